"""The reference platform as a person sees it: `dagster dev` driven by headless Chromium.

One demo build, one server and one browser for the whole test: starting them is most of its
time. It first checks the platform as the demo leaves it (its data from 2 Nov 2026: no day
complete, the freshness checks failing), then runs the demo's feeder and materializes two
views on the server, and checks the days the watermark completed and the freshness check
passing.
Screenshots of every page it checks go to the test's `tmp_path`; the last one is also
copied to `tests/output/`. With `CHRONOLAKE_REFRESH_DOCS=1` the ones the README shows go to
`docs/` too (a test run otherwise leaves the repository's files as they were).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from _browser import (
    CHROMIUM,
    chromium_context,
    dagster_dev,
    launch_and_wait,
    process_group_alive,
    process_group_members,
    stop_process_group,
)
from dagster import AssetKey, DagsterInstance
from playwright.sync_api import FloatRect, Locator, Page, expect

from chronolake.catalog import load_entries
from chronolake.dagster.preview import PREVIEW_ROWS
from chronolake.lake.layout import output_path
from chronolake.lake.stamps import latest_recorded_watermark
from chronolake.schema import TableSpec, ViewSpec
from chronolake.sql.window import plan_window_aggregate
from chronolake.watermarks.partitions import complete, first_start_ms, windows_between

REPOSITORY_ROOT = Path(__file__).resolve().parent.parent
OUTPUT = Path(__file__).resolve().parent / "output"
DOCS = REPOSITORY_ROOT / "docs"
REFRESH_DOCS_ENV = "CHRONOLAKE_REFRESH_DOCS"
# The derived table whose latest run the test opens, and the checks whose passing result it shows.
SHOWN_ASSET = "orders_enriched"
SHOWN_CHECKS = (
    "watermark_never_decreases", "late_row_rate", "pending_rows_age", "primary_key_unique",
    "late_rows_per_partition",  # it is partitioned by the hour
)
# Listed beside them, and failing after the demo: its data is from 2 Nov 2026 (README).
STALE_CHECKS = ("watermark_freshness",)
# The ops of its graph-backed asset, in order: the stages of a run, each a step of the run's page.
SHOWN_STEPS = ("read_changelog", "assign_watermarks", "temporal_join", "commit")
PLATFORM_ASSETS = (
    "orders",
    "rates",
    "rates_hybrid",
    "latest_rates",
    "orders_enriched",
    "orders_enriched_latest",
    "orders_per_currency",
    "revenue_per_currency",
    "orders_per_currency_daily_report",
)
# The daily partitioned window view whose partitions the test shows completing.
PARTITIONED_ASSET = "orders_per_currency"
LOCATION = "assets.definitions"  # the code location `workspace.yaml` loads
ASSET_JOB = "__ASSET_JOB"  # Dagster's implicit job: what an asset's Materialize button runs
# The screenshots the README shows, by the name this test takes them under.
README_SCREENSHOTS = {
    "1-asset-graph.png": "dagster-asset-graph.png",
    f"3-{SHOWN_ASSET}.png": "dagster-orders-enriched.png",
    f"6-{SHOWN_ASSET}-stale.png": "dagster-watermark-freshness.png",
    f"7-{PARTITIONED_ASSET}-partitions.png": "dagster-partitions.png",
}
# The instance the demo and the server share: no telemetry, no "join the community" dialog.
INSTANCE_YAML = "telemetry:\n  enabled: false\nnux:\n  enabled: false\n"
# The new screenshots, cut to the part of the (tall) page that shows something.
TOP_OF_PAGE: FloatRect = {"x": 0, "y": 0, "width": 1920, "height": 1100}
UI_TIMEOUT_MS = 30_000  # the UI loads live data a few seconds after the page
expect.set_options(timeout=UI_TIMEOUT_MS)


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.own_processes
@pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"{CHROMIUM} not found: install Debian's chromium (`./dev test` does it as root)",
)
@pytest.mark.timeout(1500)
def test_dagster_ui_shows_the_platform_its_metadata_and_checks(tmp_path: Path) -> None:
    lake, home = tmp_path / "lake", tmp_path / "dagster-home"
    home.mkdir()
    (home / "dagster.yaml").write_text(INSTANCE_YAML)
    env = dict(os.environ, DAGSTER_HOME=str(home), CHRONOLAKE_LAKE=str(lake))
    _run_demo(lake, env=env)
    recorded, run_id = _recorded_metadata(home, SHOWN_ASSET)
    spec = load_entries(lake)[SHOWN_ASSET].spec

    with dagster_dev(REPOSITORY_ROOT, env=env, log_path=tmp_path / "dagster-dev.log") as server:
        with chromium_context(tmp_path / "chromium-profile", timeout_ms=UI_TIMEOUT_MS) as browser:
            page = browser.new_page()
            try:
                _check_asset_graph(page, server.url, tmp_path / "1-asset-graph.png")
                _check_source_definition(page, server.url, tmp_path / "2-rates.png")
                _check_materialization(
                    page, server.url, tmp_path / f"3-{SHOWN_ASSET}.png", spec, recorded
                )
                _check_asset_checks(page, server.url, tmp_path / f"4-{SHOWN_ASSET}-checks.png")
                _check_run_steps(page, server.url, run_id, tmp_path / f"5-{SHOWN_ASSET}-run.png")
                _check_freshness(page, server.url, tmp_path / f"6-{SHOWN_ASSET}-stale.png",
                                 passed=False)
                # Data of today, as the demo's feeder writes it, and the two assets brought up
                # to date with it, each with its checks
                launch_and_wait(server, "demo_feed", location=LOCATION)
                for asset in (SHOWN_ASSET, PARTITIONED_ASSET):
                    launch_and_wait(server, ASSET_JOB, location=LOCATION, assets=[asset])
                _check_partitions(
                    page, server.url, tmp_path / f"7-{PARTITIONED_ASSET}-partitions.png",
                    _closed_partitions(lake, PARTITIONED_ASSET),
                )
                _check_freshness(page, server.url, tmp_path / f"8-{SHOWN_ASSET}-fresh.png",
                                 passed=True)
            except Exception:
                page.screenshot(path=tmp_path / "failure.png")
                raise
        pgid = server.pid
    assert not process_group_alive(pgid), f"dagster dev (process group {pgid}) still runs"

    OUTPUT.mkdir(exist_ok=True)
    shutil.copy(tmp_path / f"3-{SHOWN_ASSET}.png", OUTPUT / f"browser-{SHOWN_ASSET}.png")
    if os.environ.get(REFRESH_DOCS_ENV) == "1":  # the README's pictures, taken anew
        for taken, shown in README_SCREENSHOTS.items():
            shutil.copy(tmp_path / taken, DOCS / shown)


def test_stop_process_group_kills_children_that_ignore_sigterm() -> None:
    """The plumbing that stops `dagster dev`: the whole group goes, SIGKILL after the grace."""
    group = subprocess.Popen(
        ["sh", "-c", "trap '' TERM; sleep 60 & sleep 60 & wait"], start_new_session=True
    )
    deadline = time.monotonic() + 10
    while len(process_group_members(group.pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)  # until the shell has set its trap and started both sleeps
    assert len(process_group_members(group.pid)) == 3
    stop_process_group(group, grace_s=0.5)
    assert group.returncode == -signal.SIGKILL
    assert not process_group_alive(group.pid)


def _run_demo(lake: Path, *, env: dict[str, str]) -> None:
    """`chronolake demo` in its own process: this one may already hold a Spark session."""
    chronolake = Path(sys.executable).with_name("chronolake")
    command = [str(chronolake), "demo", "--project", str(REPOSITORY_ROOT), "--lake", str(lake)]
    done = subprocess.run(
        command, cwd=REPOSITORY_ROOT, env=env, capture_output=True, text=True, timeout=900
    )  # a hang guard: about 2 minutes quiet; 480 s ran out at load 8-10
    assert done.returncode == 0, f"chronolake demo failed:\n{done.stdout}\n{done.stderr}"


def _recorded_metadata(home: Path, asset: str) -> tuple[dict[str, object], str]:
    """The metadata values of the asset's latest materialization, as the instance holds them,
    and the id of the run that recorded it."""
    with DagsterInstance.from_config(str(home)) as instance:
        event = instance.get_latest_materialization_event(AssetKey(asset))
    assert event is not None and event.asset_materialization is not None, f"{asset} not recorded"
    metadata = event.asset_materialization.metadata
    return {key: entry.value for key, entry in metadata.items()}, event.run_id


def _check_asset_graph(page: Page, url: str, screenshot: Path) -> None:
    """The global lineage graph, every group unfolded, shows each platform asset as a node."""
    page.goto(f"{url}/asset-groups")
    folded = page.locator('[aria-label="unfold_more"]')  # a collapsed group's unfold icon
    expect(folded.first).to_be_visible()
    while folded.count():
        unfolded = page.url
        folded.first.click()
        expect(page).not_to_have_url(unfolded)  # the URL names the groups unfolded so far
        # The graph draws only what is in view, and an unfolded group may push the others out:
        # a fresh load zooms to fit them all
        page.goto(page.url)
        expect(page.locator("svg [data-tooltip]").first).to_be_visible()
    for name in dict.fromkeys((*PLATFORM_ASSETS, SHOWN_ASSET)):
        # the name, not its SVG foreignObject box: Chromium reports no viewport ratio for those
        expect(page.locator(f'svg [data-tooltip="{name}"]')).to_be_in_viewport()
    # hourly partitioned: its node shows how many of its hours are recorded, none after the demo
    expect(_graph_node(page, SHOWN_ASSET)).to_contain_text(re.compile(r"Partitions\s*0% filled"))
    expect(_graph_node(page, "rates")).to_contain_text("Observed")
    page.screenshot(path=screenshot)


def _check_source_definition(page: Page, url: str, screenshot: Path) -> None:
    """`rates`' page shows its definition: versioned, its rowtime, key and watermark strategy."""
    page.goto(f"{url}/assets/rates")
    expect(_metadata_row(page, "chronolake/kind")).to_contain_text("versioned")
    expect(_metadata_row(page, "chronolake/rowtime")).to_contain_text("currency_time")
    expect(_metadata_row(page, "chronolake/primary_key")).to_contain_text("currency")
    strategy = _metadata_row(page, "chronolake/watermark_strategy")
    expect(strategy).to_contain_text("currency_time - INTERVAL '5' SECOND")
    columns = page.locator("table").filter(has=page.get_by_text("Column name", exact=True))
    expect(columns.locator("tr").filter(has_text="currency_time")).to_contain_text("*ROWTIME*")
    _scroll_into_view(strategy)
    page.screenshot(path=screenshot)


