"""The rule for context-creep: "Context creep: the same traffic, longer context"."""

from evidence.analyze import shapes
from evidence.analyze.facts import Facts
from evidence.analyze.rules.callers import CREEP_LOOK_S, another_model_served, busier_than_usual
from evidence.analyze.rules.context_length import (
    CACHE_FULL,
    CREEP_OVER_USUAL,
    KV_ROOM,
    STATS_QUEUE_SHARE,
    STATS_UNFAILED,
    against_usual,
    cache_bound,
    cache_had_room,
    log_prompts,
    model_contexts,
    prompt_lengths,
    rose_past,
    thirds,
)
from evidence.analyze.rules.floors import LEAK_SHARE, rising_before
from evidence.analyze.rules.judgement import NOTE_IS_EVIDENCE, Judgement, rule
from evidence.analyze.rules.memory import memory_lines, memory_series, pool_size
from evidence.analyze.rules.ran_out import card_ran_out, kills_in_history, machine_killed
from evidence.analyze.rules.rises import card_kept_the_context, idle_rise, rose_with_the_context
from evidence.analyze.rules.series import HOUR_S, history, hourly, median, window
from evidence.analyze.rules.text import gib, last
from evidence.analyze.window import RECENT_S, Window, known

PREEMPT_OVER_USUAL = 3.0  # three times the worst hour's preemptions: the cache ran out


def _per_request(cache: shapes.Series, running: shapes.Series) -> list[tuple[float, float]]:
    """The cache metric divided by the requests running at the same instant (one or more)."""
    load = {t: v for t, v in running if v is not None and v >= 1}
    return [(t, v / load[t]) for t, v in cache if v is not None and t in load]


@rule("context-creep")
def context_creep(f: Facts) -> Judgement:
    j = Judgement()
    cache = [n for n in ("kv_cache", "context_high_water") if f.has(n)]
    lengths = history(f, "tokens_prompt") and history(f, "tokens_generated")
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
        if held := card_kept_the_context(f):
            j.add(3, held)
        return j
    higher = False
    if lengths or any(history(f, n) for n in cache):
        higher = _creep_in_window(f, j, [n for n in cache if history(f, n)])
    else:
        _creep_in_bundle(f, j, cache)
    if cache and higher and not j.score:
        # The cache's metrics set a new high, too little to tell a creep by; the log says
        # each request's length against its slot (the queue's rule defers to prompts that
        # fill it). Where they stayed in the day's range, prompts as long ran earlier too.
        _prompts_in_log(f, j)
    if f.lines.get("kv-cache") and j.score:
        j.add(1, f"the log mentions the KV cache: {last(f, 'kv-cache')}")
    if j.score > 0 and not higher and (flat := _host_ran_out_card_flat(f)):
        # The prompts' length may stand, as a note: it is not what this failure ran out of.
        j.score = min(j.score, 1)
        j.evidence_against.append(flat)
    if j.score > 0 and (idle := _filled_while_idle(f)):
        # What the prompts did may stand, as a note: it is not what this failure ran out of.
        j.score = min(j.score, 1)
        j.evidence_against.append(idle)
    return j


def _host_ran_out_card_flat(f: Facts) -> str | None:
    """The kernel killed for the machine while the accelerator's line, where the engines
    keep the conversations' cache (a card, or the host's memory mapped for the GPU), held
    level through the hours a creep takes (CREEP_LOOK_S), in words. Longer prompts read
    beside a cache that set no new high took none of the memory that ran out."""
    w = window(f)
    if not w.failure or not history(f, "accelerator_used"):
        return None
    if not (machine_killed(f) or kills_in_history(f)):
        return None
    card = known(
        [(t, v) for t, v in w.upto(f.series["accelerator_used"]) if t >= w.end - CREEP_LOOK_S]
    )
    pool = pool_size(f, "accelerator_used")
    if not card or not pool or max(card) - min(card) >= LEAK_SHARE * pool:
        return None
    return (
        f"the accelerator's line, where the conversations' cache lives, held level through "
        f"the last {CREEP_LOOK_S / HOUR_S:.0f} h (within {gib(max(card) - min(card))} of "
        f"{gib(pool)}) while the machine ran out: the longer prompts took none of it"
    )


