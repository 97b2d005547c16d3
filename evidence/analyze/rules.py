"""One rule per fault of the catalog (schemas/faults.toml): a small pure function of Facts.

Each rule returns a Judgement: points for the evidence it found, the evidence for and
against in words, and the sources it needed but were not measured. Absent evidence is
never evidence: a rule reasons only from what was measured and lists the rest as
missing. Points: a supporting observation 1-2, a distinguishing one 3, a decisive one
(a line saying so, two sources disagreeing) 4-5.
"""

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from itertools import groupby
from typing import Any

import orjson

from evidence.analyze import shapes, statlines
from evidence.analyze.facts import Facts, card_line
from evidence.analyze.failure import (
    FAILURE_TRIGGERS,
    RECENT_KILL_S,
    came_up,
    engine_kill,
    fell,
    history_began,
    is_engine,
    is_gateway,
    is_manager,
    is_service,
    rose,
    up_since,
    victim,
)
from evidence.analyze.recognise import ENGINE_WORDS, PREALLOCATES, belongs
from evidence.analyze.tags import tags_of
from evidence.analyze.window import INCIDENT_S, RECENT_S, Window, known, share_above
from evidence.schemas import catalog

GIB = 1024**3
SQUAT_GPU_BYTES = 1 * GIB  # an idle engine holding this much GPU memory is squatting
ROOM_LEFT = 0.9  # a memory line under this share of its pool still had room
PREALLOCATED_SHARE = 0.5  # an engine's preallocation this large is what looks alarming
SQUAT_RSS_BYTES = 4 * GIB
COMPILERS = tuple(catalog("engines")["build"]["compilers"])  # evidence/schemas/engines.toml
DESKTOP_APPS = frozenset(catalog("engines")["desktop"]["apps"])  # a person's session
BUILD_SHARE = 0.30  # compilers holding this share of memory are load, not background
BUILD_JOB_BYTES = 2 * GIB  # one C++ or CUDA compile job at its peak (flash-attention's: more)
BUILD_JOBS_MANY = 32  # jobs whose 64 GiB outgrow most workstations, where memory is unknown
CARD_OOM_TAGS = ("cuda-oom", "hip-oom", "metal-oom", "vulkan-oom")  # the card's own words
PSI_SOME_HIGH = 10.0  # % of time some task stalled on memory (avg10)
PSI_FULL_HIGH = 5.0
# Reading the incident window against the rest of the day (analyze/window.py).
HOUR_S = 3600.0
SLOW_ANSWER_S = 60.0  # a minute per answer is a queue for a chat engine, not generation
PROGRESS_LINES = 3  # three answered requests in the log's tail: the application works
WORKING_S = 300.0  # progress counters that moved in the last minutes: the application works
GAVE_UP_SHARE = 0.2  # a fifth of the log's requests cancelled by their callers: they waited
GAVE_UP_LINES = 5  # ... and five at least: one impatient user is not a queue
QUEUE_AT_CAPTURE = 4  # four callers waiting at once behind full slots is a queue
QUEUE_SHARE = 0.3  # requests waited through a third of the hour before the failure (a
#                    queue drains between bursts of callers) ...
QUEUE_OVER_USUAL = 0.2  # ... and that much more of it than in the busiest hour before,
QUEUE_DEEPER = 2.0  # ... or twice as deep
BURST_S = 900.0  # a queue of the quarter hour before a timeout, far deeper than ever before
QUEUE_SHARE_TIMED_OUT = 0.15  # an answer that did not come in time behind this much queue
QUEUE_SHARE_UNFAILED = 0.5  # with nothing failed: half the hour, twice the margins
STATS_QUEUE_SHARE = 0.5  # an engine's stats lines: waiting in half of them is a queue ...
STATS_UNFAILED = 6  # ... and, with nothing failed, only over a minute of them
READINGS_GONE_S = 30 * 60.0  # a history ending this long before the failure missed its end
SLOT_NEARLY_FULL = 0.8  # prompts this share of a slot's context are as long as they get
KV_ROOM = 0.5  # a cache never past half full in the hour before had room: no creep
CACHE_FULL = 0.9  # a KV cache this full admits nobody more, however many slots are free
CACHE_PER_REQUEST = 0.25  # ... held by so few that each running request had a quarter of it
HIGH_WATER_LOOK_S = 6 * 3600.0  # a creep starts one to six hours before the failure
PREEMPT_OVER_USUAL = 3.0  # three times the worst hour's preemptions: the cache ran out
NOTE_IS_EVIDENCE = 3  # points of a distinguishing observation (classify.MIN_SCORE)
STALL_LEADS_S = 900  # a stall this far ahead of the queue is what the queue formed behind
QUEUED = 0.5  # requests waiting: a gauge of whole requests, averaged by a scrape's step
SLOWED_SHARE = 0.8  # serving under this share of a usual busy hour is an engine slowed
PROMPT_MIN_GENERATED = 200  # an hour that generated fewer tokens says nothing of lengths
SLOW_CREEP_LOOKS_H = (6, 9, 12, 16)  # a creep's climb may have begun this long before
CREEP_OVER_USUAL = 1.25  # cache per request 25% above the highest hourly level earlier
LOAD_OVER_USUAL = 1.25  # requests running this far above the busiest hour is more load
MODEL_SHARE = 0.05  # a second model is at least 5% of the pool (a 0.7 GiB step on a 24 GiB
MODEL_MIN_BYTES = 1 * GIB  # card is a buffer, not a model) and at least 1 GiB
BIG_MODEL_SHARE = 0.10  # a step of a tenth of the pool that stays to a failure, on a box
#                         whose manager loads models on demand, is a model
SWAP_LOOKS_H = (24, 8, 2)  # hours read for a step: a second model loaded in the last hours
LOAD_TAKES_S = 7200.0  # a model loads (and its cache fills) within the hour; a leak takes hours
MODEL_LOADS_S = 1800.0  # a model's weights load in minutes, not hours
KEPT_LOOK_S = 3 * 3600.0  # a model kept this long before the incident window still counts
COINCIDE_S = 1200.0  # a step within 20 min of a server coming up came with it
# A quiet stretch's floor is nearly its lowest reading, not shapes.FLOOR_QUANTILE: a
# two-hour stretch of half-hourly baselines holds three or four readings, and a higher
# quantile of so few can read a busy one.
QUIET_FLOOR_QUANTILE = 0.05
LEAK_SHARE = 0.05  # a card's floor rising 5% to a failure and never coming back
LEAK_SHARE_HOST = 0.08  # a host's floor drifts a few per cent a day (caches it cannot drop,
#                         desktop, logs): a leak there takes more of the machine
LEAK_UNFAILED = 1.25  # with nothing failed yet, a quarter more before it is named
REST_S = 1800.0  # a load does not rest half-way for half an hour; a ratchet's clicks do
LEAK_ONE_JUMP = 0.7  # one jump between two stretches carrying 70% of the rise is a step
LEAK_SPLIT_JUMP = 0.9  # ... or, split by the grid over two, 90% of it
LEAK_MIN_STRETCHES = 4  # a ratchet needs four floors to be seen climbing
LEAK_STRETCH_S = 2 * 3600.0  # floors per two hours: a burst cannot fill one
RELEASED = 0.75  # the capture reading under three quarters of the highest floor: given back
FULL_SHARE = 0.95  # a floor this close to the pool's size has nowhere left to rise
HEADROOM_EATEN = 0.5  # a rise that ate half the room left, up to memory running out
DAY_ROUND_S = 20 * 3600.0  # a look-back this long begins at about the same hours the day before
DAY_ROUND_START_S = 15 * 60.0  # where the look-back begins: its first quarter hour
ENGINE_HELD = 0.5  # engines holding under half a rise another process holds did not leak it
LEAK_MIN_RISES = 0.7  # most steps between successive floors go up
LEAK_MOST_FALLS = 0.3  # ... or, where the pool ran out, few go down (a ratchet holds)
RETURNED_DIP_STRETCHES = 2  # a swap to another model and back is over within hours
LEAK_CLICKS = 2  # ... and clicked more than once: one rise is a step
HELD_S = 900.0  # a level held a quarter hour, not the allocations of the last minutes
CLIMB_READINGS = 6  # half-hourly bundles through the incident window: enough to see a climb
SHARED_JUMP = 0.75  # the host's floor jumping three quarters of the card's: one pool
OUTLIVED_SHARE = 0.25  # a quarter of a rise still held once its supposed leaker died
FLOOR_NOISE = 0.1  # a floor moving under a tenth of the run's rise has neither risen nor fallen
TIGHT_SHARE = 0.05  # under this share available, an idle holder keeps others out (a
#                     GB10 holding its one model runs at 10% available, and is fine)
CULPRIT_SHARE = 0.15  # another process holding this share of the machine is what grew
HELD_ALL_DAY = 1 / 6  # ... unless earlier the machine never had this share of it free
WEDGED_MIN_S = 10.0  # progress readings this far apart (two engine samples) can show nothing moved
OVERDUE_S = 120  # a model listed this long after its unload time did not unload
LIVE_OUTRANKS_S = 600  # a kill this long before a live hang is its context, not its cause
PROCESS_BUNDLE_GAP_S = 60.0  # readings of one bundle are seconds apart; bundles, minutes
PROCESS_LEAK_BYTES = 0.5 * GIB  # a process that grew half a GiB ...
PROCESS_LEAK_FACTOR = 2.0  # ... to twice its first floor, bundle after bundle
CRITICAL_AVAILABLE = 0.03  # under 3% available, read once, the machine is out
FULL_AT_FALL_S = 900  # the card's readings this long before an engine fell are what it had
LOW_AVAILABLE = 0.05  # available memory under 5% of the total is exhaustion ...
LOW_AVAILABLE_SAMPLED = 0.10  # ... and under 10% of it on a coarse scrape beside a kill
SWAP_FULL_SHARE = 0.1  # swap with under a tenth of it free is used up
SWAP_FILLED_BYTES = 1 * GIB  # swap taking a GiB more in the hours before: it did not fit
SWAPPING_PAGES_S = 10  # pages swapped out per second, through the hour: thrashing, not a blip
MAJOR_FAULTS_S = 100  # pages read back from disk per second, through the hour
MAJOR_FAULTS_PAST = 10  # ... and this many times the most of any hour before
# Reclaim counters that moved this much in the thirty seconds are pressure, not the trickle
# every box has: a thousand pages faulted back is 4 MiB re-read, one compaction stall is a
# task that waited for free memory.
CHURN_MIN = {"refaults": 1000, "refaults_file": 1000, "compact_stalls": 1, "migrations": 1000}
COMPRESSED_SHARE = 0.05  # macOS compressing this share of its memory more than any hour before
PSI_HISTORY_HIGH = 0.10  # stalled 10% of the time over the hour before (node-exporter)
PSI_HISTORY_FAILED = 0.05  # ... or 5% of it, where a service failed or an alert fired


@dataclass
class Judgement:
    score: int = 0
    evidence_for: list[str] = field(default_factory=list)
    evidence_against: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    # The evidence is how a failure ended (an allocation failed, the engine that grew was
    # killed), which confirms a cause rather than being one (classify.py weighs it).
    ending: bool = False
    points: list[int] = field(default_factory=list)  # what each evidence_for line added

    def add(self, points: int, why: str) -> None:
        self.score += points
        self.points.append(points)
        self.evidence_for.append(why)


RULES: dict[str, Callable[[Facts], Judgement]] = {}


def rule(fault: str) -> Callable[[Callable[[Facts], Judgement]], Callable[[Facts], Judgement]]:
    def register(fn: Callable[[Facts], Judgement]) -> Callable[[Facts], Judgement]:
        RULES[fault] = fn
        return fn

    return register


def _gib(value: float | None) -> str:
    return "unknown" if value is None else f"{value / GIB:.1f} GiB"


def _last(f: Facts, tag: str, width: int = 160) -> str:
    """The most recent log or kernel line carrying a tag, cut to width."""
    return f.lines[tag][-1][:width]


def _values(f: Facts, name: str) -> list[float]:
    return [v for _, v in f.series.get(name, []) if v is not None]


def _window(f: Facts) -> Window:
    return f.window or Window(end=f.bundle["started_at"].timestamp(), failure=None, cut=None)


def _history(f: Facts, name: str) -> bool:
    """The series reaches far enough before the incident window to compare it with."""
    return f.has(name) and _window(f).has_history(f.series[name])


