"""The rule for host-exhaustion: "The machine ran out, not the engine"."""

import re

from evidence.analyze import shapes
from evidence.analyze.facts import Facts
from evidence.analyze.failure import engine_kill, is_server, is_service
from evidence.analyze.rules.checks import contrast, silent_engines
from evidence.analyze.rules.judgement import Judgement, rule
from evidence.analyze.rules.memory import (
    LOW_AVAILABLE,
    LOW_AVAILABLE_SAMPLED,
    nearly_full,
    ran_low,
    shared_pool,
)
from evidence.analyze.rules.pressure import stalled
from evidence.analyze.rules.processes import (
    CULPRIT_SHARE,
    culprit_of,
    furniture_of,
    grew_other,
    largest_other,
)
from evidence.analyze.rules.ran_out import (
    counted_kill_at,
    killed_unseen,
    kills_in_history,
    machine_killed,
    recent_kills,
)
from evidence.analyze.rules.series import HOUR_S, at, history, median, readings, up_through, window
from evidence.analyze.rules.text import gib, last
from evidence.analyze.window import RECENT_S, known

LIVE_OUTRANKS_S = 600  # a kill this long before a live hang is its context, not its cause
CRITICAL_AVAILABLE = 0.03  # under 3% available, read once, the machine is out
SWAP_FULL_SHARE = 0.1  # swap with under a tenth of it free is used up
ENDING_ONLY = 2  # under a verdict's least: an ending waits for the cause it ended
# Engine jobs whose Python /metrics carry the process's memory, however the operator named them.
PUBLISH_RSS = re.compile(r"vllm|sglang", re.I)


@rule("host-exhaustion")
def host_exhaustion(f: Facts) -> Judgement:
    j = Judgement()
    if not f.measured("kernel"):
        j.missing.append("the kernel log")
    kills = recent_kills(f)
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
        if ran_low(f):
            culprit = culprit_of(f, text)
        else:
            culprit = grew_other(f) if machine_killed(f) else None
        if culprit:
            j.add(2, culprit)
        elif engine_kill(text):
            name, most, group = largest_other(f)
            j.evidence_against.append(
                f"the victim was the engine and {name}, the largest other, is no culprit: "
                f"{furniture}; the engine's own growth ran the machine out"
                if (furniture := furniture_of(f, group, most))
                else "the victim was the engine and no other process held much: the engine's "
                "own growth ran the machine out"
            )
    elif f.lines.get("unit-oom"):
        j.add(3, f"systemd says the OOM killer killed a process of the unit: {last(f, 'unit-oom')}")
    elif killed_unseen(f):
        j.add(
            3,
            f"{window(f).failure.what}: outright, while macOS pushed memory out of RAM; its "
            "memory killer (jetsam) took it and logs nothing to the kernel log",
        )
    elif window(f).failure and ran_low(f) and not stalled(f) and (grew := grew_other(f)):
        # Nothing killed, and no stall to be the story: the process that grew into the
        # machine's memory is what it ran out for.
        j.add(2, grew)
    elif f.oom_kills:
        ago, text = f.oom_kills[-1]
        j.add(1, f"an OOM kill {ago / 3600:.1f} h before the capture, too early to be this "
              f"fault's: {text[:160]}")  # fmt: skip
    if f.lines.get("host-alloc-fail"):
        j.add(2, f"an allocation failed: {last(f, 'host-alloc-fail')}")
    pool = _pool_full(f)
    if pool:
        j.add(3, pool)
    if not kills and (spared := _engines_spared(f)):
        j.add(1, spared)
    if level := _engines_held_level(f):
        j.add(1, level)
    # Without another process seen growing, the machine running out is how the engine's
    # own growth ended (a leak, a second model, the cache): the cause is that growth.
    j.ending = not any("not an engine" in e or "not the engine" in e for e in j.evidence_for)
    grew = _card_grew(f)
    if grew:
        # Another process may hold more, but it is what rose that ran the machine out.
        j.evidence_against.append(grew)
        j.ending = True
    if history(f, "available"):
        # Ran out otherwise than by a kill here: an allocation failed, the pool filled, or
        # systemd says its unit was killed (a kill too early, or inside another limit, is
        # context and says nothing of tonight).
        ran_out = bool(pool or f.lines.get("host-alloc-fail") or f.lines.get("unit-oom"))
        machine_kill = bool(kills) and j.score >= 4
        _exhaustion_in_window(f, j, machine_kill, card_grew=bool(grew), ran_out=ran_out)
        if grew:
            # The engines' growth is the cause, whatever it was (the cache, a leak, a model
            # kept): the machine running out is only how it ended, never a verdict alone.
            j.score = min(j.score, ENDING_ONLY)
        return j
    available = readings(f, "available")
    if available and f.memory_total:
        low = min(available)
        if low < CRITICAL_AVAILABLE * f.memory_total:
            # Read in this capture, a reading an operator calls alarming on its own: the
            # machine is out, whatever else was or was not measured. An earlier bundle's
            # (another boot, perhaps) is a note.
            origin = f.origin.get("available", "")
            now = (origin == "bundle" or "recorder (" in origin) and "archive" not in origin
            j.add(3 if now else 2, f"available memory fell to {gib(low)} of {gib(f.memory_total)}")
        elif not kills:
            j.evidence_against.append(f"available memory never fell below {gib(low)}")
        collapse = shapes.collapse(f.series["available"])
        if collapse.verdict:
            j.add(1, f"available memory collapsed at the end: {collapse.why}")
    elif not available:
        j.missing.append("available memory")
    return j