def _filled_while_idle(f: Facts) -> str | None:
    """A memory line that rose in the incident window, by a share of its pool worth a
    leak's, mostly while the engines generated nothing, in words. The conversations' cache
    grows with the requests that carry them; whatever their length earlier, memory that
    filled while none ran was not theirs (and under the stall it brings, answers cut short
    make every prompt look longer against what was generated)."""
    w = window(f)
    if not w.failure:
        return None
    for name, label in memory_lines(f):
        pool = pool_size(f, name)
        line = known([(t, v) for t, v in w.upto(f.series[name]) if t >= w.start])
        if not pool or len(line) < 6:
            continue
        rose = median(line[-3:]) - median(line[:3])
        if rose >= LEAK_SHARE * pool and (idle := idle_rise(f, name, w.start, rose)):
            return (
                f"of the {label}'s rise of {gib(rose)} in the incident window, {gib(idle)} "
                "came while the engines generated not one token: the conversations held no "
                "more memory then"
            )
    return None


def _creep_in_stats(f: Facts, j: Judgement) -> None:
    """Where nothing scraped the cache, the engine's stats lines: the cache held per
    running request, the last third of the lines against the first."""
    per = [r.cache / r.running for r in f.stats if r.cache is not None and r.running]
    if len(per) < STATS_UNFAILED:
        return
    first, last = thirds(per)
    said = (
        f"the engine's stats lines: the KV cache per running request went from {first:.0%} "
        f"to {last:.0%} over its last {len(per)} lines"
    )
    fullest = max(r.cache or 0.0 for r in f.stats)
    if roomy := _queued_with_room(f):
        j.evidence_against.append(f"{roomy}; {said}")
    elif last > CREEP_OVER_USUAL * first and fullest >= KV_ROOM:
        j.add(3 if window(f).failure else 1, said)
    elif (bound := cache_bound(f)) and window(f).failure:
        j.add(3, f"{bound}; {said}")
    elif window(f).failure and median(per) >= CACHE_FULL:
        # The cache holds many sequences of the longest context the engine was started
        # for; one request holding all of it is a conversation grown to the cache's size,
        # and whoever comes next waits for it to end.
        j.add(3, f"each request running held the whole KV cache: {said}")
    else:
        j.evidence_against.append(said)


def _queued_with_room(f: Facts) -> str | None:
    """A queue a longer context makes waits for the cache: the engine admits by free blocks.
    Requests that waited in most of the stats lines while the cache was under half used
    (the median of those lines) waited for a slot, however the cache per request moved."""
    queued = [r.cache for r in f.stats if r.waiting > 0 and r.cache is not None]
    if len(queued) < STATS_QUEUE_SHARE * len(f.stats) or median(queued) >= KV_ROOM:
        return None
    return (
        f"requests waited in {len(queued)} of the engine's last {len(f.stats)} stats lines "
        f"while the KV cache was {median(queued):.0%} used (median): they waited for a slot, "
        "not for the cache"
    )


def _prompts_in_log(f: Facts, j: Judgement) -> None:
    """llama-server logs each request's length against its slot's context: requests growing
    through the log's tail, the last third filling most of the slot, is the conversations
    getting longer."""
    read = log_prompts(f)
    if read is None:
        return
    grew, full, said = read
    if grew:
        j.add(3 if window(f).failure else 1, said)
    elif full and (failure := window(f).failure):
        # Long already, if not seen growing: each prompt fills the slot, and reading it
        # takes the longest a prompt can; an answer that did not come in time is that, as
        # is an allocation on the card failing while the slots held the most they hold.
        j.add(
            3 if failure.timed_out or card_ran_out(f) else 2,
            f"{said}: the prompts nearly fill the slot",
        )
    else:
        j.evidence_against.append(said)


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
            3 if window(f).failure else 1,
            f"the engine's log: {late} of its last {third} requests outgrew their slot "
            f"(released with truncated = 1), none of its first {third}",
        )


