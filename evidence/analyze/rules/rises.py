"""How a memory line rose: a load at once or resting half-way, a climb without a pause to
the engine running out, the card keeping the context's scratch."""

import bisect
import math
from collections.abc import Callable

from evidence.analyze import shapes
from evidence.analyze.facts import Facts
from evidence.analyze.rules.callers import busier_than_usual
from evidence.analyze.rules.context_length import model_contexts
from evidence.analyze.rules.floors import FLOOR_NOISE, LEAK_SHARE, QUIET_FLOOR_QUANTILE
from evidence.analyze.rules.memory import is_card, pool_size
from evidence.analyze.rules.models import MODEL_MIN_BYTES, single_model
from evidence.analyze.rules.ran_out import engine_ran_out, killed
from evidence.analyze.rules.series import HOUR_S, at, history, hourly, mean, median, window
from evidence.analyze.rules.text import gib
from evidence.analyze.window import INCIDENT_S, RECENT_S, Window, known

LOAD_TAKES_S = 7200.0  # a model loads (and its cache fills) within the hour; a leak takes hours
MODEL_LOADS_S = 1800.0  # a model's weights load in minutes, not hours
REST_S = 1800.0  # a load does not rest half-way for half an hour; a ratchet's clicks do
LEAK_ONE_JUMP = 0.7  # one jump between two stretches carrying 70% of the rise is a step
RELEASED = 0.75  # the capture reading under three quarters of the highest floor: given back
FULL_SHARE = 0.95  # a floor this close to the pool's size has nowhere left to rise
HELD_S = 900.0  # a level held a quarter hour, not the allocations of the last minutes
CLIMB_READINGS = 6  # half-hourly bundles through the incident window: enough to see a climb
STEP_SETTLE = 3  # readings either side of a high-water's step: the line's level before and after
STEP_RISES = 3  # a high-water rising over more readings than this climbs; it did not step
LONGER = 1.05  # a record this much past the last is a longer conversation, not a few tokens
LOAD_HELD = 1.25  # requests running within a quarter of where they were: the load held
IDLE_SHARE = 0.5  # half a rise put on while the engines generated nothing: not theirs
IDLE_S = 1800.0  # counters count a request when it ends: idle is none ended for half an hour
IDLE_PACE_S = 1800.0  # half an hour of idle inside a climb: enough to see whether it held
IDLE_PACE_SHARE = 0.1  # ... gaining a tenth of the rise or more in it
IDLE_PACE = 0.5  # ... at half the pace it climbed while the engines worked: not theirs
IDLE_CLIMBS = 0.75  # ... reading after reading: three in four of its idle moves went up
QUIET_FALL = 0.02  # a fall of 2% of the pool between two readings with no request running ...
QUIET_FALLS = 3  # ... in separate descents on the way up: something else's memory comes and goes

# A memory line's step between two readings (t0, v0, t1, v1) and whether the engines
# were idle through it (None: unknown).
IdleStep = tuple[float, float, float, float, bool | None]


