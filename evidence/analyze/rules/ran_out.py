"""How memory ran out: the OOM killer's kills (in the hour, in the incident window's counter,
unseen on a Mac), an allocation failing on the card, the engine's own memory."""

from evidence.analyze.facts import Facts, card_line
from evidence.analyze.failure import RECENT_KILL_S, engine_kill, is_engine
from evidence.analyze.rules.memory import LOW_AVAILABLE
from evidence.analyze.rules.pressure import stalled
from evidence.analyze.rules.processes import culprit_of
from evidence.analyze.rules.series import HOUR_S, readings, window
from evidence.analyze.rules.text import gib
from evidence.analyze.tags import tags_of
from evidence.analyze.window import INCIDENT_S, known

CARD_OOM_TAGS = ("cuda-oom", "hip-oom", "metal-oom", "vulkan-oom")  # the card's own words
FULL_AT_FALL_S = 900  # the card's readings this long before an engine fell are what it had


def engine_ran_out(f: Facts) -> str | None:
    """How the engine's own memory ran out, if it did: the kernel took the engine with no
    other process holding much, or the engine's allocation failed on the card (the card
    running out, as the kernel's kill is the host running out)."""
    kills = [t for _, t in recent_kills(f) if engine_kill(t)]
    if kills and not culprit_of(f, kills[-1]):
        return "the kernel took the engine"
    unit = unit_killed(f)
    if not kills and unit and is_engine(unit) and not culprit_of(f, "", (unit, _freed(f))):
        return f"the kernel took the engine (systemd: {unit} failed with result oom-kill)"
    if card_ran_out(f):
        return "the engine's allocation failed"
    return _full_at_the_fall(f)


def _full_at_the_fall(f: Facts) -> str | None:
    """A scrape's view of the card running out, where no log line says so: a service's
    target went down with the card's line, in the minutes before, within LOW_AVAILABLE of
    its total. The death releases the memory; the readings before it are what it had."""
    w = window(f)
    if not (w.failure and w.failure.dated_by.source == "target"):
        return None
    for card in ("", *f.cards):
        totals = readings(f, card_line("total", card))
        used = known(w.last(f.series.get(card_line("used", card), []), FULL_AT_FALL_S))
        if totals and used and max(used) >= (1 - LOW_AVAILABLE) * max(totals):
            which = f"card {card}" if card else "the card"
            held = f"{gib(max(used))} of {gib(max(totals))}"
            return f"the service went down with {which} full ({held})"
    return None


def _freed(f: Facts) -> int | None:
    """What the host's memory in use gave back at the failure: the victim's size, where no
    kill line gives it."""
    w = window(f)
    line = f.series.get("memory_used", [])
    before = known(w.last(line, FULL_AT_FALL_S))
    after = known([(t, v) for t, v in line if t > w.end])
    return int(max(before) - min(after)) if before and after and max(before) > min(after) else None


def card_ran_out(f: Facts) -> bool:
    """The engine says, in the card's own words, that an allocation on it failed: in its
    log, or in the error a failed check or alert relayed (a gateway passes the engine's
    500 on: "CUDA error: out of memory")."""
    w = window(f)
    told = [s.what for s in w.failure.signs if s.source != "target"] if w.failure else []
    return any(f.lines.get(tag) for tag in CARD_OOM_TAGS) or any(
        set(tags_of(what)) & set(CARD_OOM_TAGS) for what in told
    )


def killed(f: Facts) -> bool:
    """The OOM killer ran in the last hour (its line) or in the incident window (the
    kernel's counter), inside a limit or for the whole machine."""
    return bool(recent_kills(f)) or kills_in_history(f) > 0


def recent_kills(f: Facts) -> list[tuple[float | None, str]]:
    """The OOM kills of the last hour (undated ones too): a kill long before the capture
    belongs to an earlier night."""
    return [(ago, text) for ago, text in f.oom_kills if ago is None or ago <= RECENT_KILL_S]


def memory_ran_out(f: Facts) -> bool:
    """Memory ran out at the failure: the OOM killer, or an allocation that failed."""
    tags = (*CARD_OOM_TAGS, "host-alloc-fail", "unit-oom")
    return bool(recent_kills(f) or unit_killed(f)) or any(f.lines.get(tag) for tag in tags)


def unit_killed(f: Facts) -> str | None:
    """The unit whose failure started this capture with systemd's result oom-kill (the
    kernel killed a process of it; the hook relays $SERVICE_RESULT): the kill where the
    kernel's own line was not read, as where dmesg is root's alone."""
    b = f.bundle
    if b["trigger_kind"] == "systemd" and "unit-oom" in tags_of(b.get("trigger_detail") or ""):
        return b["trigger_name"] or "the unit"
    return None


def machine_killed(f: Facts) -> bool:
    """The kernel killed for the whole machine within the hour, not inside a cgroup's limit:
    it ran out, whatever a coarse scrape of available memory caught of the lowest point."""
    return any("Memory cgroup out of memory" not in text for _, text in recent_kills(f))


def kills_in_history(f: Facts) -> float:
    """How much node_vmstat_oom_kill rose in the incident window for the machine (0 when
    unknown). The counter counts kills inside any group's limit too: those the kernel log
    shows in those hours are not the machine running out."""
    w = window(f)
    counts = known([(t, v) for t, v in f.series.get("oom_kills_history", []) if t >= w.start])
    fenced = [
        t
        for ago, t in f.oom_kills
        if "Memory cgroup out of memory" in t and ago is not None and ago <= INCIDENT_S + HOUR_S
    ]
    return max(0.0, counts[-1] - counts[0] - len(fenced)) if len(counts) >= 2 else 0.0


def counted_kill_at(f: Facts) -> float | None:
    """The reading at which node_vmstat_oom_kill last rose in the incident window, or None."""
    counts = [(t, v) for t, v in f.series.get("oom_kills_history", []) if v is not None]
    rose = [
        t
        for (_, a), (t, b) in zip(counts, counts[1:], strict=False)
        if b > a and t >= window(f).start
    ]
    return rose[-1] if rose else None


def killed_unseen(f: Facts) -> bool:
    """A Mac (its history is macOS node-exporter's, with the compressor) kills for memory
    with jetsam, which logs to the unified log and never to the kernel log read here: a
    service that went down outright (no answer that merely came late) while memory was
    pushed out of RAM is what its kill looks like."""
    w = window(f)
    return bool(
        f.has("compressed_history") and w.failure and not w.failure.timed_out and stalled(f)
    )
