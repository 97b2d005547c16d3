"""Every exit status of `evidence`, one meaning each: the commands' help and the README's
table are drawn from EXITS (tests/test_cli.py checks both).

A script or a systemd unit reads the status, so no two outcomes share one: an internal
error is 1 and only 1.
"""

import sys
from enum import IntEnum

import click


class Exit(IntEnum):
    OK = 0
    INTERNAL = 1
    USAGE = 2
    BUSY = 3
    UNWRITABLE = 4
    INCOMPLETE = 5
    LIMITED = 6
    DAMAGED = 7
    QUARANTINED = 8
    CHECK_FAILED = 9
    NOTHING_TO_COMPARE = 10
    NOT_FIRED = 11
    STOPPED = 143  # 128 + SIGTERM, as a shell reports it


EXITS = {
    Exit.OK: "done",
    Exit.INTERNAL: "an unexpected internal error (EVIDENCE_DEBUG=1 shows where)",
    Exit.USAGE: "bad usage or bad configuration (one line names the key); a query DuckDB "
    "refused; a bundle the archive does not hold; an analyst command without the analyst "
    "installed",
    Exit.BUSY: "another capture, ingest, prune or recorder holds the archive; nothing was done",
    Exit.UNWRITABLE: "the archive cannot be written where the command must write "
    "(permissions, not a directory, a read-only or full disk)",
    Exit.INCOMPLETE: "the bundle was sealed but is not complete: some evidence was dropped "
    "(disk full), or a probe was not read in time",
    Exit.LIMITED: "this trigger captured less than capture.min_interval ago; skipped and "
    "counted in its next bundle",
    Exit.DAMAGED: "the archive database is damaged: `evidence ingest --rebuild` rebuilds it "
    "from the bundles",
    Exit.QUARANTINED: "some bundles were quarantined, each with its reason in "
    "quarantine.jsonl; the rest went in",
    Exit.CHECK_FAILED: "a health check failed; a bundle was captured unless another capture "
    "held the archive",
    Exit.NOTHING_TO_COMPARE: "nothing to compare with: no earlier incident, or no healthy baseline",
    Exit.NOT_FIRED: "a guard rail's rule would not have fired before the failure, replayed by "
    "promtool on the bundle's own Prometheus history",
    Exit.STOPPED: "stopped by SIGTERM; what was read is kept as a -partial bundle",
}


def epilog(*codes: Exit, ok: str | None = None) -> str:
    """A command's "Exit status" help: the codes it can end with, worded as in EXITS."""
    lines = [
        f"  {int(c)}  {ok if c is Exit.OK and ok else EXITS[c]}" for c in sorted({Exit.OK, *codes})
    ]
    return "\b\nExit status:\n" + "\n".join(lines)


def fail(message: str, code: Exit) -> None:
    """One line on stderr and the status: never a traceback."""
    click.echo(f"evidence: {message}", err=True)
    sys.exit(int(code))
