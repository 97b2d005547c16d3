"""At most one capture per interval per trigger: a flapping health check or a looping
alert makes a bounded number of bundles, and nothing is silently dropped.

A trigger admitted within `interval` of the last capture of the same trigger
(kind:name) is refused before the capture lock is even asked for, and counted. The next
capture of that trigger carries the count (and when the first and last refused ones
fired) in its manifest. Manual captures are never limited: a person asked.

State lives in <root>/triggers.json, read and replaced under an flock of its own, so two
triggers arriving together cannot both be admitted nor lose a count.
"""

import time
from pathlib import Path
from typing import Any

from evidence.archive.clock import iso
from evidence.archive.state import LockedState

STATE = "triggers.json"
UNLIMITED_KINDS = ("manual",)


class Limited(Exception):
    """This trigger captured too recently; the refusal was counted."""

    def __init__(self, key: str, ago_s: float, interval_s: float, skipped: int):
        super().__init__(
            f"{key} captured {ago_s:.0f} s ago (at most once every {interval_s:g} s); "
            f"skipped, and counted ({skipped} so far) in its next bundle"
        )


def admit(root: Path, kind: str, name: str | None, interval_s: float) -> dict[str, Any] | None:
    """Admit a capture of trigger kind:name now, or raise Limited.

    Returns what was skipped since this trigger's last capture ({"count", "first",
    "last"}), to be recorded in the bundle, or None if nothing was.
    """
    if kind in UNLIMITED_KINDS or interval_s <= 0:
        return None
    key = f"{kind}:{name}" if name else kind
    with LockedState(root / STATE) as state:
        now = time.time()  # under the lock: read before it, a loser would look earlier
        entry = state.setdefault(key, {"last": 0.0, "skipped": None})
        ago = now - entry["last"]
        # A clock stepped back by less than the interval still counts as recent; by more,
        # the old stamp is meaningless and must not block this trigger for that long.
        if -interval_s < ago < interval_s:
            skipped = entry["skipped"] or {"count": 0, "first": iso(now)}
            skipped.update(count=skipped["count"] + 1, last=iso(now))
            entry["skipped"] = skipped
            raise Limited(key, ago, interval_s, skipped["count"])
        carried = entry["skipped"]
        entry.update(last=now, skipped=None, before=entry["last"], carried=carried)
        return carried


def undo(root: Path, kind: str, name: str | None) -> None:
    """Give the slot back: the admitted capture did not happen (a busy or unwritable
    archive), so it must not refuse the next trigger, nor lose the count it carried."""
    if kind in UNLIMITED_KINDS:
        return
    key = f"{kind}:{name}" if name else kind
    with LockedState(root / STATE) as state:
        entry = state.get(key)
        if entry is None or "before" not in entry:
            return
        carried, since = entry.pop("carried", None), entry["skipped"]
        if carried and since:
            carried = {**carried, "count": carried["count"] + since["count"], "last": since["last"]}
        entry.update(last=entry.pop("before"), skipped=carried or since)
