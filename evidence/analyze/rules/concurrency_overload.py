"""The rule for concurrency-overload: "Concurrency beyond the plan: more callers than slots"."""

from evidence.analyze import shapes, statlines
from evidence.analyze.facts import Facts
from evidence.analyze.failure import came_up, is_server
from evidence.analyze.rules.callers import QUEUE_DEEPER, busier_than_usual, slots_held
from evidence.analyze.rules.context_length import (
    PROMPT_MIN_GENERATED,
    STATS_QUEUE_SHARE,
    STATS_UNFAILED,
    cache_bound,
    log_prompts,
    prompt_lengths,
    thirds,
)
from evidence.analyze.rules.engine_log import stopped_in_stats, waited_in_log
from evidence.analyze.rules.floors import LEAK_SHARE
from evidence.analyze.rules.judgement import NOTE_IS_EVIDENCE, Judgement, rule
from evidence.analyze.rules.memory import memory_lines, pool_size
from evidence.analyze.rules.pressure import PSI_HISTORY_HIGH, stall_shares, stalled
from evidence.analyze.rules.ran_out import card_ran_out, engine_ran_out
from evidence.analyze.rules.rises import engine_climbed, load_held, since_level
from evidence.analyze.rules.series import (
    HOUR_S,
    at,
    history,
    hourly,
    hourly_increase,
    hours_of,
    mean,
    per_second,
    readings,
    targets_began,
    up_through,
    window,
)
from evidence.analyze.rules.text import last
from evidence.analyze.window import INCIDENT_S, RECENT_S, known, share_above

QUEUE_AT_CAPTURE = 4  # four callers waiting at once behind full slots is a queue
QUEUE_SHARE = 0.3  # requests waited through a third of the hour before the failure (a
#                    queue drains between bursts of callers) ...
QUEUE_OVER_USUAL = 0.2  # ... and that much more of it than in the busiest hour before,
BURST_S = 900.0  # a queue of the quarter hour before a timeout, far deeper than ever before
QUEUE_SHARE_TIMED_OUT = 0.15  # an answer that did not come in time behind this much queue
QUEUE_SHARE_UNFAILED = 0.5  # with nothing failed: half the hour, twice the margins
READINGS_GONE_S = 30 * 60.0  # a history ending this long before the failure missed its end
STALL_LEADS_S = 900  # a stall this far ahead of the queue is what the queue formed behind
STALL_DEEPER = 1.25  # a stall this far past its worst hour before is tonight's, not the box's
QUEUED = 0.5  # requests waiting: a gauge of whole requests, averaged by a scrape's step
SLOWED_SHARE = 0.8  # serving under this share of a usual busy hour is an engine slowed
NEWCOMER_SHARE = 0.8  # the queue on servers started in the incident window, for the most part


@rule("concurrency-overload")
def concurrency_overload(f: Facts) -> Judgement:
    j = Judgement()
    if not f.has("requests_waiting"):
        queue = _queue_in_log(f)
        if queue and not window(f).failure:
            # Minutes of an engine's log with nothing failed: a busy spell, worth a note.
            # A queue through an incident needs the incident, or hours of readings.
            j.add(2, f"{queue}; nothing failed")
            return j
        if queue:
            j.add(3, queue)
        elif bound := cache_bound(f):
            j.evidence_against.append(bound)
        else:
            j.missing.append(
                "requests waiting (llamacpp:requests_deferred, "
                "vllm:num_requests_waiting, sglang:num_queue_reqs)"
            )
    elif history(f, "requests_waiting"):
        read = _queue_in_window(f, j)
        failure = window(f).failure
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
        elif max(readings(f, "requests_waiting")) > 0:
            j.evidence_against.append(f"requests waited only briefly: {waiting.why}")
        else:
            j.evidence_against.append("nothing ever waited for a slot")
    running = readings(f, "requests_running")
    if running and max(running) > 1 and j.score >= NOTE_IS_EVIDENCE:
        held = slots_held(f)
        if held:
            j.add(1, f"{held} while others waited")
        else:
            # Fewer ran than the slots have held while others waited: what held them back
            # was not the slots (a cache too full for the next sequence is a creep's).
            j.evidence_for.append(f"up to {max(running):.0f} requests ran at once")
    if f.lines.get("slot-unavailable"):
        j.add(2, f"the log says a slot was unavailable: {last(f, 'slot-unavailable')}")
    stopped = stopped_in_stats(f) if j.score else None
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
    newcomer = _queue_of_a_newcomer(f) if j.score >= NOTE_IS_EVIDENCE else None
    if newcomer:
        # More callers than slots is against the plan the box served by; a server started
        # in the incident window beside one that served on has no plan of its own yet.
        j.score = min(j.score - 2, 1)
        j.evidence_against.append(newcomer)
    climbed = _climbed_under_held_load(f) if j.score >= NOTE_IS_EVIDENCE else None
    if climbed:
        # A queue holds memory only for what runs: with as many running to the end, the
        # memory that ran out climbed for something else (the engine's own).
        j.score = min(j.score - 2, 1)
        j.evidence_against.append(climbed)
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


