"""Processes other than the engines: the one that grew, arrived or was killed holding the
machine, and the furniture that held its share all day."""

from typing import Any

from evidence.analyze import shapes
from evidence.analyze.facts import Facts
from evidence.analyze.failure import is_engine, victim
from evidence.analyze.rules.floors import grown
from evidence.analyze.rules.series import HOUR_S, median, window
from evidence.analyze.rules.text import gib
from evidence.analyze.window import known
from evidence.schemas import catalog

DESKTOP_APPS = frozenset(catalog("engines")["desktop"]["apps"])  # a person's session
CULPRIT_SHARE = 0.15  # another process holding this share of the machine is what grew
HELD_ALL_DAY = 1 / 6  # ... unless earlier the machine never had this share of it free


def grew_other(f: Facts) -> str | None:
    """A process other than the engines and the desktop whose floor rose bundle after
    bundle: what the machine ran out for."""
    for name, said in grown(f):
        if not is_engine(name) and name not in DESKTOP_APPS:
            return f"{said}: not an engine"
    return None


def culprit_of(f: Facts, kill: str, killed: tuple[str, int | None] | None = None) -> str | None:
    """Another process than the engines holding a large share of the machine at the
    capture, killed holding it, or growing bundle after bundle: what the machine ran out
    for. `killed` names the victim and its size where no kill line does."""
    total = f.memory_total or 0
    if not total:
        return None
    named = victim(kill) or killed
    if named and not is_engine(named[0]) and (named[1] or 0) >= CULPRIT_SHARE * total:
        return f"the victim, {named[0]}, held {gib(named[1])}: not the engine"
    if grew := grew_other(f):
        return grew
    if came := arrival(f):
        return came
    # Processes of one name count together (a build's compilers grow as a swarm, each one
    # small).
    _, most, group = largest_other(f)
    # The victim's own size bounds it: a process smaller than the engine that was killed
    # is background, and the engine is what grew.
    least = max(CULPRIT_SHARE * total, (named[1] or 0) if named else 0)
    if not group or most < least or furniture_of(f, group, most):
        return None
    who, holds = _group_holds(group)
    return f"{who} {holds} {gib(most)}, more than the engine that was killed: not an engine"


def _group_holds(group: list[dict[str, Any]]) -> tuple[str, str]:
    """Processes of one name in words, and the verb that goes with them."""
    first = group[0]
    if len(group) > 1:
        return f"{len(group)} {first['name']} processes", "hold"
    return f"pid {first['pid']} ({first['name']})", "holds"


def furniture_of(f: Facts, group: list[dict[str, Any]], held: float) -> str | None:
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
    ago = (window(f).end - min(started)) / HOUR_S
    return (
        f"it was running before the history begins ({ago:.0f} h before the failure), "
        f"through the earlier hours when {gib(usual)} was usually free: "
        f"the {gib(lost)} lost tonight is not its arrival, and nothing of its own readings "
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
    ago = (window(f).end - min(started)) / HOUR_S
    return (
        f"{who} started {ago:.1f} h before the failure and {holds} {gib(held)}, of the "
        f"{gib(lost)} lost since the hours with room: the arrival ran the machine out, not "
        "an engine"
    )


def arrival(f: Facts) -> str | None:
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
    w = window(f)
    series = f.series.get("available", [])
    room = [(t, v) for t, v in w.reference(series) if v is not None]
    before = known(w.incident(series))
    if not room or not before:
        return None
    return room[0][0], median([v for _, v in room]), min(before)


def _rose(history: shapes.Series) -> float:
    """How far a process's resident memory rose over its readings (0 with fewer than two)."""
    values = known(history)
    return max(0.0, values[-1] - values[0]) if len(values) >= 2 else 0.0


def _held_all_day(f: Facts, held: float) -> str | None:
    """Why a process holding `held` is the machine's furniture, not what ran it out: at
    no time earlier in the day (the 95th percentile of the reference hours' available
    memory) did the machine have a sixth of that free, so the process held most of it
    then too (a VM, a vector store). What grew tonight is something else."""
    room = known(window(f).reference(f.series.get("available", [])))
    if not room or (most := shapes.quantile(room, 0.95)) >= HELD_ALL_DAY * held:
        return None
    return f"earlier in the day at most {gib(most)} was free: it held its {gib(held)} then too"


def largest_other(f: Facts) -> tuple[str, float, list[dict[str, Any]]]:
    """The processes of one name, not an engine's, that hold the most resident memory
    together (a build's compilers grow as a swarm, each one small): name, bytes, rows."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in f.processes:
        if not is_engine(p["name"] or ""):
            groups.setdefault(p["name"] or "?", []).append(p)
    held = {name: sum(p["rss_bytes"] or 0 for p in ps) for name, ps in groups.items()}
    name, most = max(held.items(), key=lambda kv: kv[1], default=("?", 0.0))
    return name, most, groups.get(name, [])
