"""Moments as an operator types them for --since and --until (evidence.archive.clock)."""

import os
import time
from datetime import datetime

import pytest

from evidence.archive.clock import duration_s, moment

NOW = 1796095800.0  # 2026-12-01 03:30:00 UTC


@pytest.fixture(autouse=True)
def berlin():
    """A zone that is not UTC, so a local time read as UTC would show."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "Europe/Berlin"
    time.tzset()
    yield
    if old is None:
        os.environ.pop("TZ")
    else:
        os.environ["TZ"] = old
    time.tzset()


def test_durations_count_back_from_now():
    assert moment("90m", NOW) == NOW - 5400
    assert moment("2d", NOW) == NOW - 2 * 86400
    assert moment("now", NOW) == NOW
    assert duration_s("12h") == 43200 and duration_s("12 hours") is None


def test_local_times_are_local_and_zoned_ones_are_theirs():
    local = datetime(2026, 11, 30, 3, 0).timestamp()  # 02:00 UTC in Berlin's winter
    assert moment("2026-11-30 03:00", NOW) == local
    assert moment("2026-11-30T03:00", NOW) == local
    assert moment("2026-11-30", NOW) == datetime(2026, 11, 30).timestamp()
    assert moment("2026-11-30T03:00:00Z", NOW) == local + 3600


def test_today_and_yesterday_are_local_midnights():
    # 03:30 UTC is 04:30 in Berlin: today began at 23:00 UTC the day before.
    assert moment("today", NOW) == datetime(2026, 12, 1).timestamp()
    assert moment("yesterday", NOW) == datetime(2026, 11, 30).timestamp()


@pytest.mark.parametrize("text", ["last tuesday", "30", "2026-13-01", ""])
def test_anything_else_says_what_it_takes(text):
    with pytest.raises(ValueError, match="expected a duration"):
        moment(text, NOW)