def _contexts_loaded(f: Facts, j: Judgement) -> None:
    """Ollama reloads a model when a caller asks for a longer num_ctx than it was loaded
    with: one model's latest load, in the log, given more context than its first is the
    conversations outgrowing their context (and each reload asking more memory)."""
    for name, said, grew in model_contexts(f):
        if grew:
            j.add(
                3 if window(f).failure else 1,
                f"the model {name} was reloaded with longer contexts ({said} tokens per "
                "sequence): callers asked for more context than it had",
            )
        else:
            j.evidence_against.append(f"the model {name} kept its context over its loads ({said})")


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
    memory = memory_series(f)
    if memory and j.score and shapes.climb(f.series[memory[0]]).verdict:
        j.add(1, f"{memory[1]} climbed with it")


def _creep_in_window(f: Facts, j: Judgement, cache: list[str]) -> bool:
    """The cache held per running request in the hour before the failure, against the
    highest hourly level of the rest of the day: longer conversations, not more of them.
    Whether any measure read higher in the hour before than in any hour earlier."""
    higher = False
    w = window(f)
    running = f.series.get("requests_running", [])
    prompts, natural = _prompts_grew(f, j)
    busier = busier_than_usual(f)
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
        if name == "context_high_water" and (followed := _memory_followed(f)):
            # Where the prompts, read directly, kept their length and more callers came, the
            # memory followed their requests reaching further: a note.
            j.add(3 if w.failure and not (natural and busier) else 1, followed)
            continue
        if name == "kv_cache" and (room := cache_had_room(f)):
            j.evidence_against.append(f"{room}: room to spare")
            continue
        against = against_usual(w, measure)
        if against is None:
            j.missing.append(f"readings of {words} in the hour before and earlier in the day")
            continue
        now, before = against
        higher = higher or now > before
        said = f"{label} {shapes.plain(now)} in the hour before, against at most " + (
            f"{shapes.plain(before)} in any hour earlier"
        )
        climb = shapes.climb(w.incident(measure))
        # Days-long creep: the whole history climbs, each quarter above the last (a rhythm
        # goes back down at night; this does not).
        steady = shapes.climb(measure)
        grew = _high_water_grew(w, series) if name == "context_high_water" else None
        rose = rose_past(now, before)
        high_water = name == "context_high_water"
        if rose and natural and (high_water or (busier and not w.failure)):
            # A high-water is the longest of the requests seen: one long request, or more of
            # them reaching further, moves it though each is as long as before (the
            # prompts, read directly, did not grow). With nothing failed the cache per
            # request reads the same way beside more load: a batch's sequences share the
            # cache otherwise than a chat's, each prompt as long.
            why = "more requests ran, each as long" if busier else "one long request moves it"
            j.add(1, f"{label} rose past its usual range ({said}), though {natural}: {why}")
        elif rose:
            j.add(_unless_healthy(w, name), f"{label} rose past its usual range: {said}")
            if climb.verdict:
                j.add(1, f"and climbed through the incident window: {climb.why}")
        elif steady.verdict and name == "context_high_water" and natural:
            j.add(
                1,
                f"{label} climbed through the whole look-back ({steady.why}), though "
                f"{natural}: a high-water rises by nature",
            )
        elif steady.verdict:
            climbed = f"{label} climbed through the whole look-back: {steady.why}"
            j.add(_unless_healthy(w, name), climbed)
        elif grew and natural:
            # A high-water only rises; the prompts, read directly, did not grow.
            j.add(1, f"{grew}, though {natural}: a high-water rises by nature")
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
    return higher