def card_kept_the_context(f: Facts) -> str | None:
    """Where nothing measured the context, llama-server's card is its record: its CUDA pool
    keeps the largest scratch a context needed and gives nothing back. A creep is the card
    climbing past anything of the day in the hours before the engine ran out, after a day
    it held level, none of it given back: a leak's remainders pile up over the day's
    bursts; a queue's memory comes and goes with the requests running. Only the card's
    line is the engines' alone (the host's holds everything else too)."""
    w = window(f)
    ended = engine_ran_out(f)
    if not ended or not history(f, "accelerator_used") or f.prompts or f.stats:
        return None  # the log's own lengths, where it has them, say it directly
    if not any(e["kind"] == "llama-server" for e in f.engines):
        return None
    series = w.upto(f.series["accelerator_used"])
    day = hourly(w.reference(series), median)
    recent, incident = known(w.last(series, RECENT_S)), known(w.incident(series))
    pool = pool_size(f, "accelerator_used")
    if not day or not recent or not incident or not pool:
        return None
    rise = max(recent) - max(day)
    above = [
        t
        for t, v in w.last(series, RECENT_S)
        if v is not None and v >= max(day) + LEAK_SHARE * pool
    ]
    # Held a while: the last minutes' allocations as every slot filled are the ending.
    if not above or above[-1] - above[0] < HELD_S or max(day) - min(day) > rise / 2:
        return None
    # The engine's death releases what it held: a fall that stays to the end is that.
    while len(incident) > 1 and incident[-1] < max(incident[:-1]) - rise / 4:
        incident.pop()
    peak, gave_back = incident[0], 0.0
    for v in incident:
        peak = max(peak, v)
        gave_back = max(gave_back, peak - v)
    # Read from where the rise began, which may be before the incident window: a load
    # just before it is a load all the same.
    began = max(
        (t for t, v in series if v is not None and v <= max(day) and t < above[0]), default=w.start
    )
    rising = [p for p in series if p[0] >= min(began - HOUR_S, w.start)]
    if gave_back > rise / 4 or (not single_model(f) and _loaded_at_once(rising)):
        return None
    return (
        f"the card's memory rose {gib(rise)} past the most of any hour of the day "
        f"({gib(max(day))}) in the hour before {ended}, after a day within "
        f"{gib(max(day) - min(day))}, and gave none of it back: llama-server's pool keeps "
        "what the longest context needed"
    )


def _loaded_at_once(series: shapes.Series) -> bool:
    """Most of a line's rise is one step reached within MODEL_LOADS_S without resting
    half-way: what a model's weights do as they load."""
    step = shapes.step(series, fmt=gib)
    return (
        bool(step.verdict) and rise_time(series, step) <= MODEL_LOADS_S and not rested(series, step)
    )


def _midway(series: shapes.Series, step: shapes.Step) -> list[float]:
    """When the line read between a fifth and four fifths of the step."""
    before, size = step.before or 0.0, step.size or 0.0
    return [
        t for t, v in series if v is not None and before + 0.2 * size <= v <= before + 0.8 * size
    ]


def passed_between(series: shapes.Series, step: shapes.Step, began: float, reached: float) -> bool:
    """Whether the line, on its way from `began` to `reached`, read anything between a fifth
    and four fifths of the step: a climb passes through, a jump does not."""
    return any(began < t < reached for t in _midway(series, step))


def rested(series: shapes.Series, step: shapes.Step) -> bool:
    """Whether the rise rested half-way: readings between a fifth and four fifths of the
    step for REST_S or more. A load fills without a pause; a ratchet's clicks, each busy
    spell's remainder, leave a level between them."""
    middle = _midway(series, step)
    return bool(middle) and middle[-1] - middle[0] >= REST_S


def card_stayed(
    f: Facts, name: str, before: tuple[float, float], after: tuple[float, float]
) -> bool:
    """The host's line moved between two spans while the card's, read beside it, stayed
    where it was (its medians within a GiB): a model is loaded to be served from the card,
    so what moved is the engine's own host memory, not a model."""
    if name != "memory_used" or not history(f, "accelerator_used"):
        return False
    card = window(f).upto(f.series["accelerator_used"])
    spans = [known([(t, v) for t, v in card if a <= t <= b]) for a, b in (before, after)]
    if not all(spans):
        return False
    return abs(median(spans[1]) - median(spans[0])) < MODEL_MIN_BYTES


