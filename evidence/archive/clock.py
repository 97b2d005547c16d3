"""Timestamps in the one format every bundle file uses (UTC ISO 8601 with milliseconds),
and durations and moments as an operator types them."""

import contextlib
import re
from datetime import UTC, datetime, timedelta


def iso(ts: float) -> str:
    """Format a Unix time as e.g. 2026-11-29T03:12:45.123Z."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def stamp(ts: float) -> str:
    """The compact form used in bundle directory names: 20261129T031245Z."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y%m%dT%H%M%SZ")


_DURATION = re.compile(r"^(\d+)([smhd])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DAYS = {"today": 0, "yesterday": 1}
_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M")


def duration_s(text: str) -> int | None:
    """`90s`, `15m`, `24h`, `7d` -> seconds; None if text is not a duration."""
    match = _DURATION.match(text.strip())
    return int(match.group(1)) * _SECONDS[match.group(2)] if match else None


def moment(text: str, now: float) -> float:
    """A point in time as an operator types it, as a Unix time, in the manner of
    journalctl --since: a duration back from now (`90m`, `2d`), `now`, `today` or
    `yesterday` (local midnight), a local date and time (`2026-11-30 03:00`, `2026-11-30`),
    or ISO 8601 with a zone (`2026-11-30T03:00:00Z`). Raises ValueError, saying what it takes."""
    word = text.strip()
    back = duration_s(word)
    if back is not None:
        return now - back
    if word == "now":
        return now
    if word in _DAYS:
        midnight = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
        return (midnight - timedelta(days=_DAYS[word])).timestamp()
    for layout in _FORMATS:
        with contextlib.suppress(ValueError):
            return datetime.strptime(word, layout).timestamp()  # naive: local time
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(word.replace("Z", "+00:00")).timestamp()
    raise ValueError(
        f"{text!r}: expected a duration (90m, 12h, 30d), now, today, yesterday, "
        "or a time such as '2026-11-30 03:00'"
    )
