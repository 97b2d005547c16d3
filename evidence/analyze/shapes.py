"""Shapes of one series: the words the diagnosis uses for a graph, measured.

The seeds tell the memory faults apart by the shape of one line before any log is read:
context creep *climbs* slowly (with a *sawtooth* of requests on top), a leak *ratchets*
(each burst raises the floor and it never returns), a swap that never unloaded is a
*step* that stays, concurrency is requests waiting for a *sustained* period, host
exhaustion is available memory that *collapses*, and the healthy baseline is a *flat
floor* with bursts and a *daily rhythm*. Each function here answers one of those
questions about one series and shows its working.

A series is a sequence of (unix seconds, value) pairs, in any order, sampled at any
(even irregular) step: one-second samples from a bundle or five-minute steps from
Prometheus over days. Every function is pure, deterministic and stdlib only.

Invariants:

- **Unknown is never zero.** A value of None (or NaN, or infinite) is a gap: it is
  dropped, never read as 0. An interval between samples longer than GAP_FACTOR typical
  steps is unknown time: it counts neither for nor against a time-weighted measure.
- **Too little data is said, not guessed.** Fewer than MIN_POINTS known values, less
  than MIN_SPAN_S of time, or samples covering under MIN_COVERAGE of the window give
  `enough=False`, `verdict=False`, and a `why` that says what was missing.
- **Time, not index.** Wherever duration matters (windows, fractions of the window,
  slopes, runs) it is measured in seconds, so the answer does not depend on the step.
- **Show the working.** Every result is a frozen dataclass: the boolean `verdict`,
  `enough`, a one-line plain-words `why`, the number of known `points`, the `span_s`
  they cover, and the measures that justify the verdict (None when not measured).
  Values in `why` go through `fmt` (pass e.g. ``lambda b: f"{b / 2**30:.1f} GiB"``).

The verdicts describe shapes, not faults: a ratchet also climbs, bursts on a flat floor
are also a sawtooth and spikes. Telling faults apart (and noticing that two shapes fit
at once) is the classifier's job, with these measures as its evidence.
"""

import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from statistics import median
from typing import TypeVar

Series = Sequence[tuple[float, float | None]]
Format = Callable[[float], str]

DAY_S = 86400.0

# --- what "enough data" means -------------------------------------------------------
MIN_POINTS = 6  # below six readings any shape is an anecdote
MIN_SPAN_S = 10.0  # under ten seconds is a blink, not a shape (a bundle covers ~30 s)
MIN_COVERAGE = 0.5  # if gaps hide more than half the window, what we did not see dominates
GAP_FACTOR = 3.0  # an interval over 3 typical steps is a gap (irregular sampling jitters ~1x)
MAD_TO_SIGMA = 1.4826  # scales a median absolute deviation to a Gaussian standard deviation
THEIL_SEN_MAX_POINTS = 200  # Theil-Sen is quadratic; 200 time-ordered means keep it fast
RESAMPLE_MAX_BINS = 1_000_000  # bounded memory: a resample never allocates more bins

# --- climb: a slow, sustained rise ---------------------------------------------------
CLIMB_MIN_RISE_NOISE = 6.0  # a rise under 6 noise sigmas could be noise
CLIMB_MIN_RISE_LEVEL = 0.02  # under 2% of the level is not worth a word (baseline.py: 2%)
CLIMB_MIN_RISE_SPREAD = 0.5  # the rise must be at least half the 5-95% range: a trend, not
#                              a wiggle (a daily rhythm has range but almost no slope)
CLIMB_MIN_QUARTER_SHARE = 0.1  # each quarter's median above the last by 10% of the rise
#                                (linear: 25%): sustained, where a step lifts only one quarter
CLIMB_MIN_ABOVE_START = 0.7  # a climb spends most of the window above where it started

# --- sawtooth: repeated rises and falls -----------------------------------------------
SAWTOOTH_SWING_NOISE = 8.0  # a swing of 8 noise sigmas: n Gaussian readings span about
#                             2 sqrt(2 ln n) sigmas (7.4 for 900), so noise cannot repeat one
SAWTOOTH_SWING_SPREAD = 0.3  # ... and 30% of the detrended 5-95% range: the teeth, not ripples
SAWTOOTH_MIN_CYCLES = 3  # one or two rises and falls are events; three are a pattern

# --- floors (ratchet and flat_floor) -------------------------------------------------
# The floor is a low quantile, so one quiet reading does not set it: the one quantile of
# every floor the analyst reads (shapes, rules, baseline, incident signatures).
FLOOR_QUANTILE = 0.1
RATCHET_WINDOW_SHARE = 1 / 6  # bursts narrower than 1/6 of the window stand out of the floor
RATCHET_WINDOW_MIN_STEPS = 5  # ... and the floor window spans at least 5 samples
RATCHET_BURST_NOISE = 8.0  # a burst rises 8 noise sigmas above the local floor ...
RATCHET_BURST_SHARE = 0.3  # ... and 30% of the largest excursions (bursts are big, by nature)
RATCHET_MIN_STRETCH_POINTS = 3  # a floor needs 3 readings; bursts closer than that are one
RATCHET_MIN_BURSTS = 3  # "each burst raises the floor" needs at least 3 bursts to see
RATCHET_STEP_SE = 3.0  # the floor rose across a burst if it moved 3 standard errors of a
FLOOR_SE_FACTOR = 1.7  # floor (a 10% quantile of m Gaussian readings: 1.7 sigma / sqrt m),
RATCHET_STEP_NOISE = 2.0  # but never asking more than 2 noise sigmas (short stretches),
RATCHET_STEP_BURST_SHARE = 0.02  # and at least 2% of a burst's height ("a little", not nothing)
RATCHET_MIN_RISE_NOISE = 6.0  # the last floor meaningfully above the first: 6 noise sigmas
RATCHET_MIN_RISE_LEVEL = 0.02  # ... and 2% of the level (same bar as FLAT_FLOOR_LEVEL_SHARE)
RATCHET_RETURN_SHARE = 0.25  # a later floor within 25% of the highest rise from the first
#                             is a return (a restart, an unload): not a ratchet
RATCHET_DRIFT_MIN_POINTS = 5  # a stretch needs 5 readings to measure its own slope
RATCHET_MAX_IDLE_DRIFT = 0.3  # between bursts a ratchet's floor is flat; if it climbs at 30%
#                               of the overall rate or more, it is a climb with bursts on top

