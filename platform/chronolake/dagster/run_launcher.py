"""The instance's run launcher: each run forked from a process that is already warm.

Dagster's default launcher asks the code server to spawn a process per run, and that process
imports Dagster, Spark's client, pyarrow, delta-rs, sqlglot and chronolake and opens the
instance afresh: about two of the three seconds a UI run takes when there is nothing new
(`benchmarks/README.md`, "Runs launched from the UI"). `PrewarmedRunLauncher` starts one
process that does all that once (`python -m chronolake.dagster.run_launcher`, the run forker) and
forks it for each run, which then executes as `dagster api execute_run` would (the run's
`job_code_origin` and the instance's ref). The code location itself is loaded by the run,
as always, so definitions and the lake's catalog are read afresh. A forker whose imported
files changed on disk since it started runs `execute_run` afresh in the forked process,
so an edit is never run stale, and the next launch starts a new forker.

Each run has a supervisor between the forker and the run's process, which reports the run's
pid and its exit code; a run whose process ended without finishing (killed, crashed) is
failed by the launcher, not left running.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from dagster import DagsterInstance, DagsterRunStatus
from dagster._core.launcher import DefaultRunLauncher
from dagster._core.launcher.base import LaunchRunContext, RunLauncher
from dagster._grpc.types import ExecuteRunArgs
from dagster._serdes import ConfigurableClass, ConfigurableClassData, serialize_value

from chronolake.lake.scratch import Writer

PROCESS_TAG = "chronolake/run_process"
"""The run's process (host, pid and start, `scratch.Writer`), so that Terminate reaches it
from any process of this host, and never another process that took its id later."""

FORK_TIMEOUT_S = 300.0
"""How long a launch waits for the forker's answer; a forker just started imports first."""

_MAX_MESSAGE = 1 << 20
_log = logging.getLogger(__name__)


class PrewarmedRunLauncher(RunLauncher, ConfigurableClass):
    """Launches each run in a process forked from one that already imported what runs need;
    runs it cannot fork (a code location in another Python environment or with an entry
    point of its own) go to Dagster's `DefaultRunLauncher`, through the code server.

    Example `dagster.yaml` (`chronolake.dagster.home` writes it for the reference platform):

        run_launcher:
          module: chronolake.dagster.run_launcher
          class: PrewarmedRunLauncher
    """

    def __init__(self, inst_data: ConfigurableClassData | None = None) -> None:
        self._inst_data = inst_data
        self._lock = threading.Lock()
        self._forker: _RunForker | None = None
        self._through_code_server = DefaultRunLauncher()
        super().__init__()

    def register_instance(self, instance: DagsterInstance) -> None:
        super().register_instance(instance)
        self._through_code_server.register_instance(instance)

    @property
    def inst_data(self) -> ConfigurableClassData | None:
        return self._inst_data

    @classmethod
    def config_type(cls) -> dict[str, Any]:
        return {}

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]
    ) -> PrewarmedRunLauncher:
        return cls(inst_data=inst_data)

    def launch_run(self, context: LaunchRunContext) -> None:
        run = context.dagster_run
        origin = run.job_code_origin
        command = origin and ExecuteRunArgs(
            job_origin=origin, run_id=run.run_id, instance_ref=self._instance.get_ref()
        ).get_command_args()  # [*entry point, "api", "execute_run", its JSON]
        if not (origin and command and _forkable(command, origin.executable_path)):
            self._through_code_server.launch_run(context)
            return
        with self._lock:
            forker, warm = self._forker_for(origin.executable_path)
            answer = forker.send(run.run_id, command[-1])
        pid, fresh = forker.pid_of(run.run_id, answer)
        how = ("started afresh: code it imports changed since the forker started" if fresh
               else "forked from a warm process" if warm
               else "forked from a process started for it")
        self._instance.add_run_tags(run.run_id, {PROCESS_TAG: Writer.of_process(pid).tag()})
        self._instance.report_engine_event(f"Launched in a process {how} (pid: {pid}).", run,
                                           cls=self.__class__)

    def _forker_for(self, python: str) -> tuple[_RunForker, bool]:
        """The running forker of `python`, and whether it ran before; else a new one."""
        forker = self._forker
        if forker is not None and forker.python == python and forker.running():
            return forker, True
        if forker is not None:
            forker.close()
        ref = serialize_value(self._instance.get_ref())
        self._forker = _RunForker(python, ref, self._ended)
        return self._forker, False

    def _ended(self, run_id: str, pid: int, code: int) -> None:
        """Close a run whose process ended without finishing it (killed, or crashed before
        Dagster could record it)."""
        run = self._instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            return
        if run.status == DagsterRunStatus.CANCELING:
            self._instance.report_run_canceled(run)
            return
        how = f"was killed by {_signal_name(-code)}" if code < 0 else f"exited with code {code}"
        self._instance.report_run_failed(
            run, f"The run's process (pid: {pid}) {how} before the run finished (out of "
            "memory, or killed by hand?). Each table it had not committed is as it was: "
            "launch the run again."
        )

    def terminate(self, run_id: str) -> bool:
        run = self._instance.get_run_by_id(run_id)
        if run is None or run.is_finished:
            return False
        process = Writer.parse(run.tags.get(PROCESS_TAG, ""))
        if process is None:  # launched through the code server
            return self._through_code_server.terminate(run_id)
        if not process.on_this_host():
            return False
        self._instance.report_run_canceling(run)
        if process.ended_here():
            self._instance.report_run_canceled(
                run, f"The run's process (pid: {process.pid}) had already ended."
            )
            return True
        # An interrupt, as Dagster's code server sends it; a process that ended meanwhile is
        # closed by its supervisor's report.
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGINT)
        return True

    def dispose(self) -> None:
        """Let the forker go (runs it forked carry on)."""
        with self._lock:
            forker, self._forker = self._forker, None
        if forker is not None:
            forker.close()


