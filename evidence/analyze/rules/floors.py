"""Floors that ratchet: a memory line's rising stretch after stretch, the card's at each
unload, a process's bundle after bundle."""

import math
from collections.abc import Callable

from evidence.analyze import shapes
from evidence.analyze.facts import Facts
from evidence.analyze.rules.memory import memory_lines, pool_size
from evidence.analyze.rules.series import HOUR_S, window
from evidence.analyze.rules.text import GIB, gib

# A quiet stretch's floor is nearly its lowest reading, not shapes.FLOOR_QUANTILE: a
# two-hour stretch of half-hourly baselines holds three or four readings, and a higher
# quantile of so few can read a busy one.
QUIET_FLOOR_QUANTILE = 0.05
LEAK_STRETCH_S = 2 * 3600.0  # floors per two hours: a burst cannot fill one
LEAST_LAST_STRETCH_S = 3600.0  # ... and the last one hour, up to the end
LEAK_SHARE = 0.05  # a card's floor rising 5% to a failure and never coming back
LEAK_MIN_STRETCHES = 4  # a ratchet needs four floors to be seen climbing
HEADROOM_EATEN = 0.5  # a rise that ate half the room left, up to memory running out
LEAK_MIN_RISES = 0.7  # most steps between successive floors go up
LEAK_MOST_FALLS = 0.3  # ... or, where the pool ran out, few go down (a ratchet holds)
LEAK_CLICKS = 2  # ... and clicked more than once: one rise is a step
FLOOR_NOISE = 0.1  # a floor moving under a tenth of the run's rise has neither risen nor fallen
PROCESS_BUNDLE_GAP_S = 60.0  # readings of one bundle are seconds apart; bundles, minutes
PROCESS_LEAK_BYTES = 0.5 * GIB  # a process that grew half a GiB ...
PROCESS_LEAK_FACTOR = 2.0  # ... to twice its first floor, bundle after bundle


def quiet_floors(f: Facts, name: str, series: shapes.Series) -> list[tuple[float, float]]:
    """The memory floor of each two-hour stretch, read where the engine was quiet when its
    load was read at the same instants (a busy evening's floor is not a leak), else over the
    whole stretch. The stretches are counted back from the incident window's end, so that
    the floors are the same whenever the history is read (on the clock's own two hours a
    capture twenty minutes later splits the day elsewhere, and a leak read one way is a
    step the other); the last holds the hour before the end alone, so that its floor is
    where the line stood at the failure, not two hours before."""
    same = f.origin.get("requests_running") == f.origin.get(name)
    running = f.series.get("requests_running", []) if same else []
    quiet_at = {t for t, v in running if v == 0}
    anchor = window(f).end - LEAST_LAST_STRETCH_S
    stretches: dict[int, list[float]] = {}
    for t, v in series:
        if v is not None and (not quiet_at or t in quiet_at):
            stretches.setdefault(math.floor((t - anchor) / LEAK_STRETCH_S), []).append(v)
    return [
        (anchor + k * LEAK_STRETCH_S, shapes.quantile(vs, QUIET_FLOOR_QUANTILE))
        for k, vs in sorted(stretches.items())
        if len(vs) >= 3
    ]


def rising_before(f: Facts, since: float) -> str | None:
    """A memory line whose quiet floors ratcheted up to the failure, a quarter of the rise
    or more of it before `since`: a rise under way before then, whatever came after."""
    w = window(f)
    for name, label in memory_lines(f):
        pool = pool_size(f, name)
        floors = quiet_floors(f, name, w.upto(f.series[name]))
        levels = [v for _, v in floors]
        onset = rising_floors(levels, LEAK_SHARE * pool) if pool else None
        if onset is None or floors[onset][0] >= since:
            continue
        then = [v for t, v in floors[onset:] if t < since]
        if then and then[-1] - levels[onset] >= (levels[-1] - levels[onset]) / 4:
            hours = (w.end - floors[onset][0]) / HOUR_S
            return (
                f"the {label} floor had been rising for {hours:.0f} h: from "
                f"{gib(levels[onset])} to {gib(then[-1])} before, {gib(levels[-1])} at the end"
            )
    return None


def unload_staircase(f: Facts) -> str | None:
    """A leak need not come in bursts: the card's use at each bundle where its manager said
    nothing was loaded is its true floor, and a floor that rises unload after unload and
    never comes back is the runtime leaking (a staircase)."""
    empty = [(used, total) for _, used, total, nothing in f.card_bundles if nothing]
    if len(empty) < LEAK_MIN_STRETCHES:
        return None
    levels = [used for used, _ in empty]
    onset = rising_floors(levels, max(LEAK_SHARE * empty[-1][1], PROCESS_LEAK_BYTES))
    if onset is None:
        return None
    return (
        "with its manager saying nothing was loaded, the card held "
        f"{', '.join(gib(v) for v in levels[onset:])} bundle after bundle: each unload "
        "left more behind"
    )