def _scroll_into_view(target: Locator) -> None:
    """Scroll `target` into view for the screenshot, in one step in the page.

    Playwright's `scroll_into_view_if_needed` first waits for the element to be stable,
    and Dagster's page may re-render the row meanwhile (the element is then detached);
    a single script call on the freshly located element cannot be cut in between.
    """
    target.evaluate("element => element.scrollIntoView({block: 'center'})")


def _check_materialization(
    page: Page, url: str, screenshot: Path, spec: TableSpec | ViewSpec, recorded: dict[str, object]
) -> None:
    """The derived asset's page shows its run's row count, watermark and preview, and its spec."""
    row_count, watermark = recorded["dagster/row_count"], recorded["chronolake/watermark"]
    assert isinstance(row_count, int) and row_count > 0, f"recorded row count {row_count!r}"
    assert isinstance(watermark, float), f"recorded watermark {watermark!r}"
    page.goto(f"{url}/assets/{SHOWN_ASSET}")
    expect(page.get_by_text("Latest materialization", exact=True)).to_be_visible()
    status = page.get_by_text("Row count", exact=True).locator("xpath=..")
    expect(status).to_have_text(re.compile(rf"^\s*Row count\s*{row_count:,}\s*$"))
    watermark_cells = _metadata_row(page, "chronolake/watermark").get_by_role("cell")
    expect(watermark_cells.last).to_have_text(_shown_timestamp(watermark))
    preview = _metadata_row(page, "preview")
    expect(preview.locator("tbody tr")).to_have_count(min(row_count, PREVIEW_ROWS))
    expect(_metadata_row(page, "chronolake/kind")).to_contain_text(spec.kind.value)
    if spec.rowtime:
        expect(_metadata_row(page, "chronolake/rowtime")).to_contain_text(spec.rowtime)
        header = preview.get_by_role("columnheader", name=spec.rowtime, exact=True)
        expect(header).to_be_visible()
    if spec.primary_key:
        key = ", ".join(spec.primary_key)
        expect(_metadata_row(page, "chronolake/primary_key")).to_contain_text(key)
    _scroll_into_view(watermark_cells.first)  # its key, with the value beside it
    page.screenshot(path=screenshot)


