"""Handing a run's in-flight Spark work from one op to the next, in memory.

A derived table's run is a graph of ops (`chronolake.dagster.derived_assets`);
what passes between them holds lazy Spark DataFrames bound to the run's
session, which cannot be pickled. So they stay in this process's memory under
their own IO manager key: the code location's default IO manager and every
other asset keep their behaviour. The run's ops must therefore execute in one
process: `Definitions(executor=in_process_executor)`, which the design asks for
anyway (one Spark session per run, no JVM per step: `docs/design.md`, "Runs in Dagster").
"""

# No `from __future__ import annotations` here: Dagster reads the `context` annotation at
# definition time and refuses a string.

from typing import Any

from dagster import InputContext, IOManager, OutputContext, io_manager

from chronolake.errors import RunError

HANDOFF_IO_MANAGER_KEY = "chronolake_run_handoff"


class RunHandoffIOManager(IOManager):
    """Keeps each op output in memory for the next op of the same run (one instance per run).

    Example:
        >>> Definitions(assets=chronolake_assets("lake"), executor=in_process_executor, ...)
        ... # `chronolake_run_handoff` comes with the derived assets; nothing to configure
    """

    def __init__(self) -> None:
        self._outputs: dict[tuple[str, str], Any] = {}

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        self._outputs[(context.step_key, context.name)] = obj

    def load_input(self, context: InputContext) -> Any:
        upstream = context.upstream_output
        assert upstream is not None, "every handed-off input comes from an op output"
        key = (upstream.step_key, upstream.name)
        if key not in self._outputs:
            msg = (
                f"the output of step {upstream.step_key!r} is not in this process's memory: "
                "a chronolake run's ops hand Spark DataFrames to each other, so they must "
                "execute in one process and in one run; give the job (or Definitions) "
                "executor=in_process_executor, and re-execute the whole asset rather than "
                "from a failed step"
            )
            raise RunError(msg)
        return self._outputs[key]


@io_manager(description="Hands a chronolake run's Spark work from op to op, in memory.")
def run_handoff_io_manager() -> RunHandoffIOManager:
    return RunHandoffIOManager()
