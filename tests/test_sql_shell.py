"""`chronolake sql --lake L` on a terminal: the interactive shell, driven as a person would,
through a pseudo-terminal (pexpect), and when Enter runs what is typed.

One session does most things (the prompt before Spark is ready, completion, a multi-line
query, an error and the prompt after it, Ctrl-C while typing and while a query runs,
Ctrl-D); a second one finds the first's history. Only the first starts Spark.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pexpect
import pytest
from deltatables import write_commits

from chronolake import Catalog
from chronolake.cli.shell import statement_complete

CHRONOLAKE = Path(sys.executable).with_name("chronolake")
PLATFORM = Path(__file__).resolve().parent.parent / "platform"
PROMPT, CONTINUATION = "chronolake>", "        ->"  # the space after each is a cursor move
UP, CTRL_C, CTRL_D, TAB = "\x1b[A", "\x03", "\x04", "\t"
SLOW = "SELECT COUNT(*) AS n FROM fx_rates a, fx_rates b, fx_rates c, fx_rates d;"
"""10^12 rows, never done: a Spark task sees it is cancelled at its next input row (10^9
rows on), a few seconds at most."""


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """A lake of one table, fx_rates (currency, rate), declared without Spark."""
    root = tmp_path / "lake"
    rows = [{"currency": f"C{n:03d}", "rate": n} for n in range(1000)]
    write_commits(root / "fx_rates", [rows])
    Catalog(root).declare("CREATE TABLE fx_rates (currency STRING, rate BIGINT) "
                          "WITH ('path' = 'fx_rates');")
    return root


def _shell(lake: Path, home: Path) -> pexpect.spawn:
    env = {
        **os.environ, "HOME": str(home), "PYTHONPATH": str(PLATFORM), "TERM": "xterm",
        "PROMPT_TOOLKIT_NO_CPR": "1",  # pexpect answers no cursor position requests
    }
    return pexpect.spawn(str(CHRONOLAKE), ["sql", "--lake", str(lake)], env=env,
                         encoding="utf-8", timeout=90, dimensions=(40, 120))


def _next_prompt(shell: pexpect.spawn) -> str:
    """What the shell printed until its next prompt (each starts by turning on bracketed
    paste: what an accepted input redraws is not one), escape codes left out."""
    shell.expect(r"\x1b\[\?2004h[^\n]{0,80}?" + PROMPT)
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r", "", shell.before)


@pytest.mark.parametrize(("text", "complete"), [
    ("SELECT 1", False), ("SELECT 1;", True), ("SELECT ';'", False), ("SELECT 1; -- done", True),
    ("SELECT 1 /* ; */", False), ("SELECT 'open;", False), ("", True), ("quit", True),
    ("exit;", True), ("\\q", True),
])
def test_enter_runs_a_statement_once_a_semicolon_outside_quotes_and_comments_ends_it(
    text: str, complete: bool
) -> None:
    assert statement_complete(text) is complete


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.own_processes
def test_the_shell_runs_statements_completes_names_and_keeps_its_history(
    lake: Path, tmp_path: Path
) -> None:
    shell = _shell(lake, tmp_path)
    _next_prompt(shell)
    # Sent at once: the prompt was there before Spark, which the first statement waits for.
    shell.send(f"SELECT rat{TAB}")  # Tab completes a column...
    shell.expect_exact("e")
    shell.send(", currency\r")
    shell.expect_exact(CONTINUATION)  # ... Enter before the ';' continues the statement...
    shell.send(f"FROM fx_{TAB}")  # ... and Tab completes a table
    shell.expect_exact("rates")
    shell.send(" WHERE rate < 2 ORDER BY rate;\r")
    shown = _next_prompt(shell)
    assert f"{PROMPT} SELECT rate, currency\n{CONTINUATION} FROM fx_rates WHERE" in shown
    assert "starting Spark…" in shown
    table = [line for line in shown.splitlines() if "C00" in line]
    assert [line.split() for line in table] == [["│", "0", "│", "C000", "│"],
                                               ["│", "1", "│", "C001", "│"]], shown

    shell.send("SELECT nope FROM fx_rates;\r")
    shown = _next_prompt(shell)  # the prompt goes on after an error
    assert "error: " in shown and "nope" in shown and "Traceback" not in shown, shown

    shell.send(f"SELECT garbage{CTRL_C}")  # Ctrl-C while typing drops the input
    assert "error" not in _next_prompt(shell)
    shell.send("SELECT currency FROM fx_rates WHERE rate = 7;\r")
    shown = _next_prompt(shell)
    assert "C007" in shown and "garbage" not in shown, shown

    shell.send(f"{SLOW}\r")  # Ctrl-C while a query runs cancels it
    shell.expect_exact(SLOW)
    shell.expect_exact("\x1b[?2004l")  # the prompt is done...
    time.sleep(1)  # ... and has given the terminal back: Ctrl-C is a signal again
    shell.sendintr()
    shown = _next_prompt(shell)
    assert "cancelled" in shown and "Traceback" not in shown, shown

    shell.send("SELECT COUNT(*) AS n FROM fx_rates;\r")  # the session still serves
    assert "1000" in _next_prompt(shell)
    shell.send(CTRL_D)
    shell.expect(pexpect.EOF)
    shell.close()
    assert shell.exitstatus == 0

    again = _shell(lake, tmp_path)  # the history is there in the next session
    _next_prompt(again)
    again.send(UP)
    again.expect_exact("SELECT COUNT(*) AS n FROM fx_rates;")
    again.send(CTRL_C)
    _next_prompt(again)
    again.send("quit\r")
    again.expect(pexpect.EOF)
    again.close()
    assert again.exitstatus == 0
    assert (tmp_path / ".chronolake" / "sql_history").exists()