def _pool_full(f: Facts) -> str | None:
    """On a unified machine (GB10, Strix Halo) the accelerator's pool is the host's memory:
    MemAvailable can look healthy while the pool the device reports is nearly all used."""
    d = nearly_full(f, unified=True)
    if d is None:
        return None
    return (
        f"the shared memory pool of {d['name']} was {gib(d['memory_used_bytes'])} of "
        f"{gib(d['memory_total_bytes'])} used: on one pool for CPU and GPU that is the "
        "machine out of memory"
    )


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
    w = window(f)
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
    killed = machine_kill or kills_in_history(f) > 0 or killed_unseen(f)
    if usual and low >= min(usual) and not killed and not f.lines.get("host-alloc-fail"):
        # As short earlier in the day and nothing ran out: the level the machine lives at
        # (an engine that preallocates the pool, a cache sized to fill it), not a shortage.
        j.evidence_against.append(
            f"available memory was as low earlier in the day ({gib(min(usual))}) and "
            "nothing was killed: the level this machine runs at"
        )
        return
    # The shortage weighs as this fault's evidence unless nothing ran out (no kill, no
    # allocation failure, no pool full) and the machine stalled: then the stall it caused
    # is the fault, and how the shortage looked is told but weighs nothing.
    weighs = killed or ran_out or not stalled(f)

    def detail(points: int, text: str) -> None:
        if weighs:
            j.add(points, text)
        else:
            j.evidence_for.append(text)

    said = f"available memory fell to {gib(low)} of {gib(total)} ({share:.0%})"
    # A box that lives at its ceiling (an engine preallocating the pool) was as short all
    # day: the shortage is not news, only the kill is.
    usual_level = bool(usual) and low >= min(usual)
    if usual_level:
        said = (
            f"available memory was down to {gib(low)} of {gib(total)} ({share:.0%}), as low "
            f"as earlier in the day ({gib(min(usual))})"
        )
    elif usual:
        said += f", against at least {gib(min(usual))} earlier in the day"
    if share < LOW_AVAILABLE and weighs:
        j.add(1 if usual_level else 2, f"{said} before the failure")
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
        j.evidence_against.append(f"available memory stayed comfortable: lowest {gib(low)}")
        return
    collapse = shapes.collapse(w.upto(series) if w.cut else series)
    if collapse.verdict:
        detail(1, f"available memory collapsed at the end: {collapse.why}")
    count = kills_in_history(f)
    if count and not machine_kill:
        j.add(2, f"the kernel's OOM-kill counter rose by {count:.0f} in the incident window")
    after = known([(t, v) for t, v in series if t > w.end])
    if after and max(after) > 2 * low:
        detail(1, f"available memory came back to {gib(max(after))} once the victim's was freed")
    if history(f, "accelerator_used"):
        card = shapes.step(w.incident(f.series["accelerator_used"]), fmt=gib)
        if not card.verdict and not card_grew:
            detail(1, "the accelerator's line stayed flat: the host ran out, not the card")