def engine_climbed(f: Facts, name: str, label: str, least: float) -> str | None:
    """A leak's last hours need not leave floors: the line climbs without a pause to the
    kill. The kernel took the engine with no other process holding much and no cache
    climbing alongside: the engine's own memory, not its conversations."""
    w = window(f)
    ended = engine_ran_out(f)
    # Only the card's line is the engines' alone, and a kill is the host running out.
    went_down = (
        is_card(name)
        and w.failure is not None
        and w.failure.dated_by.source == "target"
        and not killed(f)
    )
    if ended is None and not went_down:
        return None
    series = f.series[name]
    busier = busier_than_usual(f)
    spans = [w.incident(series), _before_filled(w, series, pool_size(f, name))]
    since = since_level(w, series)
    if since and since[0][0] < w.start and not busier:
        # A climb of more hours than the incident window, under the usual load (under more,
        # it is the load's): a leak under load without a pause, which leaves no floors.
        spans.append(since)
    elif busier and load_held(f, since):
        # More load than usual, but it came at once and held (a batch that filled the
        # slots): the line climbing on through it is not the load's.
        spans.append(since)
    medians = next(filter(None, (_climbed_quarters(known(s), least) for s in spans)), None)
    if medians is None:
        return None
    if ended is None:
        # Nothing says the card ran out, only that the engine went down: the climb is its
        # own where the card held level through the day before it and the load did not grow
        # under it (a leak under steady load has no quiet hours to leave floors in).
        earlier = known(w.reference(series))
        total = medians[-1] - medians[0]
        if not earlier or busier:
            return None
        if shapes.quantile(earlier, 0.95) - shapes.quantile(earlier, 0.05) > FLOOR_NOISE * total:
            return None
        ended = "the engine went down, after a day held level"
    cache = [n for n in ("kv_cache", "context_high_water") if history(f, n)]
    if any(_climbed_alongside(w.incident(f.series[n])) for n in cache):
        return None
    if any(grew for _, _, grew in model_contexts(f)):
        return None  # Ollama reloading its model with ever longer contexts: the cache
    return (
        f"the {label} climbed through the hours before {ended}, with no cache climbing "
        "alongside and no other process holding much: quarter medians "
        f"{', '.join(gib(m) for m in medians)}"
    )


def rose_with_the_context(f: Facts, name: str, since: float) -> tuple[float, str] | None:
    """What the memory line `name` gained at the very readings the context high-water set a
    new record, from `since` to the failure: the level of the STEP_SETTLE readings after
    each step against those before, summed, and what says so; None without a high-water.
    A line that jumps each time a longer conversation arrives holds that conversation's
    memory; a leak's remainders come with the busy spells, whatever their length. Only
    records count, and none in the hours after the mark fell: a restarted engine's (or a
    swapped-in model's) first requests come as its model loads, the load's coincidence."""
    w = window(f)
    marks = [(t, v) for t, v in w.upto(f.series.get("context_high_water", [])) if v is not None]
    line = [(t, v) for t, v in w.upto(f.series.get(name, [])) if v is not None]
    if len(marks) < 2 or not line:
        return None
    gained, largest, record, fell = 0.0, (0.0, 0.0, 0.0, 0.0), marks[0][1], -math.inf
    i = 1
    while i < len(marks):
        if marks[i][1] < marks[i - 1][1]:
            fell = marks[i][0]  # an engine restarted, or llama-swap swapped its model
        if marks[i][1] <= record:
            i += 1
            continue
        k = i
        while k + 1 < len(marks) and marks[k + 1][1] > marks[k][1]:
            k += 1
        (t0, v0), (t1, v1) = marks[i - 1], marks[k]
        rises, record, i = k - i + 1, v1, k + 1
        loading = v0 <= 0 or t1 - fell < LOAD_TAKES_S
        if t1 < since or loading or rises > STEP_RISES or v1 < LONGER * v0:
            continue  # before the look, a model loading, a climb, a few tokens more
        before = [v for t, v in line if t <= t0][-STEP_SETTLE:]
        after = [v for t, v in line if t >= t1][:STEP_SETTLE]
        if not before or len(after) < STEP_SETTLE:
            continue
        # Signed: a busy line's scatter adds nothing either way, summed over its records.
        jump = median(after) - median(before)
        gained += jump
        largest = max(largest, (jump, v0, v1, t1))
    if gained <= 0:
        return None
    jump, v0, v1, t1 = largest
    return gained, (
        f"{gib(gained)} of it came at the readings the context high-water set a new record, "
        f"the most {gib(jump)} as it went from {v0:.0f} to {v1:.0f} tokens {at(f, t1)}"
    )


