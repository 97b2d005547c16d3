"""The lab's host scenarios, run for real: each fault brought about with real processes on
this machine, captured by the collector and named by the analyst.

A scenario this machine cannot stage (no PSI, no writable cgroup, /dev/kmsg unreadable,
not enough free memory) is skipped with the scenario's own reason: those are properties
of the kernel or the container, not prerequisites CI could install. None of these
scenarios needs a package beyond the project's own.

host-exhaustion runs last: its OOM kill stays in the kernel's ring buffer for the rest of
the boot (the lab's host scenarios read only their own minute of it; other captures read
24 hours).
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `lab` is not installed

import lab.scenarios.host  # noqa: E402  (registers the host scenarios)
from lab.core import REGISTRY, run  # noqa: E402

ATTEMPTS = 3
HOST = sorted(
    (name for name, s in REGISTRY.items() if type(s).__module__ == lab.scenarios.host.__name__),
    key=lambda name: (name == "host-exhaustion", name),
)


def test_every_host_scenario_is_here():
    assert set(HOST) == {
        "build-swarm",
        "healthy",
        "host-exhaustion",
        "leak-ratchet",
        "memory-pressure-stall",
    }


@pytest.mark.parametrize("name", HOST)
def test_host_scenario(name):
    scenario = REGISTRY[name]
    why = scenario.unavailable()
    if why:
        pytest.skip(why)
    # The collector reads the whole machine: a run that another process disturbed (the
    # scenario saw memory move, or an OOM kill, that it did not cause) is run again, up to
    # ATTEMPTS.
    disturbed = []
    for _ in range(ATTEMPTS):
        result = run(scenario)
        if result.status == "passed" or not scenario.disturbed:
            break
        disturbed.append(f"{result.verdict}: {scenario.disturbed}")
    print(f"{name}: {len(disturbed)} disturbed run(s) before this one", *disturbed, sep="\n  ")
    assert result.status == "passed", (
        f"{name}: verdict {result.verdict} (expected {' or '.join(result.expected)}): "
        f"{result.reason}; top {result.top}; disturbed runs: {disturbed}"
    )
