"""The catalog tier: what is declared in a lake (tables and views, persisted under
`_chronolake/catalog/`), a declared table as a Spark relation, and the removal of a view's
data. It sits above the planners (`sql`, `joins`, `windows`) and below the runs."""

from chronolake.catalog.catalog import Catalog, CatalogEntry, Dropped, load_entries

__all__ = ["Catalog", "CatalogEntry", "Dropped", "load_entries"]
