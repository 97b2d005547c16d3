"""The `evidence` command line: one click group, one function per command.

The only package that imports every layer. The collector's commands import the collector
at start; the analyst's import DuckDB, Jinja2 and the renderers inside each command, so
`evidence capture` on a box under memory pressure never loads them, and a collector-only
install (without the `analyst` extra) runs every collector command.

Invariant: bad input ends in one line on stderr and a status of evidence.cli.exits, never
a traceback.
"""

import os

from evidence.cli import analyst, collector, pack, paths, recorder, serve  # noqa: F401  (attach the commands)
from evidence.cli.exits import Exit, fail
from evidence.cli.group import main

ANALYST_MODULES = ("duckdb", "jinja2", "fastjsonschema")
DISTRIBUTION = "evidence-recorder"


def run() -> None:
    """The console script: an unexpected error is one line and status 1, not a traceback.

    EVIDENCE_DEBUG=1 lets the traceback through, for a bug report.
    """
    try:
        main()
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ANALYST_MODULES:
            _internal(exc)
        fail(
            f"this command needs the analyst ({exc.name} is not installed): "
            f"pipx install '{DISTRIBUTION}[analyst]', or pip install '{DISTRIBUTION}[analyst]'",
            Exit.USAGE,
        )
    except Exception as exc:
        _internal(exc)


def _internal(exc: Exception) -> None:
    if os.environ.get("EVIDENCE_DEBUG") == "1":
        raise exc
    first = (str(exc).splitlines() or [""])[0]
    fail(
        f"internal error: {type(exc).__name__}: {first} (EVIDENCE_DEBUG=1 shows where)",
        Exit.INTERNAL,
    )