def _check_asset_checks(page: Page, url: str, screenshot: Path) -> None:
    """The asset's Checks tab lists each expected check with its passing result."""
    page.goto(f"{url}/assets/{SHOWN_ASSET}?view=checks")
    if not SHOWN_CHECKS:
        expect(page.get_by_text("No checks defined for this asset", exact=True)).to_be_visible()
    else:
        shown = len(SHOWN_CHECKS) + len(STALE_CHECKS)
        expect(page.get_by_text(f"Checks ({shown})", exact=True)).to_be_visible()
    for check in SHOWN_CHECKS:
        entry = _check_list_entry(page, check)
        expect(entry).to_contain_text("Succeeded")
        entry.click()
        expect(page).to_have_url(re.compile(rf"[?&]checkDetail={check}$"))
        result = page.get_by_text("Evaluation result", exact=True).locator("xpath=..")
        expect(result).to_contain_text("Passed")
    page.screenshot(path=screenshot)


def _check_run_steps(page: Page, url: str, run_id: str, screenshot: Path) -> None:
    """The run's page shows each stage of the derived table's run, in order, as a step that
    succeeded."""
    page.goto(f"{url}/runs/{run_id}")
    expect(page.get_by_text("Success", exact=True).first).to_be_visible()
    expect(page.get_by_text("Errored (0)")).to_be_visible()
    # The chart shortens step names as the run grows; the engine's event at the end of the log
    # lists the steps the run executed in full, in the execution plan's (topological) order.
    in_order = ".*".join(rf"'{SHOWN_ASSET}\.{step}'" for step in SHOWN_STEPS)
    expect(page.get_by_text(re.compile(in_order)).first).to_be_visible()
    page.screenshot(path=screenshot)


