"""analyze/shapes.py on synthetic series: every series here is generated in the test from a
seeded random.Random, with noise, None readings, missing stretches, jittered (irregular)
sample times and shuffled order, at two scales: 1 s samples over half a minute (a bundle)
and 5 min steps over days (Prometheus history). Each shape has a positive and a negative
case, and the pairs the seeds warn are confusable are tested against each other."""

import math
import random
from collections.abc import Callable
from dataclasses import FrozenInstanceError

import pytest

from evidence.analyze import shapes
from evidence.analyze.shapes import (
    climb,
    collapse,
    daily_rhythm,
    flat_floor,
    ratchet,
    resample,
    sawtooth,
    spike,
    step,
    sustained,
)

T0 = 1_700_000_000.0
MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0
SEEDS = (1, 2, 3)
Fn = Callable[[float], float]


def sample(
    rng: random.Random,
    fn: Fn,
    *,
    every: float,
    duration: float,
    noise: float = 0.0,
    jitter: float = 0.3,
    none_share: float = 0.03,
    holes: tuple[tuple[float, float], ...] = (),
) -> list[tuple[float, float | None]]:
    """fn(seconds since start), read every `every` seconds give or take `jitter` steps, with
    Gaussian noise; a share of readings is None, nothing at all is read inside `holes`
    (seconds since start), and the result is shuffled (the functions must sort)."""
    out: list[tuple[float, float | None]] = []
    for k in range(int(duration // every) + 1):
        x = k * every
        if any(a <= x < b for a, b in holes):
            continue
        t = T0 + x + rng.uniform(-jitter, jitter) * every
        value = None if rng.random() < none_share else fn(x) + rng.gauss(0, noise)
        out.append((t, value))
    rng.shuffle(out)
    return out


def burst_plan(rng: random.Random, duration: float, count: int, width: float) -> list:
    """(start, width, height) of `count` bursts spread over the window, jittered, the first
    after a tenth of it, of random width and height (as request load comes)."""
    gap = duration * 0.9 / max(count, 1)
    return [
        (duration * 0.1 + k * gap + rng.uniform(0, 0.3) * gap, width * rng.uniform(0.6, 1.2), h)
        for k, h in enumerate(rng.uniform(3, 7) for _ in range(count))
    ]


def with_bursts(plan: list, floor: Fn, rise_per_burst: float = 0.0) -> Fn:
    """floor(x) plus the bursts; after each burst ends the floor is rise_per_burst higher."""

    def f(x: float) -> float:
        done = sum(1 for s, w, _ in plan if x >= s + w)
        return floor(x) + done * rise_per_burst + sum(h for s, w, h in plan if s <= x < s + w)

    return f


# --- the shapes of the fault catalog (GiB, 5 min steps over 3 days unless said) -------

DAYS3 = dict(every=5 * MINUTE, duration=3 * DAY, noise=0.15)


def leak(rng: random.Random) -> list:
    """leak-ratchet: 7 bursts, each leaves the floor 0.8 higher; 4 h of history missing."""
    plan = burst_plan(rng, 3 * DAY, 7, 2 * HOUR)
    return sample(
        rng, with_bursts(plan, lambda x: 40.0, 0.8), **DAYS3, holes=((DAY, DAY + 4 * HOUR),)
    )


def healthy(rng: random.Random) -> list:
    """The baseline: the same bursts on a floor that always comes back."""
    plan = burst_plan(rng, 3 * DAY, 7, 2 * HOUR)
    return sample(rng, with_bursts(plan, lambda x: 40.0), **DAYS3)


def creep(rng: random.Random) -> list:
    """context-creep: a smooth climb of 6 over 3 days, tracking the cache; no bursts."""
    return sample(rng, lambda x: 40 + 6 * x / (3 * DAY), **DAYS3)


def creep_with_requests(rng: random.Random) -> list:
    """context-creep with request bursts on top: the floor climbs between bursts too."""
    plan = burst_plan(rng, 3 * DAY, 7, 2 * HOUR)
    return sample(rng, with_bursts(plan, lambda x: 40 + 6 * x / (3 * DAY)), **DAYS3)


def creep_sawtooth(rng: random.Random) -> list:
    """context-creep as the seed draws it: a climb with an hourly sawtooth on top."""
    return sample(rng, lambda x: 40 + 6 * x / (3 * DAY) + 2 * (x % HOUR) / HOUR, **DAYS3)


def swap(rng: random.Random, at: float = 1.2 * DAY, bursts: bool = True) -> list:
    """swap-not-unloaded: a second model (8) stays resident from `at`; bursts go on."""
    plan = burst_plan(rng, 3 * DAY, 7 if bursts else 0, 2 * HOUR)
    return sample(rng, with_bursts(plan, lambda x: 40 + (8 if x >= at else 0)), **DAYS3)


def rhythm(rng: random.Random, days: float = 4, trend_per_day: float = 0.0) -> list:
    """A household's day: 8 peak-to-trough every 24 h, busiest mid-afternoon."""

    def f(x: float) -> float:
        return 40 + trend_per_day * x / DAY + 4 * math.sin(2 * math.pi * (x / DAY + 0.3))

    return sample(rng, f, every=5 * MINUTE, duration=days * DAY, noise=0.3)


def noise_1s(rng: random.Random, level: float = 10.0) -> list:
    return sample(rng, lambda x: level, every=1, duration=30, noise=0.1)


# --- invariants --------------------------------------------------------------------------

ALL: dict[str, Callable] = {
    "climb": climb,
    "sawtooth": sawtooth,
    "ratchet": ratchet,
    "step": step,
    "spike": spike,
    "collapse": collapse,
    "sustained": lambda s: sustained(s, above=0),
    "flat_floor": flat_floor,
    "daily_rhythm": daily_rhythm,
}


def _few(rng: random.Random) -> list:
    return [(T0 + 5 * k, 1.0 + rng.random()) for k in range(5)]


def _all_unknown(rng: random.Random) -> list:
    return [(T0 + k, None) for k in range(100)]


def _blink(rng: random.Random) -> list:
    return [(T0 + 0.5 * k, 1.0 + rng.random()) for k in range(10)]  # 4.5 s


def _sparse(rng: random.Random) -> list:
    """Eight readings in the first minute, then two more a day apart: mostly unknown."""
    near = [(T0 + 8 * k, 1.0 + rng.random()) for k in range(8)]
    return near + [(T0 + DAY, 1.0), (T0 + 2 * DAY, 1.0)]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("make", [_few, _all_unknown, _blink, _sparse])
def test_too_little_data_is_said_not_guessed(name, make):
    result = ALL[name](make(random.Random(7)))
    assert result.enough is False
    assert result.verdict is False
    assert result.why.startswith(("too little data", "too sparse")), result.why


def test_a_daily_rhythm_needs_about_two_days():
    result = daily_rhythm(rhythm(random.Random(1), days=1))
    assert (result.enough, result.verdict) == (False, False)
    assert "daily rhythm" in result.why
    assert daily_rhythm(rhythm(random.Random(1), days=2)).enough


def test_unknown_is_not_zero_for_time_weighting():
    """A queue that never emptied, with 40% of readings lost: still above zero all the
    known time (reading the gaps as 0 would say 60%)."""
    rng = random.Random(1)
    series = sample(rng, lambda x: 3.0, every=1, duration=120, noise=0.3, none_share=0.4)
    result = sustained(series, above=0)
    assert result.verdict and result.fraction > 0.99
    assert result.covered_s > 100  # the lost readings' neighbours cover their time


def test_unknown_is_not_zero_at_the_end():
    """The exporter died: the last readings are None. That is not a collapse to zero."""
    rng = random.Random(2)
    series = [(t, None if t > T0 + 25 else v) for t, v in noise_1s(rng)]
    assert not collapse(series).verdict
    nans = [(t, math.nan if t > T0 + 25 else v) for t, v in noise_1s(rng)]
    assert not collapse(nans).verdict


def test_a_missing_stretch_is_unknown_time():
    """An hour with no readings in the middle of a queue that is otherwise busy: it counts
    neither way, and a run of waiting does not bridge it."""
    series = [(T0 + 60 * k, 2.0) for k in range(240) if not 90 <= k < 150]
    result = sustained(series, above=0)
    assert result.fraction == 1.0
    assert result.covered_s == pytest.approx(3 * HOUR, abs=2 * MINUTE)
    assert result.longest_run_s == pytest.approx(1.5 * HOUR, abs=2 * MINUTE)


def test_order_and_duplicates_do_not_matter():
    series = leak(random.Random(3))
    assert ratchet(series) == ratchet(sorted(series, key=lambda p: p[0]))
    twice = series + [(t, v) for t, v in series if v is not None][:50]
    assert ratchet(twice).verdict


def test_results_are_frozen_and_show_their_working():
    result = ratchet(leak(random.Random(1)))
    with pytest.raises(FrozenInstanceError):
        result.verdict = False  # type: ignore[misc]
    assert result.points > 700 and result.span_s > 2.9 * DAY
    assert None not in (result.bursts, result.rise, result.floors, result.noise)


def test_fmt_puts_the_unit_in_why():
    result = ratchet(leak(random.Random(1)), fmt=lambda g: f"{g:.1f} GiB")
    assert result.verdict
    assert "GiB" in result.why and "never returned" in result.why


def test_resample_keeps_gaps_as_none():
    series = [(T0 + 10, 1.0), (T0 + 20, 3.0), (T0 + 310, None), (T0 + 650, 5.0)]
    bins = resample(series, 300)
    assert [v for _, v in bins] == [2.0, None, 5.0]
    assert all(t % 300 == 0 for t, _ in bins)  # aligned, so two series line up
    assert resample([(T0, None)], 60) == []
    with pytest.raises(ValueError):
        resample(series, 0)


# --- climb and sawtooth --------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_climb_context_creep(seed):
    result = climb(creep(random.Random(seed)))
    assert result.verdict, result.why
    assert result.rise == pytest.approx(6, abs=0.6)
    assert result.slope_per_hour == pytest.approx(6 / 72, rel=0.1)
    assert result.fraction_above_start > 0.9


def test_climb_within_a_bundle():
    rng = random.Random(1)
    result = climb(sample(rng, lambda x: 10 + 0.2 * x, every=1, duration=30, noise=0.1))
    assert result.verdict, result.why
    assert result.rise == pytest.approx(6, abs=0.6)


@pytest.mark.parametrize(
    "make", [healthy, lambda rng: swap(rng, bursts=False), lambda rng: noise_1s(rng)]
)
def test_no_climb_on_a_flat_floor_a_step_or_noise(make):
    result = climb(make(random.Random(1)))
    assert result.enough and not result.verdict, result.why


def test_no_climb_when_falling():
    rng = random.Random(1)
    result = climb(sample(rng, lambda x: 60 - 6 * x / (3 * DAY), **DAYS3))
    assert not result.verdict and result.rise < 0


@pytest.mark.parametrize("seed", SEEDS)
def test_sawtooth_on_a_climb(seed):
    series = creep_sawtooth(random.Random(seed))
    teeth = sawtooth(series)
    assert teeth.verdict, teeth.why
    assert teeth.period_s == pytest.approx(HOUR, rel=0.1)
    assert teeth.cycles > 50
    assert climb(series).verdict


@pytest.mark.parametrize("make", [creep, lambda rng: noise_1s(rng)])
def test_no_sawtooth_on_a_smooth_climb_or_noise(make):
    result = sawtooth(make(random.Random(2)))
    assert result.enough and not result.verdict, result.why


def test_no_sawtooth_in_heavy_white_noise():
    rng = random.Random(3)
    result = sawtooth(sample(rng, lambda x: 40.0, every=5 * MINUTE, duration=3 * DAY, noise=1))
    assert not result.verdict, result.why


# --- ratchet and its look-alikes ----------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_ratchet_leak(seed):
    result = ratchet(leak(random.Random(seed)))
    assert result.verdict, result.why
    # 7 planned; the last may fall in the final half floor-window, where the floor after
    # it is out of view, so it is not counted as a burst
    assert result.bursts >= 5 and result.raised >= 4
    assert result.rise == pytest.approx(7 * 0.8, abs=0.8)
    assert result.returned is False
    assert abs(result.idle_drift_share) < 0.3


def test_ratchet_within_minutes_at_one_second():
    rng = random.Random(4)
    plan = burst_plan(rng, 180, 4, 8)
    series = sample(rng, with_bursts(plan, lambda x: 20.0, 1.0), every=1, duration=180, noise=0.1)
    result = ratchet(series)
    assert result.verdict, result.why
    assert result.bursts == 4


# Used memory (GiB) of the lab's leak-ratchet under the recorder (`make lab RECORDER=1` on
# the developers' machine): the recorder's readings, then the capture's. The leak's first
# burst came and went between 20.0 and 20.7 s, leaving only its step in the floor.
LAB_LEAK_RECORDED = [
    (15.64, 0.6), (15.74, 0.6), (16.64, 0.6), (17.65, 0.6), (18.65, 0.58), (19.65, 0.58),
    (20.66, 0.94), (21.18, 0.98), (22.05, 0.98), (23.05, 0.98), (24.05, 0.98), (25.05, 2.48),
    (26.05, 1.37), (27.05, 1.37), (28.05, 1.37), (29.05, 1.37), (30.05, 2.88), (31.05, 1.77),
    (32.05, 1.77), (33.05, 1.77), (34.05, 1.77), (35.05, 3.27), (36.05, 2.16), (37.05, 2.16),
    (38.05, 2.16), (39.05, 2.16), (40.05, 2.16),
]  # fmt: skip


def test_a_burst_between_two_samples_leaves_a_step_not_a_climb():
    """The stretch before the first seen burst is flat on both sides of the unseen one's
    step: no drift between bursts, so still a ratchet."""
    result = ratchet([(T0 + t, v) for t, v in LAB_LEAK_RECORDED])
    assert result.verdict, result.why
    assert abs(result.idle_drift_share) < 0.1
    # The look-alike: the same readings on a floor that climbs all the time between bursts.
    climbing = [(T0 + t, v + 0.06 * (t - 15)) for t, v in LAB_LEAK_RECORDED]
    assert "between bursts" in ratchet(climbing).why


@pytest.mark.parametrize("seed", SEEDS)
def test_ratchet_is_not_context_creep(seed):
    """A climb that tracks the cache rises all the time, bursts or not: not a ratchet."""
    for make in (creep, creep_with_requests, creep_sawtooth):
        series = make(random.Random(seed))
        assert climb(series).verdict, make.__name__
        result = ratchet(series)
        assert not result.verdict, (make.__name__, result.why)
    assert "0 bursts" in ratchet(creep(random.Random(seed))).why
    with_requests = ratchet(creep_with_requests(random.Random(seed)))
    assert with_requests.idle_drift_share > 0.5
    assert "between bursts" in with_requests.why


@pytest.mark.parametrize("seed", SEEDS)
def test_ratchet_is_not_a_flat_floor_with_bursts(seed):
    base = healthy(random.Random(seed))
    assert not ratchet(base).verdict
    assert flat_floor(base).verdict
    leaking = leak(random.Random(seed))
    assert ratchet(leaking).verdict
    assert not flat_floor(leaking).verdict


@pytest.mark.parametrize("seed", SEEDS)
def test_step_is_not_a_ratchet(seed):
    """A swap that never unloaded: one step that stays, the bursts do not move the floor."""
    series = swap(random.Random(seed))
    up = step(series)
    assert up.verdict, up.why
    assert up.size == pytest.approx(8, abs=0.5)
    # a burst just before the step reads as the start of the new level (a genuine
    # ambiguity), so only within a burst and its shoulder; the clean step is exact below
    assert abs(up.t_change - (T0 + 1.2 * DAY)) < 4 * HOUR
    not_leak = ratchet(series)
    assert not not_leak.verdict and "rose after only" in not_leak.why
    assert not climb(series).verdict
    assert not step(leak(random.Random(seed))).verdict


@pytest.mark.parametrize("seed", SEEDS)
def test_a_single_step_without_bursts_is_not_a_ratchet(seed):
    series = swap(random.Random(seed), bursts=False)
    up = step(series)
    assert up.verdict
    assert abs(up.t_change - (T0 + 1.2 * DAY)) < 30 * MINUTE
    assert not ratchet(series).verdict


def test_a_ratchet_that_returned_is_not_one():
    """Floors rose for two days, then an unload (a ttl) brought memory back."""
    rng = random.Random(5)
    plan = burst_plan(rng, 3 * DAY, 7, 2 * HOUR)
    leaking = with_bursts(plan, lambda x: 40.0, 0.8)
    healed = with_bursts(plan, lambda x: 40.0)
    series = sample(rng, lambda x: leaking(x) if x < 2.2 * DAY else healed(x), **DAYS3)
    result = ratchet(series)
    assert not result.verdict and "came back" in result.why, result.why


# --- step, spike, collapse -----------------------------------------------------------------


def test_step_within_a_bundle():
    rng = random.Random(1)
    result = step(
        sample(rng, lambda x: 10 + (5 if x >= 12 else 0), every=1, duration=30, noise=0.1)
    )
    assert result.verdict, result.why
    assert result.size == pytest.approx(5, abs=0.3)
    assert abs(result.t_change - (T0 + 12)) <= 1.5


def test_a_step_down_that_stays_is_a_step_down():
    rng = random.Random(2)
    result = step(sample(rng, lambda x: 48 - (8 if x >= DAY else 0), **DAYS3))
    assert result.verdict and result.size < 0


def test_a_bump_that_came_back_is_not_a_step():
    rng = random.Random(3)
    result = step(sample(rng, lambda x: 40 + (8 if DAY <= x < 2.2 * DAY else 0), **DAYS3))
    assert not result.verdict, result.why


@pytest.mark.parametrize("seed", SEEDS)
def test_spike_is_not_a_step(seed):
    at = random.Random(seed).uniform(8, 20)
    short = sample(
        random.Random(seed), lambda x: 10 + (5 if at <= x < at + 2 else 0), every=1, duration=30,
        noise=0.1, none_share=0,
    )  # fmt: skip
    found = spike(short)
    assert found.verdict and found.spikes == 1, found.why
    assert found.height == pytest.approx(5, abs=0.5)
    assert abs(found.t_peak - (T0 + at)) < 3
    assert not step(short).verdict

    stays = sample(
        random.Random(seed), lambda x: 10 + (5 if x >= at else 0), every=1, duration=30, noise=0.1
    )
    assert step(stays).verdict
    assert not spike(stays).verdict


def test_spike_over_days():
    rng = random.Random(4)
    series = sample(rng, lambda x: 40 + (20 if DAY <= x < DAY + HOUR else 0), **DAYS3, none_share=0)
    result = spike(series)
    assert result.verdict and result.duration_s < 2 * HOUR


@pytest.mark.parametrize("seed", SEEDS)
def test_collapse_is_not_a_spike(seed):
    """A process dying (its memory goes to 0 for the last seconds) against a dip that
    recovered."""
    dying = sample(
        random.Random(seed), lambda x: 10 if x < 26 else 0.0, every=1, duration=30, noise=0.1,
        none_share=0,
    )  # fmt: skip
    fell = collapse(dying)
    assert fell.verdict, fell.why
    assert fell.drop == pytest.approx(10, abs=0.5) and fell.low_points >= 3
    assert not spike(dying).verdict

    dip = sample(
        random.Random(seed), lambda x: 0.2 if 12 <= x < 14 else 10, every=1, duration=30,
        noise=0.1, none_share=0,
    )  # fmt: skip
    assert not collapse(dip).verdict
    back = spike(dip)
    assert back.verdict and back.height < -9


def test_available_memory_collapsing_over_days():
    rng = random.Random(5)
    series = sample(
        rng, lambda x: 60 - 5 * x / (3 * DAY) - (55 if x > 2.93 * DAY else 0), **DAYS3
    )  # fmt: skip
    result = collapse(series)
    assert result.verdict, result.why
    assert result.drop_share > 0.9


def test_one_low_reading_is_not_a_collapse():
    series = [(T0 + k, 10.0 + 0.01 * (k % 3)) for k in range(30)] + [(T0 + 30, 0.0)]
    result = collapse(series)
    assert result.enough and not result.verdict and "one reading" in result.why


def test_a_slow_decline_is_not_a_collapse():
    rng = random.Random(6)
    result = collapse(sample(rng, lambda x: 60 - 55 * x / (3 * DAY), **DAYS3))
    assert not result.verdict, result.why


# --- sustained -------------------------------------------------------------------------------


def _queue(rng: random.Random, busy: list[tuple[float, float]], every: float, duration: float):
    """Requests waiting: 2-5 inside the busy stretches, 0 outside, integer counts."""

    def waiting(x: float) -> float:
        return rng.randint(2, 5) if any(a <= x < b for a, b in busy) else 0

    return sample(rng, waiting, every=every, duration=duration)


def test_sustained_queueing_against_occasional_bursts():
    rng = random.Random(1)
    queueing = _queue(rng, [(1 * HOUR, 9 * HOUR)], every=5 * MINUTE, duration=12 * HOUR)
    result = sustained(queueing, above=0)
    assert result.verdict, result.why
    assert result.fraction == pytest.approx(8 / 12, abs=0.05)
    assert result.longest_run_s == pytest.approx(8 * HOUR, rel=0.1)

    bursts = [(h * HOUR, h * HOUR + 10 * MINUTE) for h in (1, 4, 7, 10)]
    occasional = sustained(_queue(rng, bursts, every=5 * MINUTE, duration=12 * HOUR), above=0)
    assert not occasional.verdict and occasional.fraction < 0.1
    assert occasional.longest_run_s < 20 * MINUTE


def test_sustained_is_weighted_by_time_not_readings():
    """Readings every second while waiting, every 2.5 s otherwise: half the readings are
    above zero, but only 30% of the time."""
    busy = [(T0 + k, 3.0) for k in range(30)]
    idle = [(T0 + 30 + 2.5 * k, 0.0) for k in range(28)]
    result = sustained(busy + idle, above=0)
    assert result.fraction == pytest.approx(0.3, abs=0.03)
    assert not result.verdict
    assert sustained(busy + idle, above=0, min_fraction=0.25).verdict
    with pytest.raises(ValueError):
        sustained(busy, above=0, min_fraction=0)


# --- flat floor and daily rhythm -------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_flat_floor_is_the_healthy_baseline(seed):
    result = flat_floor(healthy(random.Random(seed)))
    assert result.verdict, result.why
    assert len(result.floors) == 3  # one per day
    assert result.peak_over_floor > 2  # the bursts are there, and it is still flat
    assert flat_floor(noise_1s(random.Random(seed))).verdict


@pytest.mark.parametrize("make", [creep, leak, swap])
def test_no_flat_floor_when_the_floor_moves(make):
    result = flat_floor(make(random.Random(1)))
    assert result.enough and not result.verdict, result.why


@pytest.mark.parametrize("seed", SEEDS)
def test_a_daily_rhythm_is_not_a_trend(seed):
    days = rhythm(random.Random(seed))
    found = daily_rhythm(days)
    assert found.verdict, found.why
    assert found.corr_24h > 0.8 and found.corr_12h < 0
    assert found.amplitude == pytest.approx(8, abs=1)
    assert not climb(days).verdict
    assert not ratchet(days).verdict
    assert flat_floor(days).verdict  # a night in every day-long stretch

    assert not daily_rhythm(creep(random.Random(seed))).verdict
    # an hourly sawtooth correlates at 24 h, but just as well at 12 h: not a daily rhythm
    assert not daily_rhythm(creep_sawtooth(random.Random(seed))).verdict


def test_a_rhythm_on_a_trend_is_both():
    series = rhythm(random.Random(2), trend_per_day=2)
    assert daily_rhythm(series).verdict
    assert climb(series).verdict


def test_a_rhythm_with_a_missing_stretch():
    rng = random.Random(3)

    def f(x: float) -> float:
        return 40 + 4 * math.sin(2 * math.pi * x / DAY)

    series = sample(
        rng, f, every=5 * MINUTE, duration=2.5 * DAY, noise=0.3, holes=((DAY, DAY + 6 * HOUR),)
    )
    result = daily_rhythm(series)
    assert result.enough and result.verdict, result.why


def test_no_daily_rhythm_in_noise():
    rng = random.Random(4)
    result = daily_rhythm(sample(rng, lambda x: 40.0, every=5 * MINUTE, duration=3 * DAY, noise=1))
    assert result.enough and not result.verdict


def test_thresholds_are_module_constants():
    """The numbers a verdict rests on are named, so a report can cite them."""
    for name in ("MIN_POINTS", "RATCHET_MIN_BURSTS", "STEP_MIN_SCORE", "RHYTHM_MIN_CORR"):
        assert isinstance(getattr(shapes, name), int | float)
