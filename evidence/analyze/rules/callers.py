"""The load: as many requests running as ever, more callers than in the busiest hour before."""

from evidence.analyze.facts import Facts
from evidence.analyze.failure import came_up, is_manager, is_server
from evidence.analyze.rules.series import (
    at,
    hourly,
    mean,
    median,
    targets_began,
    up_through,
    window,
)
from evidence.analyze.window import RECENT_S, known

QUEUE_DEEPER = 2.0  # a queue twice as deep as the busiest hour before's is a new one
LOAD_OVER_USUAL = 1.25  # requests running this far above the busiest hour is more load
STEP_BESIDE_S = 300.0  # another server read up through the readings just before one came up
CREEP_LOOK_S = 6 * 3600.0  # a creep starts one to six hours before the failure


def slots_held(f: Facts) -> str | None:
    """The hour before the failure ran as many requests as ever: at the most that ran at
    once up to it (its median within a tenth), or no fewer than in the busiest hour before
    (medians). In words; None when fewer ran (a cache too full for the next sequence
    admits fewer: a creep's queue) or the load is not known."""
    w = window(f)
    series = f.series.get("requests_running", [])
    recent = known(w.last(series, RECENT_S))
    ceiling = max(known(w.upto(series)), default=0.0)
    if not recent or not ceiling:
        return None
    now = median(recent)
    if now >= 0.9 * ceiling:
        return f"requests running held at the ceiling ({ceiling:.0f})"
    usual = max(hourly(w.reference(series), median), default=None)
    if usual and now >= usual:
        return (
            f"requests running held their busiest level ({now:.0f} at the median, as in the "
            f"busiest hour before; up to {ceiling:.0f})"
        )
    return None


def busier_than_usual(f: Facts) -> str | None:
    """More callers in the hour before the failure than in the busiest hour before it, in
    words: more requests running (medians), or, with as many running as ever (a cache
    that fills queues callers behind free slots: a creep's queue), far more waiting
    (means). None when the load stayed in its range or is not known."""
    w = window(f)
    for name, typical, over in (
        ("requests_running", median, lambda now, usual: now > usual * LOAD_OVER_USUAL + 0.5),
        (
            "requests_waiting",
            mean,
            lambda now, usual: now >= QUEUE_DEEPER * max(usual, 1.0) and slots_held(f),
        ),
    ):
        series = f.series.get(name, [])
        recent = known(w.last(series, RECENT_S))
        usual = max(hourly(w.reference(series), typical), default=None)
        if recent and usual is not None and over(typical(recent), usual):
            return (
                f"{name.replace('_', ' ')} rose above the busiest hour before "
                f"({typical(recent):.1f} against {usual:.1f})"
            )
    return None


def another_model_served(f: Facts) -> str | None:
    """A second engine server that came up in the hours a creep takes beside one already up
    (a model kept beside another, not swapped for it): its callers are another workload, and
    the prompts per answer, counted across the engines together, change with it."""
    w = window(f)
    began = targets_began(f)
    engines = {t: s for t, s in f.targets.items() if is_server(t) and not is_manager(t)}
    for target, series in engines.items():
        for t in (t for t in came_up(series, began) if t >= w.end - CREEP_LOOK_S):
            beside = [
                other
                for other, ups in engines.items()
                if other != target and up_through(ups, t - STEP_BESIDE_S, t)
            ]
            if beside:
                return f"{target} came up {at(f, t)} beside {beside[0]}"
    return None