def _check_freshness(page: Page, url: str, screenshot: Path, *, passed: bool) -> None:
    """The asset's event-time freshness check, opened in its Checks tab: failing after the
    demo (its data is from 2 Nov 2026), naming the source that holds the watermark back;
    passing once the feed and a refresh brought the watermark to now."""
    page.goto(f"{url}/assets/{SHOWN_ASSET}?view=checks")
    for check in STALE_CHECKS:
        entry = _check_list_entry(page, check)
        expect(entry).to_contain_text("Succeeded" if passed else "Failed")
        entry.click()
        expect(page).to_have_url(re.compile(rf"[?&]checkDetail={check}$"))
        result = page.get_by_text("Evaluation result", exact=True).locator("xpath=..")
        expect(result).to_contain_text("Passed" if passed else "Failed")
    if not passed:
        expect(_metadata_row(page, "held_back_by")).to_contain_text("rates")
    page.screenshot(path=screenshot, clip=TOP_OF_PAGE)


def _check_partitions(page: Page, url: str, screenshot: Path, closed: list[str]) -> None:
    """The partitioned view's Partitions tab counts as materialized exactly the days its
    stamped watermark closed (`closed`), and the latest of them holds the materialization
    that recorded it complete."""
    assert closed, f"no partition of {PARTITIONED_ASSET} complete after the feed and refresh"
    page.goto(f"{url}/assets/{PARTITIONED_ASSET}?view=partitions")
    expect(page.get_by_text(f"Materialized ({len(closed)})", exact=True)).to_be_visible()
    expect(page.get_by_text("Failed (0)", exact=True)).to_be_visible()
    page.locator(f'[title="{closed[-1]}"]').click()  # its entry in the list of partitions
    expect(_metadata_row(page, "chronolake/partition")).to_contain_text("completed")
    page.screenshot(path=screenshot, clip=TOP_OF_PAGE)


def _shown_timestamp(seconds: float) -> re.Pattern[str]:
    """How the UI shows a timestamp metadata value: en-US, UTC, the year only if not this one."""
    at = datetime.fromtimestamp(seconds, tz=UTC)
    clock = f"{at.hour % 12 or 12}:{at:%M:%S}\\s{at:%p}"  # Chromium puts U+202F before AM/PM
    return re.compile(rf"^\s*{at:%b} {at.day},(?: {at.year},)? {clock} UTC\s*$")


def _graph_node(page: Page, asset: str) -> Locator:
    """The graph node of an asset: the box around its name (which carries a tooltip attribute)."""
    return page.locator("foreignObject").filter(has=page.locator(f'[data-tooltip="{asset}"]'))


def _check_list_entry(page: Page, check: str) -> Locator:
    """The entry of a check in the Checks tab's list: its name (drawn twice) over its status."""
    named = page.locator("span").filter(has=page.get_by_text(check, exact=True))
    return named.filter(has_text=re.compile("Succeeded|Failed|Not evaluated|Running", re.I))


def _metadata_row(page: Page, key: str) -> Locator:
    """The row of the asset page's metadata table whose key is `key`."""
    return page.locator("tr").filter(has=page.get_by_text(key, exact=True))


def _closed_partitions(lake: Path, name: str) -> list[str]:
    """The keys of the time partitions of view `name` that the watermark its latest commit
    stamped has closed, oldest first: those its Dagster asset must show as materialized."""
    entries = load_entries(lake)
    spec = entries[name].spec
    assert isinstance(spec, ViewSpec) and spec.time.partitions is not None, f"{name}: no partitions"
    partitions = spec.time.partitions
    watermark = latest_recorded_watermark(output_path(lake, name))
    assert watermark is not None, f"{name} has no stamped watermark"
    windows = plan_window_aggregate(spec.query, {key: e.spec for key, e in entries.items()}).windows
    started = windows_between(partitions, first_start_ms(partitions), watermark)
    return [window.key for window in complete(started, windows, watermark)]