# --- step: a level shift that stays --------------------------------------------------
STEP_MAX_POINTS = 240  # the split search is quadratic; 240 time-ordered means are plenty
STEP_MIN_SEGMENT_SHARE = 0.1  # both levels must last 10% of the window to be levels
STEP_MIN_SCORE = 5.0  # shift of medians >= 5 within-segment sigmas (a linear climb: ~2.7)
STEP_TAIL_SHARE = 0.1  # "stays": the last 10% of the window ...
STEP_STAY_SHARE = 0.25  # ... is within 25% of the shift from the new level

# --- spike: a short excursion that returns -------------------------------------------
SPIKE_BASELINE_SHARE = 0.2  # rolling median over 20% of the window follows steps, not spikes
SPIKE_WINDOW_MIN_STEPS = 5  # ... and spans at least 5 samples
SPIKE_MIN_NOISE = 8.0  # a spike stands 8 sigmas off the rolling median (6 let noise through
#                        when 30 readings underestimate sigma; real spikes are far larger)
SPIKE_MAX_SHARE = 0.1  # short: at most 10% of the window (longer is a plateau)
SPIKE_CONTEXT_STEPS = 3  # levels before and after are read over >= 3 typical steps
SPIKE_RETURN_SHARE = 0.25  # returned: the level after is the level before, give or take 25%
#                           of the spike's height

# --- collapse: the end falls well below the level before -----------------------------
COLLAPSE_TAIL_SHARE = 0.2  # the fall must begin in the last 20% of the window ("at the end")
COLLAPSE_BEFORE_SHARE = 0.2  # the level before is the median of the 20% before the fall
COLLAPSE_MIN_DROP_SHARE = 0.5  # well below: under half the level before (the seed's 50%)
COLLAPSE_MIN_NOISE = 6.0  # ... and 6 noise sigmas, for series whose level is near zero
COLLAPSE_MIN_POINTS = 2  # one low reading at the end could be a glitch; two are a fall

# --- flat_floor ----------------------------------------------------------------------
FLOOR_STRETCHES = 6  # under two days the window is cut into up to 6 stretches ...
FLOOR_POINTS_PER_STRETCH = 10  # ... of at least 10 readings, so a burst cannot fill one
FLOOR_DAILY_MIN_SPAN_S = 1.9 * DAY_S  # from ~two days on (jitter at the edges), one
#                                       stretch per day, so every stretch has a night in it
FLOOR_MIN_STRETCH_POINTS = 3  # a stretch needs 3 readings for a floor
FLAT_FLOOR_NOISE = 4.0  # floors within 4 noise sigmas of each other are flat ...
FLAT_FLOOR_LEVEL_SHARE = 0.02  # ... or within 2% of the floor (baseline.py's FLAT_FRACTION)

# --- daily_rhythm --------------------------------------------------------------------
RHYTHM_MIN_SPAN_S = 42 * 3600.0  # ~2 days: 24 h lag pairs need most of a second day
RHYTHM_STEP_S = 1800.0  # resampled to 30 min: hourly shape kept, noise averaged down
RHYTHM_MIN_PAIRS = 24  # at least 12 hours of (t, t+24h) pairs to correlate
RHYTHM_MIN_CORR = 0.5  # today's shape predicts tomorrow's (detrended, lag 24 h)
RHYTHM_MIN_CONTRAST = 0.3  # ... clearly better than at lag 12 h: slow drift correlates at
#                            every lag, a rhythm at its period


# --- results ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Shape:
    verdict: bool
    enough: bool
    why: str
    points: int  # known values used (gaps dropped)
    span_s: float  # seconds from the first known value to the last


@dataclass(frozen=True, kw_only=True)
class Climb(Shape):
    slope_per_hour: float | None = None  # Theil-Sen
    rise: float | None = None  # slope over the whole window
    start_level: float | None = None  # the robust line at the first reading
    end_level: float | None = None  # ... and at the last
    fraction_above_start: float | None = None  # time-weighted
    noise: float | None = None


@dataclass(frozen=True, kw_only=True)
class Sawtooth(Shape):
    cycles: int | None = None  # rise-and-fall pairs of at least `threshold`
    swing: float | None = None  # median size of a rise or fall
    period_s: float | None = None  # median time between successive peaks
    threshold: float | None = None


@dataclass(frozen=True, kw_only=True)
class Ratchet(Shape):
    bursts: int | None = None  # excursions above the local floor, with floor in view both sides
    raised: int | None = None  # floor changes across a burst that went up
    lowered: int | None = None  # ... and down
    floors: tuple[float, ...] | None = None  # floor of each stretch between bursts, in order
    first_floor: float | None = None
    last_floor: float | None = None
    rise: float | None = None  # last floor - first floor
    returned: bool | None = None  # a later floor came back near the first
    idle_drift_share: float | None = None  # floor slope between bursts / overall floor slope
    noise: float | None = None


@dataclass(frozen=True, kw_only=True)
class Step(Shape):
    t_change: float | None = None  # unix seconds
    size: float | None = None  # after - before (signed)
    before: float | None = None  # median level before
    after: float | None = None  # median level after
    tail_level: float | None = None  # median of the last STEP_TAIL_SHARE of the window
    score: float | None = None  # |size| / within-segment sigma
    noise: float | None = None  # within-segment sigma


@dataclass(frozen=True, kw_only=True)
class Spike(Shape):
    spikes: int | None = None
    t_peak: float | None = None  # of the largest
    height: float | None = None  # of the largest, signed, above the rolling median
    duration_s: float | None = None  # of the largest
    noise: float | None = None


@dataclass(frozen=True, kw_only=True)
class Collapse(Shape):
    t_start: float | None = None  # first reading of the final low run
    level_before: float | None = None
    end_level: float | None = None  # median of the final low run
    drop: float | None = None  # level_before - end_level
    drop_share: float | None = None  # drop / |level_before|, None when the level is 0
    low_points: int | None = None