def _queue_of_a_newcomer(f: Facts) -> str | None:
    """The queue of the hour before the failure was, for the most part (NEWCOMER_SHARE),
    on servers that came up in the incident window while a server up before them served on
    to the failure, in words. A model loaded beside another takes callers of its own from
    its first minute: they queue behind its slots because it was just started, not
    because more of them came than the box was planned for."""
    w = window(f)
    if not w.failure or len(f.queues) < 2:
        return None
    began = targets_began(f)
    came = {
        key: times[-1]
        for key in f.queues
        if (times := [t for t in came_up(w.upto(f.targets.get(key, [])), began) if t >= w.start])
    }
    if not came:
        return None
    depth = {key: mean(known(w.last(q, HOUR_S)) or [0.0]) for key, q in f.queues.items()}
    total = sum(depth.values())
    if total <= 0 or sum(depth[k] for k in came) < NEWCOMER_SHARE * total:
        return None
    first = min(came.values())
    kept = [
        key
        for key, s in f.targets.items()
        if is_server(key)
        and key not in came
        and any(v == 1 for t, v in s if t < first)
        and up_through(w.upto(s), first, w.end)
    ]
    if not kept:
        return None
    newest = max(came, key=came.get)
    return (
        f"the requests waiting were {newest}'s, a server that came up {at(f, came[newest])} "
        f"while {kept[0]} served on: the callers of a model just loaded beside it, not more "
        "callers than the box's slots were planned for"
    )


def _climbed_under_held_load(f: Facts) -> str | None:
    """The engine ran out of memory after its line climbed quarter on quarter while the
    requests running held level, in words; None where the load grew with it or nothing
    ran out."""
    if engine_ran_out(f) is None:
        return None
    for name, label in memory_lines(f):
        pool = pool_size(f, name)
        if not pool or not load_held(f, since_level(window(f), f.series[name])):
            continue
        if climbed := engine_climbed(f, name, label, LEAK_SHARE * pool):
            return f"{climbed}, while the requests running held level: not the queue's memory"
    return None


def _slowed_by_a_stall(f: Facts) -> str | None:
    """Why the queue is a slowdown's and not more callers, while tasks stalled on memory:
    the stall began before the queue did, or the engines generated fewer tokens in the
    hour before the failure than in a usual busy hour before the incident window. More
    callers than slots keep the engine serving at least that much; a machine swapping
    serves less to the same callers, and they queue once it has slowed."""
    if not stalled(f):
        return None
    shares = stall_shares(f)
    if shares is not None and shares[0] < STALL_DEEPER * shares[1]:
        return None  # stalled about as much in the hours before: how this box runs
    w = window(f)
    stall = _since(per_second(w.upto(f.series.get("psi_some_seconds", []))), PSI_HISTORY_HIGH)
    queue = _since(w.upto(f.series.get("requests_waiting", [])), QUEUED)
    if stall is not None and queue is not None and stall <= queue - STALL_LEADS_S:
        return (
            f"tasks stalled on memory from {at(f, stall)} and requests queued only from "
            f"{at(f, queue)}: the queue formed behind the stall, not behind more callers"
        )
    if not history(f, "tokens_generated"):
        return None
    hourly = hourly_increase(w.upto(f.series["tokens_generated"]), w.end)
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
    lengths = prompt_lengths(f)
    if lengths and lengths[0]:
        return f"the prompts grew longer for answers of the same size ({lengths[1]})"
    read = log_prompts(f)
    if read and read[1]:
        return f"{read[2]} ({'grown to nearly fill' if read[0] else 'nearly filling'} it)"
    return None


def _queue_in_stats(f: Facts) -> str | None:
    """Where nothing scraped the queue, the engine's own stats lines say it: requests
    waiting in most of them with as many running as the engine ever ran at once."""
    lines = f.stats
    if not lines or (not window(f).failure and len(lines) < STATS_UNFAILED):
        return None
    if cache_bound(f):
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
    was, now = thirds([float(r.waiting) for r in lines])
    ran, runs = thirds([float(r.running) for r in lines])
    per = [r.cache / r.running for r in lines if r.cache is not None and r.running]
    longer = len(per) >= 3 and (p := thirds(per))[1] > p[0]
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
    return _queue_at_capture(f) or _queue_in_stats(f) or waited_in_log(f)