def _engines_spared(f: Facts) -> str | None:
    """Where only the kill counter saw the kill: every engine target read up from the
    reading the counter rose at to the last (none is the victim), in words. The killer
    takes the largest; that it was not an engine makes it the process that grew."""
    rose = counted_kill_at(f)
    if rose is None:
        return None
    # The engines that ran when it came (a target configured and never started is none).
    servers = [
        s for t, s in f.targets.items() if is_server(t) and any(v == 1 for u, v in s if u < rose)
    ]
    if not servers:
        return None
    last = max(t for s in servers for t, _ in s)
    if not all(up_through(s, rose, last) for s in servers):
        return None
    return (
        f"every engine target stayed up through the kill {at(f, rose)}: the OOM killer "
        "took another process, not an engine"
    )


def _engines_held_level(f: Facts) -> str | None:
    """The engines' own process memory (their /metrics) through the incident window against
    the machine's: where available memory fell by CULPRIT_SHARE of the machine or more and
    the engines grew under a tenth of that, something else took it, in words. Only where
    every engine up in the window publishes its memory (llama-server publishes none: a
    second server of it coming up is an engine too)."""
    if not history(f, "engine_rss") or not history(f, "available") or not f.memory_total:
        return None
    w = window(f)
    running = {
        t.split("/", 1)[0]
        for t, s in f.targets.items()
        if is_server(t) and any(v == 1 for _, v in w.incident(s))
    }
    if not running or not all(PUBLISH_RSS.search(job) for job in running):
        return None
    own, free = known(w.incident(f.series["engine_rss"])), known(w.incident(f.series["available"]))
    if len(own) < 3 or len(free) < 3:
        return None
    lost, grew = max(free) - min(free[-3:]), max(own[-3:]) - min(own)
    if lost < CULPRIT_SHARE * f.memory_total or grew >= lost / 10:
        return None
    return (
        f"the engines' own resident memory grew {gib(max(grew, 0.0))} while available memory "
        f"fell {gib(lost)} in the incident window: another process took it, not an engine"
    )


def _card_grew(f: Facts) -> str | None:
    """The accelerator's memory (the engines' allocations) in the hour before the failure,
    above the most it held earlier (a model loaded on demand is back at its size, not
    grown) by a large share of the machine, or on a shared pool by more than the room the
    machine usually had: the engines grew, and on a shared pool that growth is what the
    host ran out of."""
    if not history(f, "accelerator_used") or not f.memory_total:
        return None
    w = window(f)
    series = f.series["accelerator_used"]
    recent, usual = known(w.last(series, RECENT_S)), known(w.reference(series))
    if not recent or not usual:
        return None
    rise = max(recent) - max(usual)
    least = CULPRIT_SHARE * f.memory_total
    if shared_pool(f) and (room := known(w.reference(f.series.get("available", [])))):
        # The card's memory is the host's: grown past the room the machine usually had, it
        # ran the machine out on its own, however small a share of it that was.
        least = min(least, max(median(room), LOW_AVAILABLE * f.memory_total))
    if rise < least:
        return None
    return (
        f"the accelerator's memory rose {gib(rise)} above the most it held earlier "
        f"({gib(max(usual))}) in the hour before: the engines' own growth ran the machine out"
    )


def _swap_ran_out(f: Facts) -> str | None:
    """Swap all but used up in the incident window, in words; None where it was not, or
    was not read (Linux's fixed swap, read by what is free)."""
    free = known(window(f).incident(f.series.get("swap_free_history", [])))
    total = max(known(f.series.get("swap_total_history", [])), default=0.0)
    if not free or total <= 0 or min(free) >= SWAP_FULL_SHARE * total:
        return None
    return f"swap {gib(total - min(free))} of {gib(total)} used"


def _live_hang(f: Facts) -> bool:
    """Seen live at the capture: the port accepts and nothing answers."""
    passed, failed = contrast(f)
    return bool(passed and failed) or bool(silent_engines(f))
