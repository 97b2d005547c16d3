"""The rule for leak-ratchet: "A leak or fragmentation: the floor ratchets"."""

import math

from evidence.analyze import shapes
from evidence.analyze.facts import Facts, card_line
from evidence.analyze.failure import (
    is_engine,
    is_server,
    is_service,
    up_since,
    victim,
)
from evidence.analyze.rules.context_length import (
    against_usual,
    cache_had_room,
    model_contexts,
    prompt_lengths,
    rose_past,
)
from evidence.analyze.rules.floors import (
    FLOOR_NOISE,
    LEAK_MIN_STRETCHES,
    LEAK_SHARE,
    LEAK_STRETCH_S,
    grown,
    quiet_floors,
    rising_floors,
    unload_staircase,
)
from evidence.analyze.rules.judgement import Judgement, rule
from evidence.analyze.rules.memory import (
    SHARED_JUMP,
    is_card,
    memory_lines,
    memory_series,
    pool_size,
    ran_low,
)
from evidence.analyze.rules.models import MODEL_MIN_BYTES, MODEL_SHARE, single_model
from evidence.analyze.rules.pressure import SWAP_FILLED_BYTES, swap_taken
from evidence.analyze.rules.processes import DESKTOP_APPS, arrival, largest_other
from evidence.analyze.rules.ran_out import (
    card_ran_out,
    counted_kill_at,
    engine_ran_out,
    killed,
    kills_in_history,
    machine_killed,
    memory_ran_out,
    recent_kills,
)
from evidence.analyze.rules.rises import (
    FULL_SHARE,
    HELD_S,
    LEAK_ONE_JUMP,
    LOAD_TAKES_S,
    MODEL_LOADS_S,
    RELEASED,
    card_kept_the_context,
    card_stayed,
    engine_climbed,
    gave_back_while_quiet,
    passed_between,
    released_at,
    rested,
    rise,
    rise_time,
    rose_while_idle,
    rose_with_the_context,
)
from evidence.analyze.rules.series import (
    HOUR_S,
    at,
    history,
    median,
    readings,
    started,
    targets_began,
    up_through,
    window,
)
from evidence.analyze.rules.survived import OUTLIVED_SHARE, freed_while_the_engines_answered
from evidence.analyze.rules.text import gib
from evidence.analyze.window import INCIDENT_S, RECENT_S, known

LEAK_SHARE_HOST = 0.08  # a host's floor drifts a few per cent a day (caches it cannot drop,
#                         desktop, logs): a leak there takes more of the machine
LEAK_UNFAILED = 1.25  # with nothing failed yet, a quarter more before it is named
LEAK_SPLIT_JUMP = 0.9  # a jump the grid split over two stretches: 90% of the rise (LEAK_ONE_JUMP)
DAY_ROUND_S = 20 * 3600.0  # a look-back this long begins at about the same hours the day before
DAY_ROUND_START_S = 15 * 60.0  # where the look-back begins: its first quarter hour
ENGINE_HELD = 0.5  # engines holding under half a rise another process holds did not leak it
RETURNED_DIP_STRETCHES = 2  # a swap to another model and back is over within hours
ENGINE_RSS = "engine_rss"  # the engines' process memory from their own /metrics
UP_AFTER_LOAD_S = 600.0  # `up` reads 1 within a few scrapes of a load's end


@rule("leak-ratchet")
def leak_ratchet(f: Facts) -> Judgement:
    j = Judgement()
    staircase = unload_staircase(f)
    if staircase:
        j.add(4, staircase)
    _leak_in_memory(f, j)
    _leak_per_process(f, j, named=j.score > 0)
    if j.score <= 0 and (outgrew := _outgrew_its_limit(f)):
        j.add(3, outgrew)
    return j


