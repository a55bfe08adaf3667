"""The `chronolake` command and what it prints: scripts against a lake, the demo, runs and
where every view stands."""

from chronolake.cli.app import main

__all__ = ["main"]