def _signal_name(number: int) -> str:
    """SIGKILL for 9; "signal 40" for one without a name (a real-time signal)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _forkable(command: Sequence[str], python: str) -> bool:
    """Whether the run executes as `python -m dagster api execute_run` in this launcher's
    environment, where the forker can import what it does."""
    default_entry = command[:-3] in (["dagster"], [python, "-m", "dagster"])
    return default_entry and os.path.dirname(python) == os.path.dirname(sys.executable)


class _RunForker:
    """The launcher's side of a forker: runs sent over a socket pair, pids and exit codes
    read back by a thread."""

    def __init__(self, python: str, instance_ref: str,
                 ended: Callable[[str, int, int], None]) -> None:
        self.python = python
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._process = subprocess.Popen(
            [python, "-m", __name__, instance_ref, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
        )
        theirs.close()
        self._socket, self._ended = ours, ended
        self._retired, self._reading = False, True
        self._answers: dict[str, queue.Queue[tuple[int, bool]]] = {}
        threading.Thread(target=self._read, name="chronolake-run-forker", daemon=True).start()

    def running(self) -> bool:
        """Whether it runs, reads its answers and runs current code: one that found its code
        changed starts runs afresh only, and is replaced at the next launch."""
        return self._process.poll() is None and not self._retired

    def send(self, run_id: str, input_json: str) -> queue.Queue[tuple[int, bool]]:
        """Ask for the run's process; its answer comes through the returned queue."""
        answer: queue.Queue[tuple[int, bool]] = queue.Queue(maxsize=1)
        self._answers[run_id] = answer
        self._socket.send(json.dumps({"run_id": run_id, "input_json": input_json}).encode())
        return answer

    def pid_of(self, run_id: str, answer: queue.Queue[tuple[int, bool]]) -> tuple[int, bool]:
        """The run's process id, and whether it started afresh (changed code)."""
        deadline = time.monotonic() + FORK_TIMEOUT_S
        while time.monotonic() < deadline and self._reading and self._process.poll() is None:
            try:
                return answer.get(timeout=1.0)
            except queue.Empty:
                continue
        try:  # an answer sent just before the forker ended
            return answer.get(timeout=1.0)
        except queue.Empty:
            state = (f"exited with code {self._process.poll()}" if self._process.poll()
                     is not None else f"did not answer in {FORK_TIMEOUT_S:.0f} s")
            raise RuntimeError(
                f"the process that forks runs ({self.python} -m {__name__}, pid "
                f"{self._process.pid}) did not start run {run_id}: it {state}; see the UI "
                "server's output for why, and launch the run again"
            ) from None

    def _read(self) -> None:
        try:
            while message := self._socket.recv(_MAX_MESSAGE):
                answer = json.loads(message)
                if "exit" in answer:  # on a thread of its own: the instance may be slow
                    threading.Thread(target=self._ended, daemon=True, args=(
                        answer["run_id"], answer["pid"], answer["exit"])).start()
                else:
                    self._retired = self._retired or answer["fresh"]
                    self._answers.pop(answer["run_id"]).put((answer["pid"], answer["fresh"]))
        except Exception:
            _log.exception("chronolake's run forker: its answers can no longer be read")
        finally:
            self._reading, self._retired = False, True  # the next launch starts a new forker

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_WR)  # the forker sees the end and exits
        self._process.wait()


