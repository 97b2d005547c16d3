"""The conversations' length: prompts per answer, the log's prompts against their slot, a
model reloaded with longer contexts, a full cache holding the queue."""

from itertools import groupby

from evidence.analyze import shapes
from evidence.analyze.facts import Facts
from evidence.analyze.rules.callers import busier_than_usual
from evidence.analyze.rules.engine_log import PROGRESS_LINES, stopped_in_stats
from evidence.analyze.rules.series import HOUR_S, history, hourly, hourly_increase, median, window
from evidence.analyze.rules.text import blob
from evidence.analyze.window import INCIDENT_S, RECENT_S, Window, known

STATS_QUEUE_SHARE = 0.5  # an engine's stats lines: waiting in half of them is a queue ...
STATS_UNFAILED = 6  # ... and, with nothing failed, only over a minute of them
SLOT_NEARLY_FULL = 0.8  # prompts this share of a slot's context are as long as they get
KV_ROOM = 0.5  # a cache never past half full in the hour before had room: no creep
CACHE_FULL = 0.9  # a KV cache this full admits nobody more, however many slots are free
CACHE_PER_REQUEST = 0.25  # ... held by so few that each running request had a quarter of it
PROMPT_MIN_GENERATED = 200  # an hour that generated fewer tokens says nothing of lengths
BUSY_ALIKE = 0.5  # an hour that generated half as many tokens read its lengths as surely
SLOW_CREEP_LOOKS_H = (6, 9, 12, 16)  # a creep's climb may have begun this long before
CREEP_OVER_USUAL = 1.25  # cache per request 25% above the highest hourly level earlier
BEYOND_CHANCE = 3.0  # an hour's prompts per answer this many scatters past the day's
POOLED_OVER = 1.5  # ... and half as long again as the day's run together


def cache_bound(f: Facts) -> str | None:
    """The engine's stats lines say what held the queue: where requests waited, a handful
    of running requests held so much of the KV cache that what was left could not take
    one more as long. vLLM and SGLang admit a request when its cache fits, not when a slot
    frees: one long context keeps everyone else waiting, and more slots would not have let
    one more in."""
    queued = [r for r in f.stats if r.waiting > 0 and r.running and r.cache is not None]
    if len(queued) < STATS_QUEUE_SHARE * len(f.stats) or len(queued) < PROGRESS_LINES:
        return None
    used = median([r.cache or 0.0 for r in queued])
    each = median([(r.cache or 0.0) / r.running for r in queued])
    if each < CACHE_PER_REQUEST or 1.0 - used >= each:
        return None
    room = "a full KV cache" if used >= CACHE_FULL else f"a KV cache {used:.0%} used"
    return (
        f"requests waited behind {room} in {len(queued)} of the engine's last "
        f"{len(f.stats)} stats lines: {used / each:.0f} running held {each:.0%} of it each, "
        "more than was left: the contexts held the cache, not more callers than slots"
    )


def stopped_for_the_cache(f: Facts) -> str | None:
    """The engine's stats lines say nothing moved while the cache was full of what ran: the
    contexts left no room to go on, how a creep ends, where one led there (a hang holds no
    cache). In words; None otherwise."""
    held = cache_bound(f) if stopped_in_stats(f) else None
    return f"{held}: no room left to go on" if held else None


def thirds(values: list[float]) -> tuple[float, float]:
    """The median of the first third of a log's readings and of the last third."""
    third = len(values) // 3
    return median(values[:third]), median(values[-third:])


def log_prompts(f: Facts) -> tuple[bool, bool, str] | None:
    """The lengths llama-server's log gives its last requests, against their slot: whether
    they grew (the last third past CREEP_OVER_USUAL times the first, at least half the
    slot), whether the last third nearly fills it, and the figures in words. None with too
    few requests logged."""
    sizes = [p.tokens for p in f.prompts]
    if len(sizes) < STATS_UNFAILED:
        return None
    first, last = thirds(sizes)
    slot = f.prompts[-1].slot_context
    what = "the context each request held went" if f.prompts[-1].at_release else "prompts went"
    said = (
        f"the engine's log: {what} from {first:.0f} to {last:.0f} tokens (medians) over "
        f"its last {len(sizes)} requests, against a slot context of {slot}"
    )
    grew = last > CREEP_OVER_USUAL * first and last >= KV_ROOM * slot
    return grew, last >= SLOT_NEARLY_FULL * slot, said


def model_contexts(f: Facts) -> list[tuple[str, str, bool]]:
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
        out.append((blob(model), said, sizes[-1] >= CREEP_OVER_USUAL * sizes[0]))
    return out


