"""The rule for memory-pressure-stall: "One pool, one pressure: the machine stalls while nothing
is down"."""

from evidence.analyze import shapes
from evidence.analyze.facts import Facts
from evidence.analyze.rules.judgement import Judgement, rule
from evidence.analyze.rules.pressure import (
    PSI_FULL_HIGH,
    PSI_HISTORY_HIGH,
    PSI_SOME_HIGH,
    SWAP_FILLED_BYTES,
    pushed_out,
    read_back,
    stall_shares,
    swap_moved,
    swap_taken,
    swapped_out,
)
from evidence.analyze.rules.ran_out import killed_unseen, kills_in_history, recent_kills
from evidence.analyze.rules.series import readings, window
from evidence.analyze.rules.text import gib

# Reclaim counters that moved this much in the thirty seconds are pressure, not the trickle
# every box has: a thousand pages faulted back is 4 MiB re-read, one compaction stall is a
# task that waited for free memory.
CHURN_MIN = {"refaults": 1000, "refaults_file": 1000, "compact_stalls": 1, "migrations": 1000}
PSI_HISTORY_FAILED = 0.05  # PSI_HISTORY_HIGH's 10% is 5% where a service failed or an alert fired


@rule("memory-pressure-stall")
def memory_pressure_stall(f: Facts) -> Judgement:
    j = Judgement()
    seen = False  # the stall read in the history, whichever counters this box has
    if f.has("psi_some_seconds") and window(f).has_history(f.series["psi_some_seconds"]):
        seen = _stall_in_window(f, j)
    elif f.has("compressed_history"):
        seen = _compressed_in_window(f, j)
    elif f.has("majfault_history"):
        seen = _thrashed_in_window(f, j)
    _ran_out(f, j)
    failure = window(f).failure
    if failure and not failure.timed_out:
        # A stall slows work; a service that failed outright (an error, a fall) failed of
        # what filled the memory: the stall came with it, and a cause takes both.
        j.ending = True
    some = readings(f, "psi_some")
    if some and max(some) >= PSI_SOME_HIGH:
        j.add(2, f"tasks stalled on memory {max(some):.0f}% of the time (PSI some avg10)")
        sustained = shapes.sustained(f.series["psi_some"], above=PSI_SOME_HIGH, min_fraction=0.5)
        if sustained.verdict:
            j.add(1, f"the stall lasted: {sustained.why}")
        seen = True
    if seen and failure and failure.timed_out and not recent_kills(f):
        # A stall's own way of failing: everything slows, nothing is killed.
        j.add(1, f"{failure.what} timed out while tasks stalled, and nothing was killed")
    churn = _reclaim_churn(f)
    if not some:
        if not j.score:
            j.missing.append("PSI memory pressure")
        if len(churn) >= 2:
            # Without PSI (an older kernel, a container), reclaim's own counters say it.
            j.add(2, "the kernel reclaimed hard through the window: " + "; ".join(churn))
        return j
    full = readings(f, "psi_full")
    if full and max(full) >= PSI_FULL_HIGH:
        j.add(1, f"all tasks stalled together {max(full):.0f}% of the time (PSI full avg10)")
    swap = readings(f, "swap_used")
    out = readings(f, "pswpout")
    if out and out[-1] > out[0]:
        j.add(1, f"swapping out during the window ({out[-1] - out[0]:.0f} pages)")
    if churn and j.score:
        j.add(1, "the working set does not fit: " + "; ".join(churn))
    if not j.score:
        j.evidence_against.append(
            f"PSI memory stayed low (max {max(some):.1f}% some)"
            + ("" if not swap else f"; swap {gib(max(swap))} used")
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
        values = readings(f, name)
        if values and values[-1] - values[0] >= CHURN_MIN[name]:
            said.append(f"{values[-1] - values[0]:.0f} {words}")
    return said


def _ran_out(f: Facts, j: Judgement) -> None:
    """A stall that ended with the OOM killer taking a process on the whole machine is the
    prelude of exhaustion, not a fault of its own: work slowing while nothing goes down."""
    machine = [t for _, t in recent_kills(f) if "Memory cgroup out of memory" not in t]
    unseen = killed_unseen(f)
    if machine or kills_in_history(f) > 0 or unseen:
        j.score -= 2
        # How the growth before it ended, as the kill is: a cause with evidence takes it.
        j.ending = True
        j.evidence_against.append(
            "the machine ran out and the OOM killer took a process: the stall was its prelude"
            if not unseen
            else f"{window(f).failure.what} outright, not slowly, while macOS pushed memory "
            "out: what its memory killer (jetsam, which logs nothing here) does; the stall "
            "was the prelude"
        )


def _stall_in_window(f: Facts, j: Judgement) -> bool:
    """node-exporter's stall counters over the hour before the failure, against the worst
    hour of the rest of the day; swap filling and pages swapped out beside them."""
    shares = stall_shares(f)
    if shares is None:
        j.missing.append("readings of memory stall time in the hour before the failure")
        return False
    now, worst = shares
    said = f"tasks stalled on memory {now:.0%} of the hour before, against {worst:.0%} at worst"
    # With a failure to explain, a milder stall far past the machine's usual is one.
    bar = PSI_HISTORY_FAILED if window(f).failure else PSI_HISTORY_HIGH
    if now >= bar and now >= 2 * worst:
        j.add(3, f"{said} in any hour earlier (node-exporter PSI)")
    else:
        j.evidence_against.append(f"{said} earlier")
        return False
    if _swap_filled(f, j) is False:
        j.score -= 1
        j.evidence_against.append(
            "swap did not fill in the incident window: the working set still fit"
        )
    if out := swapped_out(f):
        j.add(1, out)
    if faulted := read_back(f):
        j.add(1, faulted)
    return True


def _thrashed_in_window(f: Facts, j: Judgement) -> bool:
    """A Linux box whose node-exporter has no stall counters (a kernel without PSI, the
    pressure collector off) shows a stall by what it did (pressure.thrashed): pages read
    back from disk far past any hour earlier while swap filled or took pages (on a box
    without swap, the read back alone). Read back while swap stood still is a page cache
    evicted by anything: said against, not for."""
    faulted = read_back(f)
    if not faulted:
        return False
    if not swap_moved(f):
        j.evidence_against.append(f"{faulted}, but swap did not move: the page cache, not a stall")
        return False
    j.add(3, f"{faulted} (node-exporter has no stall counters here)")
    _swap_filled(f, j)
    if out := swapped_out(f):
        j.add(1, out)
    return True


def _swap_filled(f: Facts, j: Judgement) -> bool | None:
    """Swap taking SWAP_FILLED_BYTES more through the incident window (a point for the
    stall); None where no swap history was read, or the machine has none."""
    taken = swap_taken(f)
    if taken is None:
        return None
    if taken >= SWAP_FILLED_BYTES:
        j.add(1, f"swap filled in the incident window: {gib(taken)} more used")
        return True
    return False


def _compressed_in_window(f: Facts, j: Judgement) -> bool:
    """macOS has no PSI: under pressure its compressor takes pages in, then it swaps. What
    did not fit in RAM past the day's usual is the stall; swap filling beside it adds (its
    absence takes nothing away: the compressor is the first resort)."""
    pushed = pushed_out(f)
    if pushed is None:
        j.missing.append("readings of compressed memory before the failure and earlier")
        return False
    past, said = pushed
    if not past:
        j.evidence_against.append(said)
        return False
    j.add(3, f"{said}: its compressor worked through the stall (macOS has no PSI)")
    _swap_filled(f, j)
    return True
