"""The demo's feeder: new orders and a rate change written into the demo lake's sources, as a
live system would, so that runs have work. Apart from the platform's own jobs: a production
deployment leaves it out."""

from __future__ import annotations

import time

from dagster import ScheduleDefinition, job, op

from chronolake.dagster.automation import default_schedule_status
from chronolake.dagster.resources import LakeResource
from chronolake.demo.lake import feed_demo_lake


@op(description="Append 100 new orders and change one rate in the demo lake.")
def append_demo_commits(lake: LakeResource) -> dict[str, int]:
    return feed_demo_lake(lake.location, seed=int(time.time()))


@job(description="Feed the demo lake: new orders and a rate change, as a live system would.")
def demo_feed() -> None:
    append_demo_commits()


DEMO_JOBS = [demo_feed]
DEMO_SCHEDULES = [
    ScheduleDefinition(
        name="feed_demo_every_minute", job=demo_feed, cron_schedule="* * * * *",
        default_status=default_schedule_status(),
    ),
]