def _memory_followed(f: Facts) -> str | None:
    """A memory line that stepped up at the very readings the context high-water set new
    records, in the hours a creep takes: by a share of its pool worth a leak's, and most of
    what the line rose in those hours. The memory follows the conversations' length. One
    long request moves a high-water; that it moved the memory too is the context's memory,
    however long the other prompts were."""
    w = window(f)
    since = w.end - CREEP_LOOK_S
    for name, label in memory_lines(f):
        pool = pool_size(f, name)
        moved = rose_with_the_context(f, name, since)
        line = known([(t, v) for t, v in w.upto(f.series[name]) if t >= since])
        rose = median(line[-3:]) - median(line[:3]) if line else 0.0
        if moved and pool and moved[0] >= max(LEAK_SHARE * pool, rose / 2):
            return f"the {label} followed the conversations' length: {moved[1]}"
    return None


def _unless_healthy(w: Window, name: str) -> int:
    """The high-water only rises, and a day after a restart it climbs by nature: without a
    failure its rise is a note, with one it is the creep that led there."""
    return 3 if w.failure or name != "context_high_water" else 1


def _high_water_grew(w: Window, series: shapes.Series) -> str | None:
    """The context high-water only rises (until a restart): a creep that began hours
    before the failure shows as the mark now against where it stood CREEP_LOOK_S
    earlier, even where it has levelled off at the context's limit."""
    now = known(w.last(series, RECENT_S))
    then = known([(t, v) for t, v in series if t <= w.end - CREEP_LOOK_S])
    if not now or not then or then[-1] <= 0:
        return None
    if now[-1] >= CREEP_OVER_USUAL * then[-1]:
        return (
            f"the context high-water rose from {then[-1]:.0f} to {now[-1]:.0f} tokens in the "
            f"{CREEP_LOOK_S / HOUR_S:.0f} h before the failure: longer conversations"
        )
    return None


def _prompts_grew(f: Facts, j: Judgement) -> tuple[bool | None, str | None]:
    """The prompt lengths as the creep's evidence, for or against: whether they grew, and
    why a rising high-water or cache per request is not the conversations' (the prompts
    kept their length, or a second model's callers came), in words, where it is not."""
    lengths = prompt_lengths(f)
    if lengths is None:
        return None, None
    grew, said = lengths
    if grew is None:
        j.missing.append(said)
    elif grew and (served := another_model_served(f)):
        # Its callers, counted with the first's, change the mix, and their requests move
        # the high-water with the prompts: both are another workload's.
        j.add(1, f"the prompts grew longer for answers of the same size ({said}), though {served}")
        return grew, f"{served}, another workload"
    elif grew and (
        # Longer prompts that a cache with room held (what failed did not run out for
        # them); a floor already rising before the hours a creep takes (a leak the prompts
        # grew beside): a note.
        though := cache_had_room(f, working=True) or rising_before(f, window(f).end - CREEP_LOOK_S)
    ):
        j.add(1, f"the prompts grew longer for answers of the same size ({said}), though {though}")
    elif grew:
        words = f"the prompts grew longer for answers of the same size: {said}"
        j.add(3 if window(f).failure else 1, words)
    else:
        j.evidence_against.append(f"the prompts did not grow past their usual length: {said}")
        return grew, "the prompts kept their length"
    return grew, None


def _preempted(f: Facts, j: Judgement, explained: bool) -> None:
    """vLLM and SGLang preempt a running request when the KV cache has no room for the
    conversations: preemptions in the hour before, where the hours before had few, are
    the cache running out (a cache already near full all day says nothing by its level).
    `explained`: more callers came, or the prompts kept their length; then more sequences
    filled the cache, and its running out is theirs."""
    if not history(f, "preemptions"):
        return
    w = window(f)
    per_hour = hourly(w.reference(f.series["preemptions"]), lambda vs: max(vs) - min(vs))
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