def _leak_in_memory(f: Facts, j: Judgement) -> None:
    """The leak on a memory line: floors in the history, else the bundle's own window."""
    memory = memory_series(f)
    if memory is None:
        j.missing.append("a memory series")
        return
    if history(f, memory[0]):
        _leak_in_history(f, j)
        return
    series = f.series[memory[0]]
    ratchet = shapes.ratchet(series, fmt=gib)
    if ratchet.verdict:
        j.add(3, f"{memory[1]} ratcheted: {ratchet.why}")
        if f.has("kv_cache") and not shapes.climb(f.series["kv_cache"]).verdict:
            j.add(1, "the KV cache did not climb with it: the rise is not the cache")
    else:
        floor = shapes.flat_floor(series, fmt=gib)
        if floor.verdict:
            j.evidence_against.append(f"the floor is flat between bursts: {floor.why}")
        else:
            j.evidence_against.append(f"{memory[1]}: {ratchet.why}")
    if f.has("kv_cache") and shapes.climb(f.series["kv_cache"]).verdict:
        j.evidence_against.append("the rise tracks the KV cache (context creep)")
    step = shapes.step(series, fmt=gib)
    if step.verdict and (step.size or 0) > 0 and not ratchet.verdict:
        j.evidence_against.append(f"one step that stays, not a ratchet: {step.why}")
    rhythm = shapes.daily_rhythm(series, fmt=gib)
    if rhythm.verdict:
        j.evidence_against.append(f"a daily rhythm, which is not a trend: {rhythm.why}")


def _leak_per_process(f: Facts, j: Judgement, named: bool) -> None:
    """One process followed through the host's earlier bundles and this one: its resident
    memory floor higher at each bundle than at the last, by a size that matters. Named
    even before anything fails; where a memory line already showed the leak (`named`), the
    process is who leaked, not a second leak."""
    for name, said in grown(f):
        if name in DESKTOP_APPS:
            # Through a waking day a browser gains tabs and a shell windows: its user's day.
            j.evidence_against.append(f"{said}: a desktop app growing with its user's day")
        elif not is_engine(name) and window(f).failure and (ran_low(f) or machine_killed(f)):
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