def grown(f: Facts) -> list[tuple[str, str]]:
    """The processes whose resident floor rose bundle after bundle through the host's
    earlier bundles and this one, by a size that matters: (name, what the readings say)."""
    out = []
    for key, series in f.process_history.items():
        levels: list[float] = []
        last = None
        for t, v in sorted((t, v) for t, v in series if v is not None):
            # one floor per bundle: a pause longer than a window starts the next bundle
            if last is None or t - last > PROCESS_BUNDLE_GAP_S:
                levels.append(v)
            levels[-1] = min(levels[-1], v)
            last = t
        onset = rising_floors(levels, PROCESS_LEAK_BYTES)
        if onset is None or levels[-1] < PROCESS_LEAK_FACTOR * levels[onset]:
            continue
        rises = sum(b > a for a, b in zip(levels[onset:], levels[onset + 1 :], strict=False))
        out.append(
            (
                key.split(" ", 1)[1],
                f"pid {key} grew from {gib(levels[onset])} to {gib(levels[-1])} resident "
                f"over {len(levels) - onset} bundles of this host, each floor above the last "
                f"({rises} of {len(levels) - onset - 1} rose); read from the archive",
            )
        )
    return out


def rising_floors(
    levels: list[float], least: float, ceiling: float = math.inf, pool: float | None = None
) -> int | None:
    """Where the floors began to ratchet: the earliest start of a run to the end of at
    least LEAK_MIN_STRETCHES floors that rose `least` in all, most of whose steps rose,
    that never came back (once halfway up, no later floor within a quarter of the start)
    and still rose in its second half. A leak that began in the afternoon is read from the
    afternoon. Floors at the pool's ceiling cannot rise further: steps between them are
    neither rises nor falls.

    Given the `pool` that ran out, the end agrees with a leak: a rise that ate
    HEADROOM_EATEN of the room above the run's start is enough, and, where no run rose
    step after step, a ratchet that held between its clicks (a quiet stretch keeps the
    floor where it was) is one too: read from its first click."""
    onset = _ratchet_run(levels, least, ceiling, pool, _most_rise)
    if onset is not None or pool is None:
        return onset
    onset = _ratchet_run(levels, least, ceiling, pool, _held_between_clicks)
    if onset is None:
        return None
    noise = FLOOR_NOISE * (levels[-1] - levels[onset])
    while onset + LEAK_MIN_STRETCHES < len(levels) and levels[onset + 1] <= levels[onset] + noise:
        onset += 1
    return onset


def _ratchet_run(
    levels: list[float],
    least: float,
    ceiling: float,
    pool: float | None,
    clicked: Callable[[list[tuple[float, float]], float], bool],
) -> int | None:
    for k in range(len(levels) - LEAK_MIN_STRETCHES + 1):
        run = levels[k:]
        rise = run[-1] - run[0]
        room = pool - run[0] if pool is not None else math.inf
        if rise < min(least, HEADROOM_EATEN * room):
            continue
        if run[-1] <= max(levels[:k], default=-math.inf) + FLOOR_NOISE * rise:
            continue  # climbed back to where the floor already was: a reload, not a leak
        # A run that began above the ceiling (a box full all day) is read as it is.
        cap = ceiling if run[0] < ceiling else math.inf
        steps = [(a, b) for a, b in zip(run, run[1:], strict=False) if min(a, b) < cap]
        halfway = next(i for i, v in enumerate(run) if v >= run[0] + rise / 2)
        # Still rising in the hours before the end, unless it filled the pool: a rise that
        # stopped a day before the failure did not run it out.
        late = run[-1] >= cap or run[-1] - run[len(run) // 2] >= rise / 4
        if late and clicked(steps, rise) and min(run[halfway:]) > run[0] + rise / 4:
            return k
    return None


def _most_rise(steps: list[tuple[float, float]], rise: float) -> bool:
    return bool(steps) and sum(b > a for a, b in steps) >= LEAK_MIN_RISES * len(steps)


def _held_between_clicks(steps: list[tuple[float, float]], rise: float) -> bool:
    """It clicked upwards more than once (one rise is a step) and hardly ever fell;
    moves under FLOOR_NOISE of the rise are neither."""
    noise = FLOOR_NOISE * rise
    rises = sum(b > a + noise for a, b in steps)
    falls = sum(b < a - noise for a, b in steps)
    return rises >= LEAK_CLICKS and falls <= LEAK_MOST_FALLS * len(steps)