@dataclass(frozen=True, kw_only=True)
class Sustained(Shape):
    above: float | None = None
    fraction: float | None = None  # time above / known time
    above_s: float | None = None
    covered_s: float | None = None  # known time (gaps excluded)
    longest_run_s: float | None = None  # longest stretch above with no gap in it


@dataclass(frozen=True, kw_only=True)
class FlatFloor(Shape):
    floors: tuple[float, ...] | None = None  # one per stretch (per day from two days)
    stretch_s: float | None = None
    floor_range: float | None = None  # max - min of floors
    floor_change: float | None = None  # last - first
    tolerance: float | None = None
    peak_over_floor: float | None = None  # 99th percentile minus the median floor: the bursts


@dataclass(frozen=True, kw_only=True)
class DailyRhythm(Shape):
    corr_24h: float | None = None
    corr_12h: float | None = None
    pairs: int | None = None  # resampled (t, t+24h) pairs with both sides known
    amplitude: float | None = None  # peak-to-trough of the mean hour-of-day profile
    peak_hour_utc: float | None = None
    days: float | None = None


# --- helpers -------------------------------------------------------------------------

R = TypeVar("R", bound=Shape)


def plain(x: float) -> str:
    """Default value format: four significant digits, no unit (the caller knows the unit)."""
    return f"{x:.4g}"


def _dur(seconds: float) -> str:
    s = abs(seconds)
    if s < 120:
        return f"{seconds:.0f} s"
    if s < 7200:
        return f"{seconds / 60:.0f} min"
    if s < 2 * DAY_S:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / DAY_S:.1f} days"