def _by_hour(series: shapes.Series) -> dict[int, list[float]]:
    """The readings of each hour (by its number since the epoch), in time order; hours with
    fewer than 3 readings are left out."""
    hours: dict[int, list[float]] = {}
    for t, v in series:
        if v is not None:
            hours.setdefault(int(t // HOUR_S), []).append(v)
    return {k: vs for k, vs in sorted(hours.items()) if len(vs) >= 3}


def _hourly(series: shapes.Series, fn: Callable[[list[float]], float]) -> list[float]:
    """fn of each hour of readings (hours with fewer than 3 readings are skipped)."""
    return [fn(vs) for vs in _by_hour(series).values()]


def _median(vs: list[float]) -> float:
    return shapes.quantile(vs, 0.5)


def _mean(vs: list[float]) -> float:
    return sum(vs) / len(vs)


def _at(f: Facts, when: float) -> str:
    ago = _window(f).end - when
    return (
        f"{ago / 60:.0f} min before the failure"
        if _window(f).failure
        else (f"{ago / 60:.0f} min before the capture")
    )


def _per_request(cache: shapes.Series, running: shapes.Series) -> list[tuple[float, float]]:
    """The cache metric divided by the requests running at the same instant (one or more)."""
    load = {t: v for t, v in running if v is not None and v >= 1}
    return [(t, v / load[t]) for t, v in cache if v is not None and t in load]


def _memory_series(f: Facts) -> tuple[str, str] | None:
    """The memory series to read shapes from: the accelerator's where it is known, else the
    host's (on a unified machine the host's is the accelerator's)."""
    for name, label in (("accelerator_used", "accelerator memory"), ("memory_used", "memory")):
        if f.has(name):
            return name, f"{label} ({f.origin[name]})"
    return None


@rule("context-creep")
def context_creep(f: Facts) -> Judgement:
    j = Judgement()
    cache = [n for n in ("kv_cache", "context_high_water") if f.has(n)]
    lengths = _history(f, "tokens_prompt") and _history(f, "tokens_generated")
    _contexts_loaded(f, j)
    if not cache and (f.stats or f.prompts or f.truncated):
        _creep_in_stats(f, j)
        _prompts_in_log(f, j)
        _outgrew_slots(f, j)
    if j.score and not cache:
        return j
    if not cache and not lengths:
        j.missing.append(
            "a KV-cache metric (vllm:kv_cache_usage_perc, sglang:token_usage, an older "
            "llama-server's llamacpp:kv_cache_usage_ratio), the context "
            "high-water (llamacpp:n_tokens_max) or the prompt and generated token counters"
        )
        if held := _card_kept_the_context(f):
            j.add(3, held)
        return j
    if lengths or any(_history(f, n) for n in cache):
        _creep_in_window(f, j, [n for n in cache if _history(f, n)])
    else:
        _creep_in_bundle(f, j, cache)
    if f.lines.get("kv-cache") and j.score:
        j.add(1, f"the log mentions the KV cache: {_last(f, 'kv-cache')}")
    return j


def _card_kept_the_context(f: Facts) -> str | None:
    """Where nothing measured the context, llama-server's card is its record: its CUDA pool
    keeps the largest scratch a context needed and gives nothing back. A creep is the card
    climbing past anything of the day in the hours before the engine ran out, after a day
    it held level, none of it given back: a leak's remainders pile up over the day's
    bursts; a queue's memory comes and goes with the requests running. Only the card's
    line is the engines' alone (the host's holds everything else too)."""
    w = _window(f)
    ended = _engine_ran_out(f)
    if not ended or not _history(f, "accelerator_used") or f.prompts or f.stats:
        return None  # the log's own lengths, where it has them, say it directly
    if not any(e["kind"] == "llama-server" for e in f.engines):
        return None
    series = w.upto(f.series["accelerator_used"])
    day = _hourly(w.reference(series), _median)
    recent, incident = known(w.last(series, RECENT_S)), known(w.incident(series))
    pool = _pool(f, "accelerator_used")
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
    if gave_back > rise / 4 or (not _one_model(f) and _loaded_at_once(rising)):
        return None
    return (
        f"the card's memory rose {_gib(rise)} past the most of any hour of the day "
        f"({_gib(max(day))}) in the hour before {ended}, after a day within "
        f"{_gib(max(day) - min(day))}, and gave none of it back: llama-server's pool keeps "
        "what the longest context needed"
    )


def _loaded_at_once(series: shapes.Series) -> bool:
    """Most of a line's rise is one step reached within MODEL_LOADS_S without resting
    half-way: what a model's weights do as they load."""
    step = shapes.step(series, fmt=_gib)
    return (
        bool(step.verdict)
        and _rise_time(series, step) <= MODEL_LOADS_S
        and not _rested(series, step)
    )


def _creep_in_stats(f: Facts, j: Judgement) -> None:
    """Where nothing scraped the cache, the engine's stats lines: the cache held per
    running request, the last third of the lines against the first."""
    per = [r.cache / r.running for r in f.stats if r.cache is not None and r.running]
    if len(per) < STATS_UNFAILED:
        return
    first, last = _thirds(per)
    said = (
        f"the engine's stats lines: the KV cache per running request went from {first:.0%} "
        f"to {last:.0%} over its last {len(per)} lines"
    )
    fullest = max(r.cache or 0.0 for r in f.stats)
    if roomy := _queued_with_room(f):
        j.evidence_against.append(f"{roomy}; {said}")
    elif last > CREEP_OVER_USUAL * first and fullest >= KV_ROOM:
        j.add(3 if _window(f).failure else 1, said)
    elif (bound := _cache_bound(f)) and _window(f).failure:
        j.add(3, f"{bound}; {said}")
    else:
        j.evidence_against.append(said)


def _queued_with_room(f: Facts) -> str | None:
    """A queue a longer context makes waits for the cache: the engine admits by free blocks.
    Requests that waited in most of the stats lines while the cache was under half used
    (the median of those lines) waited for a slot, however the cache per request moved."""
    queued = [r.cache for r in f.stats if r.waiting > 0 and r.cache is not None]
    if len(queued) < STATS_QUEUE_SHARE * len(f.stats) or _median(queued) >= KV_ROOM:
        return None
    return (
        f"requests waited in {len(queued)} of the engine's last {len(f.stats)} stats lines "
        f"while the KV cache was {_median(queued):.0%} used (median): they waited for a slot, "
        "not for the cache"
    )


def _cache_bound(f: Facts) -> str | None:
    """The engine's stats lines say what held the queue: where requests waited, the KV
    cache was full and a handful of running requests held all of it. vLLM and SGLang admit
    a request when its cache fits, not when a slot frees: one long context keeps everyone
    else waiting, and more slots would not have let one more in."""
    queued = [r for r in f.stats if r.waiting > 0 and r.running and r.cache is not None]
    if len(queued) < STATS_QUEUE_SHARE * len(f.stats) or len(queued) < PROGRESS_LINES:
        return None
    used = _median([r.cache or 0.0 for r in queued])
    each = _median([(r.cache or 0.0) / r.running for r in queued])
    if used < CACHE_FULL or each < CACHE_PER_REQUEST:
        return None
    return (
        f"requests waited behind a full KV cache in {len(queued)} of the engine's last "
        f"{len(f.stats)} stats lines: {used:.0%} used by {used / each:.0f} running: the "
        "contexts held the cache, not more callers than slots"
    )


def _thirds(values: list[float]) -> tuple[float, float]:
    """The median of the first third of a log's readings and of the last third."""
    third = len(values) // 3
    return _median(values[:third]), _median(values[-third:])


def _prompts_in_log(f: Facts, j: Judgement) -> None:
    """llama-server logs each request's length against its slot's context: requests growing
    through the log's tail, the last third filling most of the slot, is the conversations
    getting longer."""
    read = _log_prompts(f)
    if read is None:
        return
    grew, full, said = read
    if grew:
        j.add(3 if _window(f).failure else 1, said)
    elif full and (failure := _window(f).failure):
        # Long already, if not seen growing: each prompt fills the slot, and reading it
        # takes the longest a prompt can; an answer that did not come in time is that, as
        # is an allocation on the card failing while the slots held the most they hold.
        j.add(
            3 if failure.timed_out or _card_ran_out(f) else 2,
            f"{said}: the prompts nearly fill the slot",
        )
    else:
        j.evidence_against.append(said)


def _log_prompts(f: Facts) -> tuple[bool, bool, str] | None:
    """The lengths llama-server's log gives its last requests, against their slot: whether
    they grew (the last third past CREEP_OVER_USUAL times the first, at least half the
    slot), whether the last third nearly fills it, and the figures in words. None with too
    few requests logged."""
    sizes = [p.tokens for p in f.prompts]
    if len(sizes) < STATS_UNFAILED:
        return None
    first, last = _thirds(sizes)
    slot = f.prompts[-1].slot_context
    what = "the context each request held went" if f.prompts[-1].at_release else "prompts went"
    said = (
        f"the engine's log: {what} from {first:.0f} to {last:.0f} tokens (medians) over "
        f"its last {len(sizes)} requests, against a slot context of {slot}"
    )
    grew = last > CREEP_OVER_USUAL * first and last >= KV_ROOM * slot
    return grew, last >= SLOT_NEARLY_FULL * slot, said


def _outgrew_slots(f: Facts, j: Judgement) -> None:
    """llama-server says, as it releases each request, whether it outgrew its slot: none in
    the first third of the log's requests and several in the last is conversations that
    stopped fitting."""
    cut = f.truncated
    if len(cut) < STATS_UNFAILED:
        return
    third = len(cut) // 3
    early, late = sum(cut[:third]), sum(cut[-third:])
    if not early and late >= 2:
        j.add(
            3 if _window(f).failure else 1,
            f"the engine's log: {late} of its last {third} requests outgrew their slot "
            f"(released with truncated = 1), none of its first {third}",
        )


def _contexts_loaded(f: Facts, j: Judgement) -> None:
    """Ollama reloads a model when a caller asks for a longer num_ctx than it was loaded
    with: one model's latest load, in the log, given more context than its first is the
    conversations outgrowing their context (and each reload asking more memory)."""
    for name, said, grew in _model_contexts(f):
        if grew:
            j.add(
                3 if _window(f).failure else 1,
                f"the model {name} was reloaded with longer contexts ({said} tokens per "
                "sequence): callers asked for more context than it had",
            )
        else:
            j.evidence_against.append(f"the model {name} kept its context over its loads ({said})")


def _model_contexts(f: Facts) -> list[tuple[str, str, bool]]:
    """Each model loaded more than once in the log: its name, its contexts load by load
    in words, and whether the latest is longer than the first."""
    by_model: dict[str, list[int]] = {}
    for load in f.loads:
        by_model.setdefault(load.model, []).append(load.context)
    out = []
    for model, sizes in by_model.items():
        if len(sizes) < 2:
            continue
        said = " -> ".join(
            f"{size}" + (f" ({n} loads)" if n > 1 else "")
            for size, n in ((size, len(list(run))) for size, run in groupby(sizes))
        )
        out.append((_blob(model), said, sizes[-1] >= CREEP_OVER_USUAL * sizes[0]))
    return out


def _creep_in_bundle(f: Facts, j: Judgement, cache: list[str]) -> None:
    for name in cache:
        shape = shapes.climb(f.series[name])
        if shape.verdict:
            j.add(3, f"{name.replace('_', ' ')} rose: {shape.why}")
        elif not shape.enough:  # too few readings to judge is a gap, not a finding
            j.missing.append(f"enough readings of {name.replace('_', ' ')}: {shape.why}")
        else:
            j.evidence_against.append(f"{name.replace('_', ' ')} did not climb: {shape.why}")
    if f.has("requests_running"):
        running = shapes.climb(f.series["requests_running"])
        if running.verdict:
            j.evidence_against.append(
                f"requests running rose too ({running.why}): more callers, not longer context"
            )
        elif j.score:
            j.add(1, "requests running stayed flat: the same load, more memory")
    else:
        j.missing.append("requests running")
    memory = _memory_series(f)
    if memory and j.score and shapes.climb(f.series[memory[0]]).verdict:
        j.add(1, f"{memory[1]} climbed with it")


def _slots_held(f: Facts) -> str | None:
    """The hour before the failure ran as many requests as ever: at the most that ran at
    once up to it (its median within a tenth), or no fewer than in the busiest hour before
    (medians). In words; None when fewer ran (a cache too full for the next sequence
    admits fewer: a creep's queue) or the load is not known."""
    w = _window(f)
    series = f.series.get("requests_running", [])
    recent = known(w.last(series, RECENT_S))
    ceiling = max(known(w.upto(series)), default=0.0)
    if not recent or not ceiling:
        return None
    now = _median(recent)
    if now >= 0.9 * ceiling:
        return f"requests running held at the ceiling ({ceiling:.0f})"
    usual = max(_hourly(w.reference(series), _median), default=None)
    if usual and now >= usual:
        return (
            f"requests running held their busiest level ({now:.0f} at the median, as in the "
            f"busiest hour before; up to {ceiling:.0f})"
        )
    return None


def _busier(f: Facts) -> str | None:
    """More callers in the hour before the failure than in the busiest hour before it, in
    words: more requests running (medians), or, with as many running as ever (a cache
    that fills queues callers behind free slots: a creep's queue), far more waiting
    (means). None when the load stayed in its range or is not known."""
    w = _window(f)
    for name, typical, over in (
        ("requests_running", _median, lambda now, usual: now > usual * LOAD_OVER_USUAL + 0.5),
        (
            "requests_waiting",
            _mean,
            lambda now, usual: now >= QUEUE_DEEPER * max(usual, 1.0) and _slots_held(f),
        ),
    ):
        series = f.series.get(name, [])
        recent = known(w.last(series, RECENT_S))
        usual = max(_hourly(w.reference(series), typical), default=None)
        if recent and usual is not None and over(typical(recent), usual):
            return (
                f"{name.replace('_', ' ')} rose above the busiest hour before "
                f"({typical(recent):.1f} against {usual:.1f})"
            )
    return None


def _against_usual(w: Window, series: shapes.Series) -> tuple[float, float] | None:
    """The median of the hour before the failure, and the highest hourly median before the
    incident window; None without readings of both."""
    recent = known(w.last(series, RECENT_S))
    usual = _hourly(w.reference(series), _median)
    return (_median(recent), max(usual)) if len(recent) >= 3 and usual else None


def _rose_past(now: float, before: float) -> bool:
    return now > before * CREEP_OVER_USUAL and now - before > 1e-9


def _creep_in_window(f: Facts, j: Judgement, cache: list[str]) -> None:
    """The cache held per running request in the hour before the failure, against the
    highest hourly level of the rest of the day: longer conversations, not more of them."""
    w = _window(f)
    running = f.series.get("requests_running", [])
    prompts = _prompts_grew(f, j)
    busier = _busier(f)
    for name in cache:
        words = name.replace("_", " ")
        series = w.upto(f.series[name])
        per = _per_request(series, running) if name == "kv_cache" and running else []
        measure, label = (
            (per, f"{words} per running request")
            if len(per) >= 6
            else (
                series,
                words,
            )
        )
        level = known(w.last(series, RECENT_S))
        fullest = shapes.quantile(level, 0.9) if level else None
        if name == "kv_cache" and fullest is not None and fullest < KV_ROOM:
            j.evidence_against.append(
                f"the KV cache was at most {fullest:.0%} full in the hour before (90th "
                "percentile): room to spare"
            )
            continue
        against = _against_usual(w, measure)
        if against is None:
            j.missing.append(f"readings of {words} in the hour before and earlier in the day")
            continue
        now, before = against
        said = f"{label} {shapes.plain(now)} in the hour before, against at most " + (
            f"{shapes.plain(before)} in any hour earlier"
        )
        climb = shapes.climb(w.incident(measure))
        # Days-long creep: the whole history climbs, each quarter above the last (a rhythm
        # goes back down at night; this does not).
        steady = shapes.climb(measure)
        grew = _high_water_grew(w, series) if name == "context_high_water" else None
        rose = _rose_past(now, before)
        if rose and busier and prompts is False and (name == "context_high_water" or not w.failure):
            # A high-water is the longest of the requests seen: more of them reach further
            # though each is as long as before (the prompts, read directly, did not grow).
            # With nothing failed the cache per request reads the same way: a batch's
            # sequences share the cache otherwise than a chat's, each prompt as long.
            j.add(
                1,
                f"{label} rose past its usual range ({said}), though the prompts kept "
                "their length and more requests ran: more of them, each as long",
            )
        elif rose:
            j.add(_unless_healthy(w, name), f"{label} rose past its usual range: {said}")
            if climb.verdict:
                j.add(1, f"and climbed through the incident window: {climb.why}")
        elif steady.verdict and name == "context_high_water" and prompts is False:
            j.add(
                1,
                f"{label} climbed through the whole look-back ({steady.why}), though the "
                "prompts kept their length: a high-water rises by nature",
            )
        elif steady.verdict:
            climbed = f"{label} climbed through the whole look-back: {steady.why}"
            j.add(_unless_healthy(w, name), climbed)
        elif grew and prompts is False:
            # A high-water only rises; the prompts, read directly, did not grow.
            j.add(1, f"{grew}, though the prompts kept their length: a high-water rises by nature")
        elif grew:
            j.add(_unless_healthy(w, name), grew)
        else:
            within = (
                "stayed in its usual range"
                if now <= before
                else "rose too little past its usual range to say the context grew"
            )
            j.evidence_against.append(f"{label} {within}: {said}")
    _preempted(f, j, explained=bool(busier) or prompts is False)
    if not f.has("requests_running"):
        j.missing.append("requests running")
    elif j.score:
        recent = known(w.last(running, RECENT_S))
        if busier:
            j.evidence_against.append(f"{busier}: more callers, not longer context")
        elif recent and j.score >= NOTE_IS_EVIDENCE:
            # The same load confirms a creep; beside notes alone it would make a verdict
            # of a healthy day's drift, or a rival of a high-water's natural climb.
            j.add(1, "requests running stayed in their usual range: the same load, more cache")


def _unless_healthy(w: Window, name: str) -> int:
    """The high-water only rises, and a day after a restart it climbs by nature: without a
    failure its rise is a note, with one it is the creep that led there."""
    return 3 if w.failure or name != "context_high_water" else 1


def _high_water_grew(w: Window, series: shapes.Series) -> str | None:
    """The context high-water only rises (until a restart): a creep that began hours
    before the failure shows as the mark now against where it stood HIGH_WATER_LOOK_S
    earlier, even where it has levelled off at the context's limit."""
    now = known(w.last(series, RECENT_S))
    then = known([(t, v) for t, v in series if t <= w.end - HIGH_WATER_LOOK_S])
    if not now or not then or then[-1] <= 0:
        return None
    if now[-1] >= CREEP_OVER_USUAL * then[-1]:
        return (
            f"the context high-water rose from {then[-1]:.0f} to {now[-1]:.0f} tokens in the "
            f"{HIGH_WATER_LOOK_S / HOUR_S:.0f} h before the failure: longer conversations"
        )
    return None


def _hourly_increase(series: shapes.Series, end: float) -> dict[int, float]:
    """A counter's increase in each hour counted back from `end` (0: the hour before it);
    a reset (a restart) adds nothing for the interval it falls in."""
    pts = [(t, v) for t, v in series if v is not None and t <= end]
    out: dict[int, float] = {}
    for (_, v1), (t2, v2) in zip(pts, pts[1:], strict=False):
        if v2 >= v1:
            hour = int((end - t2) // HOUR_S)
            out[hour] = out.get(hour, 0.0) + v2 - v1
    return out


def _prompt_lengths(f: Facts) -> tuple[bool | None, str] | None:
    """Prompt tokens per generated token, hour by hour: a conversation that grows resends a
    longer history for answers of the same size, while more callers add prompts and
    answers alike. The hour before the failure against every hour before the incident
    window: whether it rose past the highest of them (longer context at the same load),
    and the figures in words (None and what is missing without the hours to tell); None
    where the engine counts no tokens."""
    if not (_history(f, "tokens_prompt") and _history(f, "tokens_generated")):
        return None
    w = _window(f)
    prompt = _hourly_increase(w.upto(f.series["tokens_prompt"]), w.end)
    gen = _hourly_increase(w.upto(f.series["tokens_generated"]), w.end)
    ratio = {h: prompt[h] / g for h, g in gen.items() if g >= PROMPT_MIN_GENERATED and h in prompt}
    inside = int(INCIDENT_S // HOUR_S)
    usual = [r for h, r in ratio.items() if h >= inside]
    # The latest hour of the incident window that had traffic (a quiet last hour says
    # nothing of lengths).
    latest = next((h for h in range(inside) if h in ratio), None)
    if latest is None or len(usual) < 3:
        return None, "hours of prompt and generated tokens before the incident and in it"
    now, before = ratio[latest], max(usual)
    end = "the failure" if w.failure else "the capture"
    said = (
        f"{now:.1f} prompt tokens per generated token in the latest busy hour before {end}, "
        f"against at most {before:.1f} in any hour before the incident window (a rise "
        f"needs {CREEP_OVER_USUAL:.2g} times that)"
    )
    if now > CREEP_OVER_USUAL * before:
        return True, said
    # A creep of many hours has no before in the incident window's day: the hours just
    # before it crept too. Where the ratio climbed through the last hours, the hours
    # before that climb are the before.
    hours = [(w.end - h * HOUR_S, r) for h, r in sorted(ratio.items(), reverse=True)]
    for look in SLOW_CREEP_LOOKS_H:
        climbing = [(t, r) for t, r in hours if t > w.end - look * HOUR_S]
        earlier = [r for t, r in hours if t <= w.end - look * HOUR_S]
        if len(earlier) < 3 or not shapes.climb(climbing).verdict:
            continue
        if now > CREEP_OVER_USUAL * max(earlier):
            return True, (
                f"{now:.1f} prompt tokens per generated token in the latest busy hour before "
                f"{end}, climbing through the last {look} h from at most {max(earlier):.1f} "
                "in any hour before"
            )
    # Conversations that grew at once and stayed long (a new agent's history, a document
    # pasted into every turn) make a step, not a climb: every busy hour since it longer
    # than every hour before it.
    for onset in range(inside, max(SLOW_CREEP_LOOKS_H) + 1):
        since = [r for h, r in ratio.items() if h <= onset]
        earlier = [r for h, r in ratio.items() if h > onset]
        if len(since) >= 2 and len(earlier) >= 3 and min(since) > CREEP_OVER_USUAL * max(earlier):
            return True, (
                f"{now:.1f} prompt tokens per generated token in the latest busy hour before "
                f"{end}, and at least {min(since):.1f} in every busy hour of the last "
                f"{onset + 1} h, against at most {max(earlier):.1f} in any hour before"
            )
    return False, said


def _prompts_grew(f: Facts, j: Judgement) -> bool | None:
    """The prompt lengths as the creep's evidence, for or against."""
    lengths = _prompt_lengths(f)
    if lengths is None:
        return None
    grew, said = lengths
    if grew is None:
        j.missing.append(said)
    elif grew:
        words = f"the prompts grew longer for answers of the same size: {said}"
        j.add(3 if _window(f).failure else 1, words)
    else:
        j.evidence_against.append(f"the prompts did not grow past their usual length: {said}")
    return grew


def _preempted(f: Facts, j: Judgement, explained: bool) -> None:
    """vLLM and SGLang preempt a running request when the KV cache has no room for the
    conversations: preemptions in the hour before, where the hours before had few, are
    the cache running out (a cache already near full all day says nothing by its level).
    `explained`: more callers came, or the prompts kept their length; then more sequences
    filled the cache, and its running out is theirs."""
    if not _history(f, "preemptions"):
        return
    w = _window(f)
    per_hour = _hourly(w.reference(f.series["preemptions"]), lambda vs: max(vs) - min(vs))
    recent = known(w.last(f.series["preemptions"], RECENT_S))
    if len(recent) < 2:
        return
    now = recent[-1] - recent[0]
    usual = max(per_hour, default=0.0)
    if now > 0 and now >= PREEMPT_OVER_USUAL * max(usual, 1.0):
        # Alone, and with something failed, the cache running out is the creep; on a day
        # when nothing failed, or beside a load that explains it, a note.
        points = 3 if w.failure and not j.score and not explained else 1
        j.add(
            points,
            f"{now:.0f} requests were preempted for want of KV cache in the hour before, "
            f"against at most {usual:.0f} in any hour earlier",
        )


@rule("concurrency-overload")
def concurrency_overload(f: Facts) -> Judgement:
    j = Judgement()
    if not f.has("requests_waiting"):
        queue = _queue_in_log(f)
        if queue and not _window(f).failure:
            # Minutes of an engine's log with nothing failed: a busy spell, worth a note.
            # A queue through an incident needs the incident, or hours of readings.
            j.add(2, f"{queue}; nothing failed")
            return j
        if queue:
            j.add(3, queue)
        elif bound := _cache_bound(f):
            j.evidence_against.append(bound)
        else:
            j.missing.append(
                "requests waiting (llamacpp:requests_deferred, "
                "vllm:num_requests_waiting, sglang:num_queue_reqs)"
            )
    elif _history(f, "requests_waiting"):
        read = _queue_in_window(f, j)
        failure = _window(f).failure
        # The scrapes stopped before the failure (an engine too busy to answer them, a
        # gap): its own log and the capture still say what waited. Readings that ended
        # half an hour before it saw the hour's start only, not the queue at its end.
        gone = _readings_end_before(f, "requests_waiting")
        if failure and (not read or (gone and not j.score)) and (queue := _queue_in_log(f)):
            j.add(3, f"{queue} (the scrapes stopped {gone / 60:.0f} min before)" if gone else queue)
    else:
        waiting = shapes.sustained(f.series["requests_waiting"], above=0, min_fraction=0.25)
        if waiting.verdict:
            j.add(3, f"requests waited for a slot: {waiting.why}")
        elif not waiting.enough:
            j.missing.append(f"enough readings of requests waiting: {waiting.why}")
        elif max(_values(f, "requests_waiting")) > 0:
            j.evidence_against.append(f"requests waited only briefly: {waiting.why}")
        else:
            j.evidence_against.append("nothing ever waited for a slot")
    running = _values(f, "requests_running")
    if running and max(running) > 1 and j.score >= NOTE_IS_EVIDENCE:
        held = _slots_held(f)
        if held:
            j.add(1, f"{held} while others waited")
        else:
            # Fewer ran than the slots have held while others waited: what held them back
            # was not the slots (a cache too full for the next sequence is a creep's).
            j.evidence_for.append(f"up to {max(running):.0f} requests ran at once")
    if f.lines.get("slot-unavailable"):
        j.add(2, f"the log says a slot was unavailable: {_last(f, 'slot-unavailable')}")
    stopped = _stopped_in_stats(f) if j.score else None
    if stopped:
        # A queue behind an engine that served nothing: no slot freed, whoever called.
        j.score = min(j.score - 2, 1)
        j.evidence_against.append(f"{stopped}: the queue is a stopped engine's, not more callers")
    slowed = _slowed_by_a_stall(f) if j.score >= NOTE_IS_EVIDENCE else None
    if slowed:
        # The seeds' question, did the load change: a queue behind an engine that served
        # less than on a usual busy hour, while memory stalled, formed behind the stall.
        j.score = min(j.score - 2, 1)
        j.evidence_against.append(slowed)
    longer = _longer_context(f)
    if j.score and longer:
        # The same callers resending longer histories hold each slot longer (as many
        # callers, each answer slower: more of them running at once, and a queue): the
        # queue forms behind the conversations' length, not behind more of them.
        j.score = min(j.score - 2, 1)
        j.evidence_against.append(
            f"{longer}: each request held its slot longer; the queue is the longer context's"
        )
    return j


def _slowed_by_a_stall(f: Facts) -> str | None:
    """Why the queue is a slowdown's and not more callers, while tasks stalled on memory:
    the stall began before the queue did, or the engines generated fewer tokens in the
    hour before the failure than in a usual busy hour before the incident window. More
    callers than slots keep the engine serving at least that much; a machine swapping
    serves less to the same callers, and they queue once it has slowed."""
    if not _stalled(f):
        return None
    w = _window(f)
    stall = _since(_rate(w.upto(f.series.get("psi_some_seconds", []))), PSI_HISTORY_HIGH)
    queue = _since(w.upto(f.series.get("requests_waiting", [])), QUEUED)
    if stall is not None and queue is not None and stall <= queue - STALL_LEADS_S:
        return (
            f"tasks stalled on memory from {_at(f, stall)} and requests queued only from "
            f"{_at(f, queue)}: the queue formed behind the stall, not behind more callers"
        )
    if not _history(f, "tokens_generated"):
        return None
    hourly = _hourly_increase(w.upto(f.series["tokens_generated"]), w.end)
    inside = int(INCIDENT_S // HOUR_S)
    usual = sorted(v for h, v in hourly.items() if h >= inside and v >= PROMPT_MIN_GENERATED)
    if len(usual) < 3 or 0 not in hourly:
        return None
    busy = usual[(3 * len(usual)) // 4]
    if hourly[0] >= SLOWED_SHARE * busy:
        return None
    return (
        f"the engines generated {hourly[0]:.0f} tokens in the hour before, against {busy:.0f} "
        "in a usual busy hour here, while tasks stalled on memory: they served less, not "
        "more callers; the queue formed behind the stall"
    )


def _since(series: shapes.Series, at_least: float) -> float | None:
    """When what holds at or above `at_least` to the end of the series began: the earliest
    reading at or above it from which at least half the readings to the end are too. A
    queue comes and goes with each burst of callers: it began when it first held, not
    after its latest lull. None when it does not hold to the end."""
    began, above = None, 0
    pts = [(t, v) for t, v in series if v is not None]
    for seen, (t, v) in enumerate(reversed(pts), 1):
        above += v >= at_least
        if v >= at_least and 2 * above >= seen:
            began = t
    return began


def _longer_context(f: Facts) -> str | None:
    """The conversations' length said to have grown: the token counters' prompts per answer
    past any hour before, or llama-server's log of prompts nearly filling their slot (each
    answer then takes the longest a prompt can; a prompt grown to half of it still leaves
    the slots, not the length, the likelier limit)."""
    lengths = _prompt_lengths(f)
    if lengths and lengths[0]:
        return f"the prompts grew longer for answers of the same size ({lengths[1]})"
    read = _log_prompts(f)
    if read and read[1]:
        return f"{read[2]} ({'grown to nearly fill' if read[0] else 'nearly filling'} it)"
    return None


_GO_DURATION = re.compile(r"\|\s*\d{3}\s*\|\s*((?:[\d.]+(?:h|ms|µs|us|m|s))+)\s*\|")
_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "µs": 1e-6, "us": 1e-6}


def _seconds(go: str) -> float:
    """A Go duration as Gin prints it (1m2.5s, 182.2s, 850ms) in seconds."""
    return sum(float(n) * _GO_UNITS[u] for n, u in re.findall(r"([\d.]+)(h|ms|µs|us|m|s)", go))


def _slow_answers(f: Facts) -> str | None:
    """Without a queue metric (Ollama publishes none) the access log still says how long
    each answer took: minutes per answer, while a check timed out, is requests waiting
    their turn (the seeds: the friendlier version of the fault is latency, not memory)."""
    took = [
        _seconds(m.group(1))
        for line in f.lines.get("request-done", [])
        if (m := _GO_DURATION.search(line))
    ]
    timed_out = any(c["status"] == "timeout" for c in f.checks)
    if len(took) < PROGRESS_LINES or not timed_out or _median(took) < SLOW_ANSWER_S:
        return None
    if _stalled(f):
        return None  # the machine stalled on memory: answers crawl for swapping, not a queue
    return (
        f"the log's last {len(took)} answers took {_median(took):.0f} s each (median) while "
        "a check timed out: requests waited their turn"
    )


def _waited_in_log(f: Facts) -> str | None:
    """The engine's log says requests waited their turn: answers that took minutes, or
    callers that gave up before theirs."""
    return _slow_answers(f) or _gave_up(f)


def _gave_up(f: Facts) -> str | None:
    """Without a queue metric, llama-server's log still says when callers stopped waiting:
    a share of its last requests cancelled before their answer while it kept answering
    the others, before a failure. Requests waited their turn, unless the machine stalled
    on memory (then every answer crawled)."""
    cancelled = len(f.lines.get("request-cancelled", []))
    done = f.lines.get("request-done", [])
    # Older builds log a request twice (its slot's release and its access line).
    answered = len([line for line in done if "stop processing" in line] or done)
    kept = "answering the rest"
    if not answered:
        # A tail cut before the releases were written (an engine that died with every
        # slot busy) still shows its slots taking the next task, which a hung loop never does.
        answered, kept = _slots_turned_over(f), "taking the next request into its slots"
    total = cancelled + answered
    if not _window(f).failure or cancelled < GAVE_UP_LINES or cancelled < GAVE_UP_SHARE * total:
        return None
    if answered < PROGRESS_LINES or _stalled(f):
        return None
    return (
        f"{cancelled} of the last {total} requests in the engine's log were cancelled by "
        f"their callers before an answer, while it kept {kept}: requests waited their turn"
    )


_SLOT_ID = re.compile(r"launch_slot_: id\s+(\d+)")


def _slots_turned_over(f: Facts) -> int:
    """How many times a slot of llama-server's log took a task after an earlier one: each
    time, the task before it had ended."""
    seen: set[str] = set()
    again = 0
    for line in f.lines.get("request-started", []):
        if m := _SLOT_ID.search(line):
            again += m.group(1) in seen
            seen.add(m.group(1))
    return again


def _queue_in_stats(f: Facts) -> str | None:
    """Where nothing scraped the queue, the engine's own stats lines say it: requests
    waiting in most of them with as many running as the engine ever ran at once."""
    lines = f.stats
    if not lines or (not _window(f).failure and len(lines) < STATS_UNFAILED):
        return None
    if _cache_bound(f):
        return None  # the cache, not the slots, kept them waiting (context-creep reads it)
    ceiling = max(r.running for r in lines)
    full = [r for r in lines if r.waiting > 0 and r.running >= 0.9 * ceiling and r.running]
    if len(full) < STATS_QUEUE_SHARE * len(lines):
        return _queue_deepened(lines)
    return (
        f"the engine's stats lines: requests waited in {len(full)} of its last {len(lines)} "
        f"(up to {max(r.waiting for r in full)}) with {ceiling} running, its most at once"
    )


def _queue_deepened(lines: list[statlines.Reading]) -> str | None:
    """A queue that formed while the engine was still taking more in: requests waited from
    the first third of the stats lines on, the last third's queue at least QUEUE_DEEPER
    times as deep and more of them running, each holding no more of the cache than
    before. More callers, each as long: the engine had not reached its most at once
    when they began to wait, so the ceiling reading cannot say it."""
    waited = [r for r in lines if r.waiting > 0]
    if len(waited) < STATS_QUEUE_SHARE * len(lines) or len(lines) < 3:
        return None
    was, now = _thirds([float(r.waiting) for r in lines])
    ran, runs = _thirds([float(r.running) for r in lines])
    per = [r.cache / r.running for r in lines if r.cache is not None and r.running]
    longer = len(per) >= 3 and (p := _thirds(per))[1] > p[0]
    if was < 1 or now < QUEUE_DEEPER * was or runs <= ran or longer:
        return None
    return (
        f"the engine's stats lines: requests waited in {len(waited)} of its last "
        f"{len(lines)}, the queue deepening from {was:.0f} to {now:.0f} while those running "
        f"rose from {ran:.0f} to {runs:.0f}, each holding no more of the cache: more callers"
    )


def _queue_in_log(f: Facts) -> str | None:
    """What waited, where no scrape says it: the capture's own engine readings, the
    engine's stats lines, the answers its log shows waiting their turn."""
    return _queue_at_capture(f) or _queue_in_stats(f) or _waited_in_log(f)


def _queue_at_capture(f: Facts) -> str | None:
    """A single reading can say it: at a failure, more requests waiting than running, every
    slot busy. Strong evidence below the line of a series is still evidence."""
    waiting = _values(f, "requests_waiting")
    running = _values(f, "requests_running")
    if not (waiting and running and f.window and f.window.failure):
        return None
    if waiting[-1] >= max(QUEUE_AT_CAPTURE, running[-1]) and running[-1] >= 1:
        return (
            f"at the capture {waiting[-1]:.0f} requests waited behind {running[-1]:.0f} "
            f"running, as {f.window.failure.what}"
        )
    return None


def _readings_end_before(f: Facts, name: str) -> float:
    """How long before the failure a history's readings ended, where that is more than
    READINGS_GONE_S (0 otherwise): the last stretch before it was not seen."""
    w = _window(f)
    seen = [t for t, v in w.upto(f.series[name]) if v is not None]
    gap = w.end - seen[-1] if seen else 0.0
    return gap if gap > READINGS_GONE_S else 0.0


def _queue_in_window(f: Facts, j: Judgement) -> bool:
    """Requests waiting through the hour before the failure, against the busiest hour
    before the queue began: a queue that lasted this incident, however long, and not the
    machine's usual busy hour. False where the history has no readings of that hour."""
    w = _window(f)
    series = w.upto(f.series["requests_waiting"])
    recent = w.last(series, RECENT_S)
    share = share_above(recent, 0)
    if share is None or len(known(recent)) < 4:
        j.missing.append("readings of requests waiting in the hour before the failure")
        return False
    # Walk back hour by hour while the queue held: the rest of the history is the before.
    onset = w.end - RECENT_S
    while True:
        hour = [(t, v) for t, v in series if onset - HOUR_S <= t < onset]
        held = share_above(hour, 0) if len(known(hour)) >= 3 else None
        if held is None or held < QUEUE_SHARE:
            break
        onset -= HOUR_S
    before = [(t, v) for t, v in series if t < onset]
    usual = max(_hourly_shares(before), default=0.0)
    depth = _mean(known(recent))
    usual_depth = max(_hourly(before, _mean), default=0.0)
    lasted = (w.end - onset) / HOUR_S
    said = (
        f"{share:.0%} of the hour before ({depth:.1f} waiting on average), the queue lasting "
        f"about {lasted:.0f} h, against {usual:.0%} ({usual_depth:.1f}) in the busiest hour "
        "before it"
    )
    # With nothing failed only an unmistakable queue is worth naming: most of the hour,
    # and far past the busiest hour before (a nightly batch queues every night).
    need = QUEUE_SHARE if w.failure else QUEUE_SHARE_UNFAILED
    over = QUEUE_OVER_USUAL if w.failure else 2 * QUEUE_OVER_USUAL
    deeper = depth >= (1 if w.failure else 2) * QUEUE_DEEPER * max(usual_depth, 1.0)
    # A queue that began before the last few hours of the look-back has no before to
    # stand out from: without a failure, that is how this machine runs (always-on agents).
    since = [t for t, v in before if v is not None]
    always = not since or onset - since[0] < INCIDENT_S
    timed_out = bool(w.failure and w.failure.timed_out)
    timed_out_behind = timed_out and share >= QUEUE_SHARE_TIMED_OUT and depth >= 1
    if share >= need and always and not w.failure:
        j.evidence_against.append(
            f"requests waited all through the look-back and nothing failed: {said}; this "
            "machine's normal, not a change"
        )
    elif share >= need and (share >= usual + over or deeper):
        peak = max(known(recent))
        if not w.failure and f.bundle["trigger_kind"] == "cron":
            # A routine snapshot of a box where nothing failed: a batch queues by design,
            # and a day's look-back need not hold its last run. Worth a note, not a fault.
            j.add(2, f"requests waited for a slot: {said} (up to {peak:.0f}); nothing failed")
            return True
        j.add(3, f"requests waited for a slot through the incident: {said} (up to {peak:.0f})")
    elif timed_out_behind and _stalled(f):
        # A usual busy hour's queue, and the machine stalled on memory: the answer crawled
        # for swapping, and the queue waited behind it.
        j.evidence_against.append(
            f"requests waited as in a busy hour here ({said}), and the machine stalled on "
            "memory: the answers crawled for it, not for the slots"
        )
    elif timed_out_behind:
        # The machine queues in its busy hours too, but this time an answer did not come
        # in time behind the queue: the slots were the limit at the failure.
        j.add(
            3,
            f"requests waited for a slot when {w.failure.what}: {said}; a busy hour here "
            "queues too, this one timed out behind it",
        )
    elif w.failure and _card_ran_out(f) and share >= QUEUE_SHARE_TIMED_OUT and depth >= 1:
        # Each sequence running holds its cache and activations on the card: a busy hour
        # queues here every day, and this time the card ran out under it.
        j.add(
            3,
            f"requests waited for a slot when the engine's allocation failed: {said}; a "
            "busy hour here queues too, this one ran the card out",
        )
    elif (timed_out or (w.failure and _card_ran_out(f))) and (
        burst := _burst(series, before, w.end)
    ):
        # Callers piling in all at once (a retry storm, an agent loop) fill the queue in
        # minutes: too short for a share of the hour, far past anything earlier. Either an
        # answer did not come in time behind them, or the sequences they brought in ran
        # the card out.
        j.add(3, f"requests piled up in the minutes before {w.failure.what}: {burst}")
    elif share >= QUEUE_SHARE:
        j.evidence_against.append(f"requests waited as much earlier in the day: {said}")
    elif share > 0:
        j.evidence_against.append(f"requests waited only briefly: {said}")
    else:
        j.evidence_against.append("nothing waited for a slot in the hour before")
    return True


def _burst(series: shapes.Series, before: shapes.Series, end: float) -> str | None:
    """The queue that holds the readings of the last BURST_S to the end (at least two of
    them), on average deeper than QUEUE_AT_CAPTURE and QUEUE_DEEPER times the deepest
    reading before the hour of the failure."""
    last = known([(t, v) for t, v in series if t >= end - BURST_S])
    run = next((i for i, v in enumerate(reversed(last)) if v <= 0), len(last))
    tail = last[len(last) - run :]
    deepest = max(known(before), default=0.0)
    if run < 2 or _mean(tail) < max(QUEUE_AT_CAPTURE, QUEUE_DEEPER * deepest):
        return None
    return (
        f"{_mean(tail):.0f} waiting on average over its last {run} readings (up to "
        f"{max(tail):.0f}), against at most {deepest:.0f} at any reading before"
    )


def _hourly_shares(series: shapes.Series) -> list[float]:
    """Per hour of the series, the share of it with requests waiting."""
    hours: dict[int, list[tuple[float, float | None]]] = {}
    for t, v in series:
        hours.setdefault(int(t // HOUR_S), []).append((t, v))
    shares = [share_above(pts, 0) for pts in hours.values() if len(known(pts)) >= 3]
    return [x for x in shares if x is not None]


@rule("leak-ratchet")
def leak_ratchet(f: Facts) -> Judgement:
    j = Judgement()
    staircase = _unload_staircase(f)
    if staircase:
        j.add(4, staircase)
    _leak_in_memory(f, j)
    _leak_per_process(f, j, named=j.score > 0)
    return j


def _leak_in_memory(f: Facts, j: Judgement) -> None:
    """The leak on a memory line: floors in the history, else the bundle's own window."""
    memory = _memory_series(f)
    if memory is None:
        j.missing.append("a memory series")
        return
    if _history(f, memory[0]):
        _leak_in_history(f, j)
        return
    series = f.series[memory[0]]
    ratchet = shapes.ratchet(series, fmt=_gib)
    if ratchet.verdict:
        j.add(3, f"{memory[1]} ratcheted: {ratchet.why}")
        if f.has("kv_cache") and not shapes.climb(f.series["kv_cache"]).verdict:
            j.add(1, "the KV cache did not climb with it: the rise is not the cache")
    else:
        floor = shapes.flat_floor(series, fmt=_gib)
        if floor.verdict:
            j.evidence_against.append(f"the floor is flat between bursts: {floor.why}")
        else:
            j.evidence_against.append(f"{memory[1]}: {ratchet.why}")
    if f.has("kv_cache") and shapes.climb(f.series["kv_cache"]).verdict:
        j.evidence_against.append("the rise tracks the KV cache (context creep)")
    step = shapes.step(series, fmt=_gib)
    if step.verdict and (step.size or 0) > 0 and not ratchet.verdict:
        j.evidence_against.append(f"one step that stays, not a ratchet: {step.why}")
    rhythm = shapes.daily_rhythm(series, fmt=_gib)
    if rhythm.verdict:
        j.evidence_against.append(f"a daily rhythm, which is not a trend: {rhythm.why}")


def _unload_staircase(f: Facts) -> str | None:
    """A leak need not come in bursts: the card's use at each bundle where its manager said
    nothing was loaded is its true floor, and a floor that rises unload after unload and
    never comes back is the runtime leaking (a staircase)."""
    empty = [(used, total) for _, used, total, nothing in f.card_bundles if nothing]
    if len(empty) < LEAK_MIN_STRETCHES:
        return None
    levels = [used for used, _ in empty]
    onset = _rising_floors(levels, max(LEAK_SHARE * empty[-1][1], PROCESS_LEAK_BYTES))
    if onset is None:
        return None
    return (
        "with its manager saying nothing was loaded, the card held "
        f"{', '.join(_gib(v) for v in levels[onset:])} bundle after bundle: each unload "
        "left more behind"
    )


def _leak_per_process(f: Facts, j: Judgement, named: bool) -> None:
    """One process followed through the host's earlier bundles and this one: its resident
    memory floor higher at each bundle than at the last, by a size that matters. Named
    even before anything fails; where a memory line already showed the leak (`named`), the
    process is who leaked, not a second leak."""
    for name, said in _grown(f):
        if name in DESKTOP_APPS:
            # Through a waking day a browser gains tabs and a shell windows: its user's day.
            j.evidence_against.append(f"{said}: a desktop app growing with its user's day")
        elif not is_engine(name) and _window(f).failure and (_ran_low(f) or _machine_killed(f)):
            j.evidence_against.append(
                f"{said}: another process than the engines grew until the machine ran out, "
                "which is the host running out (host-exhaustion)"
            )
        else:
            if named:
                # The same rise the memory line weighed: who leaked, not a second leak.
                j.evidence_for.append(f"{said}: the process that leaked")
            else:
                j.add(3, said)
            return


def _grown(f: Facts) -> list[tuple[str, str]]:
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
        onset = _rising_floors(levels, PROCESS_LEAK_BYTES)
        if onset is None or levels[-1] < PROCESS_LEAK_FACTOR * levels[onset]:
            continue
        rises = sum(b > a for a, b in zip(levels[onset:], levels[onset + 1 :], strict=False))
        out.append(
            (
                key.split(" ", 1)[1],
                f"pid {key} grew from {_gib(levels[onset])} to {_gib(levels[-1])} resident "
                f"over {len(levels) - onset} bundles of this host, each floor above the last "
                f"({rises} of {len(levels) - onset - 1} rose); read from the archive",
            )
        )
    return out


def _grew_other(f: Facts) -> str | None:
    """A process other than the engines and the desktop whose floor rose bundle after
    bundle: what the machine ran out for."""
    for name, said in _grown(f):
        if not is_engine(name) and name not in DESKTOP_APPS:
            return f"{said}: not an engine"
    return None


def _quiet_floors(f: Facts, name: str, series: shapes.Series) -> list[tuple[float, float]]:
    """The memory floor of each two-hour stretch, read where the engine was quiet when its
    load was read at the same instants (a busy evening's floor is not a leak), else over the
    whole stretch."""
    same = f.origin.get("requests_running") == f.origin.get(name)
    running = f.series.get("requests_running", []) if same else []
    quiet_at = {t for t, v in running if v == 0}
    stretches: dict[int, list[float]] = {}
    for t, v in series:
        if v is not None and (not quiet_at or t in quiet_at):
            stretches.setdefault(int(t // LEAK_STRETCH_S), []).append(v)
    return [
        (k * LEAK_STRETCH_S, shapes.quantile(vs, QUIET_FLOOR_QUANTILE))
        for k, vs in sorted(stretches.items())
        if len(vs) >= 3
    ]


def _leak_in_history(f: Facts, j: Judgement) -> None:
    """Floors between busy spells that rise stretch after stretch and never come back in
    the quiet hours, on any memory line (the card's or the host's), up to the failure."""
    w = _window(f)
    for name, label in _leaked_into(f):
        pool = _pool(f, name)
        upto = w.upto(f.series[name])
        floors = _quiet_floors(f, name, upto)
        if len(floors) < LEAK_MIN_STRETCHES:
            j.missing.append(f"{label}: floors in {LEAK_MIN_STRETCHES} quiet stretches")
            continue
        levels = [v for _, v in floors]
        share = LEAK_SHARE if _is_card(name) else LEAK_SHARE_HOST
        share *= 1 if w.failure else LEAK_UNFAILED
        limit = _engine_limit(f)
        if limit and name == "memory_used":
            # Killed by its own memory limit: the pool it ran out of is the limit, whose
            # size the kill line gives (the victim's resident memory), not the machine.
            pool, share = limit, LEAK_SHARE
        elif w.failure and w.failure.dated_by.source == "kill":
            share = LEAK_SHARE  # the machine ran out and took the engine: the end agrees
        least, ceiling = (share * pool, FULL_SHARE * pool) if pool else (math.inf, math.inf)
        # A box that ran near full all day has little room: a rise that ate most of what
        # was left, up to memory running out, is the leak whatever its share of the pool.
        room = pool if pool and _memory_ran_out(f) else None
        onset = _rising_floors(levels, least, ceiling, room)
        said = f"from {_gib(levels[0])} to {_gib(levels[-1])} over {len(levels)} stretches"
        release = _release(f, name, floors) if onset is None else None
        if release is not None:
            # The engine's death (the line collapses and stays down) or a restart released
            # what leaked: the readings up to it are the leak, what follows is a new
            # process's (or none). The stretch it fell in keeps its readings before it.
            released = _quiet_floors(f, name, [(t, v) for t, v in upto if t < release])
            if len(released) >= LEAK_MIN_STRETCHES:
                floors, levels = released, [v for _, v in released]
                onset = _rising_floors(levels, least, ceiling, room)
        own = _less_the_card(f, floors) if name == "memory_used" and onset is not None else None
        if own and _rising_floors([v for _, v in own], least, ceiling, room) is None:
            j.evidence_against.append(
                f"the {label} floor rose with the accelerator's: less the card's it went from "
                f"{_gib(own[0][1])} to {_gib(own[-1][1])} and did not ratchet, nor did the "
                "card's own floors: models loaded into the shared pool"
            )
            return
        elsewhere = (
            not _is_card(name)
            and onset is not None
            and (
                _outlived_the_engine(f, name, levels[onset], levels[-1])
                or (
                    name == "memory_used"
                    and (_held_elsewhere(f, levels) or _a_day_round(f, upto, levels[-1]))
                )
            )
        )
        if elsewhere:
            j.evidence_against.append(elsewhere)
            return
        one_card = onset is not None and name != "accelerator_used" and _is_card(name)
        if one_card and (moved := _moved_between_cards(f, floors[onset:], release)):
            j.evidence_against.append(f"the {label} floor rose {moved}")
            continue
        if onset is not None:
            hours = (w.end - floors[onset][0]) / HOUR_S
            rose = f"from {_gib(levels[onset])} to {_gib(levels[-1])} over the last {hours:.0f} h"
            flat = f", level before that at {_gib(levels[0])}" if onset else ""
            j.add(3, f"the {label} floor rose in the quiet hours and never came back: {rose}{flat}")
            if stepped := _one_step(f, name, floors[onset:], pool):
                if climbed := _engine_climbed(f, name, label, least):
                    # The jump is the last hours' climb to the failure, not a step.
                    j.evidence_for.append(climbed)
                    return
                j.score -= 2
                j.evidence_against.append(stepped)
                return
            cache = [n for n in ("kv_cache", "context_high_water") if _history(f, n)]
            # The cache tracks the rise where it climbed with it, or where it rose past its
            # usual range in the hour before the failure while most of the rise came in the
            # incident window (a floor that rose all day did not wait for the cache).
            earlier = [v for t, v in floors[onset:] if t < w.start]
            late = not earlier or levels[-1] - earlier[-1] >= (levels[-1] - levels[onset]) / 2
            # A high-water only rises: where the prompts, read directly, kept their length,
            # its slow climb through the day is its nature, not the conversations growing
            # (a jump past anything earlier still is).
            lengths = _prompt_lengths(f)
            natural = lengths is not None and lengths[0] is False
            tracked = [
                n
                for n in cache
                if (
                    shapes.climb(w.upto(f.series[n])).verdict
                    and not (n == "context_high_water" and natural)
                )
                or (late and (now := _against_usual(w, f.series[n])) and _rose_past(*now))
            ]
            reloaded = [said for _, said, grew in _model_contexts(f) if grew]
            # Without a context reading, llama-server's card climbing past the whole day in
            # the hour before, after a day held within half of that, is the context's record.
            kept = not cache and name == "accelerator_used" and _card_kept_the_context(f)
            # The prompts growing longer for answers of the same size while the floor, level
            # through the hours before the incident window, rose in it: the conversations'
            # rise, whatever the high water says (at the most a slot holds it cannot
            # climb). A floor already climbing before is a leak the prompts happened beside;
            # and where the cache's own use was read, a cache with room did not take it.
            inside = levels[-1] - (earlier or levels[onset : onset + 1])[-1]
            before = [v for t, v in floors if w.start - 2 * INCIDENT_S <= t < w.start]
            prompts = (
                lengths[1]
                if lengths
                and lengths[0]
                and "kv_cache" not in cache
                and len(before) >= 2
                and max(before) - min(before) <= inside / 2
                else None
            )
            if tracked or reloaded or kept or prompts:
                j.score -= 1
                j.evidence_against.append(
                    f"the rise tracks the {tracked[0].replace('_', ' ')} (context creep)"
                    if tracked
                    else f"the rise came with reloads of the model at longer contexts "
                    f"({reloaded[0]} tokens): the cache, not a leak"
                    if reloaded
                    else f"most of it came late: {kept}"
                    if kept
                    else f"it rose in the hours the prompts grew longer ({prompts}): the "
                    "context's, not a leak"
                )
            elif cache:
                read = " or ".join(n.replace("_", " ") for n in cache)
                j.add(1, f"the {read} did not climb with it: the rise is not the context")
            return
        climbed = _engine_climbed(f, name, label, least)
        if climbed:
            j.add(3, climbed)
            return
        low = levels.index(min(levels))
        if levels[-1] - levels[low] >= least and levels[-1] <= max(levels[: low + 1]):
            j.evidence_against.append(
                f"the {label} floor climbed back from {_gib(levels[low])} to where it was "
                f"before ({said}): a reload, not a leak"
            )
        elif pool and abs(levels[-1] - levels[0]) < LEAK_SHARE * pool:
            j.evidence_against.append(f"the {label} floor is flat between bursts: {said}")
        else:
            j.evidence_against.append(f"the {label} floor did not ratchet: {said}")


def _less_the_card(f: Facts, floors: list[tuple[float, float]]) -> list[tuple[float, float]] | None:
    """The host's floors less the card's at the same stretches, where the two share one
    pool: the card's largest jump between two stretches, the size of a model, shows in the
    host's floors as much (a discrete card's load leaves the host's line where it was).
    None where nothing says the pool is shared."""
    if not _history(f, "accelerator_used"):
        return None
    card = _card_floors(f)
    host = [(t, v) for t, v in floors if t in card]
    pairs = list(zip(host, host[1:], strict=False))
    if not pairs:
        return None
    (t0, h0), (t1, h1) = max(pairs, key=lambda p: card[p[1][0]] - card[p[0][0]])
    jump = card[t1] - card[t0]
    if jump < MODEL_MIN_BYTES or h1 - h0 < SHARED_JUMP * jump:
        return None
    return [(t, v - card[t]) for t, v in host]


def _card_floors(f: Facts) -> dict[float, float]:
    """The card's quiet floors up to the failure, by the stretch they begin."""
    return dict(_quiet_floors(f, "accelerator_used", _window(f).upto(f.series["accelerator_used"])))


def _held_elsewhere(f: Facts, levels: list[float]) -> str | None:
    """Why the host's rise is not the engines': at the capture it is still held (nothing
    died or was given back), the engines hold less than ENGINE_HELD of it (their resident
    memory and, on a unified machine, their accelerator memory) and another process, or
    processes of one name, at least that. A job's working set, a notebook, a build: another
    process's growth, however the floors look."""
    if not f.measured("processes") or _recent_kills(f):
        return None
    now = [v for _, v in f.series.get("memory_used", []) if v is not None]
    if not now or now[-1] < RELEASED * levels[-1]:
        return None
    rise = levels[-1] - min(levels)
    engines = {p["pid"] for p in f.processes if is_engine(p["name"] or "")}
    held = sum(p["rss_bytes"] or 0 for p in f.processes if p["pid"] in engines)
    if any(d["unified_memory"] for d in f.gpu_devices):
        listed = [p["used_bytes"] or 0 for p in f.gpu_processes if p["pid"] in engines]
        card = _values(f, "accelerator_used")
        held += sum(listed) if listed else (card[-1] if card else 0.0)
    if came := _arrival(f):
        # However much the engines hold (their weights, all day), it is the arrival that
        # the floor rose for.
        return f"{came}: the floor rose for it"
    other, most, _ = _largest_other(f)
    if held >= ENGINE_HELD * rise or most < ENGINE_HELD * rise:
        return None
    return (
        f"the engines hold {_gib(held)} at the capture and {other} {_gib(most)}, of the "
        f"{_gib(rise)} the floor rose and still held: another process's growth, not the "
        "engine's"
    )


def _outlived_the_engine(f: Facts, name: str, floor: float, risen: float) -> str | None:
    """The kernel killed and the engine went down: had the engine leaked the rise, its
    death gave the rise back (its whole memory with it, to below the floor the rise began
    from). The machine still holding a good share of the rise in the minutes after is
    another process's growth, the host running out, whatever the floors looked like."""
    w = _window(f)
    if not w.failure or not (_machine_killed(f) or _kills_in_history(f)):
        return None
    after = known([(t, v) for t, v in f.series[name] if w.end < t <= w.end + HELD_S])
    if not after or min(after) - floor < OUTLIVED_SHARE * (risen - floor):
        return None
    return (
        f"with the engine down the machine still held {_gib(min(after))}, "
        f"{_gib(min(after) - floor)} above the floor of {_gib(floor)} the rise began from: the "
        "rise outlived the engine, another process's growth (host-exhaustion)"
    )


def _a_day_round(f: Facts, series: shapes.Series, now: float) -> str | None:
    """Nothing failed, and a day earlier, where the look-back begins, the host's line stood
    about where its floor stands now (within a quarter of the day's swing); it fell in
    between while every engine ran on (each started before the fall, or, where the
    process table is not the engines' machine, each engine target up since). The engines'
    memory does not fall while they run: the rise is the day's round of something else
    (a desktop, a job), not a leak piling up."""
    pts = [(t, v) for t, v in series if v is not None]
    if _window(f).failure or not pts or pts[-1][0] - pts[0][0] < DAY_ROUND_S:
        return None
    before = _median([v for t, v in pts if t < pts[0][0] + DAY_ROUND_START_S])
    fell_at, low = min(pts, key=lambda p: p[1])
    if now - before > (now - low) / 4:
        return None
    engines = [p for p in f.processes if is_engine(p["name"] or "")]
    if engines:
        if any(p["started"] is None for p in engines):
            return None
        if any(p["started"] > fell_at for p in engines):
            return None  # an engine restarted since: the fall may be its release
    else:
        servers = [
            s
            for t, s in f.targets.items()
            if is_service(t) and not is_gateway(t) and up_since(s) is not None
        ]
        if not servers or not all(_up_through(s, fell_at, pts[-1][0]) for s in servers):
            return None
    return (
        f"the host's line stood at {_gib(before)} a day earlier, fell to {_gib(low)} "
        f"{_at(f, fell_at)} while the engines ran on, and rose back: the day's round of "
        "something else, not the engine's memory piling up"
    )


def _engine_ran_out(f: Facts) -> str | None:
    """How the engine's own memory ran out, if it did: the kernel took the engine with no
    other process holding much, or the engine's allocation failed on the card (the card
    running out, as the kernel's kill is the host running out)."""
    kills = [t for _, t in _recent_kills(f) if engine_kill(t)]
    if kills and not _culprit(f, kills[-1]):
        return "the kernel took the engine"
    if _card_ran_out(f):
        return "the engine's allocation failed"
    return _full_at_the_fall(f)


def _full_at_the_fall(f: Facts) -> str | None:
    """A scrape's view of the card running out, where no log line says so: a service's
    target went down with the card's line, in the minutes before, within LOW_AVAILABLE of
    its total. The death releases the memory; the readings before it are what it had."""
    w = _window(f)
    if not (w.failure and w.failure.dated_by.source == "target"):
        return None
    for card in ("", *f.cards):
        totals = _values(f, card_line("total", card))
        used = known(w.last(f.series.get(card_line("used", card), []), FULL_AT_FALL_S))
        if totals and used and max(used) >= (1 - LOW_AVAILABLE) * max(totals):
            which = f"card {card}" if card else "the card"
            held = f"{_gib(max(used))} of {_gib(max(totals))}"
            return f"the service went down with {which} full ({held})"
    return None


def _card_ran_out(f: Facts) -> bool:
    """The engine says, in the card's own words, that an allocation on it failed: in its
    log, or in the error a failed check or alert relayed (a gateway passes the engine's
    500 on: "CUDA error: out of memory")."""
    w = _window(f)
    told = [s.what for s in w.failure.signs if s.source != "target"] if w.failure else []
    return any(f.lines.get(tag) for tag in CARD_OOM_TAGS) or any(
        set(tags_of(what)) & set(CARD_OOM_TAGS) for what in told
    )


def _one_step(
    f: Facts, name: str, floors: list[tuple[float, float]], pool: float | None
) -> str | None:
    """Why most of the floors' rise is one step, not a ratchet; None when it is not. One
    jump between two stretches carries most of it, and it is a load: a server came up
    then, or nothing says the engine's own memory ran out, or the jump is the size of a
    model and came at once (a leak's remainders of one busy spell pile up over its
    hours)."""
    # A swap and back inside the run is no jump: the climb back is where it was before.
    # (The first and last floors stay, so the rise is the run's.)
    floors = _without_returned_dips(floors)
    levels = [v for _, v in floors]
    if name == "memory_used" and _history(f, "accelerator_used"):
        # On a shared pool what is loaded into the card shows in the host's line too. The
        # card's own floors were read first and did not ratchet: a host rise that is
        # mostly the card's is its models loading, not a leak.
        card = _card_floors(f)
        if floors[0][0] in card and floors[-1][0] in card:
            rose = card[floors[-1][0]] - card[floors[0][0]]
            if rose >= LEAK_ONE_JUMP * (levels[-1] - levels[0]):
                return (
                    f"the accelerator's floor rose {_gib(rose)} of it, without a ratchet: "
                    "models loaded into the shared pool"
                )
    jumped = _largest_jump(f, name, floors)
    if jumped is None:
        return None
    low, high = jumped
    size = levels[high] - levels[low]
    said = f"most of the rise is one jump of {_gib(size)} between two stretches"
    before, after = ((t, t + LEAK_STRETCH_S) for t in (floors[low][0], floors[high][0]))
    start, stop = before[0], after[1]
    ran_out = _engine_ran_out(f)
    if ran_out and _card_stayed(f, name, before, after):
        # A server that came up then (llama-swap swapping away and back) loaded nothing
        # onto the card: the host's jump that stayed is the engine's own, and it ran out.
        return None
    began = _began(f)
    if any(
        start <= t <= stop
        for target, series in f.targets.items()
        if is_service(target)
        for t in came_up(series, began)
    ):
        return f"{said}, as a server came up: a step, not a ratchet"
    if any(grew for _, _, grew in _model_contexts(f)):
        return f"{said}, as the model was reloaded with a longer context: a step, not a ratchet"
    if ran_out is None:
        return f"{said}: a step, not a ratchet"
    # The engine's own memory ran out: a jump too small for a model, or one that took
    # hours, is what one busy spell left behind.
    if size < max(MODEL_SHARE * (pool or 0), MODEL_MIN_BYTES):
        return None
    if _one_model(f):
        return None  # nothing here loads a second model: the jump is the engine's own
    span = [p for p in _window(f).upto(f.series[name]) if start <= p[0] <= stop]
    step = shapes.step(span, fmt=_gib)
    if step.verdict and _rise_time(span, step) <= LOAD_TAKES_S and not _rested(span, step):
        return f"{said}, the size of a model and at once: a step, not a ratchet"
    return None


def _largest_jump(f: Facts, name: str, floors: list[tuple[float, float]]) -> tuple[int, int] | None:
    """The floors between which most of the rise came: two neighbours (LEAK_ONE_JUMP of
    it), or two a stretch apart where the readings between rose at once. A step inside a
    stretch leaves that stretch's floor part before it, part after: the grid splits it
    into two jumps, neither most of the rise. Read over two stretches, a leak's busiest
    hours can look as sudden: there the jump must be nearly all of the rise
    (LEAK_SPLIT_JUMP), the floors around it level."""
    levels = [v for _, v in floors]
    for apart, most in ((1, LEAK_ONE_JUMP), (2, LEAK_SPLIT_JUMP))[: len(levels) - 1]:
        low = max(range(len(levels) - apart), key=lambda i: levels[i + apart] - levels[i])
        if levels[low + apart] - levels[low] <= most * (levels[-1] - levels[0]):
            continue
        if apart == 1:
            return low, low + 1
        start, stop = floors[low][0], floors[low + apart][0] + LEAK_STRETCH_S
        span = [p for p in f.series[name] if start <= p[0] < stop]
        step = shapes.step(span, fmt=_gib)
        if step.verdict and _rise_time(span, step) <= MODEL_LOADS_S and not _rested(span, step):
            return low, low + apart
    return None


def _rested(series: shapes.Series, step: shapes.Step) -> bool:
    """Whether the rise rested half-way: readings between a fifth and four fifths of the
    step for REST_S or more. A load fills without a pause; a ratchet's clicks, each busy
    spell's remainder, leave a level between them."""
    before, size = step.before or 0.0, step.size or 0.0
    middle = [
        t for t, v in series if v is not None and before + 0.2 * size <= v <= before + 0.8 * size
    ]
    return bool(middle) and middle[-1] - middle[0] >= REST_S


def _one_model(f: Facts) -> bool:
    """Nothing on this box loads a second model: no model manager (llama-swap, Ollama: they
    load on demand, and a log's tail holds only the latest loads) read or scraped, and at
    most one engine's server among the scrape targets and the engines read. A model is
    loaded by a server starting or a manager; without either, the engine's memory is its
    own."""
    if any(e["kind"] in ("llama-swap", "ollama") for e in f.engines) or any(
        is_manager(t) for t in f.targets
    ):
        return False
    servers = {t for t in f.targets if is_service(t) and not is_gateway(t)}
    return len(servers) <= 1 and len({e["url"] or e["name"] for e in f.engines}) <= 1


def _card_stayed(
    f: Facts, name: str, before: tuple[float, float], after: tuple[float, float]
) -> bool:
    """The host's line moved between two spans while the card's, read beside it, stayed
    where it was (its medians within a GiB): a model is loaded to be served from the card,
    so what moved is the engine's own host memory, not a model."""
    if name != "memory_used" or not _history(f, "accelerator_used"):
        return False
    card = _window(f).upto(f.series["accelerator_used"])
    spans = [known([(t, v) for t, v in card if a <= t <= b]) for a, b in (before, after)]
    if not all(spans):
        return False
    return abs(_median(spans[1]) - _median(spans[0])) < MODEL_MIN_BYTES


def _engine_climbed(f: Facts, name: str, label: str, least: float) -> str | None:
    """A leak's last hours need not leave floors: the line climbs without a pause to the
    kill. The kernel took the engine with no other process holding much and no cache
    climbing alongside: the engine's own memory, not its conversations."""
    w = _window(f)
    ended = _engine_ran_out(f)
    # Only the card's line is the engines' alone, and a kill is the host running out.
    went_down = (
        _is_card(name)
        and w.failure is not None
        and w.failure.dated_by.source == "target"
        and not _killed(f)
    )
    if ended is None and not went_down:
        return None
    series = f.series[name]
    busier = _busier(f)
    spans = [w.incident(series), _before_filled(w, series, _pool(f, name))]
    since = _since_level(w, series)
    if since and since[0][0] < w.start and not busier:
        # A climb of more hours than the incident window, under the usual load (under more,
        # it is the load's): a leak under load without a pause, which leaves no floors.
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
    cache = [n for n in ("kv_cache", "context_high_water") if _history(f, n)]
    if any(shapes.climb(w.incident(f.series[n])).verdict for n in cache):
        return None
    if any(grew for _, _, grew in _model_contexts(f)):
        return None  # Ollama reloading its model with ever longer contexts: the cache
    return (
        f"the {label} climbed through the hours before {ended}, with no cache climbing "
        "alongside and no other process holding much: quarter medians "
        f"{', '.join(_gib(m) for m in medians)}"
    )


def _since_level(w: Window, series: shapes.Series) -> shapes.Series:
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


def _climbed_quarters(levels: list[float], least: float) -> list[float] | None:
    """The quarter medians of readings that rose quarter on quarter without a pause, by
    `least` in all and not in one jump (a model loaded is a step; a second model's cache
    filling after it leaves a flat quarter either side); None when they did not. Quarters
    as even as the readings allow: the archive's half-hourly bundles give six readings in
    the three hours before, a scrape dozens."""
    if len(levels) < CLIMB_READINGS:
        return None
    cuts = [i * len(levels) // 4 for i in range(5)]
    medians = [_median(levels[a:b]) for a, b in zip(cuts, cuts[1:], strict=False)]
    rises = [b - a for a, b in zip(medians, medians[1:], strict=False)]
    total = medians[-1] - medians[0]
    if min(rises) <= 0.05 * total or total < least or max(rises) > LEAK_ONE_JUMP * total:
        return None
    return medians


def _before_filled(w: Window, series: shapes.Series, pool: float | None) -> shapes.Series:
    """Where the line's last readings sat at its pool's ceiling (before the death's
    release), the INCIDENT_S before it got there; else nothing. A full pool cannot climb
    further: an allocation that failed after hours at the ceiling had its climb before."""
    pts = [(t, v) for t, v in w.upto(series) if v is not None]
    i = _released_at(pts, max((v for _, v in pts), default=0.0))  # not readings of the climb
    full = i
    while pool and full > 0 and pts[full - 1][1] >= FULL_SHARE * pool:
        full -= 1
    if full == i or full == 0:
        return []
    filled = pts[full][0]
    return [(t, v) for t, v in pts if filled - INCIDENT_S <= t <= filled]


def _released_at(pts: list[tuple[float, float]], high: float) -> int:
    """Where the final run of readings under RELEASED of `high` begins (len(pts) when the
    last reading is above it): a death releases its memory, it does not return."""
    i = len(pts)
    while i > 0 and pts[i - 1][1] < RELEASED * high:
        i -= 1
    return i


def _release(f: Facts, name: str, floors: list[tuple[float, float]]) -> float | None:
    """With a failure, when the memory was released: the latest start of a service in the
    incident window (a target's `up` 0 -> 1), or the line dropping at its end and staying
    down (a death releases, it does not return). None when neither happened, or nothing
    failed."""
    w = _window(f)
    if not w.failure:
        return None  # nothing died: a restart then was a swap or an operator's
    releases = []
    for target, series in f.targets.items():
        pts = [(t, v) for t, v in series if v is not None]
        if is_service(target):
            releases += [
                t for (_, a), (t, b) in zip(pts, pts[1:], strict=False) if a == 0 and b == 1
            ]
    releases = [t for t in releases if w.start <= t <= w.end]
    # The final run of readings under RELEASED of the highest floor, begun in the
    # incident window: dense (Prometheus) or coarse (the archive, then the capture).
    pts = [(t, v) for t, v in f.series[name] if v is not None]
    i = _released_at(pts, max((v for _, v in floors), default=0.0))
    if 0 < i < len(pts) and pts[i][0] >= w.start:
        releases.append(pts[i][0])
    return max(releases, default=None)


def _rising_floors(
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


def _without_returned_dips(floors: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The floors without a dip of one or two stretches (a model's worth at least) after
    which the floor is back where it was before: a swap to another model and back, or a
    restart that reloaded. The engine's memory was elsewhere for a while; its climb back
    is no rise."""
    kept = floors[:1]
    i = 1
    while i < len(floors):
        for width in range(1, RETURNED_DIP_STRETCHES + 1):
            if i + width < len(floors) and _back_where_it_was(
                kept[-1][1], [v for _, v in floors[i : i + width]], floors[i + width][1]
            ):
                i += width
                break
        else:
            kept.append(floors[i])
            i += 1
    return kept


def _back_where_it_was(before: float, dip: list[float], after: float) -> bool:
    depth = before - max(dip)
    return depth > MODEL_MIN_BYTES and abs(after - before) <= FLOOR_NOISE * depth


def _killed(f: Facts) -> bool:
    """The OOM killer ran in the last hour (its line) or in the incident window (the
    kernel's counter), inside a limit or for the whole machine."""
    return bool(_recent_kills(f)) or _kills_in_history(f) > 0


def _recent_kills(f: Facts) -> list[tuple[float | None, str]]:
    """The OOM kills of the last hour (undated ones too): a kill long before the capture
    belongs to an earlier night."""
    return [(ago, text) for ago, text in f.oom_kills if ago is None or ago <= RECENT_KILL_S]


def _engine_limit(f: Facts) -> float | None:
    """The size of the engine when its own memory limit killed it, within the hour."""
    for _, text in reversed(_recent_kills(f)):
        if "Memory cgroup out of memory" in text:
            named = victim(text)
            if named and is_engine(named[0]) and named[1]:
                return float(named[1])
    return None


def _memory_lines(f: Facts) -> list[tuple[str, str]]:
    """Every memory line with history: the card's and the host's are read apart."""
    return [
        (name, label)
        for name, label in (("accelerator_used", "accelerator memory"), ("memory_used", "memory"))
        if _history(f, name)
    ]


def _leaked_into(f: Facts) -> list[tuple[str, str]]:
    """The lines a leak is read on: the memory lines, and before the host's its sum with
    swap where the kill gave swap back: on a machine at its ceiling, what the victim grew
    into."""
    lines = _memory_lines(f)
    if _swap_given_back(f) and _history(f, "memory_with_swap"):
        lines.insert(len(lines) - 1, ("memory_with_swap", "memory with swap"))
    # Then each card alone, where there are several: one card's leak is half as steep in
    # the sum of two.
    return lines + [(card_line("used", c), f"card {c} memory") for c in f.cards]


def _moved_between_cards(
    f: Facts, floors: list[tuple[float, float]], release: float | None
) -> str | None:
    """Why one card's rising floors are not its leak: the cards' sum, read over the same
    stretches (up to the same release), rose less than half as much. The others gave
    back what it took: a model or a split moved between cards."""
    upto = [
        p for p in _window(f).upto(f.series["accelerator_used"]) if p[0] < (release or math.inf)
    ]
    total = dict(_quiet_floors(f, "accelerator_used", upto))
    (start, low), (end, high) = floors[0], floors[-1]
    if start not in total or end not in total or total[end] - total[start] >= (high - low) / 2:
        return None
    return (
        f"{_gib(high - low)} while all the cards together rose {_gib(total[end] - total[start])}"
        ": the others gave it back, the memory moved between cards"
    )


def _is_card(name: str) -> bool:
    """A card's line: the cards' sum, or one card's own."""
    return name.split(" ", 1)[0] == "accelerator_used"


def _swap_given_back(f: Facts) -> bool:
    """Swap filled through the incident window and, in the minutes after the kill, gave
    SWAP_FILLED_BYTES back: the victim's own pages were in it."""
    w = _window(f)
    if not w.failure or not _killed(f):
        return False
    used = f.series.get("swap_in_use", [])
    # A scrape at the failure's instant already reads the death's release.
    before = [v for t, v in used if w.start <= t < w.end]
    after = [v for t, v in used if w.end <= t <= w.end + HELD_S]
    return (
        bool(before and after)
        and min(before[-1] - before[0], before[-1] - min(after)) >= SWAP_FILLED_BYTES
    )


def _pool(f: Facts, name: str) -> float | None:
    """The size of the pool a memory line is of: the card's total, else the host's."""
    if _is_card(name):
        totals = _values(f, name.replace("used", "total", 1))
        if totals:
            return max(totals)
    if name == "memory_with_swap" and f.memory_total:
        return f.memory_total + max(_values(f, "swap_total_history"), default=0.0)
    return f.memory_total


def _loaded(f: Facts) -> dict[str, list[str]] | None:
    """What each model manager says is loaded; None if none was read."""
    managers = [
        e["name"]
        for e in f.engines
        if e["kind"] in ("llama-swap", "ollama") and e["status"] == "ok"
    ]
    if not managers:
        return None
    return {
        m: sorted(
            {
                x["model"]
                for x in f.models
                if x["engine"] == m and (x["state"] in (None, "ready", "loaded"))
            }
        )
        for m in managers
    }


def _who(f: Facts, gpu_process: dict[str, Any]) -> dict[str, Any]:
    """A GPU process with the name and command line the process table has for its pid."""
    row = next((p for p in f.processes if p["pid"] == gpu_process["pid"]), None)
    return {**gpu_process, **({"name": row["name"], "cmdline": row["cmdline"]} if row else {})}


def preallocated(f: Facts) -> list[str]:
    """Discrete cards held mostly by an engine that takes a fixed share of the card at start
    (vLLM, SGLang): high and flat by design, what users ask about as a leak (vLLM #550). A
    unified pool is left out: there the same share is the host's memory too."""
    said = []
    for d in f.gpu_devices:
        total = d["memory_total_bytes"]
        if d["unified_memory"] or not total:
            continue
        for kind, setting in PREALLOCATES.items():
            holders = [
                p
                for p in f.gpu_processes
                if p["device_index"] == d["device_index"]
                and p["used_bytes"]
                and belongs(_who(f, p), kind)
            ]
            held = sum(p["used_bytes"] for p in holders)
            if held >= PREALLOCATED_SHARE * total:
                pids = ", ".join(str(p["pid"]) for p in holders)
                said.append(
                    f"{kind} (pid {pids}) holds {_gib(held)}, {held / total:.0%} of GPU "
                    f"{d['device_index']}: it takes that share at start for weights and its "
                    f"KV cache ({setting}), so high and flat is by design, not a leak"
                )
    return said


def _engine_holders(f: Facts) -> list[dict[str, Any]]:
    """Processes holding accelerator memory, largest first (unknown sizes last)."""
    return sorted(f.gpu_processes, key=lambda p: -(p["used_bytes"] or 0))


@rule("swap-not-unloaded")
def swap_not_unloaded(f: Facts) -> Judgement:
    j = Judgement()
    loaded = _loaded(f)
    one_model: str | None = None  # what says the manager's one model is alone
    if loaded is None:
        j.missing.append("a model manager's loaded set (llama-swap /running, Ollama /api/ps)")
    if not f.measured("gpu") or not f.gpu_devices:
        j.missing.append("per-process accelerator memory")
    elif loaded is not None:
        count = sum(len(models) for models in loaded.values())
        kinds = {e["kind"] for e in f.engines if e["name"] in loaded}
        # Only the processes the managers run: another engine's memory is not a model they
        # forgot (that is a squatter, or simply another tenant).
        # A manager runs whatever its config says (llama-swap may start vLLM): its own
        # children count too, whatever their name.
        children = _descendants(f, {p["pid"] for p in f.processes if _manager(p, kinds)})
        holders = [
            p
            for p in _engine_holders(f)
            if (p["used_bytes"] or 0) >= SQUAT_GPU_BYTES
            and (p["pid"] in children or any(belongs(_who(f, p), kind) for kind in kinds))
        ]
        said = "; ".join(f"{m} says {', '.join(v) or 'nothing'} loaded" for m, v in loaded.items())
        if not count:
            # Nothing listed: only llama-swap's own children speak against it (a process
            # of an engine's name elsewhere may be an orphan or another tenant), and not
            # while it starts or stops one (that memory is on its way in or out). Ollama
            # lists no model while it loads, so its runner holding memory is no contradiction.
            moving = any(m["engine"] in loaded and m["state"] for m in f.models)
            swaps = {p["pid"] for p in f.processes if _manager(p, {"llama-swap"})}
            kept = _descendants(f, swaps) if "llama-swap" in kinds and not moving else set()
            holders = [p for p in holders if p["pid"] in kept]
        if len(holders) > count:
            held = ", ".join(
                f"pid {p['pid']} {p['name'] or '?'} {_gib(p['used_bytes'])}" for p in holders
            )
            j.add(
                5,
                f"two sources disagree: {said}, the accelerator holds memory for "
                f"{len(holders)} process{'es' if len(holders) > 1 else ''} ({held})",
            )
        elif not count and (held := _held_beside_nothing(f)):
            if _unload_staircase(f):
                j.evidence_against.append(
                    f"{said}, yet {held}; but that memory grew at every unload: a leak in "
                    "the runtime, not one model kept"
                )
            else:
                j.add(3, f"two sources disagree: {said}, yet {held}")
        else:
            j.evidence_against.append(f"the model manager and the accelerator agree ({said})")
            # Alone only where the card said who holds it (NVML on a shared pool may not).
            if count == 1 and len(holders) == 1:
                one_model = "the manager lists one model and the card holds it alone"
    if loaded is not None and not f.gpu_processes:
        one_model = _one_model_in_log(f, loaded)
    overdue = _overdue(f) or _slept_holding(f) or _loaded_beside(f)
    if overdue:
        j.add(3, overdue)
    memory = _memory_series(f)
    if memory and _history(f, memory[0]):
        before = j.score
        _step_with_a_server(f, j, one_model)
        second = _second_engine(f) if j.score == before else None
        if second:
            j.add(3, second)
    elif memory:
        step = shapes.step(f.series[memory[0]], fmt=_gib)
        if step.verdict and (step.size or 0) > 0:
            ratchet = shapes.ratchet(f.series[memory[0]], fmt=_gib)
            if ratchet.verdict:
                # Bursts, each leaving the floor higher: the best single split of a
                # staircase is a step too, but no one load made it.
                j.evidence_against.append(
                    f"{memory[1]} rose in steps, one after each burst, not in one: {ratchet.why}"
                )
            else:
                j.add(2, f"{memory[1]} stepped up and stayed: {step.why}")
    return j


def _one_model_in_log(f: Facts, loaded: dict[str, list[str]]) -> str | None:
    """Where the card does not say who holds it (NVML on a shared pool lists nobody),
    Ollama's log says what it loaded: one model's weights, load after load (unloaded when
    idle, loaded again when asked), and the manager lists no other. A second model kept
    beside it would have a load line of its own."""
    weights = {load.model for load in f.loads}
    if len(weights) != 1 or len(f.loads) < 2 or sum(map(len, loaded.values())) > 1:
        return None
    return (
        f"the engine's log loads only {_blob(weights.pop())} ({len(f.loads)} times) and the "
        "manager lists no other model"
    )


def _loaded_beside(f: Facts) -> str | None:
    """The engine's last load in its log was of other weights than a runner still holding
    accelerator memory at the capture, and the card ran out: the model in place was not
    unloaded for the next (Ollama keeping a runner it should have evicted)."""
    if not f.loads or not _card_ran_out(f):
        return None
    wanted = f.loads[-1].model
    if any(grew and name == _blob(wanted) for name, _, grew in _model_contexts(f)):
        return None  # the load that failed asked for a longer context: the creep's
    for holder in _engine_holders(f):
        cmd = list(_who(f, holder).get("cmdline") or [])
        at = cmd.index("--model") + 1 if "--model" in cmd else len(cmd)
        if at >= len(cmd) or cmd[at] == wanted or (holder["used_bytes"] or 0) < SQUAT_GPU_BYTES:
            continue
        return (
            f"the log's last load was {_blob(wanted)} while pid {holder['pid']} still held "
            f"{_gib(holder['used_bytes'])} for {_blob(cmd[at])}, and the card ran out: the "
            "model in place was not unloaded for the next"
        )
    return None


def _blob(path: str) -> str:
    """A model's weights by their file's name, as short as the report can carry."""
    return path.rsplit("/", 1)[-1][:19]


def _held_beside_nothing(f: Facts) -> str | None:
    """A manager says nothing is loaded while a card that lists no processes (AMD, WSL)
    holds a model's worth. Where the list is read, the holders speak for themselves."""
    for d in f.gpu_devices:
        used, total = d["memory_used_bytes"], d["memory_total_bytes"]
        if not used or not total or d["unified_memory"]:
            continue
        listed = [p for p in f.gpu_processes if p["device_index"] == d["device_index"]]
        if _list_known(f, d, listed):
            continue
        if used >= max(MODEL_MIN_BYTES, MODEL_SHARE * total):
            return f"{d['name']} holds {_gib(used)} of {_gib(total)}"
    return None


def _overdue(f: Facts) -> str | None:
    """Ollama lists a model until its runner has stopped, with the time it was to be
    unloaded: a model still listed well past it is an unload that did not happen (what
    `ollama ps` shows as 'Stopping...')."""
    captured = f.bundle["started_at"].timestamp()
    for m in f.models:
        when = _instant(m.get("expires_at"))
        if when is not None and captured - when > OVERDUE_S:
            size = f" ({_gib(m['size_bytes'])})" if m["size_bytes"] else ""
            return (
                f"{m['engine']} still lists {m['model']}{size} "
                f"{(captured - when) / 60:.0f} min after it was to be unloaded"
            )
    return None


def _slept_holding(f: Facts) -> str | None:
    """An engine that says it put its model away while the memory stayed. vLLM's sleep mode
    says what it freed and what is still in use: a sleep that freed less than stayed did
    not put the model away (sleep without its allocator is a no-op). llama-server says only
    that it is sleeping (--sleep-idle-seconds): its process still holding a model's worth
    of the card after its last such line is the same unload that did not happen."""
    for line in reversed(f.lines.get("engine-sleep", [])):
        m = re.search(r"Sleep mode freed ([\d.]+) GiB memory, ([\d.]+) GiB memory is still", line)
        if m:
            freed, kept = (float(g) * GIB for g in m.groups())
            if kept >= MODEL_MIN_BYTES and freed < kept:
                return (
                    f"the engine went to sleep and freed {_gib(freed)}, with {_gib(kept)} "
                    f"still in use: {line[:160]}"
                )
            return None
        if "exiting sleeping state" in line:
            return None  # awake again: its memory is its model's
        if "entering sleeping state" in line:
            held = [
                p
                for p in _engine_holders(f)
                if (p["used_bytes"] or 0) >= MODEL_MIN_BYTES and belongs(_who(f, p), "llama-server")
            ]
            if held:
                return (
                    f"the engine said it is sleeping ({line[:120]}) while pid {held[0]['pid']} "
                    f"still holds {_gib(held[0]['used_bytes'])} of the accelerator"
                )
            return None
    return None


def _instant(text: str | None) -> float | None:
    """An RFC 3339 time as Go writes it (nanoseconds, a zone) in unix seconds."""
    if not text:
        return None
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?$", text)
    if not m:
        return None
    zone = "+00:00" if m.group(3) in (None, "Z") else m.group(3)
    base = datetime.fromisoformat(m.group(1) + zone).timestamp()
    return base + float(f"0.{m.group(2) or 0}")


def _manager(process: dict[str, Any], kinds: set[str]) -> bool:
    name = (process["name"] or "").lower()
    return any(kind in ("llama-swap", "ollama") and kind in name for kind in kinds)


def _descendants(f: Facts, roots: set[int]) -> set[int]:
    """Every process below the given pids in the process table."""
    children: dict[int, list[int]] = {}
    for p in f.processes:
        children.setdefault(p["ppid"], []).append(p["pid"])
    found, todo = set(), list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _step_with_a_server(f: Facts, j: Judgement, one_model: str | None) -> None:
    """A step up the size of a model that stays to the failure, at the moment a second
    server came up: the seeds' decisive coincidence, sized against the machine. Where the
    manager's one model is known to be alone (`one_model` says how), the step was that
    model loading."""
    w = _window(f)
    came_up = _servers_started(f)
    for name, label in _memory_lines(f):
        pool = _pool(f, name) or 0
        series = w.upto(f.series[name])
        model = max(MODEL_SHARE * pool, MODEL_MIN_BYTES)
        # Both levels must last a tenth of what is read: a long look for an old step, a
        # short one for a model loaded minutes before the failure. A long look that finds
        # only a ripple on a flat day does not hide the model-sized step a short one finds.
        steps = [
            found
            for hours in SWAP_LOOKS_H
            if (
                found := shapes.step(
                    [p for p in series if p[0] >= w.end - hours * HOUR_S], fmt=_gib
                )
            ).verdict
            and (found.size or 0) > 0
        ]
        if not steps:
            continue
        step = next((s for s in steps if (s.size or 0) >= model), steps[0])
        size = step.size or 0
        if size < model:
            j.evidence_against.append(
                f"the {label} step is {_gib(size)}, too small for a second model on "
                f"{_gib(pool)}: {step.why}"
            )
            continue
        began, reached = _rise(series, step)
        took = reached - began
        if _card_stayed(f, name, (began - HOUR_S, began), (reached, reached + HOUR_S)):
            j.evidence_against.append(
                f"the {label} stepped up {_gib(size)} while the accelerator's line stayed "
                "where it was: the engine's own memory, not a model loaded to be served"
            )
            continue
        if took > LOAD_TAKES_S and _passed_between(series, step, began, reached):
            # A model loads within the hour; a level reached over hours is a climb (a leak, a
            # growing cache) that a split into two levels only approximates. Hours with no
            # reading between the levels are a level held (a smaller model) and then a jump.
            j.evidence_against.append(
                f"the {label} rose {_gib(size)} over {took / HOUR_S:.1f} h: a climb, not a "
                "model loaded at once"
            )
            continue
        # A server that came up while none went down: a model added, not one swapped for
        # another (a hand-over replaces the memory, it does not step it up).
        fell_at = [t for t in (fell(series) for series in f.targets.values()) if t is not None]
        # A model loads and its cache fills over a ramp: a server that came up anywhere on
        # it, or within COINCIDE_S of it, came with the step.
        with_server = [
            (t, target)
            for t, target in came_up
            if began - COINCIDE_S <= t <= reached + COINCIDE_S
            and not any(abs(t - down) <= COINCIDE_S for down in fell_at)
        ]
        holders = [p for p in f.gpu_processes if (p["used_bytes"] or 0) >= SQUAT_GPU_BYTES]
        # Only the card's line is the engines' alone: the host's earlier levels may be
        # anything else's (a build, a browser).
        if (
            not with_server
            and name == "accelerator_used"
            and (stood := _stood_there(series, began, step.after, model))
        ):
            j.evidence_against.append(
                f"the {label} stepped up {_gib(size)} to where it stood for an hour earlier "
                f"({_gib(stood[1])} {_at(f, stood[0])}): the model loaded on demand again, "
                "not a second one"
            )
            continue
        if not with_server and name == "memory_used" and (came := _arrival(f)):
            # The host's line holds every process: one that arrived and holds the step is
            # what stepped it, not a model.
            j.evidence_against.append(f"the {label} step of {_gib(size)} is no model: {came}")
            continue
        climbed = not with_server and _engine_climbed(f, name, label, model)
        if climbed:
            # A split into two levels fits a climb too: quarter after quarter without a
            # pause up to the engine running out is no model loaded at once.
            j.evidence_against.append(f"the {label} step of {_gib(size)} is no load: {climbed}")
            continue
        if not with_server and _one_model(f):
            j.evidence_against.append(
                f"the {label} stepped up {_gib(size)}, but nothing here loads a second model "
                "(no model manager, one engine's server): the engine's own memory"
            )
            continue
        alone = len(holders) < 2 and (f.engine_targets_up or 0) < 2
        if with_server and alone and (one_model or not w.failure):
            t, target = with_server[0]
            j.add(1, f"{label} stepped up {_gib(size)} as {target} came up: a model loaded")
        elif (
            with_server
            and not w.failure
            and f.bundle["trigger_kind"] == "cron"
            and (step.after or 0) < ROOM_LEFT * pool
        ):
            # A routine snapshot, nothing failed and the line kept room: two models side by
            # side by design, a note until memory runs short (a person looking is told).
            t, target = with_server[0]
            j.add(
                1,
                f"{label} stepped up {_gib(size)} as {target} came up and stayed, at "
                f"{_gib(step.after or 0)} of {_gib(pool)}: a second model, with room to spare",
            )
        elif with_server:
            t, target = with_server[0]
            j.add(
                3,
                f"{label} stepped up {_gib(size)} {_at(f, step.t_change or t)} as {target} "
                f"came up, and stayed: {step.why}",
            )
            if len(holders) >= 2:
                held = ", ".join(
                    f"pid {p['pid']} {_who(f, p).get('name') or '?'} {_gib(p['used_bytes'])}"
                    for p in holders
                )
                j.add(2, f"the accelerator holds memory for {len(holders)} models: {held}")
        elif w.failure and (step.t_change or 0) < w.start - KEPT_LOOK_S:
            # Loaded many hours before the failure and served since: not what this
            # failure came from.
            j.add(1, f"{label} stepped up {_gib(size)} {_at(f, step.t_change or 0)}: {step.why}")
        elif reloaded := [(n, said) for n, said, grew in _model_contexts(f) if grew]:
            # Ollama starts a new runner for a longer context too: the same model, bigger.
            j.evidence_against.append(
                f"the {label} step of {_gib(size)} is {reloaded[0][0]} reloaded with a longer "
                f"context ({reloaded[0][1]}), not a second model"
            )
        elif w.failure and (step.t_change or 0) < w.start:
            # Hours before the incident window: the model that stayed is what this failure
            # came from only if memory then ran out, and the step is a model's size,
            # loaded in minutes (a leak's hour of climbing reads as a step this far back).
            big = size >= BIG_MODEL_SHARE * pool and took <= MODEL_LOADS_S and _memory_ran_out(f)
            j.add(
                3 if big else 1,
                f"{label} stepped up {_gib(size)} {_at(f, step.t_change or 0)}"
                + (f" ({size / pool:.0%} of {_gib(pool)}) and stayed until {w.failure.what}"
                   if big else "") + f": {step.why}",
            )  # fmt: skip
        elif w.failure and w.failure.timed_out and size >= BIG_MODEL_SHARE * pool and one_model:
            # The manager lists one model and the card holds it alone: nothing was kept
            # beside it, the step is that model loaded when it was asked for. Only where the
            # engine lived through the failure (an answer too late) is the list at the
            # capture the one of the hours before: a kill and a restart leave another.
            j.evidence_against.append(
                f"the {label} stepped up {_gib(size)}, the size of a model, but {one_model}: "
                "that model loaded on demand"
            )
        elif w.failure and size >= BIG_MODEL_SHARE * pool and _loaded(f) is not None:
            j.add(
                3,
                f"{label} stepped up {_gib(size)} ({size / pool:.0%} of {_gib(pool)}, the size of "
                f"a model) and stayed until {w.failure.what}: {step.why}",
            )
        elif _loaded(f) is not None:
            j.add(2, f"{label} stepped up {_gib(size)} and stayed: {step.why}")
        else:
            # No manager loads models here and no server came up: a shape, not a model.
            j.add(1, f"{label} stepped up {_gib(size)} and stayed: {step.why}")
        return


def _stood_there(
    series: shapes.Series, began: float, level: float | None, model: float
) -> tuple[float, float] | None:
    """When, before a step began, the line held the step's new level for an hour (an
    hourly median within half a model of it, or above): a manager that loads its model on
    demand and unloads it when idle steps to the same level every time. A second model
    kept takes the line higher than a day of single loads did."""
    if level is None:
        return None
    hours = _by_hour([(t, v) for t, v in series if t < began - HOUR_S])
    top = max(((k, _median(vs)) for k, vs in hours.items()), key=lambda kv: kv[1], default=None)
    if top is None or top[1] < level - model / 2:
        return None
    return top[0] * HOUR_S, top[1]


def _second_engine(f: Facts) -> str | None:
    """An engine's server that came up in the hours before the failure beside another that
    stayed up through it, and then the memory ran out: two models on one pool. A full pool
    may let the second one add little to the line; the coincidence is the evidence. A
    hand-over (one down as the other comes up) is a swap that worked."""
    w = _window(f)
    if not w.failure or not _memory_ran_out(f):
        return None
    fell_at = [t for t in (fell(series) for series in f.targets.values()) if t is not None]
    engines = {t: s for t, s in f.targets.items() if is_service(t) and not is_gateway(t)}
    began = _began(f)
    for target, series in engines.items():
        came = [t for t in came_up(series, began) if w.start <= t <= w.end]
        if not came or any(abs(came[-1] - down) <= COINCIDE_S for down in fell_at):
            continue
        beside = [
            other
            for other, s in engines.items()
            if other != target and _up_through(s, came[-1] - COINCIDE_S, w.failure.at - 60)
        ]
        if beside:
            return (
                f"{target} came up {_at(f, came[-1])} beside {beside[0]}, which stayed up, and "
                f"then {w.failure.what}: a second model loaded without the first unloaded"
            )
    return None


def _stalled(f: Facts) -> bool:
    """Tasks stalled on memory at the capture, past PSI_SOME_HIGH (PSI some avg10), or
    through the hour before it, past PSI_HISTORY_HIGH (node-exporter's counter), or, on
    macOS (no PSI), memory pushed out of RAM past the day's usual before the failure."""
    if max(_values(f, "psi_some"), default=0.0) >= PSI_SOME_HIGH:
        return True
    shares = _stall_shares(f)
    if shares is not None and shares[0] >= PSI_HISTORY_HIGH:
        return True
    pushed = _pushed_out(f)
    return bool(pushed and pushed[0])


def _memory_ran_out(f: Facts) -> bool:
    """Memory ran out at the failure: the OOM killer, or an allocation that failed."""
    tags = (*CARD_OOM_TAGS, "host-alloc-fail", "unit-oom")
    return bool(_recent_kills(f)) or any(f.lines.get(tag) for tag in tags)


def _began(f: Facts) -> float:
    return history_began(f.targets, 0.0)


def _up_through(series: shapes.Series, start: float, end: float) -> bool:
    """The target read up at every reading from `start` to `end` (and read in that time)."""
    seen = [v for t, v in series if v is not None and start <= t <= end]
    return bool(seen) and all(v == 1 for v in seen)


def _rise_time(series: shapes.Series, step: shapes.Step) -> float:
    """Seconds the series took to go from a tenth of the step above the old level to a
    tenth below the new one, around the step's time."""
    began, ended = _rise(series, step)
    return ended - began


def _rise(series: shapes.Series, step: shapes.Step) -> tuple[float, float]:
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


def _passed_between(series: shapes.Series, step: shapes.Step, began: float, reached: float) -> bool:
    """Whether the line, on its way from `began` to `reached`, read anything between a fifth
    and four fifths of the step: a climb passes through, a jump does not."""
    before, size = step.before or 0.0, step.size or 0.0
    return any(
        began < t < reached and before + 0.2 * size <= v <= before + 0.8 * size
        for t, v in series
        if v is not None
    )


def _servers_started(f: Facts) -> list[tuple[float, str]]:
    """Model servers' targets that came up during the look-back (0 -> 1, or first seen up
    after the history began) and were still up at its end or at the failure: the server
    that came up with its model is often the one that dies of the memory it could not
    get. A gateway coming back (a restart, a missed scrape) loads no model of its own: the
    servers it starts are targets of their own."""
    first_seen = _began(f)
    w = _window(f)
    started = []
    for target, series in f.targets.items():
        upto = w.upto(series)
        since = up_since(upto)
        if not is_service(target) or is_gateway(target) or since is None:
            continue
        if rose(upto) is not None or since - first_seen > HOUR_S:
            started.append((since, target))
    return started


@rule("host-exhaustion")
def host_exhaustion(f: Facts) -> Judgement:
    j = Judgement()
    if not f.measured("kernel"):
        j.missing.append("the kernel log")
    kills = _recent_kills(f)
    if kills:
        ago, text = kills[-1]
        when = "" if ago is None else f" {max(ago, 0) / 60:.0f} min before the capture"
        if "Memory cgroup out of memory" in text and engine_kill(text):
            # The engine's own limit (its unit's MemoryMax=, its container's): named as such.
            j.add(3, f"the OOM killer ran{when} inside the engine's memory limit: {text[:200]}")
            j.evidence_against.append(
                "the kill was the engine's own cgroup limit (CONSTRAINT_MEMCG), not the whole "
                "machine running out: check the unit's MemoryMax= or the container's limit"
            )
        elif "Memory cgroup out of memory" in text and _services(f):
            # Another group's limit beside the services: its process was killed inside its
            # own fence, which says nothing of the machine or the engines.
            j.add(1, f"an OOM kill{when} inside another memory limit, context only: {text[:160]}")
            j.evidence_against.append(
                "the only kill was another cgroup's limit, not the machine running out"
            )
        elif "Memory cgroup out of memory" in text:
            j.add(3, f"the OOM killer ran{when} inside a memory limit: {text[:200]}")
            j.evidence_against.append(
                "the kill was a cgroup's limit (CONSTRAINT_MEMCG), not the whole machine "
                "running out: check the unit's MemoryMax= or the container's limit"
            )
        elif ago is not None and ago > LIVE_OUTRANKS_S and _live_hang(f):
            # The kill was earlier; what the capture saw live is a hang, the fault of the
            # moment: the kill is its context.
            j.add(2, f"the OOM killer ran{when}: {text[:200]}")
            j.evidence_against.append(
                "the capture found the port accepting and nothing answering: a live hang "
                "after the kill is the fault of the moment"
            )
        else:
            j.add(4, f"the OOM killer ran{when}: {text[:200]}")
        # A process seen growing bundle after bundle needs no reading of the lowest point
        # beside a kill of the whole machine; one merely large does.
        if _ran_low(f):
            culprit = _culprit(f, text)
        else:
            culprit = _grew_other(f) if _machine_killed(f) else None
        if culprit:
            j.add(2, culprit)
        elif engine_kill(text):
            name, most, group = _largest_other(f)
            j.evidence_against.append(
                f"the victim was the engine and {name}, the largest other, is no culprit: "
                f"{furniture}; the engine's own growth ran the machine out"
                if (furniture := _furniture(f, group, most))
                else "the victim was the engine and no other process held much: the engine's "
                "own growth ran the machine out"
            )
    elif f.lines.get("unit-oom"):
        j.add(
            3, f"systemd says the OOM killer killed a process of the unit: {_last(f, 'unit-oom')}"
        )
    elif _killed_unseen(f):
        j.add(
            3,
            f"{_window(f).failure.what}: outright, while macOS pushed memory out of RAM; its "
            "memory killer (jetsam) took it and logs nothing to the kernel log",
        )
    elif _window(f).failure and _ran_low(f) and not _stalled(f) and (grew := _grew_other(f)):
        # Nothing killed, and no stall to be the story: the process that grew into the
        # machine's memory is what it ran out for.
        j.add(2, grew)
    elif f.oom_kills:
        ago, text = f.oom_kills[-1]
        j.add(1, f"an OOM kill {ago / 3600:.1f} h before the capture, too early to be this "
              f"fault's: {text[:160]}")  # fmt: skip
    if f.lines.get("host-alloc-fail"):
        j.add(2, f"an allocation failed: {_last(f, 'host-alloc-fail')}")
    pool = _pool_full(f)
    if pool:
        j.add(3, pool)
    # Without another process seen growing, the machine running out is how the engine's
    # own growth ended (a leak, a second model, the cache): the cause is that growth.
    j.ending = not any("not an engine" in e or "not the engine" in e for e in j.evidence_for)
    grew = _card_grew(f)
    if grew and not j.ending:
        # Another process may hold more, but it is what rose that ran the machine out.
        j.evidence_against.append(grew)
        j.ending = True
    if _history(f, "available"):
        # Ran out otherwise than by a kill here: an allocation failed, the pool filled, or
        # systemd says its unit was killed (a kill too early, or inside another limit, is
        # context and says nothing of tonight).
        ran_out = bool(pool or f.lines.get("host-alloc-fail") or f.lines.get("unit-oom"))
        machine_kill = bool(kills) and j.score >= 4
        _exhaustion_in_window(f, j, machine_kill, card_grew=bool(grew), ran_out=ran_out)
        return j
    available = _values(f, "available")
    if available and f.memory_total:
        low = min(available)
        if low < CRITICAL_AVAILABLE * f.memory_total:
            # Read in this capture, a reading an operator calls alarming on its own: the
            # machine is out, whatever else was or was not measured. An earlier bundle's
            # (another boot, perhaps) is a note.
            origin = f.origin.get("available", "")
            now = (origin == "bundle" or "recorder (" in origin) and "archive" not in origin
            j.add(
                3 if now else 2, f"available memory fell to {_gib(low)} of {_gib(f.memory_total)}"
            )
        elif not kills:
            j.evidence_against.append(f"available memory never fell below {_gib(low)}")
        collapse = shapes.collapse(f.series["available"])
        if collapse.verdict:
            j.add(1, f"available memory collapsed at the end: {collapse.why}")
    elif not available:
        j.missing.append("available memory")
    return j


def _pool_full(f: Facts) -> str | None:
    """On a unified machine (GB10, Strix Halo) the accelerator's pool is the host's memory:
    MemAvailable can look healthy while the pool the device reports is nearly all used."""
    d = _nearly_full(f, unified=True)
    if d is None:
        return None
    return (
        f"the shared memory pool of {d['name']} was {_gib(d['memory_used_bytes'])} of "
        f"{_gib(d['memory_total_bytes'])} used: on one pool for CPU and GPU that is the "
        "machine out of memory"
    )


def _nearly_full(f: Facts, unified: bool) -> dict[str, Any] | None:
    """The first device, unified or discrete as asked, with under LOW_AVAILABLE free."""
    for d in f.gpu_devices:
        used, total = d["memory_used_bytes"], d["memory_total_bytes"]
        kind = bool(d["unified_memory"]) == unified
        if kind and used and total and total - used < LOW_AVAILABLE * total:
            return d
    return None


def _machine_killed(f: Facts) -> bool:
    """The kernel killed for the whole machine within the hour, not inside a cgroup's limit:
    it ran out, whatever a coarse scrape of available memory caught of the lowest point."""
    return any("Memory cgroup out of memory" not in text for _, text in _recent_kills(f))


def _ran_low(f: Facts) -> bool:
    """Available memory fell under LOW_AVAILABLE_SAMPLED of the machine before the failure,
    or was not measured: only then is another process's size what the machine ran out for."""
    available = _values(f, "available")
    if not available or not f.memory_total:
        return True
    w = _window(f)
    before = known([(t, v) for t, v in f.series["available"] if t <= w.end + HOUR_S / 6])
    return min(before or available) < LOW_AVAILABLE_SAMPLED * f.memory_total


def _culprit(f: Facts, kill: str) -> str | None:
    """Another process than the engines holding a large share of the machine at the
    capture, killed holding it, or growing bundle after bundle: what the machine ran out
    for."""
    total = f.memory_total or 0
    if not total:
        return None
    named = victim(kill)
    if named and not is_engine(named[0]) and (named[1] or 0) >= CULPRIT_SHARE * total:
        return f"the victim, {named[0]}, held {_gib(named[1])}: not the engine"
    if grew := _grew_other(f):
        return grew
    if came := _arrival(f):
        return came
    # Processes of one name count together (a build's compilers grow as a swarm, each one
    # small).
    _, most, group = _largest_other(f)
    # The victim's own size bounds it: a process smaller than the engine that was killed
    # is background, and the engine is what grew.
    least = max(CULPRIT_SHARE * total, (named[1] or 0) if named else 0)
    if not group or most < least or _furniture(f, group, most):
        return None
    who, holds = _group_holds(group)
    return f"{who} {holds} {_gib(most)}, more than the engine that was killed: not an engine"


def _group_holds(group: list[dict[str, Any]]) -> tuple[str, str]:
    """Processes of one name in words, and the verb that goes with them."""
    first = group[0]
    if len(group) > 1:
        return f"{len(group)} {first['name']} processes", "hold"
    return f"pid {first['pid']} ({first['name']})", "holds"


def _furniture(f: Facts, group: list[dict[str, Any]], held: float) -> str | None:
    """Why the processes of one name holding `held` are the machine's furniture, not what
    ran it out tonight: they held most of it all day, or ran through the earlier hours
    when it had room."""
    return _held_all_day(f, held) or _there_before(f, group)


def _there_before(f: Facts, group: list[dict[str, Any]]) -> str | None:
    """Processes that were already running when the history begins: the machine's earlier
    hours, when it had room, were lived with them, so their presence is not what changed
    tonight. Only their own readings rising by half of what was lost since say they grew
    into it (a start time says nothing of growth)."""
    started = [p.get("started") for p in group]
    loss = _tonights_loss(f)
    if not started or None in started or loss is None or max(started) > loss[0]:
        return None
    _, usual, lowest = loss
    lost = usual - lowest
    grew = sum(_rose(f.process_history.get(f"{p['pid']} {p['name']}", [])) for p in group)
    if lost <= 0 or grew >= lost / 2:
        return None
    ago = (_window(f).end - min(started)) / HOUR_S
    return (
        f"it was running before the history begins ({ago:.0f} h before the failure), "
        f"through the earlier hours when {_gib(usual)} was usually free: "
        f"the {_gib(lost)} lost tonight is not its arrival, and nothing of its own readings "
        "says it grew"
    )


def _arrived(f: Facts, group: list[dict[str, Any]], held: float) -> str | None:
    """Processes of one name that all started inside the look-back, after the hours when
    the machine had room, and hold at least half of what was lost since: their arrival is
    what changed tonight, however large the engine that was there before them (its weights
    were there all day)."""
    started = [p.get("started") for p in group]
    loss = _tonights_loss(f)
    if None in started or loss is None or min(started) <= loss[0]:
        return None
    _, usual, lowest = loss
    lost = usual - lowest
    # What the machine had free when they started, against the failure: their arrival
    # cost it what they hold (a process table's start alone is no arrival).
    then = [v for t, v in f.series["available"] if v is not None and t <= min(started)]
    cost = then[-1] - lowest if then else 0.0
    if held < max(CULPRIT_SHARE * (f.memory_total or 0), lost / 2) or cost < held / 2:
        return None
    who, holds = _group_holds(group)
    ago = (_window(f).end - min(started)) / HOUR_S
    return (
        f"{who} started {ago:.1f} h before the failure and {holds} {_gib(held)}, of the "
        f"{_gib(lost)} lost since the hours with room: the arrival ran the machine out, not "
        "an engine"
    )


def _arrival(f: Facts) -> str | None:
    """The processes of one name, not an engine's, that started after the hours with room
    and hold the most, where their arrival is what the machine lost (`_arrived`). Only
    the arrivals count: a second python3 up since boot beside tonight's is furniture."""
    loss = _tonights_loss(f)
    if loss is None:
        return None
    came: dict[str, list[dict[str, Any]]] = {}
    for p in f.processes:
        started = p.get("started")
        if not is_engine(p["name"] or "") and started is not None and started > loss[0]:
            came.setdefault(p["name"] or "?", []).append(p)
    held = {name: sum(p["rss_bytes"] or 0 for p in group) for name, group in came.items()}
    name = max(held, key=held.__getitem__, default=None)
    return _arrived(f, came[name], held[name]) if name else None


def _tonights_loss(f: Facts) -> tuple[float, float, float] | None:
    """Available memory through the hours before the incident window, and in it: when the
    earlier readings begin, their median (what the machine usually had free), and the
    lowest reading of the incident window. None without readings of both."""
    w = _window(f)
    series = f.series.get("available", [])
    room = [(t, v) for t, v in w.reference(series) if v is not None]
    before = known(w.incident(series))
    if not room or not before:
        return None
    return room[0][0], _median([v for _, v in room]), min(before)


def _rose(history: shapes.Series) -> float:
    """How far a process's resident memory rose over its readings (0 with fewer than two)."""
    values = known(history)
    return max(0.0, values[-1] - values[0]) if len(values) >= 2 else 0.0


def _held_all_day(f: Facts, held: float) -> str | None:
    """Why a process holding `held` is the machine's furniture, not what ran it out: at
    no time earlier in the day (the 95th percentile of the reference hours' available
    memory) did the machine have a sixth of that free, so the process held most of it
    then too (a VM, a vector store). What grew tonight is something else."""
    room = known(_window(f).reference(f.series.get("available", [])))
    if not room or (most := shapes.quantile(room, 0.95)) >= HELD_ALL_DAY * held:
        return None
    return f"earlier in the day at most {_gib(most)} was free: it held its {_gib(held)} then too"


def _largest_other(f: Facts) -> tuple[str, float, list[dict[str, Any]]]:
    """The processes of one name, not an engine's, that hold the most resident memory
    together (a build's compilers grow as a swarm, each one small): name, bytes, rows."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in f.processes:
        if not is_engine(p["name"] or ""):
            groups.setdefault(p["name"] or "?", []).append(p)
    held = {name: sum(p["rss_bytes"] or 0 for p in ps) for name, ps in groups.items()}
    name, most = max(held.items(), key=lambda kv: kv[1], default=("?", 0.0))
    return name, most, groups.get(name, [])


def _services(f: Facts) -> bool:
    """Model services were read here: an engine, or a service target in Prometheus."""
    return bool(f.engines) or any(is_service(t) for t in f.targets)


def _exhaustion_in_window(
    f: Facts, j: Judgement, machine_kill: bool, card_grew: bool, ran_out: bool
) -> None:
    """Host available memory falling to a small share of the total before the kill or the
    outage, against the rest of the day; the card's line flat; memory back once the
    victim's was released. A scrape can miss the lowest point: beside a kill a higher
    reading still counts."""
    w = _window(f)
    total = f.memory_total
    series = f.series["available"]
    if not total:
        j.missing.append("the machine's total memory")
        return
    before = known([(t, v) for t, v in series if w.start <= t <= w.end + HOUR_S / 6])
    usual = known(w.reference(series))
    if not before:
        j.missing.append("available memory in the hours before the failure")
        return
    low = min(before)
    share = low / total
    killed = machine_kill or _kills_in_history(f) > 0 or _killed_unseen(f)
    if usual and low >= min(usual) and not killed and not f.lines.get("host-alloc-fail"):
        # As short earlier in the day and nothing ran out: the level the machine lives at
        # (an engine that preallocates the pool, a cache sized to fill it), not a shortage.
        j.evidence_against.append(
            f"available memory was as low earlier in the day ({_gib(min(usual))}) and "
            "nothing was killed: the level this machine runs at"
        )
        return
    # The shortage weighs as this fault's evidence unless nothing ran out (no kill, no
    # allocation failure, no pool full) and the machine stalled: then the stall it caused
    # is the fault, and how the shortage looked is told but weighs nothing.
    weighs = killed or ran_out or not _stalled(f)

    def detail(points: int, text: str) -> None:
        if weighs:
            j.add(points, text)
        else:
            j.evidence_for.append(text)

    said = f"available memory fell to {_gib(low)} of {_gib(total)} ({share:.0%})"
    if usual:
        said += f", against at least {_gib(min(usual))} earlier in the day"
    if share < LOW_AVAILABLE and weighs:
        j.add(2, f"{said} before the failure")
    elif share < LOW_AVAILABLE:
        # Nothing was killed and no allocation failed: the machine was short, and what it
        # did about it (stall, swap) is the story; running out is the kill.
        j.add(1, f"{said}, and nothing was killed")
    elif share < LOW_AVAILABLE_SAMPLED and killed:
        j.add(2, f"{said} beside a kill (a scrape can miss the lowest point)")
    elif killed and (full := _swap_ran_out(f)):
        # What MemAvailable still counted was cache the kernel could not free fast enough:
        # with swap gone too, the kill is the machine out of memory.
        j.add(2, f"{said} beside a kill, with {full}")
    else:
        j.evidence_against.append(f"available memory stayed comfortable: lowest {_gib(low)}")
        return
    collapse = shapes.collapse(w.upto(series) if w.cut else series)
    if collapse.verdict:
        detail(1, f"available memory collapsed at the end: {collapse.why}")
    count = _kills_in_history(f)
    if count and not machine_kill:
        j.add(2, f"the kernel's OOM-kill counter rose by {count:.0f} in the incident window")
    after = known([(t, v) for t, v in series if t > w.end])
    if after and max(after) > 2 * low:
        detail(1, f"available memory came back to {_gib(max(after))} once the victim's was freed")
    if _history(f, "accelerator_used"):
        card = shapes.step(w.incident(f.series["accelerator_used"]), fmt=_gib)
        if not card.verdict and not card_grew:
            detail(1, "the accelerator's line stayed flat: the host ran out, not the card")


def _card_grew(f: Facts) -> str | None:
    """The accelerator's memory (the engines' allocations) in the hour before the failure,
    above the most it held earlier (a model loaded on demand is back at its size, not
    grown) by a large share of the machine: the engines grew, and on a shared pool that
    growth is what the host ran out of."""
    if not _history(f, "accelerator_used") or not f.memory_total:
        return None
    w = _window(f)
    series = f.series["accelerator_used"]
    recent, usual = known(w.last(series, RECENT_S)), known(w.reference(series))
    if not recent or not usual:
        return None
    rise = max(recent) - max(usual)
    if rise < CULPRIT_SHARE * f.memory_total:
        return None
    return (
        f"the accelerator's memory rose {_gib(rise)} above the most it held earlier "
        f"({_gib(max(usual))}) in the hour before: the engines' own growth ran the machine out"
    )


def _kills_in_history(f: Facts) -> float:
    """How much node_vmstat_oom_kill rose in the incident window for the machine (0 when
    unknown). The counter counts kills inside any group's limit too: those the kernel log
    shows in those hours are not the machine running out."""
    w = _window(f)
    counts = known([(t, v) for t, v in f.series.get("oom_kills_history", []) if t >= w.start])
    fenced = [
        t
        for ago, t in f.oom_kills
        if "Memory cgroup out of memory" in t and ago is not None and ago <= INCIDENT_S + HOUR_S
    ]
    return max(0.0, counts[-1] - counts[0] - len(fenced)) if len(counts) >= 2 else 0.0


@rule("accelerator-oom")
def accelerator_oom(f: Facts) -> Judgement:
    j = Judgement()
    for tag in CARD_OOM_TAGS:
        if f.lines.get(tag):
            j.add(5, f"the log says so ({tag}): {_last(f, tag, 200)}")
            j.ending = True
            sizes = _torch_sizes(f.lines[tag])
            if sizes:
                j.evidence_for.append(sizes)
            break
    if not j.score and f.lines.get("nv-no-memory"):
        # The driver prints it on successful starts too (a probe of what fits): alone a
        # note; beside a failure, how it ended.
        said = f"the driver said NV_ERR_NO_MEMORY: {_last(f, 'nv-no-memory', 160)}"
        if _window(f).failure:
            j.add(3, f"{said}, as {_window(f).failure.what}")
            j.ending = True
        else:
            j.add(1, f"{said}; it is printed on starts that succeed too, and nothing failed")
    read = [p for p in ("logs", "kernel") if f.measured(p)]
    if not j.score:
        if read:
            j.evidence_against.append(f"no allocation failure in the {' and '.join(read)} read")
        if "logs" not in read:
            j.missing.append("the engines' logs ([[logs]] or an engine's unit/container)")
    return j


_TORCH_OLD = re.compile(
    r"Tried to allocate ([\d.]+ [KMG]iB) \(GPU \d+; ([\d.]+ [KMG]iB) total capacity; "
    r"([\d.]+ [KMG]iB) already allocated; ([\d.]+ [KMG]iB) free"
)
_TORCH_NEW = re.compile(
    r"Tried to allocate ([\d.]+ [KMG]iB)\. GPU \d+ has a total capacity of ([\d.]+ [KMG]iB) "
    r"of which ([\d.]+ [KMG]iB) is free\.(?: Including non-PyTorch memory, this process has "
    r"([\d.]+ [KMG]iB) memory in use)?"
)


def _torch_sizes(lines: list[str]) -> str | None:
    """What PyTorch's out-of-memory message states, in words: a small request failing on a
    full card is the card filled over time; a large one on a card with room is one request
    too big; a process holding far less than the card is sharing it."""
    for line in reversed(lines):
        if m := _TORCH_OLD.search(line):
            tried, total, held, free = (sum(_bytes(g)) for g in m.groups())
            mine = None
        elif m := _TORCH_NEW.search(line):
            tried, total, free = (sum(_bytes(g)) for g in m.groups()[:3])
            mine = sum(_bytes(m.group(4))) if m.group(4) else None
            held = mine
        else:
            continue
        said = f"it asked for {_gib(tried)} with {_gib(free)} of {_gib(total)} free"
        if held is not None:
            said += f", {_gib(held)} held by {'this process' if mine else 'PyTorch'}"
        others = total - free - mine if mine is not None else 0
        if others >= max(GIB, 0.1 * total):
            said += f"; {_gib(others)} of the card is held by other processes"
        elif tried < 0.05 * total:
            said += ": a small request on a full card, the card filled before it"
        return said
    return None


@rule("memory-pressure-stall")
def memory_pressure_stall(f: Facts) -> Judgement:
    j = Judgement()
    if f.has("psi_some_seconds") and _window(f).has_history(f.series["psi_some_seconds"]):
        _stall_in_window(f, j)
    elif f.has("compressed_history"):
        _compressed_in_window(f, j)
    _ran_out(f, j)
    failure = _window(f).failure
    if failure and not failure.timed_out:
        # A stall slows work; a service that failed outright (an error, a fall) failed of
        # what filled the memory: the stall came with it, and a cause takes both.
        j.ending = True
    some = _values(f, "psi_some")
    churn = _reclaim_churn(f)
    if not some:
        if not j.score:
            j.missing.append("PSI memory pressure")
        if len(churn) >= 2:
            # Without PSI (an older kernel, a container), reclaim's own counters say it.
            j.add(2, "the kernel reclaimed hard through the window: " + "; ".join(churn))
        return j
    if max(some) >= PSI_SOME_HIGH:
        j.add(2, f"tasks stalled on memory {max(some):.0f}% of the time (PSI some avg10)")
        sustained = shapes.sustained(f.series["psi_some"], above=PSI_SOME_HIGH, min_fraction=0.5)
        if sustained.verdict:
            j.add(1, f"the stall lasted: {sustained.why}")
        if failure and failure.timed_out and not _recent_kills(f):
            # A stall's own way of failing: everything slows, nothing is killed.
            j.add(1, f"{failure.what} timed out while tasks stalled, and nothing was killed")
    full = _values(f, "psi_full")
    if full and max(full) >= PSI_FULL_HIGH:
        j.add(1, f"all tasks stalled together {max(full):.0f}% of the time (PSI full avg10)")
    swap = _values(f, "swap_used")
    out = _values(f, "pswpout")
    if out and out[-1] > out[0]:
        j.add(1, f"swapping out during the window ({out[-1] - out[0]:.0f} pages)")
    if churn and j.score:
        j.add(1, "the working set does not fit: " + "; ".join(churn))
    if not j.score:
        j.evidence_against.append(
            f"PSI memory stayed low (max {max(some):.1f}% some)"
            + ("" if not swap else f"; swap {_gib(max(swap))} used")
        )
    return j


def _reclaim_churn(f: Facts) -> list[str]:
    """What reclaim did in the window beyond swapping, in words: pages faulted back in
    (anonymous and file), direct compaction stalls, page migrations."""
    said = []
    for name, words in (
        ("refaults", "anonymous pages faulted back in"),
        ("refaults_file", "file pages faulted back in"),
        ("compact_stalls", "stalls on direct compaction"),
        ("migrations", "pages migrated"),
    ):
        values = _values(f, name)
        if values and values[-1] - values[0] >= CHURN_MIN[name]:
            said.append(f"{values[-1] - values[0]:.0f} {words}")
    return said


def _ran_out(f: Facts, j: Judgement) -> None:
    """A stall that ended with the OOM killer taking a process on the whole machine is the
    prelude of exhaustion, not a fault of its own: work slowing while nothing goes down."""
    machine = [t for _, t in _recent_kills(f) if "Memory cgroup out of memory" not in t]
    unseen = _killed_unseen(f)
    if machine or _kills_in_history(f) > 0 or unseen:
        j.score -= 2
        # How the growth before it ended, as the kill is: a cause with evidence takes it.
        j.ending = True
        j.evidence_against.append(
            "the machine ran out and the OOM killer took a process: the stall was its prelude"
            if not unseen
            else f"{_window(f).failure.what} outright, not slowly, while macOS pushed memory "
            "out: what its memory killer (jetsam, which logs nothing here) does; the stall "
            "was the prelude"
        )


def _killed_unseen(f: Facts) -> bool:
    """A Mac (its history is macOS node-exporter's, with the compressor) kills for memory
    with jetsam, which logs to the unified log and never to the kernel log read here: a
    service that went down outright (no answer that merely came late) while memory was
    pushed out of RAM is what its kill looks like."""
    w = _window(f)
    return bool(
        f.has("compressed_history") and w.failure and not w.failure.timed_out and _stalled(f)
    )


def _rate(series: shapes.Series) -> list[tuple[float, float]]:
    """Per-second rate of a counter between successive readings (a reset gives no rate)."""
    pts = [(t, v) for t, v in series if v is not None]
    return [
        (t2, (v2 - v1) / (t2 - t1))
        for (t1, v1), (t2, v2) in zip(pts, pts[1:], strict=False)
        if t2 > t1 and v2 >= v1
    ]


def _stall_in_window(f: Facts, j: Judgement) -> None:
    """node-exporter's stall counters over the hour before the failure, against the worst
    hour of the rest of the day; swap filling and pages swapped out beside them."""
    shares = _stall_shares(f)
    if shares is None:
        j.missing.append("readings of memory stall time in the hour before the failure")
        return
    now, worst = shares
    said = f"tasks stalled on memory {now:.0%} of the hour before, against {worst:.0%} at worst"
    # With a failure to explain, a milder stall far past the machine's usual is one.
    bar = PSI_HISTORY_FAILED if _window(f).failure else PSI_HISTORY_HIGH
    if now >= bar and now >= 2 * worst:
        j.add(3, f"{said} in any hour earlier (node-exporter PSI)")
    else:
        j.evidence_against.append(f"{said} earlier")
        return
    if _swap_filled(f, j) is False:
        j.score -= 1
        j.evidence_against.append(
            "swap did not fill in the incident window: the working set still fit"
        )
    out = known(_window(f).last(_rate(f.series.get("pswpout_history", [])), RECENT_S))
    if out and _median(out) >= SWAPPING_PAGES_S:
        j.add(1, f"pages were swapped out through the hour ({_median(out):.0f}/s)")
    if faulted := _read_back(f):
        j.add(1, faulted)


def _read_back(f: Facts) -> str | None:
    """Pages read back from disk (major faults) through the hour before, far past any hour
    earlier, in words. With no swap, or beside it, what a stall evicts is the page cache,
    a model's mapped weights among it, read back again at each use."""
    w = _window(f)
    rate = _rate(w.upto(f.series.get("majfault_history", [])))
    recent = known(w.last(rate, RECENT_S))
    if len(recent) < 3:
        return None
    now, worst = _median(recent), max(_hourly(w.reference(rate), _median), default=0.0)
    if now < MAJOR_FAULTS_S or now < MAJOR_FAULTS_PAST * worst:
        return None
    return (
        f"pages were read back from disk through the hour ({now:.0f} major faults/s, against "
        f"{worst:.0f} at most in any hour earlier): what was evicted was needed again"
    )


def _stall_shares(f: Facts) -> tuple[float, float] | None:
    """The share of time tasks stalled on memory in the hour before the failure and in the
    worst hour before the stall began, from node-exporter's PSI counter; None without
    readings of that hour. A stall of many hours has no before in the incident window's
    day: the hours stalled without a break up to the window are part of it, not the
    machine's usual (while 3 hours at least remain before them)."""
    w = _window(f)
    stalled = _rate(w.upto(f.series.get("psi_some_seconds", [])))
    recent = known(w.last(stalled, RECENT_S))
    if len(recent) < 3:
        return None
    now = _median(recent)
    earlier = _hourly(w.reference(stalled), _median)
    # The stall's own hours: stalled as much as half of now, or past the bar.
    while len(earlier) > 3 and earlier[-1] >= min(PSI_HISTORY_HIGH, now / 2) > 0:
        earlier.pop()
    return now, max(earlier, default=0.0)


def _swap_ran_out(f: Facts) -> str | None:
    """Swap all but used up in the incident window, in words; None where it was not, or
    was not read (Linux's fixed swap, read by what is free)."""
    free = known(_window(f).incident(f.series.get("swap_free_history", [])))
    total = max(known(f.series.get("swap_total_history", [])), default=0.0)
    if not free or total <= 0 or min(free) >= SWAP_FULL_SHARE * total:
        return None
    return f"swap {_gib(total - min(free))} of {_gib(total)} used"


def _swap_filled(f: Facts, j: Judgement) -> bool | None:
    """Swap taking SWAP_FILLED_BYTES more through the incident window (a point for the
    stall); None where no swap history was read, or the machine has none. Linux's swap
    is a fixed size, read by what is free; macOS's use is read directly."""
    w = _window(f)
    used = known(w.incident(f.series.get("swap_used_history", [])))
    free = known(w.incident(f.series.get("swap_free_history", [])))
    if not used and not free:
        return None
    if not used and max(known(f.series.get("swap_total_history", [])), default=0.0) <= 0:
        return None  # no swap at all: nothing could fill, and its absence says nothing
    taken = used[-1] - used[0] if used else free[0] - free[-1]
    if taken >= SWAP_FILLED_BYTES:
        j.add(1, f"swap filled in the incident window: {_gib(taken)} more used")
        return True
    return False


def _compressed_in_window(f: Facts, j: Judgement) -> None:
    """macOS has no PSI: under pressure its compressor takes pages in, then it swaps. What
    did not fit in RAM past the day's usual is the stall; swap filling beside it adds (its
    absence takes nothing away: the compressor is the first resort)."""
    pushed = _pushed_out(f)
    if pushed is None:
        j.missing.append("readings of compressed memory before the failure and earlier")
        return
    past, said = pushed
    if not past:
        j.evidence_against.append(said)
        return
    j.add(3, f"{said}: its compressor worked through the stall (macOS has no PSI)")
    _swap_filled(f, j)


def _pushed_out(f: Facts) -> tuple[bool, str] | None:
    """What macOS held compressed or swapped (node-exporter publishes both) in the quarter
    hour before the failure (a level: what did not fit in RAM when the service gave up),
    and whether it passed the most of any hour earlier by COMPRESSED_SHARE of the machine;
    None without those readings."""
    if not _history(f, "compressed_history") or not f.memory_total:
        return None
    w = _window(f)
    swapped = dict(f.series.get("swap_used_history", []))
    series = [
        (t, None if v is None else v + (swapped.get(t) or 0.0))
        for t, v in w.upto(f.series["compressed_history"])
    ]
    recent = known(w.last(series, RECENT_S / 4))
    usual = _hourly(w.reference(series), _median)
    if len(recent) < 3 or not usual:
        return None
    now, before = _median(recent), max(usual)
    said = (
        f"macOS held {_gib(now)} compressed or swapped in the quarter hour before, against "
        f"at most {_gib(before)} in any hour earlier"
    )
    return now - before >= COMPRESSED_SHARE * f.memory_total, said


@rule("idle-squatter")
def idle_squatter(f: Facts) -> Judgement:
    j = Judgement()
    if not f.engine_load:
        _idle_without_a_queue(f, j)
        if not j.score:
            j.missing.append("an engine's queue (its own running / pending counts)")
        return j
    kinds = {e["name"]: e["kind"] for e in f.engines}
    rss = {p["pid"]: p["rss_bytes"] for p in f.processes}
    # The engine whose own check failed is not keeping another out: it could not work.
    failed = {c["name"] for c in f.checks if not c["ok"]}
    if f.bundle["trigger_kind"] in FAILURE_TRIGGERS and f.bundle["trigger_name"]:
        failed.add(f.bundle["trigger_name"])
    found = Judgement()
    for engine, load in f.engine_load.items():
        if max(load, default=0) > 0:
            j.evidence_against.append(f"{engine} was working (its queue was not empty)")
            continue
        kind = kinds.get(engine, "")
        # A check named for the engine's software is its own where it is the only one of
        # its kind (llama-swap names its server by the model it serves).
        mine = kind in failed and list(kinds.values()).count(kind) == 1
        if engine in failed or mine:
            j.evidence_against.append(
                f"{engine} is idle, but it is the service that failed to answer: a victim of "
                "what held the memory, not a squatter"
            )
            continue
        need = _contention(f, kind)
        if need is None:
            # A resident model nobody is using is the state a box spends most of its life
            # in: squatting needs someone kept out.
            found.evidence_against.append(
                f"{engine} is idle with its model resident, and nothing else wanted the memory "
                "(no other tenant on the accelerator, no stall, nothing failed)"
            )
            continue
        gpu = [
            p
            for p in f.gpu_processes
            if belongs(_who(f, p), kind) and (p["used_bytes"] or 0) >= SQUAT_GPU_BYTES
        ]
        if gpu:
            p = gpu[0]
            found.add(
                4,
                f"{engine} is idle (nothing running, nothing queued) while pid {p['pid']} "
                f"holds {_gib(p['used_bytes'])} of accelerator memory, and {need}",
            )
            continue
        host = [
            p
            for p in f.processes
            if belongs(p, kind) and (rss.get(p["pid"]) or 0) >= SQUAT_RSS_BYTES
        ]
        if host:
            found.add(
                2,
                f"{engine} is idle while pid {host[0]['pid']} holds "
                f"{_gib(host[0]['rss_bytes'])} resident, and {need}",
            )
    # One squatter is the finding; more idle engines are listed, not added up.
    j.evidence_against += found.evidence_against
    if found.evidence_for:
        best = max(found.points, default=0)
        j.score = best
        j.evidence_for = found.evidence_for
        start, began = _window(f).start, _began(f)
        fresh = [
            target
            for target, series in f.targets.items()
            if is_service(target) and any(t >= start for t in came_up(series, began))
        ]
        if fresh:
            j.score -= 2
            j.evidence_against.append(
                f"{fresh[0]} came up in the hours before the failure: the idle model is one "
                "that was not unloaded for it (a swap), more than an idle one"
            )
    return j


def _idle_without_a_queue(f: Facts, j: Judgement) -> None:
    """Ollama publishes no queue: a manager with a model loaded and the accelerator at 0 %
    through every reading of the window is idle. Squatting still needs someone kept out,
    and a card with almost nothing free keeps out the next load, whoever it is."""
    loaded = {m: models for m, models in (_loaded(f) or {}).items() if models}
    busy = [d["utilization_gpu_pct"] for d in f.gpu_devices]
    if not loaded or not busy or None in busy or max(busy) > 0:
        return
    engine, models = next(iter(loaded.items()))
    kind = next(e["kind"] for e in f.engines if e["name"] == engine)
    need = _contention(f, kind) or _card_full(f)
    idle = (
        f"{engine} holds {', '.join(models)} loaded with the accelerator at 0 % through "
        f"{len(busy)} reading{'s' * (len(busy) > 1)}"
    )
    if need:
        j.add(3, f"{idle}, and {need}")
    else:
        j.evidence_against.append(f"{idle}, and nothing else wanted the memory")


def _card_full(f: Facts) -> str | None:
    d = _nearly_full(f, unified=False)
    if d is None:
        return None
    total = d["memory_total_bytes"]
    free = total - d["memory_used_bytes"]
    return f"{d['name']} has {_gib(free)} of {_gib(total)} free for anything else"


def _contention(f: Facts, kind: str) -> str | None:
    """Who or what needed the memory an idle engine holds, in words; None if nothing did."""
    others = [p for p in f.gpu_processes if not belongs(_who(f, p), kind)]
    if others:
        p = _who(f, others[0])
        return f"another tenant shares the accelerator (pid {p['pid']} {p.get('name') or '?'})"
    available = _values(f, "available")
    # Little available keeps out only what tried to get in: with nothing failed and nothing
    # stalled it is the box as it runs (an engine that reserves its share of a shared pool
    # at start, as vLLM does).
    if (
        _window(f).failure
        and available
        and f.memory_total
        and available[-1] < TIGHT_SHARE * f.memory_total
    ):
        return f"only {_gib(available[-1])} of {_gib(f.memory_total)} was available"
    some = _values(f, "psi_some")
    if some and max(some) >= PSI_SOME_HIGH:
        return f"tasks stalled on memory {max(some):.0f}% of the time"
    return None


@rule("orphaned-gpu-holder")
def orphaned_gpu_holder(f: Facts) -> Judgement:
    j = Judgement()
    if not f.gpu_devices:
        j.missing.append("per-process accelerator memory")
        return j
    table = {p["pid"]: p for p in f.processes}
    for p in f.gpu_processes:
        used = p["used_bytes"]
        if used is not None and used < SQUAT_GPU_BYTES:
            continue
        kinds = [k for k in ENGINE_WORDS if belongs(_who(f, p), k)]
        if not kinds:
            continue
        why = _orphaned(f, p, table, kinds)
        if why:
            held = "an amount NVML did not say" if used is None else _gib(used)
            j.add(4, f"pid {p['pid']} ({p['name']}) holds {held} of accelerator memory, {why}")
    for d in f.gpu_devices:
        listed = [p for p in f.gpu_processes if p["device_index"] == d["device_index"]]
        used = d["memory_used_bytes"]
        if used is None or d["unified_memory"] or not _list_known(f, d, listed):
            continue
        rest = used - sum(p["used_bytes"] for p in listed)
        if rest > 2 * GIB:
            said = f"{_gib(rest)} of GPU {d['device_index']}'s memory is held by no listed process"
            if _card_ran_out(f) or _card_full(f):
                j.add(2, said)
            else:
                # The driver's own reservations go unlisted too; with the card roomy, what
                # it holds kept nothing out.
                j.add(1, f"{said}; the card had room")
    return j


def _orphaned(
    f: Facts, holder: dict[str, Any], table: dict[int, dict[str, Any]], kinds: list[str]
) -> str | None:
    """Why a GPU holder of an engine is left behind, or None. Re-parented to init, with no
    engine of its kind answering; or its parent gone from the table or not of its engine
    (the shell or supervisor that launched it) while nothing listens on its engine's port:
    a hung engine still accepts, an orphan's server is gone."""
    mine = [e for e in f.engines if e["kind"] in kinds]
    if any(e["status"] == "ok" for e in mine):
        return None
    row = table.get(holder["pid"])
    ppid = row["ppid"] if row else None
    if ppid == 1:
        return "re-parented to init, and no engine of its kind answers"
    parent = table.get(ppid) if ppid is not None else None
    gone = [e for e in mine if e["status"] != "timeout"]
    if row is None or not gone:
        return None
    if parent is None:
        return f"its parent (pid {ppid}) is gone, and nothing listens on its engine's port"
    if not any(belongs(parent, k) for k in kinds):
        return (
            f"its parent is {parent['name']} (pid {ppid}), not its engine, and nothing "
            "listens on its engine's port"
        )
    return None


def _list_known(f: Facts, device: dict[str, Any], listed: list[dict[str, Any]]) -> bool:
    """Whether the device's per-process list was read in full: NVML's, with every size
    given. AMD's sysfs has no list, and NVML under WSL lists processes without sizes:
    not measured, never "held by nobody"."""
    unread = device.get("unavailable") or {}
    if isinstance(unread, str):
        unread = orjson.loads(unread)
    return (
        device["vendor"] == "nvidia"
        and "processes" not in unread
        and all(p["used_bytes"] is not None for p in listed)
    )


@rule("build-swarm")
def build_swarm(f: Facts) -> Judgement:
    j = Judgement()
    if not f.processes or not f.memory_total:
        j.missing.append("the process table and the machine's memory")
    else:
        compilers = [p for p in f.processes if (p["name"] or "") in COMPILERS]
        held = sum(p["rss_bytes"] or 0 for p in compilers)
        share = held / f.memory_total
        if share >= BUILD_SHARE:
            j.add(
                4, f"{len(compilers)} compiler processes hold {_gib(held)}, {share:.0%} of memory"
            )
        elif compilers:
            j.add(1, f"{len(compilers)} compiler processes hold {_gib(held)} ({share:.0%})")
        else:
            j.evidence_against.append("no compiler was running")
    _compiler_killed(f, j)
    _build_jobs(f, j)
    return j


def _compiler_killed(f: Facts, j: Judgement) -> None:
    """A compiler killed mid-build: by the kernel's line, or by the build's own words for
    a SIGKILL (what a person pastes where no kernel line was kept)."""
    compilers = [
        text for _, text in _recent_kills(f) if (named := victim(text)) and named[0] in COMPILERS
    ]
    if compilers:
        j.add(4, f"the OOM killer took a compiler: {compilers[-1][:160]}")
    elif said := f.lines.get("compiler-killed"):
        j.add(4, f"the build's log says a compiler was killed: {said[-1].strip()[:160]}")


_JOBS = re.compile(r"(?:-j(?:=|\s+|',\s*')?|--parallel[= ]|MAX_JOBS=)(\d+)")


def _build_jobs(f: Facts, j: Judgement) -> None:
    """A build that failed with many jobs at once: each C++ or CUDA compile holds a GiB or
    more (flash-attention's kernels several), so the job count against the machine's
    memory says whether the jobs could fit."""
    runs = [
        (int(m.group(1)), line)
        for line in f.lines.get("build-failed", [])
        if (m := _JOBS.search(line))
    ]
    if not runs:
        return
    jobs, line = max(runs)
    asked = jobs * BUILD_JOB_BYTES
    said = f"a build running {jobs} jobs at once failed ({line.strip()[:120]})"
    ask = f"at ~{_gib(BUILD_JOB_BYTES)} a job they ask {_gib(asked)}"
    if f.memory_total and asked >= f.memory_total:
        j.add(3, f"{said}: {ask} of {_gib(f.memory_total)}")
    elif f.memory_total:
        j.evidence_against.append(
            f"{said}, but {_gib(asked)} for its jobs fits {_gib(f.memory_total)}"
        )
    elif jobs >= BUILD_JOBS_MANY:
        j.add(3, f"{said}: {ask}, more than most machines hold")
        j.missing.append("the machine's memory, to weigh the jobs against")
    else:
        j.missing.append(f"the machine's memory, to weigh {jobs} jobs against")


@rule("admission-overcommit")
def admission_overcommit(f: Facts) -> Judgement:
    j = Judgement()
    estimate = _estimate(f)
    if estimate:
        j.add(*estimate)
    starting = [m for m in f.models if m["state"] in ("starting", "loading")]
    available = _values(f, "available")
    if not f.models:
        j.missing.append("what a model manager was loading")
        return j
    if not available:
        j.missing.append("available memory at the load")
        return j
    for m in starting:
        size = m["size_bytes"] or max(
            (x["size_bytes"] or 0 for x in f.models if x["model"] == m["model"]), default=0
        )
        if not size:
            j.missing.append(f"the size of {m['model']} in memory")
        elif min(available) < size:
            j.add(
                4,
                f"{m['engine']} was loading {m['model']} ({_gib(size)}) while only "
                f"{_gib(min(available))} was available",
            )
        else:
            j.evidence_against.append(
                f"{_gib(min(available))} was available for {m['model']} ({_gib(size)})"
            )
    return j


_UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}


def _bytes(text: str) -> list[float]:
    return [float(n) * _UNITS.get(u, 1) for n, u in re.findall(r"([\d.]+) ?([KMGT]i?B|B)", text)]


def _estimate(f: Facts) -> tuple[int, str] | None:
    """Ollama says, before a load, what the model needs in all (memory.required.full) and
    what each GPU has free (memory.available): what does not fit on the GPUs must come
    from host memory. Ollama never reports a model as loading; this line is the load."""
    lines = f.lines.get("load-estimate", [])
    if not lines:
        return None
    line = lines[-1]
    need = re.search(r'memory\.required\.full="([^"]+)"', line)
    have = re.search(r'memory\.available="\[([^\]]*)\]"', line)
    if not need or not have:
        return None
    needed, gpus = sum(_bytes(need.group(1))), sum(_bytes(have.group(1)))
    spill = needed - gpus
    if spill <= 0:
        return None
    said = (
        f"Ollama's load needed {_gib(needed)} with {_gib(gpus)} free on the GPUs: {_gib(spill)} "
        "had to come from host memory"
    )
    available = _values(f, "available")
    if available and min(available) < spill:
        return 4, f"{said}, which had {_gib(min(available))} available"
    if f.memory_total and f.memory_total < spill:
        return 4, f"{said}, more than the machine's {_gib(f.memory_total)}"
    if available:
        return None  # it fitted in host memory: a partial offload, Ollama's normal way
    killed = (
        f.lines.get("unit-oom")
        or f.lines.get("runner-killed")
        or any(engine_kill(t) for _, t in f.oom_kills)
    )
    own = _ollama_host_free(f)
    if own is not None:
        total, free = own
        if free - spill < LOW_AVAILABLE * total:
            return (4 if killed else 3), (
                f"{said}, which by Ollama's own reading had {_gib(free)} free of "
                f"{_gib(total)}: {_gib(max(free - spill, 0))} left for everything else"
                + (", and the runner was killed" if killed else "")
            )
        return None
    if killed:
        return 3, f"{said} (not measured), and the OOM killer took the engine"
    return 2, f"{said} (host memory at the load not measured)"


def _ollama_host_free(f: Facts) -> tuple[float, float] | None:
    """Host memory as Ollama read it planning its last load: (total, free with free swap)."""
    lines = f.lines.get("load-host-memory", [])
    if not lines:
        return None
    said = dict(re.findall(r'(total|free|free_swap)="([^"]+)"', lines[-1]))
    if "total" not in said or "free" not in said:
        return None
    free = sum(_bytes(said["free"])) + sum(_bytes(said.get("free_swap", "")))
    return sum(_bytes(said["total"])), free


def _contrast(f: Facts) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Checks of the shallow layer that passed, and of the deep layer that failed."""
    passed = [c for c in f.checks if c["ok"] and c["kind"] in ("tcp", "http")]
    # A completion that came back 200 with nothing in it was answered: that is a result
    # without content (silent-empty-result), not a layer that failed to answer.
    failed = [
        c
        for c in f.checks
        if not c["ok"] and c["kind"] in ("completion", "command", "http") and not _empty_200(c)
    ]
    return passed, failed


def _live_hang(f: Facts) -> bool:
    """Seen live at the capture: the port accepts and nothing answers."""
    passed, failed = _contrast(f)
    return bool(passed and failed) or bool(_silent_engines(f))


def _silent_engines(f: Facts) -> list[dict[str, Any]]:
    """The engines that accepted the connection and never answered at the capture."""
    return [e for e in f.engines if e["status"] == "timeout"]


@rule("false-liveness")
def false_liveness(f: Facts) -> Judgement:
    j = Judgement()
    passed, failed = _contrast(f)
    if passed and failed:
        j.add(
            4,
            f"{passed[0]['name']} ({passed[0]['kind']}) answered while "
            f"{failed[0]['name']} ({failed[0]['kind']}) failed: {failed[0]['reason']}",
        )
    silent = _silent_engines(f)
    for e in silent:
        j.add(
            3,
            f"{e['name']} accepted the connection and never answered: the port is "
            "up, the application is not",
        )
    working = _working(f)
    if j.score and working:
        # Requests kept being answered: the application was not stuck, it was behind. Where
        # its own endpoints answered at the capture too, only the deep check's wait is left.
        hung = bool(silent)
        j.score = j.score - 2 if hung else min(j.score - 2, 1)
        j.evidence_against.append(
            f"{working}: it was working, not stuck"
            + ("" if hung else ", and the engines' own endpoints answered at the capture")
        )
    queue = _queued_at_capture(f)
    if j.score and queue:
        # The engine answered and was working through a queue: the deep check waited its
        # turn. That is the queue (concurrency), not a layer that stopped answering: what
        # is left is a note, which cannot tie with the queue's own evidence.
        j.score = min(j.score - 2, 1)
        j.evidence_against.append(f"the engine answered and {queue}: the timeout is the queue")
    if not f.checks and not f.engines:
        j.missing.append("health checks or engines to contrast")
    elif not j.score:
        j.evidence_against.append("every layer that was asked answered")
    return j


def _working(f: Facts) -> str | None:
    """The engine answering requests up to the failure, in words: answered requests in its
    log's tail, or its progress counters moving in the last readings before the end."""
    done = f.lines.get("request-done", [])
    if len(done) >= PROGRESS_LINES:
        return f"the engine's log shows {len(done)} requests answered (the last: {done[-1][:120]})"
    w = _window(f)
    for name, words in PROGRESS:
        pts = [(t, v) for t, v in w.upto(f.series.get(name, [])) if v is not None and t <= w.end]
        # The last reading inside the last minutes, against the one before it (a scrape
        # every few minutes holds one reading there).
        if len(pts) < 2 or pts[-1][0] < w.end - WORKING_S:
            continue
        (t0, v0), (t1, v1) = pts[-2], pts[-1]
        if v1 > v0:
            return (
                f"{v1 - v0:.0f} {words} between readings {w.end - t0:.0f} s and "
                f"{w.end - t1:.0f} s before the end"
            )
    return None


def _queued_at_capture(f: Facts) -> str | None:
    """Requests waiting in the last readings before the capture, or answers that took
    minutes each, in words."""
    w = _window(f)
    waiting = known(w.last(f.series.get("requests_waiting", []), RECENT_S / 4))
    if waiting and max(waiting) > 0:
        return f"{max(waiting):.0f} requests waited in the minutes before"
    if f.stats and f.stats[-1].waiting > 0 and not _stopped_in_stats(f):
        return f"{f.stats[-1].waiting} requests waited in the engine's last stats line"
    return _waited_in_log(f)


def _stopped_in_stats(f: Facts) -> str | None:
    """The engine's last stats line says it did nothing for its interval: no token read or
    generated while requests waited (or, in two lines running, while they ran: a request
    that arrived just before a line may not have had its first step)."""
    lines = f.stats
    if not lines or lines[-1].throughput != 0:
        return None
    if any(f.has(name) for name, _ in PROGRESS) or len(_values(f, "slot_tokens")) >= 2:
        return None  # a progress counter says it better than one line's interval
    last = lines[-1]
    idle_twice = len(lines) >= 2 and lines[-2].throughput == 0 and lines[-2].running
    if not (last.waiting or (last.running and idle_twice)):
        return None
    return (
        f"the engine's last stats line says {last.running} running and {last.waiting} "
        "waiting at 0.0 tokens/s read or generated since the line before"
    )


def _answer(check: dict[str, Any]) -> dict[str, Any]:
    return orjson.loads(check["answer"]) if check["answer"] else {}


def _empty_200(check: dict[str, Any]) -> bool:
    answer = _answer(check)
    return answer.get("http_status") == 200 and answer.get("content_chars") == 0


@rule("silent-empty-result")
def silent_empty_result(f: Facts) -> Judgement:
    j = Judgement()
    completions = [c for c in f.checks if c["kind"] == "completion"]
    if not completions:
        j.missing.append("a completion check (evidence check, kind = completion)")
    for c in completions:
        answer = _answer(c)
        if _empty_200(c):
            j.add(
                4,
                f"{c['name']}: HTTP 200, finish_reason {answer.get('finish_reason')!r}, "
                "empty content",
            )
            if answer.get("reasoning_chars"):
                j.add(
                    1,
                    f"the reasoning field held {answer['reasoning_chars']} characters: "
                    "it ate the budget",
                )
        elif c["ok"]:
            j.evidence_against.append(f"{c['name']} answered with content")
    return j


@rule("orphaned-result")
def orphaned_result(f: Facts) -> Judgement:
    j = Judgement()
    if not f.jobs:
        j.missing.append("an engine's job history (ComfyUI /history)")
        return j
    done = [x for x in f.jobs if x["completed"] and x["outputs"] not in (None, "[]", [])]
    started = f.bundle["started_at"]
    recent = [
        x for x in done if x["ended_at"] and 0 <= (started - x["ended_at"]).total_seconds() <= 3600
    ]
    watcher_gave_up = f.bundle["trigger_kind"] in ("healthcheck", "alert", "systemd")
    if recent and watcher_gave_up:
        j.add(
            3,
            f"the engine's history says job {recent[-1]['job_id']} completed with outputs "
            f"while the capture was triggered as a failure "
            f"({f.bundle['trigger_kind']}:{f.bundle['trigger_name']})",
        )
    elif recent:
        j.add(1, f"job {recent[-1]['job_id']} completed with outputs shortly before")
    failed = [x for x in f.jobs if x["status"] == "error"]
    if failed and not recent:
        j.evidence_against.append(f"the history shows job {failed[-1]['job_id']} failed")
    return j


# Counters that move when an engine works: generated tokens, prompt tokens read, and
# llama.cpp's decode calls (its generated-token counter moves only as a request finishes).
PROGRESS = (
    ("tokens_generated", "tokens generated"),
    ("tokens_prompt", "prompt tokens processed"),
    ("decode_calls", "decode calls"),
)


@rule("wedged-no-progress")
def wedged_no_progress(f: Facts) -> Judgement:
    j = Judgement()
    counters = {name: words for name, words in PROGRESS if f.has(name)}
    values = {name: _values(f, name) for name in counters}
    slot_tokens = _values(f, "slot_tokens")
    if not counters and len(slot_tokens) < 2:
        stopped = _stopped_in_stats(f)
        if stopped and _window(f).failure:
            j.add(4, f"{stopped}: busy and nothing moved")
            return j
        j.missing.append(
            "an engine's progress counter (generated tokens, decode calls, or its slots' tokens)"
        )
        return j
    stamps = [
        t for name in (*counters, "slot_tokens") for t, v in f.series.get(name, []) if v is not None
    ]
    busy = [v for values in f.engine_load.values() for v in values]
    moved = {name: v[-1] - v[0] for name, v in values.items() if v[-1] != v[0]}
    if max(stamps) - min(stamps) < WEDGED_MIN_S:
        # Two readings a moment apart cannot show that nothing moved.
        j.missing.append(
            f"progress readings over at least {WEDGED_MIN_S:.0f} s (these span "
            f"{max(stamps) - min(stamps):.1f} s)"
        )
    elif "tokens_generated" not in moved and "tokens_prompt" in moved:
        j.evidence_against.append(
            f"no token generated, but {moved['tokens_prompt']:.0f} prompt tokens were "
            "processed: a long prompt being read is progress"
        )
    elif moved:
        said = ", ".join(f"{value:.0f} {counters[name]}" for name, value in moved.items())
        j.evidence_against.append(f"{said} in the window: busy but progressing")
    elif len(set(slot_tokens)) > 1:
        j.evidence_against.append(
            f"the busy slots' decoded tokens moved ({slot_tokens[0]:.0f} -> "
            f"{slot_tokens[-1]:.0f}): busy but progressing"
        )
    elif busy and min(busy) > 0:
        standing = (
            "; ".join(f"{words} {values[name][0]:.0f}" for name, words in counters.items())
            or f"slots' decoded tokens {slot_tokens[0]:.0f}"
        )
        j.add(
            4,
            f"busy through the window (queue never empty) and nothing moved ({standing}, "
            "before and after)",
        )
    return j


@rule("power-cycled")
def power_cycled(f: Facts) -> Judgement:
    j = Judgement()
    before = f.previous
    if before is None:
        j.missing.append("an earlier bundle of this host")
        return j
    if before["boot_id"] == f.bundle["boot_id"]:
        j.evidence_against.append("same boot as the previous bundle")
        return j
    j.add(2, f"the boot id changed since the previous bundle ({before['bundle_id']})")
    total = before["total"] or 0
    low = before["min_available"]
    if low is not None and total and low < 0.05 * total:
        j.add(2, f"the previous bundle saw available memory at {_gib(low)}")
    if (before["psi_full"] or 0) >= PSI_FULL_HIGH:
        j.add(1, f"the previous bundle saw memory stalls ({before['psi_full']:.0f}% full)")
    return j
