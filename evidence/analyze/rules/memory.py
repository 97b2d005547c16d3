"""The memory lines and their pools: which line to read, the card's and the host's apart,
a pool nearly full, available memory running low."""

from typing import Any

from evidence.analyze.facts import Facts
from evidence.analyze.rules.series import HOUR_S, history, readings, window
from evidence.analyze.rules.text import gib
from evidence.analyze.window import known

LOW_AVAILABLE = 0.05  # available memory under 5% of the total is exhaustion ...
LOW_AVAILABLE_SAMPLED = 0.10  # ... and under 10% of it on a coarse scrape beside a kill
SHARED_JUMP = 0.75  # the host's line jumping three quarters of the card's: one pool
OWN_POOL = 0.5  # a card of under half the host's memory is a pool of its own (not GTT's)


def memory_series(f: Facts) -> tuple[str, str] | None:
    """The memory series to read shapes from: the accelerator's where it is known, else the
    host's (on a unified machine the host's is the accelerator's)."""
    for name, label in (("accelerator_used", "accelerator memory"), ("memory_used", "memory")):
        if f.has(name):
            return name, f"{label} ({f.origin[name]})"
    return None


def memory_lines(f: Facts) -> list[tuple[str, str]]:
    """Every memory line with history: the card's and the host's are read apart."""
    return [
        (name, label)
        for name, label in (("accelerator_used", "accelerator memory"), ("memory_used", "memory"))
        if history(f, name)
    ]


def is_card(name: str) -> bool:
    """A card's line: the cards' sum, or one card's own."""
    return name.split(" ", 1)[0] == "accelerator_used"


def pool_size(f: Facts, name: str) -> float | None:
    """The size of the pool a memory line is of: the card's total, else the host's."""
    if is_card(name):
        totals = readings(f, name.replace("used", "total", 1))
        if totals:
            return max(totals)
    if name == "memory_with_swap" and f.memory_total:
        return f.memory_total + max(readings(f, "swap_total_history"), default=0.0)
    return f.memory_total


def shared_pool(f: Facts, name: str = "accelerator_used") -> bool:
    """The card's memory is the host's: a unified device, or a pool of OWN_POOL of the
    host's memory or more (GTT on an APU), whatever the host's line shows of it."""
    if any(d["unified_memory"] for d in f.gpu_devices):
        return True
    return (pool_size(f, name) or 0.0) >= OWN_POOL * (f.memory_total or 0)


def nearly_full(f: Facts, unified: bool) -> dict[str, Any] | None:
    """The first device, unified or discrete as asked, with under LOW_AVAILABLE free."""
    for d in f.gpu_devices:
        used, total = d["memory_used_bytes"], d["memory_total_bytes"]
        kind = bool(d["unified_memory"]) == unified
        if kind and used and total and total - used < LOW_AVAILABLE * total:
            return d
    return None


def ran_low(f: Facts) -> bool:
    """Available memory fell under LOW_AVAILABLE_SAMPLED of the machine before the failure,
    or was not measured: only then is another process's size what the machine ran out for."""
    available = readings(f, "available")
    if not available or not f.memory_total:
        return True
    w = window(f)
    before = known([(t, v) for t, v in f.series["available"] if t <= w.end + HOUR_S / 6])
    return min(before or available) < LOW_AVAILABLE_SAMPLED * f.memory_total


def ran_low_in_history(f: Facts) -> bool:
    """`ran_low` where a history of available memory says so: not merely unmeasured."""
    return history(f, "available") and ran_low(f)


def card_full(f: Facts) -> str | None:
    d = nearly_full(f, unified=False)
    if d is None:
        return None
    total = d["memory_total_bytes"]
    free = total - d["memory_used_bytes"]
    return f"{d['name']} has {gib(free)} of {gib(total)} free for anything else"
