"""Reading a series against the incident window and the day before it: its readings, hour
by hour, medians and rates, and when the scrape targets' history began."""

import math
from collections.abc import Callable

from evidence.analyze import shapes
from evidence.analyze.facts import Facts
from evidence.analyze.failure import came_up, history_began, is_service
from evidence.analyze.window import Window

# Reading the incident window against the rest of the day (analyze/window.py).
HOUR_S = 3600.0


def readings(f: Facts, name: str) -> list[float]:
    return [v for _, v in f.series.get(name, []) if v is not None]


def window(f: Facts) -> Window:
    return f.window or Window(end=f.bundle["started_at"].timestamp(), failure=None, cut=None)


def history(f: Facts, name: str) -> bool:
    """The series reaches far enough before the incident window to compare it with."""
    return f.has(name) and window(f).has_history(f.series[name])


def hours_of(series: shapes.Series) -> dict[float, list[tuple[float, float]]]:
    """The known readings of each hour, keyed by when it began, oldest first; hours with
    fewer than 3 readings are left out. The hours are counted back from the last reading,
    not the clock's: the same history read ten minutes later splits the same way (on the
    clock's hours a burst falls in one hour or across two, and the busiest hour moves)."""
    known = [(t, v) for t, v in series if v is not None]
    if not known:
        return {}
    last = max(t for t, _ in known)
    hours: dict[float, list[tuple[float, float]]] = {}
    for t, v in known:
        hours.setdefault(last - (math.floor((last - t) / HOUR_S) + 1) * HOUR_S, []).append((t, v))
    return {k: pts for k, pts in sorted(hours.items()) if len(pts) >= 3}


def by_hour(series: shapes.Series) -> dict[float, list[float]]:
    """The readings' values of each hour (`hours_of`)."""
    return {k: [v for _, v in pts] for k, pts in hours_of(series).items()}


def hourly(series: shapes.Series, fn: Callable[[list[float]], float]) -> list[float]:
    """fn of each hour of readings (hours with fewer than 3 readings are skipped)."""
    return [fn(vs) for vs in by_hour(series).values()]


def median(vs: list[float]) -> float:
    return shapes.quantile(vs, 0.5)


def mean(vs: list[float]) -> float:
    return sum(vs) / len(vs)


def at(f: Facts, when: float) -> str:
    ago = window(f).end - when
    return (
        f"{ago / 60:.0f} min before the failure"
        if window(f).failure
        else (f"{ago / 60:.0f} min before the capture")
    )


def hourly_increase(series: shapes.Series, end: float) -> dict[int, float]:
    """A counter's increase in each hour counted back from `end` (0: the hour before it);
    a reset (a restart) adds nothing for the interval it falls in."""
    pts = [(t, v) for t, v in series if v is not None and t <= end]
    out: dict[int, float] = {}
    for (_, v1), (t2, v2) in zip(pts, pts[1:], strict=False):
        if v2 >= v1:
            hour = int((end - t2) // HOUR_S)
            out[hour] = out.get(hour, 0.0) + v2 - v1
    return out


def targets_began(f: Facts) -> float:
    return history_began(f.targets, 0.0)


def started(
    f: Facts, which: Callable[[str], bool] = is_service, began: float | None = None
) -> list[float]:
    """Every time one of the targets `which` picks came up in the look-back (a target first
    scraped after `began`, by default when the targets' history began, was started then)."""
    since = targets_began(f) if began is None else began
    return [t for target, s in f.targets.items() if which(target) for t in came_up(s, since)]


def up_through(series: shapes.Series, start: float, end: float) -> bool:
    """The target read up at every reading from `start` to `end` (and read in that time)."""
    seen = [v for t, v in series if v is not None and start <= t <= end]
    return bool(seen) and all(v == 1 for v in seen)


def per_second(series: shapes.Series) -> list[tuple[float, float]]:
    """Per-second rate of a counter between successive readings (a reset gives no rate)."""
    pts = [(t, v) for t, v in series if v is not None]
    return [
        (t2, (v2 - v1) / (t2 - t1))
        for (t1, v1), (t2, v2) in zip(pts, pts[1:], strict=False)
        if t2 > t1 and v2 >= v1
    ]
