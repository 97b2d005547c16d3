"""Slow reads run at once under one deadline, so a black hole costs its own timeout and not
the sum of everybody's: engines read beside each other, an engine's endpoints beside each
other once its primary one answered, the configured checks beside each other."""

import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
# A job that returns right at its deadline is still taken: the deadline is the job's, the
# grace is the time its thread needs to hand the result over.
JOIN_GRACE_S = 0.15


def side_by_side(jobs: Sequence[Callable[[float], T]], deadline: float) -> list[T | None]:
    """Run each job(deadline) in its own thread; a job not done by the deadline gives None."""
    results: list[T | None] = [None] * len(jobs)

    def run(i: int) -> None:
        results[i] = jobs[i](deadline)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline + JOIN_GRACE_S - time.monotonic()))
    return results
