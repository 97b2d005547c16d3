"""Tasks stalled on memory: PSI at the capture and through the hour, macOS pushing memory
out of RAM, swap filling."""

from evidence.analyze.facts import Facts
from evidence.analyze.rules.series import history, hourly, median, per_second, readings, window
from evidence.analyze.rules.text import GIB, gib
from evidence.analyze.window import RECENT_S, known

PSI_SOME_HIGH = 10.0  # % of time some task stalled on memory (avg10)
PSI_FULL_HIGH = 5.0
SWAP_FILLED_BYTES = 1 * GIB  # swap taking a GiB more in the hours before: it did not fit
COMPRESSED_SHARE = 0.05  # macOS compressing this share of its memory more than any hour before
COMPRESSED_SHARE_FAILED = 0.025  # half that where a service failed, at least twice the most
PSI_HISTORY_HIGH = 0.10  # stalled 10% of the time over the hour before (node-exporter)
SWAPPING_PAGES_S = 10  # pages swapped out per second, through the hour: thrashing, not a blip
MAJOR_FAULTS_S = 100  # pages read back from disk per second, through the hour
MAJOR_FAULTS_PAST = 10  # ... and this many times the most of any hour before


def stalled(f: Facts) -> bool:
    """Tasks stalled on memory at the capture, past PSI_SOME_HIGH (PSI some avg10), or
    through the hour before it, past PSI_HISTORY_HIGH (node-exporter's counter), or, on
    macOS (no PSI), memory pushed out of RAM past the day's usual before the failure."""
    if max(readings(f, "psi_some"), default=0.0) >= PSI_SOME_HIGH:
        return True
    shares = stall_shares(f)
    if shares is not None and shares[0] >= PSI_HISTORY_HIGH:
        return True
    pushed = pushed_out(f)
    if pushed and pushed[0]:
        return True
    return not history(f, "psi_some_seconds") and thrashed(f)


def thrashed(f: Facts) -> bool:
    """Pages read back from disk through the hour before far past any hour earlier, while
    swap filled or took pages through it (on a box with none, the read back alone): a
    working set that did not fit, read from node-exporter's vmstat where it has no stall
    counters."""
    return bool(read_back(f)) and swap_moved(f)


def swap_moved(f: Facts) -> bool:
    """Swap filled or took pages through the incident window, or the box has none (so
    nothing could move): what read back from disk beside it is a working set that did not
    fit, not a page cache evicted by anything."""
    taken = swap_taken(f)
    return taken is None or taken >= SWAP_FILLED_BYTES or bool(swapped_out(f))


def read_back(f: Facts) -> str | None:
    """Pages read back from disk (major faults) through the hour before, far past any hour
    earlier, in words. With no swap, or beside it, what a stall evicts is the page cache,
    a model's mapped weights among it, read back again at each use."""
    w = window(f)
    rate = per_second(w.upto(f.series.get("majfault_history", [])))
    recent = known(w.last(rate, RECENT_S))
    if len(recent) < 3:
        return None
    now = median(recent)
    worst = _before_it_began(hourly(w.reference(rate), median), min(MAJOR_FAULTS_S, now / 2))
    if now < MAJOR_FAULTS_S or now < MAJOR_FAULTS_PAST * worst:
        return None
    return (
        f"pages were read back from disk through the hour ({now:.0f} major faults/s, against "
        f"{worst:.0f} at most in any hour earlier): what was evicted was needed again"
    )


def swapped_out(f: Facts) -> str | None:
    """Pages swapped out through the hour before, in words."""
    out = known(window(f).last(per_second(f.series.get("pswpout_history", [])), RECENT_S))
    if out and median(out) >= SWAPPING_PAGES_S:
        return f"pages were swapped out through the hour ({median(out):.0f}/s)"
    return None


def swap_taken(f: Facts) -> float | None:
    """What swap took through the incident window; None where no swap history was read,
    or the machine has none. Linux's swap is a fixed size, read by what is free; macOS's
    use is read directly."""
    w = window(f)
    used = known(w.incident(f.series.get("swap_used_history", [])))
    free = known(w.incident(f.series.get("swap_free_history", [])))
    if not used and not free:
        return None
    if not used and max(known(f.series.get("swap_total_history", [])), default=0.0) <= 0:
        return None  # no swap at all: nothing could fill, and its absence says nothing
    return used[-1] - used[0] if used else free[0] - free[-1]


def stall_shares(f: Facts) -> tuple[float, float] | None:
    """The share of time tasks stalled on memory in the hour before the failure and in the
    worst hour before the stall began, from node-exporter's PSI counter; None without
    readings of that hour. A stall of many hours has no before in the incident window's
    day: the hours stalled without a break up to the window are part of it, not the
    machine's usual (while 3 hours at least remain before them)."""
    w = window(f)
    stalled = per_second(w.upto(f.series.get("psi_some_seconds", [])))
    recent = known(w.last(stalled, RECENT_S))
    if len(recent) < 3:
        return None
    now = median(recent)
    return now, _before_it_began(
        hourly(w.reference(stalled), median), min(PSI_HISTORY_HIGH, now / 2)
    )


def _before_it_began(hours: list[float], own: float) -> float:
    """The worst of the hours before the incident window, less the stall's own: the hours
    at `own` or more without a break up to the window (while 3 at least remain before them).
    A stall grows over hours; those it grew in are not the machine's usual."""
    hours = list(hours)
    while len(hours) > 3 and hours[-1] >= own > 0:
        hours.pop()
    return max(hours, default=0.0)


def pushed_out(f: Facts) -> tuple[bool, str] | None:
    """What macOS held compressed or swapped (node-exporter publishes both) in the quarter
    hour before the failure (a level: what did not fit in RAM when the service gave up),
    and whether it passed the most of any hour earlier by COMPRESSED_SHARE of the machine
    (with a failure to explain, a milder push far past the usual is one: half that share,
    twice the most); None without those readings."""
    if not history(f, "compressed_history") or not f.memory_total:
        return None
    w = window(f)
    swapped = dict(f.series.get("swap_used_history", []))
    series = [
        (t, None if v is None else v + (swapped.get(t) or 0.0))
        for t, v in w.upto(f.series["compressed_history"])
    ]
    recent = known(w.last(series, RECENT_S / 4))
    usual = hourly(w.reference(series), median)
    if len(recent) < 3 or not usual:
        return None
    now, before = median(recent), max(usual)
    said = (
        f"macOS held {gib(now)} compressed or swapped in the quarter hour before, against "
        f"at most {gib(before)} in any hour earlier"
    )
    more = now - before
    milder = w.failure is not None and now >= 2 * before
    past = more >= (COMPRESSED_SHARE_FAILED if milder else COMPRESSED_SHARE) * f.memory_total
    return past, said
