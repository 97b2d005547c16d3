"""The quiet floors a leak is read from do not depend on the hour the capture ran."""

import pytest

from evidence.analyze.facts import Facts
from evidence.analyze.rules.floors import quiet_floors
from evidence.analyze.window import Window

GIB = 2**30
END = 1_796_608_042.0  # a failure at 01:47 UTC, off the clock's two-hour marks
STEP = 120.0  # a real capture's query step


def _accelerator_day(end: float) -> Facts:
    """A day of an APU's accelerator memory to a failure at `end`: 31 GiB for eleven
    hours, a leak climbing to 80 GiB through the household's evening, held overnight."""
    n = int(86400 / STEP)
    values = []
    for i in range(n):
        hours_before = (n - i) * STEP / 3600
        climbed = min(1.0, max(0.0, (13 - hours_before) / 9))
        values.append((31 + 49 * climbed) * GIB + (i % 7) * 0.01 * GIB)
    series = [(end - (n - i) * STEP, v) for i, v in enumerate(values)]
    return Facts(
        bundle={},
        probes={},
        series={"accelerator_used": series},
        origin={"accelerator_used": "prometheus"},
        window=Window(end=end, failure=None, cut=None),
    )


@pytest.mark.parametrize("later_min", [0, 23, 47, 71, 95])
def test_the_floors_are_read_back_from_the_window_not_the_clock(later_min):
    """Fresh seed 2626 captured twice (leak-ratchet-139190087985937, a leak on a Strix Halo):
    the same history read 23 minutes apart was a leak once and a step the other time,
    because the floors were cut on the clock's two-hour marks. Read back from the
    failure (the last stretch its last hour), the same history gives the same floors
    whenever it is read."""
    reference = _accelerator_day(END)
    moved = _accelerator_day(END + later_min * 60)
    first = quiet_floors(reference, "accelerator_used", reference.series["accelerator_used"])
    again = quiet_floors(moved, "accelerator_used", moved.series["accelerator_used"])
    assert [(t - END, v) for t, v in first] == [(t - END - later_min * 60, v) for t, v in again]
    assert len(first) == 13  # twelve two-hour stretches and the last hour