WARM_IMPORTS: Sequence[str] = (
    "dagster._cli.api", "pyspark.sql", "pyspark.sql.connect.session", "pyarrow.parquet",
    "deltalake", "sqlglot", "chronolake.dagster", "chronolake.runtime.views",
)
"""What a run of chronolake's assets imports before its first step, on the forker's time
instead of each run's."""


def _fork_runs(instance_ref: str, channel: socket.socket) -> None:
    """Import `WARM_IMPORTS` and open the instance once (its storage's first opening in a
    process costs about half a second), then fork a supervised process for each run that
    arrives on `channel`, until it closes or an interrupt comes."""
    started = time.time()
    signal.signal(signal.SIGINT, lambda *_: os._exit(0))  # dagster dev stopped
    for module in WARM_IMPORTS:
        __import__(module)
    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef
    from dagster._serdes import deserialize_value

    DagsterInstance.from_ref(deserialize_value(instance_ref, InstanceRef)).dispose()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # supervisors are reaped by the kernel
    fresh = False
    while message := channel.recv(_MAX_MESSAGE):
        request = json.loads(message)
        fresh = fresh or _changed_since(started)
        if os.fork() == 0:
            _supervise(channel, request["run_id"], request["input_json"], fresh)


def _supervise(channel: socket.socket, run_id: str, input_json: str, fresh: bool) -> NoReturn:
    """Fork the run's own process, report its pid and then its exit code."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt is the run's to handle
    pid = os.fork()
    if pid == 0:
        channel.close()
        _execute_run(input_json, fresh)
    try:
        channel.send(json.dumps({"run_id": run_id, "pid": pid, "fresh": fresh}).encode())
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        channel.send(json.dumps({"run_id": run_id, "pid": pid, "exit": code}).encode())
    finally:
        os._exit(0)


def _execute_run(input_json: str, fresh: bool) -> NoReturn:
    """`dagster api execute_run`: in this process, which exits as that command's would
    (its threads joined, its exit handlers run), or in a fresh one if code changed."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    command = [sys.executable, "-m", "dagster", "api", "execute_run", input_json]
    if fresh:
        os.execv(sys.executable, command)
    from dagster._cli.api import execute_run_command

    execute_run_command.main(args=command[-1:], prog_name="dagster api execute_run")
    sys.exit(0)  # main exits the process itself


def _changed_since(started: float) -> bool:
    """Whether a file this process imported changed on disk (or went) after `started`."""
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path or not os.path.isabs(path):  # e.g. "<stdin>"
            continue
        try:
            if os.stat(path).st_mtime > started:
                return True
        except OSError:
            return True
    return False


if __name__ == "__main__":
    _fork_runs(sys.argv[1], socket.socket(fileno=int(sys.argv[2])))