def cache_had_room(f: Facts, working: bool = False) -> str | None:
    """The KV cache at most under KV_ROOM full in the hour before (its 90th percentile), in
    words: a cache with room to spare took nothing more, whatever its rise. `working`: read
    only while requests ran, where the load is read (an engine idle most of the hour reads
    empty between the minutes its cache filled). None where it was fuller or is not read."""
    w = window(f)
    cache = w.last(w.upto(f.series.get("kv_cache", [])), RECENT_S)
    busy = {t for t, v in f.series.get("requests_running", []) if v} if working else set()
    level = known([(t, v) for t, v in cache if t in busy] if busy else cache)
    fullest = shapes.quantile(level, 0.9) if level else None
    if fullest is None or fullest >= KV_ROOM:
        return None
    return (
        f"the KV cache was at most {fullest:.0%} full in the hour before (90th percentile"
        f"{' while requests ran' if busy else ''})"
    )


def against_usual(w: Window, series: shapes.Series) -> tuple[float, float] | None:
    """The median of the hour before the failure, and the highest hourly median before the
    incident window; None without readings of both."""
    recent = known(w.last(series, RECENT_S))
    usual = hourly(w.reference(series), median)
    return (median(recent), max(usual)) if len(recent) >= 3 and usual else None


def rose_past(now: float, before: float) -> bool:
    return now > before * CREEP_OVER_USUAL and now - before > 1e-9


def day_ratio(
    ratio: dict[int, float], prompt: dict[int, float], gen: dict[int, float]
) -> tuple[float, float]:
    """The prompts per answer of the hours before the incident window run together (all
    their prompts over all their answers), and by how much one hour strays from that by
    chance: as one over the root of what it generated, times a scatter the hours show (the
    root of the median of their squared strays, each weighted by what it generated)."""
    earlier = [h for h in ratio if h >= INCIDENT_S // HOUR_S]
    day = sum(prompt[h] for h in earlier) / max(sum(gen[h] for h in earlier), 1.0)
    scatter = median([(ratio[h] - day) ** 2 * gen[h] for h in earlier]) ** 0.5
    return day, scatter


def prompt_lengths(f: Facts) -> tuple[bool | None, str] | None:
    """Prompt tokens per generated token, hour by hour: a conversation that grows resends a
    longer history for answers of the same size, while more callers add prompts and
    answers alike. The hour before the failure against every hour before the incident
    window: whether it rose past the highest of them (longer context at the same load),
    and the figures in words (None and what is missing without the hours to tell); None
    where the engine counts no tokens."""
    if not (history(f, "tokens_prompt") and history(f, "tokens_generated")):
        return None
    w = window(f)
    prompt = hourly_increase(w.upto(f.series["tokens_prompt"]), w.end)
    gen = hourly_increase(w.upto(f.series["tokens_generated"]), w.end)
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
    # An hour of a few answers gives its ratio by chance (one long prompt), and a busy spell
    # the look-back holds once (tonight's batch) has no usual hours of its own: the hours
    # before the latest that answered at least half as much are its fair before. Prompts
    # shorter than the day's run together are a new caller's kind of request, and prompts
    # longer by no more than the hours' own scatter are chance, not longer conversations.
    day, scatter = day_ratio(ratio, prompt, gen)
    chance = day + BEYOND_CHANCE * scatter / gen[latest] ** 0.5
    alike = [r for h, r in ratio.items() if h > latest and gen[h] >= BUSY_ALIKE * gen[latest]]
    if alike and now > CREEP_OVER_USUAL * max(alike) and now > chance:
        return True, (
            f"{now:.1f} prompt tokens per generated token in the latest busy hour before "
            f"{end}, against at most {max(alike):.1f} in the hours before it that generated "
            f"at least {BUSY_ALIKE:.0%} as many tokens"
        )
    # The day's highest hour may be one of few answers, its ratio high by chance: against
    # the day run together, half as long again past chance, and above every hour before the
    # incident window that answered as surely, the prompts grew; unless more callers came
    # than in any hour before, whose own longer requests change the day's mix.
    sure = [r for h, r in ratio.items() if h >= inside and gen[h] >= BUSY_ALIKE * gen[latest]]
    longer = sure and now > max(sure) and now > max(POOLED_OVER * day, chance)
    if longer and not busier_than_usual(f):
        return True, (
            f"{now:.1f} prompt tokens per generated token in the latest busy hour before "
            f"{end}, {now / day:.1f} times the {day:.1f} of the day before the incident window "
            f"run together, and above every hour of it that generated at least "
            f"{BUSY_ALIKE:.0%} as many tokens (at most {max(sure):.1f})"
        )
    return False, said
