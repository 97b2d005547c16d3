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

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `lab` is not installed

import lab.scenarios.host  # noqa: E402  (registers the host scenarios)
from lab.core import EVIDENCE, REGISTRY, run  # noqa: E402

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


def test_the_leak_under_the_recorder_is_named_from_the_minutes_before_too():
    """`make lab RECORDER=1`: the recorder runs from before the leak starts; the bundle
    holds its readings (the leak's first burst among them) and the diagnosis reads them
    with the window as one series."""
    scenario = REGISTRY["leak-ratchet"]
    why = scenario.unavailable()
    if why:
        pytest.skip(why)
    # A short folder: the recorder's socket path must stay under 108 bytes.
    with tempfile.TemporaryDirectory(prefix="lab-", dir="/tmp") as keep:
        for _ in range(ATTEMPTS):
            result = run(scenario, Path(keep), recorder=True)
            if result.status == "passed" or not scenario.disturbed:
                break
        assert result.status == "passed", f"{result.verdict}: {result.reason}; top {result.top}"
        made = Path(keep).glob("lab-leak-ratchet-*/archive/bundles/*/*/manifest.json")
        by_id = {json.loads(m.read_text())["bundle_id"]: m.parent for m in made}
        bundle = by_id[result.bundle]
        history = (bundle / "memory.history.jsonl").read_bytes().splitlines()
        assert len(history) >= 5  # the recorder's seconds before the capture
        classified = subprocess.run(
            [EVIDENCE, "classify", str(bundle), "--json", "--archive", str(bundle.parents[2])],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    series = json.loads(classified.stdout)["context"]["series"]["memory_used"]
    assert series["origin"].startswith("recorder (")
