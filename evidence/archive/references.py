"""<root>/references.jsonl: one line per bundle and why something refers to it.

`evidence keep`, a changelog entry and a written report each refer to bundles; prune keeps
every bundle named here.
"""

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evidence.archive.clock import iso

REFERENCES = "references.jsonl"


def _line(entry: dict[str, Any]) -> bytes:
    return json.dumps(entry, separators=(",", ":")).encode()


def refer(root: Path, bundle_ids: Iterable[str | None], why: str) -> None:
    """Record that something refers to these bundles, so prune keeps them."""
    now = iso(time.time())
    lines = b"".join(
        _line({"bundle_id": b, "why": why, "at": now}) + b"\n" for b in bundle_ids if b
    )
    if lines:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(root / REFERENCES, "ab", opener=_private) as f:
            f.write(lines)


def _private(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)


def referenced(root: Path) -> dict[str, list[str]]:
    """bundle id -> why it is kept. A torn last line (a writer killed mid-line) is skipped."""
    out: dict[str, list[str]] = {}
    try:
        text = (root / REFERENCES).read_bytes()
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        out.setdefault(entry["bundle_id"], []).append(entry["why"])
    return out
