"""The catalog tier: what is declared in a lake (`Registry`: tables and views persisted under
`_chronolake/catalog/`), what a query's names resolve to (`inputs`), queries over them as
Spark frames (`QuerySession`), a declared table as a Spark relation, the removal of a
view's data, the runs' checkpoints (`checkpoint`: written by the runs, read here too) and
where each table's watermark stands (`watermarks`), and the answers to SHOW, DESCRIBE and
EXPLAIN (`inspection`). `Catalog` is the face over all of them. It sits above the planners (`sql`,
`joins`, `windows`) and below the runs."""

from chronolake.catalog.catalog import Catalog
from chronolake.catalog.entry import CatalogEntry, Dropped
from chronolake.catalog.registry import Registry, load_entries

__all__ = ["Catalog", "CatalogEntry", "Dropped", "Registry", "load_entries"]
