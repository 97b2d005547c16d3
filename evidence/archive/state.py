"""A small JSON state file shared by processes: read, changed and written back under an
exclusive flock of its own, so two writers arriving together cannot lose an update.

A torn or missing file reads as empty: state here is bookkeeping (intervals, counters),
never evidence, and must never stop the command that keeps it.
"""

import fcntl
import json
import os
from pathlib import Path
from typing import Any


class LockedState:
    """`with LockedState(path) as state:` the state, written back on leaving, also when
    the block raised: a refusal raised after counting must keep its count."""

    def __init__(self, path: Path):
        self.path = path
        self.lock = path.with_name(f".{path.name}.lock")

    def __enter__(self) -> dict[str, Any]:
        self.fd = os.open(self.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            self.state = json.loads(self.path.read_bytes())
        except (FileNotFoundError, ValueError):
            self.state = {}
        return self.state

    def __exit__(self, *exc: object) -> None:
        try:
            tmp = self.path.with_name(f".{self.path.name}.tmp")
            tmp.write_text(json.dumps(self.state))
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        finally:
            os.close(self.fd)