def load_held(f: Facts, span: shapes.Series) -> bool:
    """The load held level over the span: the requests running and waiting, on average,
    within a quarter in its second half of what they were in its first, some in both. A
    queue that kept deepening is more load, whatever the slots held."""
    if not span:
        return False
    began, ended = span[0][0], span[-1][0]
    waiting = dict(f.series.get("requests_waiting", []))
    load = [
        v + (waiting.get(t) or 0.0)
        for t, v in f.series.get("requests_running", [])
        if began <= t <= ended and v is not None
    ]
    if len(load) < CLIMB_READINGS:
        return False
    half = len(load) // 2
    first, second = mean(load[:half]), mean(load[half:])
    return first > 0 and second <= LOAD_HELD * first


def since_level(w: Window, series: shapes.Series) -> shapes.Series:
    """The readings since the line last stood at its level of the day (its low, within
    FLOOR_NOISE of the way up to the failure): a leak under load without a pause climbs
    from there for as many hours as it takes, past any one incident window."""
    pts = [(t, v) for t, v in w.upto(series) if v is not None]
    if not pts:
        return []
    low = shapes.quantile([v for _, v in pts], QUIET_FLOOR_QUANTILE)
    level = low + FLOOR_NOISE * (pts[-1][1] - low)
    left = max((i for i, (_, v) in enumerate(pts) if v <= level), default=0)
    return pts[left:]


def _climbed_alongside(series: shapes.Series) -> bool:
    """A cache that climbed through the incident window and was still climbing in its
    second half (its last quarter's median past its second's): one that rose as a batch
    began and then held did not climb alongside the hours that followed."""
    if not shapes.climb(series).verdict:
        return False
    medians = _quarter_medians(known(series))
    return len(medians) < 4 or medians[3] > LONGER * medians[1]


def _climbed_quarters(levels: list[float], least: float) -> list[float] | None:
    """The quarter medians of readings that rose quarter on quarter without a pause, by
    `least` in all and not in one jump (a model loaded is a step; a second model's cache
    filling after it leaves a flat quarter either side); None when they did not. Quarters
    as even as the readings allow: the archive's half-hourly bundles give six readings in
    the three hours before, a scrape dozens."""
    if len(levels) < CLIMB_READINGS:
        return None
    medians = _quarter_medians(levels)
    rises = [b - a for a, b in zip(medians, medians[1:], strict=False)]
    total = medians[-1] - medians[0]
    if min(rises) <= 0.05 * total or total < least or max(rises) > LEAK_ONE_JUMP * total:
        return None
    return medians