def _clean(series: Series) -> list[tuple[float, float]]:
    """Known values, sorted by time; readings at the same instant are averaged."""
    by_time: dict[float, list[float]] = {}
    for t, v in series:
        if t is None or v is None:
            continue  # unknown, never 0
        t, v = float(t), float(v)
        if math.isfinite(t) and math.isfinite(v):
            by_time.setdefault(t, []).append(v)
    return [(t, sum(vs) / len(vs)) for t, vs in sorted(by_time.items())]


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (the same definition as DuckDB's quantile_cont)."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _robust_sd(values: Sequence[float]) -> float:
    m = median(values)
    return MAD_TO_SIGMA * median(abs(v - m) for v in values)


def _tiny(vs: Sequence[float]) -> float:
    """Stand-in for a noise of exactly zero (synthetic or integer data): any real change counts."""
    return 1e-9 * max(1.0, max(abs(v) for v in vs))


def _noise(vs: Sequence[float]) -> float:
    """Sample-to-sample noise sigma: MAD of first differences / sqrt 2. Robust to a trend,
    to steps and bursts (few differences), unlike the spread of the values themselves."""
    d = [b - a for a, b in pairwise(vs)]
    if not d:
        return _tiny(vs) if vs else 0.0
    m = median(d)
    sigma = MAD_TO_SIGMA * median(abs(x - m) for x in d) / math.sqrt(2)
    return sigma if sigma > 0 else _tiny(vs)


def _gap_limit(ts: Sequence[float]) -> tuple[float, float]:
    """(typical step, longest interval that is still not a gap)."""
    typical = median(b - a for a, b in pairwise(ts))
    return typical, GAP_FACTOR * typical


def _holds(ts: Sequence[float]) -> list[float]:
    """Seconds each reading stands for: half the interval to each neighbour, or half a
    typical step next to a gap (the rest of a gap is unknown and counts for nobody)."""
    n = len(ts)
    if n < 2:
        return [0.0] * n
    typical, limit = _gap_limit(ts)
    holds = [0.0] * n
    for i, (a, b) in enumerate(pairwise(ts)):
        share = (b - a) / 2 if b - a <= limit else typical / 2
        holds[i] += share
        holds[i + 1] += share
    return holds


def _prepare(
    series: Series, min_span_s: float = MIN_SPAN_S
) -> tuple[list[float], list[float], str | None]:
    """Known times and values, and why they are not enough to judge (None if they are)."""
    pts = _clean(series)
    ts = [t for t, _ in pts]
    vs = [v for _, v in pts]
    if len(pts) < MIN_POINTS:
        return ts, vs, f"too little data: {len(pts)} known values (need {MIN_POINTS})"
    span = ts[-1] - ts[0]
    if span < min_span_s:
        return ts, vs, f"too little data: the values cover {_dur(span)} (need {_dur(min_span_s)})"
    coverage = sum(_holds(ts)) / span
    if coverage < MIN_COVERAGE:
        return ts, vs, f"too sparse: samples cover {coverage:.0%} of the {_dur(span)} window"
    return ts, vs, None


def _not_enough(cls: type[R], ts: Sequence[float], why: str) -> R:
    span = ts[-1] - ts[0] if ts else 0.0
    return cls(verdict=False, enough=False, why=why, points=len(ts), span_s=span)


def _chunk(ts: Sequence[float], vs: Sequence[float], most: int) -> tuple[list[float], list[float]]:
    """At most `most` equal-count, time-ordered means: keeps the shape, bounds the work."""
    n = len(ts)
    if n <= most:
        return list(ts), list(vs)
    cuts = [k * n // most for k in range(most + 1)]
    out_t = [sum(ts[a:b]) / (b - a) for a, b in pairwise(cuts)]
    out_v = [sum(vs[a:b]) / (b - a) for a, b in pairwise(cuts)]
    return out_t, out_v


def _theil_sen(ts: Sequence[float], vs: Sequence[float]) -> float:
    """Median of pairwise slopes (per second): one burst or step cannot tilt it much."""
    cts, cvs = _chunk(ts, vs, THEIL_SEN_MAX_POINTS)
    slopes = [
        (cvs[j] - cvs[i]) / (cts[j] - cts[i])
        for i in range(len(cts))
        for j in range(i + 1, len(cts))
        if cts[j] > cts[i]
    ]
    return median(slopes) if slopes else 0.0


def _rolling(ts: Sequence[float], vs: Sequence[float], window: float, pick) -> list:
    """pick(values within window/2 of each reading's time): a time window, not an index one."""
    half = window / 2
    return [pick(vs[bisect_left(ts, t - half) : bisect_right(ts, t + half)]) for t in ts]


def _opening(ts: Sequence[float], vs: Sequence[float], window: float) -> list[float]:
    """Morphological opening (rolling min, then rolling max): the lower envelope with every
    excursion narrower than `window` removed. It keeps steps and steady climbs as they are,
    so value - opening is the bursts alone (the "top-hat")."""
    return _rolling(ts, _rolling(ts, vs, window, min), window, max)


def _runs(flags: Sequence[bool]) -> list[tuple[int, int]]:
    """(first, last) index of each run of True."""
    runs, start = [], None
    for i, f in enumerate(flags):
        if f and start is None:
            start = i
        elif not f and start is not None:
            runs.append((start, i - 1))
            start = None
    if start is not None:
        runs.append((start, len(flags) - 1))
    return runs


def _between(ts, vs, lo: float, hi: float) -> list[float]:
    return [v for t, v in zip(ts, vs, strict=True) if lo <= t <= hi]


def resample(series: Series, step_s: float) -> list[tuple[float, float | None]]:
    """Mean per bin of step_s seconds, bins aligned to multiples of step_s (so two series
    resampled alike line up); a bin with no known value is None, never 0."""
    if step_s <= 0:
        raise ValueError("step_s must be positive")
    bins: dict[int, list[float]] = {}
    for t, v in _clean(series):
        bins.setdefault(math.floor(t / step_s), []).append(v)
    if not bins:
        return []
    first, last = min(bins), max(bins)
    if last - first + 1 > RESAMPLE_MAX_BINS:
        raise ValueError(f"resampling would make {last - first + 1} bins; use a larger step")
    return [
        (k * step_s, sum(bins[k]) / len(bins[k]) if k in bins else None)
        for k in range(first, last + 1)
    ]


# --- climb -----------------------------------------------------------------------------


def _quarter_medians(ts: Sequence[float], vs: Sequence[float]) -> list[float]:
    t0, span = ts[0], ts[-1] - ts[0]
    out = []
    for k in range(4):
        q = _between(ts, vs, t0 + k * span / 4, t0 + (k + 1) * span / 4)
        if len(q) >= 2:  # a quarter lost to a gap is skipped, not invented
            out.append(median(q))
    return out


def climb(series: Series, *, fmt: Format = plain) -> Climb:
    """A slow, sustained climb across the window (context creep's memory line)."""
    ts, vs, problem = _prepare(series)
    if problem:
        return _not_enough(Climb, ts, problem)
    span = ts[-1] - ts[0]
    slope = _theil_sen(ts, vs)
    rise = slope * span
    # where it started, read off the robust line rather than the first readings, so a
    # burst or a daily peak at the start does not move it
    start = median(v - slope * (t - ts[0]) for t, v in zip(ts, vs, strict=True))
    sigma = _noise(vs)
    level = median(vs)
    spread = quantile(vs, 0.95) - quantile(vs, 0.05)
    quarters = _quarter_medians(ts, vs)
    holds = _holds(ts)
    above = sum(h for h, v in zip(holds, vs, strict=True) if v > start) / sum(holds)
    measures = dict(
        points=len(ts),
        span_s=span,
        slope_per_hour=slope * 3600,
        rise=rise,
        start_level=start,
        end_level=start + rise,
        fraction_above_start=above,
        noise=sigma,
    )
    per_hour = f"{fmt(slope * 3600)}/h"
    if rise <= 0:
        why = f"no climb: the robust slope is {per_hour} (flat or falling)"
    elif rise < CLIMB_MIN_RISE_NOISE * sigma:
        why = f"no climb: a rise of {fmt(rise)} is within the noise (sigma {fmt(sigma)})"
    elif rise < CLIMB_MIN_RISE_LEVEL * abs(level):
        why = (
            f"no climb: a rise of {fmt(rise)} is under {CLIMB_MIN_RISE_LEVEL:.0%} "
            f"of the level {fmt(level)}"
        )
    elif rise < CLIMB_MIN_RISE_SPREAD * spread:
        why = f"no climb: a trend of {fmt(rise)} is small beside swings of {fmt(spread)}"
    elif len(quarters) < 3 or any(
        b - a < CLIMB_MIN_QUARTER_SHARE * rise for a, b in pairwise(quarters)
    ):
        shown = ", ".join(fmt(q) for q in quarters)
        why = f"no climb: the rise is not spread across the window (quarter medians {shown})"
    elif above < CLIMB_MIN_ABOVE_START:
        why = f"no climb: only {above:.0%} of the time above where it started"
    else:
        why = (
            f"climbed {fmt(rise)} over {_dur(span)} ({per_hour}), in every quarter, "
            f"{above:.0%} of the time above its start"
        )
        return Climb(verdict=True, enough=True, why=why, **measures)
    return Climb(verdict=False, enough=True, why=why, **measures)


# --- sawtooth --------------------------------------------------------------------------


def _turning_points(values: Sequence[float], h: float) -> list[int]:
    """Alternating extremes of a zigzag: a reversal counts once the value has come back at
    least h from the last extreme (hysteresis, so noise inside h makes no turns)."""
    if h <= 0:
        return []
    lo = hi = 0
    pivots: list[int] = []
    direction = 0
    for i, v in enumerate(values):
        if direction == 0:
            hi = i if v > values[hi] else hi
            lo = i if v < values[lo] else lo
            if values[hi] - values[lo] >= h:
                pivots, direction = ([lo, hi], 1) if lo < hi else ([hi, lo], -1)
        elif direction > 0:
            if v >= values[pivots[-1]]:
                pivots[-1] = i
            elif values[pivots[-1]] - v >= h:
                pivots.append(i)
                direction = -1
        else:
            if v <= values[pivots[-1]]:
                pivots[-1] = i
            elif v - values[pivots[-1]] >= h:
                pivots.append(i)
                direction = 1
    return pivots


def sawtooth(series: Series, *, fmt: Format = plain) -> Sawtooth:
    """Repeated rises and falls (on a climb, the trend is removed first). Bursts on a flat
    floor and a daily rhythm oscillate too: period_s tells them apart."""
    ts, vs, problem = _prepare(series)
    if problem:
        return _not_enough(Sawtooth, ts, problem)
    slope = _theil_sen(ts, vs)
    resid = [v - slope * (t - ts[0]) for t, v in zip(ts, vs, strict=True)]
    sigma = _noise(resid)
    spread = quantile(resid, 0.95) - quantile(resid, 0.05)
    h = max(SAWTOOTH_SWING_NOISE * sigma, SAWTOOTH_SWING_SPREAD * spread)
    pivots = _turning_points(resid, h)
    cycles = max(0, len(pivots) - 1) // 2
    swings = [abs(resid[b] - resid[a]) for a, b in pairwise(pivots)]
    # pivots alternate trough/peak: the peaks are every other one, starting with the higher
    first_peak = 1 if len(pivots) > 1 and resid[pivots[1]] > resid[pivots[0]] else 0
    peaks = [ts[i] for i in pivots[first_peak::2]]
    period = median(b - a for a, b in pairwise(peaks)) if len(peaks) >= 2 else None
    measures = dict(
        points=len(ts),
        span_s=ts[-1] - ts[0],
        cycles=cycles,
        swing=median(swings) if swings else None,
        period_s=period,
        threshold=h,
    )
    if cycles >= SAWTOOTH_MIN_CYCLES:
        why = f"{cycles} rises and falls of about {fmt(median(swings))}" + (
            f", one every {_dur(period)}" if period else ""
        )
        return Sawtooth(verdict=True, enough=True, why=why, **measures)
    why = (
        f"no sawtooth: {cycles} rise-and-fall cycles of at least {fmt(h)} "
        f"(need {SAWTOOTH_MIN_CYCLES})"
    )
    return Sawtooth(verdict=False, enough=True, why=why, **measures)


# --- ratchet ---------------------------------------------------------------------------


def _bursts(ts, vs, sigma) -> tuple[list[tuple[int, int]], list[bool], list[float]]:
    """Excursions above the local floor: (complete bursts, in-excursion flag per reading,
    height of each burst). An excursion within half a floor window of either end is
    incomplete: the floor on that side is out of view (and there the opening lags a
    climb), so it is neither a burst nor floor."""
    typical, _ = _gap_limit(ts)
    window = max(RATCHET_WINDOW_SHARE * (ts[-1] - ts[0]), RATCHET_WINDOW_MIN_STEPS * typical)
    top_hat = [v - b for v, b in zip(vs, _opening(ts, vs, window), strict=True)]
    h = max(RATCHET_BURST_NOISE * sigma, RATCHET_BURST_SHARE * quantile(top_hat, 0.99))
    runs = _runs([r > h for r in top_hat]) if h > 0 else []
    merged: list[tuple[int, int]] = []
    for a, b in runs:  # bursts with fewer than 3 floor readings between them are one burst
        if merged and a - merged[-1][1] - 1 < RATCHET_MIN_STRETCH_POINTS:
            merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    inside = [False] * len(vs)
    for a, b in merged:
        inside[a : b + 1] = [True] * (b - a + 1)
    half = window / 2
    complete = [(a, b) for a, b in merged if ts[a] - ts[0] >= half and ts[-1] - ts[b] >= half]
    heights = [max(top_hat[a : b + 1]) for a, b in complete]
    return complete, inside, heights


@dataclass(frozen=True)
class _Stretch:
    start: float  # unix seconds
    end: float
    floor: float
    slope: float | None  # per second, None when too short to measure
    count: int

    @property
    def mid(self) -> float:
        return (self.start + self.end) / 2


def _stretch_floors(ts, vs, inside, sigma: float, least: float) -> list[_Stretch]:
    """The floor of each stretch between excursions (quiet time, bursts excluded).

    A quiet run is cut where the level jumps from one reading to the next by far more than
    the noise, and by as much as a floor's rise across a burst (`least`): a burst that came
    and went between two samples leaves only its step in the floor. Read as one stretch,
    that step would be its slope, and a ratchet would pass for a steady climb."""
    out = []
    d = [b - a for a, b in pairwise(vs)]
    usual = median(d) if d else 0.0
    jump = max(RATCHET_BURST_NOISE * sigma, least)
    for a, b in _runs([not f for f in inside]):
        cuts = [i + 1 for i in range(a, b) if abs(vs[i + 1] - vs[i] - usual) >= jump]
        for lo, hi in pairwise([a, *cuts, b + 1]):
            if hi - lo < RATCHET_MIN_STRETCH_POINTS:
                continue
            st, sv = ts[lo:hi], vs[lo:hi]
            slope = _theil_sen(st, sv) if len(st) >= RATCHET_DRIFT_MIN_POINTS else None
            out.append(_Stretch(st[0], st[-1], quantile(sv, FLOOR_QUANTILE), slope, len(st)))
    return out


def _floor_moves(
    stretches: Sequence[_Stretch], bursts: Sequence[tuple[float, float]], sigma: float, least: float
) -> tuple[int, int]:
    """(rises, falls) of the floor across a burst, beyond what measuring a floor explains:
    a long stretch's floor is known to a fraction of sigma, a short one's to about sigma."""
    up = down = 0
    for a, b in pairwise(stretches):
        if not any(a.end < start and end < b.start for start, end in bursts):
            continue  # only an incomplete excursion between them: not a burst's doing
        se = FLOOR_SE_FACTOR * sigma / math.sqrt(min(a.count, b.count))
        need = max(min(RATCHET_STEP_SE * se, RATCHET_STEP_NOISE * sigma), least)
        up += b.floor - a.floor >= need
        down += a.floor - b.floor >= need
    return up, down


def ratchet(series: Series, *, fmt: Format = plain) -> Ratchet:
    """Each burst raises the floor and the floor never returns (a leak or fragmentation).
    Not a flat floor with bursts (healthy), not a steady climb (creep), not one step."""
    ts, vs, problem = _prepare(series)
    if problem:
        return _not_enough(Ratchet, ts, problem)
    sigma = _noise(vs)
    bursts, inside, heights = _bursts(ts, vs, sigma)
    base = dict(points=len(ts), span_s=ts[-1] - ts[0], bursts=len(bursts), noise=sigma)
    if len(bursts) < RATCHET_MIN_BURSTS:
        why = f"no ratchet: {len(bursts)} bursts above the local floor (need {RATCHET_MIN_BURSTS})"
        return Ratchet(verdict=False, enough=True, why=why, **base)
    least = RATCHET_STEP_BURST_SHARE * median(heights)
    stretches = _stretch_floors(ts, vs, inside, sigma, least)
    if len(stretches) < RATCHET_MIN_BURSTS:
        why = f"no ratchet: the floor was measurable between only {len(stretches)} stretches"
        return Ratchet(verdict=False, enough=True, why=why, **base)

    floors = [s.floor for s in stretches]
    first, last = floors[0], floors[-1]
    rise, peak = last - first, max(floors) - first
    spans = [(ts[a], ts[b]) for a, b in bursts]
    raised, lowered = _floor_moves(stretches, spans, sigma, least)
    returned = _returned(floors, first, peak)
    overall = rise / (stretches[-1].mid - stretches[0].mid)
    idle = [s.slope for s in stretches if s.slope is not None]
    drift = median(idle) / overall if idle and overall > 0 else None
    measures = dict(
        base,
        raised=raised,
        lowered=lowered,
        floors=tuple(floors),
        first_floor=first,
        last_floor=last,
        rise=rise,
        returned=returned,
        idle_drift_share=drift,
    )
    n = len(bursts)
    min_rise = max(RATCHET_MIN_RISE_NOISE * sigma, RATCHET_MIN_RISE_LEVEL * abs(median(vs)))
    if peak < min_rise:
        why = f"no ratchet: the floor rose at most {fmt(peak)} across {n} bursts (a flat floor)"
    elif returned or rise < min_rise:
        why = f"no ratchet: the floor rose {fmt(peak)}, then came back near where it started"
    elif raised < RATCHET_MIN_BURSTS:
        why = f"no ratchet: the floor rose after only {raised} of {n} bursts (a step, at most)"
    elif lowered * 2 > raised:
        why = f"no ratchet: the floor fell {lowered} times and rose {raised} times"
    elif drift is None:
        why = "no ratchet: no idle stretch long enough to tell a ratchet from a steady climb"
    elif drift > RATCHET_MAX_IDLE_DRIFT:
        why = (
            f"no ratchet: the floor also rose between bursts ({drift:.0%} of its overall "
            "rate): a steady climb with bursts on top"
        )
    else:
        why = f"floor rose {fmt(rise)} over {n} bursts (up after {raised}) and never returned"
        return Ratchet(verdict=True, enough=True, why=why, **measures)
    return Ratchet(verdict=False, enough=True, why=why, **measures)


def _returned(floors: Sequence[float], first: float, peak: float) -> bool:
    """Once the floor is halfway to its highest, does a later floor come back near the first?"""
    if peak <= 0:
        return False
    halfway = next(i for i, f in enumerate(floors) if f >= first + peak / 2)
    return any(f <= first + RATCHET_RETURN_SHARE * peak for f in floors[halfway + 1 :])


def _l1(values: Sequence[float]) -> float:
    m = median(values)
    return sum(abs(v - m) for v in values)


# --- step ------------------------------------------------------------------------------


def step(series: Series, *, fmt: Format = plain) -> Step:
    """One level shift that stays (a swap that never unloaded): the medians before and after
    the best split differ by many within-segment sigmas and the end is at the new level."""
    ts, vs, problem = _prepare(series)
    if problem:
        return _not_enough(Step, ts, problem)
    span = ts[-1] - ts[0]
    cts, cvs = _chunk(ts, vs, STEP_MAX_POINTS)
    best = None  # (L1 cost, split index): least absolute deviation locates the change
    for k in range(2, len(cts) - 1):  # sharply and, unlike least squares, ignores a spike
        t_split = (cts[k - 1] + cts[k]) / 2
        if min(t_split - ts[0], ts[-1] - t_split) < STEP_MIN_SEGMENT_SHARE * span:
            continue
        cost = _l1(cvs[:k]) + _l1(cvs[k:])
        if best is None or cost < best[0]:
            best = (cost, k)
    if best is None:
        return _not_enough(Step, ts, "too little data: no split leaves two levels long enough")
    k = best[1]
    a, b = cvs[:k], cvs[k:]
    spread = math.sqrt((len(a) * _robust_sd(a) ** 2 + len(b) * _robust_sd(b) ** 2) / len(cvs))
    noise = max(spread, _tiny(cvs))
    t_change, before, after = (cts[k - 1] + cts[k]) / 2, median(a), median(b)
    score = abs(after - before) / noise
    size = after - before
    tail = median(_between(ts, vs, ts[-1] - STEP_TAIL_SHARE * span, ts[-1]))
    measures = dict(
        points=len(ts),
        span_s=span,
        t_change=t_change,
        size=size,
        before=before,
        after=after,
        tail_level=tail,
        score=score,
        noise=noise,
    )
    way = "up" if size > 0 else "down"
    when = f"{_dur(t_change - ts[0])} into the window ({_dur(span)})"
    if score < STEP_MIN_SCORE:
        why = f"no step: the best split moves the level {fmt(size)}, only {score:.1f}x the noise"
    elif abs(tail - after) > STEP_STAY_SHARE * abs(size):
        why = f"no step that stays: {way} {fmt(abs(size))} {when}, but the end is at {fmt(tail)}"
    else:
        why = f"stepped {way} {fmt(abs(size))} {when} ({score:.0f}x the noise) and stayed"
        return Step(verdict=True, enough=True, why=why, **measures)
    return Step(verdict=False, enough=True, why=why, **measures)


# --- spike -----------------------------------------------------------------------------


def spike(series: Series, *, fmt: Format = plain) -> Spike:
    """A short excursion (up or down) that returns to the level it left."""
    ts, vs, problem = _prepare(series)
    if problem:
        return _not_enough(Spike, ts, problem)
    span = ts[-1] - ts[0]
    typical, _ = _gap_limit(ts)
    window = max(SPIKE_BASELINE_SHARE * span, SPIKE_WINDOW_MIN_STEPS * typical)
    resid = [v - b for v, b in zip(vs, _rolling(ts, vs, window, median), strict=True)]
    # over a few readings the rolling median hugs each point and shrinks the residuals:
    # the sample-to-sample noise is the floor of the estimate
    sigma = max(_robust_sd(resid), _noise(vs))
    h = SPIKE_MIN_NOISE * sigma
    found = []  # (|height|, height, t_peak, duration)
    for sign in (1, -1):
        for a, b in _runs([sign * r > h for r in resid]):
            if a == 0 or b == len(vs) - 1:
                continue  # at an edge: we cannot see it return (or begin)
            duration = ts[b] - ts[a]
            if duration > SPIKE_MAX_SHARE * span:
                continue
            peak = max(range(a, b + 1), key=lambda i: sign * resid[i])
            context = max(duration, SPIKE_CONTEXT_STEPS * typical)
            pre = _between(ts[:a], vs[:a], ts[a] - context, ts[a])
            post = _between(ts[b + 1 :], vs[b + 1 :], ts[b], ts[b] + context)
            if (
                pre
                and post
                and abs(median(post) - median(pre)) <= SPIKE_RETURN_SHARE * abs(resid[peak])
            ):
                found.append((abs(resid[peak]), resid[peak], ts[peak], duration))
    base = dict(points=len(ts), span_s=span, spikes=len(found), noise=sigma)
    if not found:
        why = f"no spike: nothing left the rolling median by {fmt(h)} and came back"
        return Spike(verdict=False, enough=True, why=why, **base)
    _, height, t_peak, duration = max(found)
    why = (
        f"{len(found)} short excursion(s); the largest {fmt(height)} off the baseline "
        f"{_dur(t_peak - ts[0])} in, lasting {_dur(duration)}, then back"
    )
    largest = dict(t_peak=t_peak, height=height, duration_s=duration)
    return Spike(verdict=True, enough=True, why=why, **largest, **base)


# --- collapse --------------------------------------------------------------------------


def collapse(series: Series, *, fmt: Format = plain) -> Collapse:
    """The last readings fall well below the level before (available memory collapsing, a
    process dying) and stay there until the end of the window."""
    ts, vs, problem = _prepare(series)
    if problem:
        return _not_enough(Collapse, ts, problem)
    span = ts[-1] - ts[0]
    tail_start = ts[-1] - COLLAPSE_TAIL_SHARE * span
    body = [v for t, v in zip(ts, vs, strict=True) if t < tail_start]
    sigma = _noise(vs)

    def need(level: float) -> float:
        return max(COLLAPSE_MIN_NOISE * sigma, COLLAPSE_MIN_DROP_SHARE * abs(level))

    level0 = median(body)
    i = len(vs)
    while i > 0 and vs[i - 1] <= level0 - need(level0):
        i -= 1
    low = vs[i:]
    base = dict(points=len(ts), span_s=span, low_points=len(low))
    if not low:
        why = f"no collapse: the last value {fmt(vs[-1])} is not well below the level {fmt(level0)}"
        return Collapse(verdict=False, enough=True, why=why, **base)
    if i == 0 or ts[i] < tail_start:
        why = "no collapse: the values were already low long before the end (a decline or a step)"
        return Collapse(verdict=False, enough=True, why=why, t_start=ts[i], **base)
    window = _between(ts[:i], vs[:i], ts[i] - COLLAPSE_BEFORE_SHARE * span, ts[i])
    before = median(window or vs[max(0, i - 3) : i])  # a gap before the fall: last readings
    end = median(low)
    drop = before - end
    measures = dict(
        base,
        t_start=ts[i],
        level_before=before,
        end_level=end,
        drop=drop,
        drop_share=drop / abs(before) if before else None,
    )
    if len(low) < COLLAPSE_MIN_POINTS:
        why = "no collapse: only the last reading is low, and one reading is not a fall"
    elif drop < need(before):
        why = f"no collapse: the end {fmt(end)} is not well below the level before {fmt(before)}"
    else:
        why = (
            f"collapsed from {fmt(before)} to {fmt(end)} for the last "
            f"{_dur(ts[-1] - ts[i])} of the window, with no recovery"
        )
        return Collapse(verdict=True, enough=True, why=why, **measures)
    return Collapse(verdict=False, enough=True, why=why, **measures)


# --- sustained -------------------------------------------------------------------------


def sustained(
    series: Series, above: float, min_fraction: float = 0.5, *, fmt: Format = plain
) -> Sustained:
    """The value stays above `above` for at least `min_fraction` of the known time
    (time-weighted; gaps count neither way). Requests waiting above zero, sustained."""
    if not 0 < min_fraction <= 1:
        raise ValueError("min_fraction must be in (0, 1]")
    ts, vs, problem = _prepare(series)
    if problem:
        return _not_enough(Sustained, ts, problem)
    holds = _holds(ts)
    _, limit = _gap_limit(ts)
    covered = sum(holds)
    above_s = sum(h for h, v in zip(holds, vs, strict=True) if v > above)
    longest = run = 0.0
    for i, (h, v) in enumerate(zip(holds, vs, strict=True)):
        if v <= above or (i and ts[i] - ts[i - 1] > limit):
            run = 0.0  # a reading at or below, or unknown time, ends a run
        run = run + h if v > above else 0.0
        longest = max(longest, run)
    fraction = above_s / covered
    measures = dict(
        points=len(ts),
        span_s=ts[-1] - ts[0],
        above=above,
        fraction=fraction,
        above_s=above_s,
        covered_s=covered,
        longest_run_s=longest,
    )
    said = (
        f"above {fmt(above)} for {fraction:.0%} of the known {_dur(covered)}, "
        f"longest run {_dur(longest)}"
    )
    verdict = fraction >= min_fraction
    why = said if verdict else f"not sustained: {said} (need {min_fraction:.0%})"
    return Sustained(verdict=verdict, enough=True, why=why, **measures)


# --- flat floor ------------------------------------------------------------------------


def flat_floor(series: Series, *, fmt: Format = plain) -> FlatFloor:
    """The floor of each stretch (per day from two days on) stays level, bursts or not:
    the healthy baseline ("a flat floor with bursts is not a leak")."""
    ts, vs, problem = _prepare(series)
    if problem:
        return _not_enough(FlatFloor, ts, problem)
    span = ts[-1] - ts[0]
    if span >= FLOOR_DAILY_MIN_SPAN_S:
        k = round(span / DAY_S)
    else:
        k = max(3, min(FLOOR_STRETCHES, len(ts) // FLOOR_POINTS_PER_STRETCH))
    length = span / k
    groups: list[list[float]] = [[] for _ in range(k)]
    for t, v in zip(ts, vs, strict=True):
        groups[min(int((t - ts[0]) / length), k - 1)].append(v)
    floors = [quantile(g, FLOOR_QUANTILE) for g in groups if len(g) >= FLOOR_MIN_STRETCH_POINTS]
    if len(floors) < 2:
        return _not_enough(FlatFloor, ts, f"too sparse: a floor in only {len(floors)} stretch")
    sigma = _noise(vs)
    mid = median(floors)
    tolerance = max(FLAT_FLOOR_NOISE * sigma, FLAT_FLOOR_LEVEL_SHARE * abs(mid))
    floor_range = max(floors) - min(floors)
    measures = dict(
        points=len(ts),
        span_s=span,
        floors=tuple(floors),
        stretch_s=length,
        floor_range=floor_range,
        floor_change=floors[-1] - floors[0],
        tolerance=tolerance,
        peak_over_floor=quantile(vs, 0.99) - mid,
    )
    each = f"{len(floors)} stretches of {_dur(length)}"
    if floor_range <= tolerance:
        why = (
            f"flat floor: {fmt(mid)} within {fmt(floor_range)} across {each}, "
            f"with peaks {fmt(measures['peak_over_floor'])} above it"
        )
        return FlatFloor(verdict=True, enough=True, why=why, **measures)
    why = (
        f"floor not flat: it moved {fmt(floor_range)} across {each} "
        f"(from {fmt(floors[0])} to {fmt(floors[-1])})"
    )
    return FlatFloor(verdict=False, enough=True, why=why, **measures)


# --- daily rhythm ----------------------------------------------------------------------


def _lag_corr(values: Sequence[float | None], lag: int) -> tuple[float | None, int]:
    """Pearson correlation of x(t) with x(t + lag) over pairs where both are known."""
    both = zip(values, values[lag:], strict=False)
    pairs = [(a, b) for a, b in both if a is not None and b is not None]
    if len(pairs) < 3:
        return None, len(pairs)
    ma = sum(a for a, _ in pairs) / len(pairs)
    mb = sum(b for _, b in pairs) / len(pairs)
    cov = sum((a - ma) * (b - mb) for a, b in pairs)
    va = sum((a - ma) ** 2 for a, _ in pairs)
    vb = sum((b - mb) ** 2 for _, b in pairs)
    if va <= 0 or vb <= 0:
        return None, len(pairs)
    return cov / math.sqrt(va * vb), len(pairs)


def daily_rhythm(series: Series, *, fmt: Format = plain) -> DailyRhythm:
    """A 24 h rhythm (so that "a daily rhythm is not a trend"): on the detrended series
    resampled to 30 min, today's shape predicts tomorrow's, and clearly better than the
    shape 12 h later does. Needs about two days."""
    ts, vs, problem = _prepare(series, min_span_s=RHYTHM_MIN_SPAN_S)
    if problem:
        return _not_enough(DailyRhythm, ts, problem + " for a daily rhythm")
    bins = resample(list(zip(ts, vs, strict=True)), RHYTHM_STEP_S)
    known = [(t, v) for t, v in bins if v is not None]
    slope = _theil_sen([t for t, _ in known], [v for _, v in known])
    resid = [None if v is None else v - slope * (t - ts[0]) for t, v in bins]
    day = round(DAY_S / RHYTHM_STEP_S)
    corr24, pairs = _lag_corr(resid, day)
    corr12, _ = _lag_corr(resid, day // 2)
    if pairs < RHYTHM_MIN_PAIRS:
        why = f"too sparse: {pairs} known (t, t+24h) pairs (need {RHYTHM_MIN_PAIRS})"
        return _not_enough(DailyRhythm, ts, why)
    profile: dict[int, list[float]] = {}
    for (t, _), r in zip(bins, resid, strict=True):
        if r is not None:
            profile.setdefault(int((t % DAY_S) // RHYTHM_STEP_S), []).append(r)
    means = {k: sum(rs) / len(rs) for k, rs in profile.items()}
    peak_bin = max(means, key=means.__getitem__)
    amplitude = max(means.values()) - min(means.values())
    span = ts[-1] - ts[0]
    measures = dict(
        points=len(ts),
        span_s=span,
        corr_24h=corr24,
        corr_12h=corr12,
        pairs=pairs,
        amplitude=amplitude,
        peak_hour_utc=peak_bin * RHYTHM_STEP_S / 3600,
        days=span / DAY_S,
    )
    c24 = "unmeasurable" if corr24 is None else f"{corr24:.2f}"
    c12 = "unmeasurable" if corr12 is None else f"{corr12:.2f}"
    if (
        corr24 is not None
        and corr24 >= RHYTHM_MIN_CORR
        and corr24 - (corr12 if corr12 is not None else 0.0) >= RHYTHM_MIN_CONTRAST
    ):
        why = (
            f"daily rhythm over {span / DAY_S:.1f} days: peak-to-trough {fmt(amplitude)}, "
            f"highest near {peak_bin * RHYTHM_STEP_S / 3600:.1f} h UTC (24 h correlation {c24})"
        )
        return DailyRhythm(verdict=True, enough=True, why=why, **measures)
    why = f"no daily rhythm: correlation {c24} at 24 h against {c12} at 12 h"
    return DailyRhythm(verdict=False, enough=True, why=why, **measures)