def _leak_in_history(f: Facts, j: Judgement) -> None:
    """Floors between busy spells that rise stretch after stretch and never come back in
    the quiet hours, on any memory line (the card's or the host's), up to the failure."""
    w = window(f)
    for name, label in _leaked_into(f):
        pool = pool_size(f, name)
        upto = w.upto(f.series[name])
        floors = quiet_floors(f, name, upto)
        if len(floors) < LEAK_MIN_STRETCHES:
            j.missing.append(f"{label}: floors in {LEAK_MIN_STRETCHES} quiet stretches")
            continue
        levels = [v for _, v in floors]
        # The machine's line drifts with everything on it; the engines' own lines do not.
        share = LEAK_SHARE if is_card(name) or name == ENGINE_RSS else LEAK_SHARE_HOST
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
        room = pool if pool and memory_ran_out(f) else None
        onset = rising_floors(levels, least, ceiling, room)
        said = f"from {gib(levels[0])} to {gib(levels[-1])} over {len(levels)} stretches"
        # The engine's death (the line collapses and stays down) or a restart released
        # what leaked: the readings up to it are the leak, what follows is a new process's
        # (or none). The stretch it fell in keeps its readings before it. A rise already
        # read is cut at a death alone: a restart in the window may be the leak's own.
        release = _release(f, name, floors) if onset is None else _died(f, name, floors)
        if release is not None:
            released = quiet_floors(f, name, [(t, v) for t, v in upto if t < release])
            if len(released) >= LEAK_MIN_STRETCHES:
                floors, levels = released, [v for _, v in released]
                onset = rising_floors(levels, least, ceiling, room)
        own = _less_the_card(f, floors) if name == "memory_used" and onset is not None else None
        if own and rising_floors([v for _, v in own], least, ceiling, room) is None:
            j.evidence_against.append(
                f"the {label} floor rose with the accelerator's: less the card's it went from "
                f"{gib(own[0][1])} to {gib(own[-1][1])} and did not ratchet, nor did the "
                "card's own floors: models loaded into the shared pool"
            )
            return
        elsewhere = (
            not is_card(name)
            and name != ENGINE_RSS
            and onset is not None
            and (
                _card_ran_out_alone(f)
                or _outlived_the_engine(f, name, levels[onset], levels[-1])
                or freed_while_the_engines_answered(f, name, levels[onset], levels[-1], "the rise")
                or rose_while_idle(f, name, floors[onset][0], levels[-1] - levels[onset])
                or gave_back_while_quiet(f, name, floors[onset][0], levels[-1] - levels[onset])
                or _only_as_swap_filled(f, floors, least)
                or (
                    name == "memory_used"
                    and (_held_elsewhere(f, levels) or _a_day_round(f, upto, levels[-1]))
                )
            )
        )
        if elsewhere:
            j.evidence_against.append(elsewhere)
            return
        one_card = onset is not None and name != "accelerator_used" and is_card(name)
        if one_card and (moved := _moved_between_cards(f, floors[onset:], release)):
            j.evidence_against.append(f"the {label} floor rose {moved}")
            continue
        if onset is not None:
            hours = (w.end - floors[onset][0]) / HOUR_S
            rose = f"from {gib(levels[onset])} to {gib(levels[-1])} over the last {hours:.0f} h"
            flat = f", level before that at {gib(levels[0])}" if onset else ""
            j.add(3, f"the {label} floor rose in the quiet hours and never came back: {rose}{flat}")
            if stepped := _one_step(f, name, floors[onset:], pool):
                if climbed := engine_climbed(f, name, label, least):
                    # The jump is the last hours' climb to the failure, not a step.
                    j.evidence_for.append(climbed)
                    return
                j.score -= 2
                j.evidence_against.append(stepped)
                return
            cache = [n for n in ("kv_cache", "context_high_water") if history(f, n)]
            # The cache tracks the rise where it climbed with it, or where it rose past its
            # usual range in the hour before the failure while most of the rise came in the
            # incident window (a floor that rose all day did not wait for the cache).
            earlier = [v for t, v in floors[onset:] if t < w.start]
            late = not earlier or levels[-1] - earlier[-1] >= (levels[-1] - levels[onset]) / 2
            # A high-water only rises, and one long request moves it: where the prompts, read
            # directly, kept their length, neither its climb through the day nor a jump is the
            # conversations growing. A cache with room to spare in the hour before took
            # nothing more, however it rose.
            lengths = prompt_lengths(f)
            natural = lengths is not None and lengths[0] is False
            tracked = [
                n
                for n in cache
                if not (n == "kv_cache" and cache_had_room(f))
                and not (n == "context_high_water" and natural)
                and (
                    shapes.climb(w.upto(f.series[n])).verdict
                    or (late and (now := against_usual(w, f.series[n])) and rose_past(*now))
                )
            ]
            # However the prompts read, a floor that rose, for the most part, at the very
            # readings the longest conversation yet arrived holds the conversations (a
            # leak's remainders come with the busy spells, whatever their length).
            moved = rose_with_the_context(f, name, floors[onset][0])
            stepped_with = (
                moved[1] if moved and moved[0] >= (levels[-1] - levels[onset]) / 2 else None
            )
            reloaded = [said for _, said, grew in model_contexts(f) if grew]
            # Without a context reading, llama-server's card climbing past the whole day in
            # the hour before, after a day held within half of that, is the context's record.
            kept = not cache and name == "accelerator_used" and card_kept_the_context(f)
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
            if stepped_with or tracked or reloaded or kept or prompts:
                j.score -= 1
                j.evidence_against.append(
                    f"the rise is the context's (context creep): {stepped_with}"
                    if stepped_with
                    else f"the rise tracks the {tracked[0].replace('_', ' ')} (context creep)"
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
        if name == ENGINE_RSS and (own := _own_memory_climbed(f, least)):
            j.add(3, own)
            return
        climbed = engine_climbed(f, name, label, least)
        if climbed:
            j.add(3, climbed)
            return
        low = levels.index(min(levels))
        if levels[-1] - levels[low] >= least and levels[-1] <= max(levels[: low + 1]):
            j.evidence_against.append(
                f"the {label} floor climbed back from {gib(levels[low])} to where it was "
                f"before ({said}): a reload, not a leak"
            )
        elif pool and abs(levels[-1] - levels[0]) < LEAK_SHARE * pool:
            j.evidence_against.append(f"the {label} floor is flat between bursts: {said}")
        else:
            j.evidence_against.append(f"the {label} floor did not ratchet: {said}")


def _only_as_swap_filled(f: Facts, floors: list[tuple[float, float]], least: float) -> str | None:
    """Why a host floor's rise is the working set, not a leak: before the incident window
    the floors rose less than a leak's least, and the rest came in the window as swap
    filled, and nothing was killed. A leak takes hours to show and runs memory out; what
    outgrew it in the last hours, pushed pages out and stalled the machine is the stall's."""
    w = window(f)
    before = [v for t, v in floors if t < w.start]
    if not before:
        return None
    rose_before = before[-1] - floors[0][1]
    taken = swap_taken(f) or 0.0  # no swap read, or none at all: nothing filled
    if (
        rose_before >= least
        or taken < SWAP_FILLED_BYTES
        or memory_ran_out(f)
        or counted_kill_at(f) is not None
    ):
        return None
    return (
        f"the floor rose {gib(rose_before)} before the incident window and "
        f"{gib(floors[-1][1] - before[-1])} in it, as swap took {gib(taken)}: the working "
        "set outgrowing memory, not a leak"
    )


def _own_memory_climbed(f: Facts, least: float) -> str | None:
    """The engines' own process memory in the hour before the failure above the most it
    held at any reading before the incident window, by `least`, in words. A process that
    keeps neither a cache nor weights on the host (vLLM's API server) climbing past its
    busiest hours of the day leaked, whatever the load: its floors, read between busy
    spells, miss a climb through the work that ran to the failure."""
    w = window(f)
    series = w.upto(f.series[ENGINE_RSS])
    recent, before = known(w.last(series, RECENT_S)), known(w.reference(series))
    if recent and len(before) >= 3 and max(recent) - max(before) >= least:
        return (
            f"the engine's own resident memory climbed to {gib(max(recent))} in the hour "
            f"before the failure, {gib(max(recent) - max(before))} above the most it held at "
            f"any reading before the incident window ({gib(max(before))})"
        )
    return _own_memory_held(f, series, least)


def _own_memory_held(f: Facts, series: shapes.Series, least: float) -> str | None:
    """The engines' own process memory, level through a stretch, then up by `least` and
    never back below that, to the failure, with no server coming up meanwhile, in words.
    Their processes hold no weights on the host (a model loads into a new process, whose
    coming up says so), so a rise that stays is theirs however fast it came: a leak that
    filled the machine in an hour and then waited for the kill reads as one step."""
    pts = [(t, v) for t, v in series if v is not None]
    if not pts:
        return None
    # Read from the last start of a server before the failure: a new process, new memory.
    since = max((t for t in started(f, is_server) if t <= pts[-1][0]), default=pts[0][0])
    pts = [(t, v) for t, v in pts if t >= since]
    first = [v for t, v in pts if t < pts[0][0] + LEAK_STRETCH_S]
    base = min(first)
    onset = next((k for k, (_, v) in enumerate(pts) if v >= base + least), None)
    if onset is None or pts[onset][0] - pts[0][0] < LEAK_STRETCH_S or len(pts) - onset < 3:
        return None
    held = min(v for _, v in pts[onset:])
    if held < base + least:
        return None
    return (
        f"the engine's own resident memory rose from {gib(base)} to {gib(pts[-1][1])}, "
        f"beginning {at(f, pts[onset][0])}, and never came back below {gib(held)}, with no "
        "server coming up: its process grew, and its process holds no model"
    )


def _less_the_card(f: Facts, floors: list[tuple[float, float]]) -> list[tuple[float, float]] | None:
    """The host's floors less the card's at the same stretches, where the two share one
    pool: the card's largest jump between two stretches, the size of a model, shows in the
    host's floors as much (a discrete card's load leaves the host's line where it was).
    None where nothing says the pool is shared."""
    if not history(f, "accelerator_used"):
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
    return dict(quiet_floors(f, "accelerator_used", window(f).upto(f.series["accelerator_used"])))


def _held_elsewhere(f: Facts, levels: list[float]) -> str | None:
    """Why the host's rise is not the engines': at the capture it is still held (nothing
    died or was given back) and the engines the process table shows hold less than
    ENGINE_HELD of it (their resident memory and, on a unified machine, their accelerator
    memory). A leak is held by the leaker: a job's working set, a notebook, a build, a
    desktop's day of browser tabs hold the rest, however the floors look."""
    if not f.measured("processes") or recent_kills(f):
        return None
    now = [v for _, v in f.series.get("memory_used", []) if v is not None]
    if not now or now[-1] < RELEASED * levels[-1]:
        return None
    rise = levels[-1] - min(levels)
    engines = {p["pid"] for p in f.processes if is_engine(p["name"] or "")}
    held = sum(p["rss_bytes"] or 0 for p in f.processes if p["pid"] in engines)
    if any(d["unified_memory"] for d in f.gpu_devices):
        listed = [p["used_bytes"] or 0 for p in f.gpu_processes if p["pid"] in engines]
        card = readings(f, "accelerator_used")
        held += sum(listed) if listed else (card[-1] if card else 0.0)
    if came := arrival(f):
        # However much the engines hold (their weights, all day), it is the arrival that
        # the floor rose for.
        return f"{came}: the floor rose for it"
    other, most, _ = largest_other(f)
    # Several others between them: only where the cards were read, so that what an APU's
    # engine holds outside its resident memory is counted above.
    if (
        not engines
        or held >= ENGINE_HELD * rise
        or (most < ENGINE_HELD * rise and not f.gpu_devices)
    ):
        return None
    return (
        f"the engines hold {gib(held)} at the capture and {other} {gib(most)}, of the "
        f"{gib(rise)} the floor rose and still held: "
        + (
            "another process's growth, not the engine's"
            if most >= ENGINE_HELD * rise
            else "other processes' growth, not the engine's"
        )
    )


def _card_ran_out_alone(f: Facts) -> str | None:
    """On a discrete card, an allocation failed on the card and the kernel killed nothing:
    the card ran out, and the host's memory is another pool. A host floor rising beside it
    did not take the card's room, whatever it rose by."""
    if not f.gpu_devices or any(d["unified_memory"] for d in f.gpu_devices):
        return None
    if not card_ran_out(f) or killed(f):
        return None
    return (
        "what ran out was the card (its allocation failed; the kernel killed nothing), a pool "
        "of its own on this discrete card: the host's rise beside it is not this failure's"
    )


def _outlived_the_engine(f: Facts, name: str, floor: float, risen: float) -> str | None:
    """The kernel killed and the engine went down: had the engine leaked the rise, its
    death gave the rise back (its whole memory with it, to below the floor the rise began
    from). The machine still holding a good share of the rise in the minutes after is
    another process's growth, the host running out, whatever the floors looked like."""
    w = window(f)
    if not w.failure or not (machine_killed(f) or kills_in_history(f)):
        return None
    after = known([(t, v) for t, v in f.series[name] if w.end < t <= w.end + HELD_S])
    if not after or min(after) - floor < OUTLIVED_SHARE * (risen - floor):
        return None
    return (
        f"with the engine down the machine still held {gib(min(after))}, "
        f"{gib(min(after) - floor)} above the floor of {gib(floor)} the rise began from: the "
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
    if window(f).failure or not pts or pts[-1][0] - pts[0][0] < DAY_ROUND_S:
        return None
    before = median([v for t, v in pts if t < pts[0][0] + DAY_ROUND_START_S])
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
        servers = [s for t, s in f.targets.items() if is_server(t) and up_since(s) is not None]
        if not servers or not all(up_through(s, fell_at, pts[-1][0]) for s in servers):
            return None
    return (
        f"the host's line stood at {gib(before)} a day earlier, fell to {gib(low)} "
        f"{at(f, fell_at)} while the engines ran on, and rose back: the day's round of "
        "something else, not the engine's memory piling up"
    )


def _one_step(
    f: Facts, name: str, floors: list[tuple[float, float]], pool: float | None
) -> str | None:
    """Why most of the floors' rise is one step, not a ratchet; None when it is not. One
    jump between two stretches carries most of it, and it is a load: a server came up
    then, or nothing says the engine's own memory ran out and it did not take longer
    than a model loads, or the jump is the size of a model and came at once (a leak's
    remainders of one busy spell pile up over its hours)."""
    # A swap and back inside the run is no jump: the climb back is where it was before.
    # (The first and last floors stay, so the rise is the run's.)
    floors = _without_returned_dips(floors)
    levels = [v for _, v in floors]
    if name == "memory_used" and history(f, "accelerator_used"):
        # On a shared pool what is loaded into the card shows in the host's line too. The
        # card's own floors were read first and did not ratchet: a host rise that is
        # mostly the card's is its models loading, not a leak.
        card = _card_floors(f)
        if floors[0][0] in card and floors[-1][0] in card:
            rose = card[floors[-1][0]] - card[floors[0][0]]
            if rose >= LEAK_ONE_JUMP * (levels[-1] - levels[0]):
                return (
                    f"the accelerator's floor rose {gib(rose)} of it, without a ratchet: "
                    "models loaded into the shared pool"
                )
    jumped = _largest_jump(f, name, floors)
    if jumped is None:
        return None
    low, high = jumped
    size = levels[high] - levels[low]
    said = f"most of the rise is one jump of {gib(size)} between two stretches"
    start, stop = floors[low][0], floors[high][0] + LEAK_STRETCH_S
    span = [p for p in window(f).upto(f.series[name]) if start <= p[0] <= stop]
    step = shapes.step(span, fmt=gib)
    # The card read either side of the host's own step where one is seen: a load early in
    # the first stretch would set the card's median there after it, as if it had stayed.
    before, after = (start, start + LEAK_STRETCH_S), (floors[high][0], stop)
    # A server that came up once the line had risen (a scrape it missed, a restart) loaded
    # nothing of it: `up` turns 1 as a load ends, a few readings after at most.
    came = stop
    if step.verdict:
        began, reached = rise(span, step)
        before, after = (start, began), (reached, stop)
        came = reached + UP_AFTER_LOAD_S
    ran_out = engine_ran_out(f)
    if ran_out and card_stayed(f, name, before, after):
        # A server that came up then (llama-swap swapping away and back) loaded nothing
        # onto the card: the host's jump that stayed is the engine's own, and it ran out.
        return None
    if any(start <= t <= came for t in started(f)):
        return f"{said}, as a server came up: a step, not a ratchet"
    if any(grew for _, _, grew in model_contexts(f)):
        return f"{said}, as the model was reloaded with a longer context: a step, not a ratchet"
    if name == ENGINE_RSS:
        return None  # its process holds no model: a jump no new server explains is its own
    if ran_out is None:
        # Two-hour floors put a climb of an hour or two between two neighbours as well: a
        # model loads in minutes, a leak's busiest spell takes longer and reads between the
        # levels on its way (coarse readings jump between them however fast it was).
        if (
            step.verdict
            and reached - began > MODEL_LOADS_S
            and passed_between(span, step, began, reached)
        ):
            return None
        return f"{said}: a step, not a ratchet"
    # The engine's own memory ran out: a jump too small for a model, or one that took
    # hours, is what one busy spell left behind.
    if size < max(MODEL_SHARE * (pool or 0), MODEL_MIN_BYTES):
        return None
    if single_model(f):
        return None  # nothing here loads a second model: the jump is the engine's own
    if step.verdict and reached - began <= LOAD_TAKES_S and not rested(span, step):
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
        step = shapes.step(span, fmt=gib)
        if step.verdict and rise_time(span, step) <= MODEL_LOADS_S and not rested(span, step):
            return low, low + apart
    return None


def _release(f: Facts, name: str, floors: list[tuple[float, float]]) -> float | None:
    """With a failure, when the memory was released: the latest start of a service in the
    incident window (a target's `up` 0 -> 1), or the line dropping at its end and staying
    down (a death releases, it does not return). None when neither happened, or nothing
    failed."""
    w = window(f)
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
    if (died := _died(f, name, floors)) is not None:
        releases.append(died)
    return max(releases, default=None)


def _died(f: Facts, name: str, floors: list[tuple[float, float]]) -> float | None:
    """With a failure, when the line dropped at its end and stayed down (a death releases,
    it does not return): the final run of readings under RELEASED of the highest floor,
    begun in the incident window, dense (Prometheus) or coarse (the archive, then the
    capture). None when it did not, or nothing failed."""
    w = window(f)
    if not w.failure:
        return None
    pts = [(t, v) for t, v in f.series[name] if v is not None]
    i = released_at(pts, max((v for _, v in floors), default=0.0))
    return pts[i][0] if 0 < i < len(pts) and pts[i][0] >= w.start else None


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


def _engine_limit(f: Facts) -> float | None:
    """The size of the engine when its own memory limit killed it, within the hour."""
    for _, text in reversed(recent_kills(f)):
        if "Memory cgroup out of memory" in text:
            named = victim(text)
            if named and is_engine(named[0]) and named[1]:
                return float(named[1])
    return None


def _outgrew_its_limit(f: Facts) -> str | None:
    """The engine killed by its own memory limit (its unit's MemoryMax=, its container's)
    hours after it loaded: nothing outside its group took its room and it fitted once
    loaded, so what it holds grew to the limit. A box full all day hides that growth from
    its memory lines, and a growth that came in one busy spell leaves a step, not floors."""
    size = _engine_limit(f)
    if size is None:
        return None
    # A target first scraped after the host's history began was started then.
    memory = memory_series(f)
    history_start = f.series[memory[0]][0][0] if memory and f.series[memory[0]] else math.inf
    end, began = window(f).end, min(targets_began(f), history_start)
    if any(t > end - LOAD_TAKES_S for t in started(f, began=began)):
        return None  # it died loading: the limit is too small for the model, nothing grew
    return (
        f"the engine's own memory limit killed it at {gib(size)} resident, nothing outside "
        "its group taking its room: what it holds grew to the limit"
    )


def _leaked_into(f: Facts) -> list[tuple[str, str]]:
    """The lines a leak is read on: the memory lines, and before the host's its sum with
    swap where the kill gave swap back: on a machine at its ceiling, what the victim grew
    into."""
    lines = memory_lines(f)
    if _swap_given_back(f) and history(f, "memory_with_swap"):
        lines.insert(len(lines) - 1, ("memory_with_swap", "memory with swap"))
    # First the engines' own process memory, where their /metrics publish it: a leak there
    # is theirs whatever the machine's lines hold beside it.
    own = [(ENGINE_RSS, "engine's own resident memory")] if history(f, ENGINE_RSS) else []
    # Then each card alone, where there are several: one card's leak is half as steep in
    # the sum of two.
    return own + lines + [(card_line("used", c), f"card {c} memory") for c in f.cards]


def _moved_between_cards(
    f: Facts, floors: list[tuple[float, float]], release: float | None
) -> str | None:
    """Why one card's rising floors are not its leak: the cards' sum, read over the same
    stretches (up to the same release), rose less than half as much. The others gave
    back what it took: a model or a split moved between cards."""
    upto = [p for p in window(f).upto(f.series["accelerator_used"]) if p[0] < (release or math.inf)]
    total = dict(quiet_floors(f, "accelerator_used", upto))
    (start, low), (end, high) = floors[0], floors[-1]
    if start not in total or end not in total or total[end] - total[start] >= (high - low) / 2:
        return None
    return (
        f"{gib(high - low)} while all the cards together rose {gib(total[end] - total[start])}"
        ": the others gave it back, the memory moved between cards"
    )


def _swap_given_back(f: Facts) -> bool:
    """Swap filled through the incident window and, in the minutes after the kill, gave
    SWAP_FILLED_BYTES back: the victim's own pages were in it."""
    w = window(f)
    if not w.failure or not killed(f):
        return False
    used = f.series.get("swap_in_use", [])
    # A scrape at the failure's instant already reads the death's release.
    before = [v for t, v in used if w.start <= t < w.end]
    after = [v for t, v in used if w.end <= t <= w.end + HELD_S]
    return (
        bool(before and after)
        and min(before[-1] - before[0], before[-1] - min(after)) >= SWAP_FILLED_BYTES
    )