def _quarter_medians(levels: list[float]) -> list[float]:
    """The medians of the readings' four quarters, as even as their count allows (fewer
    than four readings leave empty quarters out)."""
    cuts = [i * len(levels) // 4 for i in range(5)]
    return [median(levels[a:b]) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]


def _before_filled(w: Window, series: shapes.Series, pool: float | None) -> shapes.Series:
    """Where the line's last readings sat at its pool's ceiling (before the death's
    release), the INCIDENT_S before it got there; else nothing. A full pool cannot climb
    further: an allocation that failed after hours at the ceiling had its climb before."""
    pts = [(t, v) for t, v in w.upto(series) if v is not None]
    i = released_at(pts, max((v for _, v in pts), default=0.0))  # not readings of the climb
    full = i
    while pool and full > 0 and pts[full - 1][1] >= FULL_SHARE * pool:
        full -= 1
    if full == i or full == 0:
        return []
    filled = pts[full][0]
    return [(t, v) for t, v in pts if filled - INCIDENT_S <= t <= filled]


def released_at(pts: list[tuple[float, float]], high: float) -> int:
    """Where the final run of readings under RELEASED of `high` begins (len(pts) when the
    last reading is above it): a death releases its memory, it does not return."""
    i = len(pts)
    while i > 0 and pts[i - 1][1] < RELEASED * high:
        i -= 1
    return i


def rise_time(series: shapes.Series, step: shapes.Step) -> float:
    """Seconds the series took to go from a tenth of the step above the old level to a
    tenth below the new one, around the step's time."""
    began, ended = rise(series, step)
    return ended - began


def rise(series: shapes.Series, step: shapes.Step) -> tuple[float, float]:
    """When the series left the old level (its last reading within a tenth of the step
    of it) and reached the new one, around the step's time; the step's time for both
    where either is not seen."""
    before, size, at = step.before or 0.0, step.size or 0.0, step.t_change or 0.0
    pts = [(t, v) for t, v in series if v is not None]
    low = [t for t, v in pts if t <= at and v <= before + 0.1 * size]
    high = [t for t, v in pts if t >= at and v >= before + 0.9 * size]
    if not low or not high:
        return at, at
    return low[-1], max(low[-1], high[0])


def rose_while_idle(f: Facts, name: str, since: float, rose: float) -> str | None:
    """Where a memory line's rise of `rose` since `since` came while the engines generated
    nothing, in words: IDLE_SHARE or more of it (`idle_rise`), or, through the climb
    itself, idle hours in which it kept rising at the pace it rose while they worked. An
    engine leaks (and fragments) with the work it does; one that served nothing put
    nothing on: memory rising then is another process's."""
    steps = _idle_steps(f, name, since, rose)
    idle = _idle_gain(steps, rose)
    if idle is not None:
        return (
            f"of the rise of {gib(rose)}, {gib(idle)} came while the engines generated not "
            "one token: an engine that serves nothing leaks nothing; another process grew"
        )
    paced = _idle_pace(steps, rose)
    if paced is None:
        return None
    gained, hours, share = paced
    return (
        f"it climbed {gib(gained)} in {hours:.1f} h in which the engines generated not one "
        f"token, at {share:.0%} of the pace it climbed while they worked: a leak holds "
        "still while nothing is served; another process grew"
    )


def gave_back_while_quiet(f: Facts, name: str, since: float, rose: float) -> str | None:
    """Where a memory line, through its climb of `rose` since `since` (`_climb`), fell by
    QUIET_FALL of its pool or more between readings with no request running at either
    end, in QUIET_FALLS separate descents or more, in words: another process's working
    memory coming and going (a build's jobs, a batch's chunks). A leak gives nothing back,
    and an engine serving nothing neither takes nor frees. Unknown where no request gauge
    is read."""
    w = window(f)
    pool = pool_size(f, name)
    if not pool or not history(f, "requests_running") or not history(f, name):
        return None
    running = _read_at(w, f.series["requests_running"])
    line = [(t, v) for t, v in w.upto(f.series[name]) if t >= since and v is not None]
    if len(line) < 2:
        return None
    first, top = _climb([v for _, v in line], rose)
    falls = [
        (v0 - v1 >= QUIET_FALL * pool and running(t0) == 0 and running(t1) == 0, v0 - v1)
        for (t0, v0), (t1, v1) in zip(line[first:top], line[first + 1 : top + 1], strict=False)
    ]
    # A descent over several readings is one giving back, not several.
    descents = sum(fell and not (i and falls[i - 1][0]) for i, (fell, _) in enumerate(falls))
    if descents < QUIET_FALLS:
        return None
    given = sum(size for fell, size in falls if fell)
    return (
        f"on its way up it fell {descents} times while the engines ran no request, "
        f"{gib(given)} in all: another process's memory coming and going; a leak gives "
        "nothing back, and an engine serving nothing frees nothing"
    )


def _climb(values: list[float], rose: float) -> tuple[int, int]:
    """Where a line's climb of `rose` runs: from its last reading near where it began
    (FLOOR_NOISE of the rise above its first readings) to its highest."""
    top = values.index(max(values))
    base = median(values[:3]) + FLOOR_NOISE * rose
    return max((i for i in range(top + 1) if values[i] <= base), default=0), top


def idle_rise(f: Facts, name: str, since: float, rose: float) -> float | None:
    """How much of a memory line's rise of `rose` since `since` came between readings over
    which, and over IDLE_S before, the engines generated not one token, where that was at
    least IDLE_SHARE of it; None where less, or where the card's line (the engines' alone)
    rose with it."""
    return _idle_gain(_idle_steps(f, name, since, rose), rose)


def _idle_gain(steps: list[IdleStep], rose: float) -> float | None:
    idle = sum(v1 - v0 for _, v0, _, v1, quiet in steps if quiet)
    if not steps or idle < IDLE_SHARE * rose:
        return None
    return min(idle, rose)  # a busy spell's own swing counted going up, not coming down


def _idle_pace(steps: list[IdleStep], rose: float) -> tuple[float, float, float] | None:
    """Through the line's climb of `rose` (`_climb` over its steps), what it gained while
    the engines were idle, over how many hours, and that pace as a share of its pace while
    they worked; None unless it climbed through half an hour of idle or more
    (IDLE_PACE_S), by IDLE_PACE_SHARE of the rise, at IDLE_PACE of the busy pace, mostly
    going up (IDLE_CLIMBS). A leak's line holds between busy spells, whatever the spells
    left behind."""
    if not steps:
        return None
    first, top = _climb([steps[0][1]] + [v1 for _, _, _, v1, _ in steps], rose)
    climb = steps[first:top]
    idle = [(t1 - t0, v1 - v0) for t0, v0, t1, v1, quiet in climb if quiet]
    busy = [(t1 - t0, v1 - v0) for t0, v0, t1, v1, quiet in climb if quiet is False]
    idle_s, gained = sum(s for s, _ in idle), sum(d for _, d in idle)
    busy_s, worked = sum(s for s, _ in busy), sum(d for _, d in busy)
    if idle_s < IDLE_PACE_S or busy_s <= 0 or gained < IDLE_PACE_SHARE * rose or worked <= 0:
        return None
    ups, downs = sum(d > 0 for _, d in idle), sum(d < 0 for _, d in idle)
    if ups < IDLE_CLIMBS * (ups + downs):
        return None  # a line that wanders up and down while idle ended higher by chance
    share = (gained / idle_s) / (worked / busy_s)
    return (gained, idle_s / HOUR_S, share) if share >= IDLE_PACE else None


def _idle_steps(f: Facts, name: str, since: float, rose: float) -> list[IdleStep]:
    """A memory line's readings since `since` as steps (t0, v0, t1, v1, idle): idle where
    the engines generated not one token over the step and IDLE_S before it and ran no
    request at either end, busy where they did, None where the counter was not read near
    either end (a gap is no idle). No steps at all where the card's line (the engines'
    alone) rose with it: theirs, idle or not."""
    if rose <= 0 or not history(f, "tokens_generated") or not history(f, name):
        return []
    w = window(f)
    if name != "accelerator_used" and history(f, "accelerator_used"):
        card = known([(t, v) for t, v in w.upto(f.series["accelerator_used"]) if t >= since])
        if card and median(card[-3:]) - median(card[:3]) >= rose / 2:
            return []
    made = _read_at(w, f.series["tokens_generated"])
    running = _read_at(w, f.series.get("requests_running", []))
    line = [(t, v) for t, v in w.upto(f.series[name]) if t >= since and v is not None]
    steps: list[IdleStep] = []
    for (t0, v0), (t1, v1) in zip(line, line[1:], strict=False):
        # A counter counts a request when it ends: one running at either end is work its
        # count has not shown yet.
        a, b = made(t0 - IDLE_S), made(t1)
        quiet = None if a is None or b is None else a == b
        if quiet and any((running(t) or 0) > 0 for t in (t0, t1)):
            quiet = False
        steps.append((t0, v0, t1, v1, quiet))
    return steps


def _read_at(w: Window, series: shapes.Series) -> Callable[[float], float | None]:
    """The series' latest reading at or before a time, None where that is more than three
    of its scrapes old (a gap is no reading)."""
    known_pts = [(t, v) for t, v in w.upto(series) if v is not None]
    times = [t for t, _ in known_pts]
    fresh = 3 * median([b - a for a, b in zip(times, times[1:], strict=False)] or [math.inf])

    def read(t: float) -> float | None:
        i = bisect.bisect_right(times, t) - 1
        return known_pts[i][1] if i >= 0 and t - times[i] <= fresh else None

    return read