def _queue_at_capture(f: Facts) -> str | None:
    """A single reading can say it: at a failure, more requests waiting than running, every
    slot busy. Strong evidence below the line of a series is still evidence."""
    waiting = readings(f, "requests_waiting")
    running = readings(f, "requests_running")
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
    w = window(f)
    seen = [t for t, v in w.upto(f.series[name]) if v is not None]
    gap = w.end - seen[-1] if seen else 0.0
    return gap if gap > READINGS_GONE_S else 0.0


def _queue_in_window(f: Facts, j: Judgement) -> bool:
    """Requests waiting through the hour before the failure, against the busiest hour
    before the queue began: a queue that lasted this incident, however long, and not the
    machine's usual busy hour. False where the history has no readings of that hour."""
    w = window(f)
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
    depth = mean(known(recent))
    usual_depth = max(hourly(before, mean), default=0.0)
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
        routine = f.bundle["trigger_kind"] == "cron"
        if not w.failure and (routine or not slots_held(f)):
            # Nothing failed, and either a routine snapshot (a batch queues by design, and a
            # day's look-back need not hold its last run) or fewer ran than the slots had
            # held: the engine paced what it admitted (a batch sent faster than its cache
            # takes), every caller still served in turn. Worth a note, not a fault.
            most = max(readings(f, "requests_running"), default=0.0)
            paced = "" if routine else f", fewer running than the {most:.0f} it ran at once"
            j.add(
                2,
                f"requests waited for a slot: {said} (up to {peak:.0f}){paced}; nothing failed",
            )
            return True
        j.add(3, f"requests waited for a slot through the incident: {said} (up to {peak:.0f})")
    elif timed_out_behind and stalled(f):
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
    elif w.failure and card_ran_out(f) and share >= QUEUE_SHARE_TIMED_OUT and depth >= 1:
        # Each sequence running holds its cache and activations on the card: a busy hour
        # queues here every day, and this time the card ran out under it.
        j.add(
            3,
            f"requests waited for a slot when the engine's allocation failed: {said}; a "
            "busy hour here queues too, this one ran the card out",
        )
    elif (timed_out or (w.failure and card_ran_out(f))) and (
        burst := _burst(series, before, w.end)
    ):
        # Callers piling in all at once (a retry storm, an agent loop) fill the queue in
        # minutes: too short for a share of the hour, far past anything earlier. Either an
        # answer did not come in time behind them, or the sequences they brought in ran
        # the card out.
        j.add(3, f"requests piled up in the minutes before {w.failure.what}: {burst}")
    elif timed_out and (crowd := _crowded(f, series, w.end)):
        # A queue no deeper than a busy spell's earlier in the day, but behind more callers
        # than any hour before, every slot taken, when the answer did not come in time.
        j.add(3, f"requests piled up behind full slots when {w.failure.what}: {crowd}")
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
    tail = _queue_at_end(series, end)
    deepest = max(known(before), default=0.0)
    if len(tail) < 2 or mean(tail) < max(QUEUE_AT_CAPTURE, QUEUE_DEEPER * deepest):
        return None
    return (
        f"{mean(tail):.0f} waiting on average over its last {len(tail)} readings (up to "
        f"{max(tail):.0f}), against at most {deepest:.0f} at any reading before"
    )


def _queue_at_end(series: shapes.Series, end: float) -> list[float]:
    """The readings of the last BURST_S that end the series with requests waiting."""
    last = known([(t, v) for t, v in series if t >= end - BURST_S])
    run = next((i for i, v in enumerate(reversed(last)) if v <= 0), len(last))
    return last[len(last) - run :]


def _crowded(f: Facts, series: shapes.Series, end: float) -> str | None:
    """The queue that holds the readings of the last BURST_S to the end (at least two of
    them, QUEUE_AT_CAPTURE deep on average) while the slots held and more ran than in any
    hour before, in words; None otherwise."""
    tail = _queue_at_end(series, end)
    if len(tail) < 2 or mean(tail) < QUEUE_AT_CAPTURE:
        return None
    busier = busier_than_usual(f)
    if not (busier and slots_held(f)):
        return None
    return f"{mean(tail):.0f} waiting over its last {len(tail)} readings; {busier}"


def _hourly_shares(series: shapes.Series) -> list[float]:
    """Per hour of the series (`hours_of`), the share of it with requests waiting."""
    shares = [share_above(pts, 0) for pts in hours_of(series).values()]
    return [x for x in shares if x is not None]
