"""The lab's engine scenarios end to end: stateful fake engines (lab/fakes) in the real
formats, driven by a real load generator, holding real memory, on the fake NVML driver;
captured by the real collector and classified by the real analyst (lab.core.run).

About 20-45 s each (their capture windows); the nine take four to five minutes.
"""

import shutil
import sys
from pathlib import Path

import pytest
from conftest import need

ROOT = Path(__file__).parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `lab` is not installed: it lives beside the package

from lab import core  # noqa: E402
from lab.scenarios import engines  # noqa: E402, F401  (registers the scenarios)

NAMES = (
    "idle-squatter",
    "swap-not-unloaded",
    "context-creep",
    "concurrency-overload",
    "silent-empty-result",
    "false-liveness",
    "orphaned-result",
    "wedged-no-progress",
    "healthy-engines",
)


@pytest.mark.parametrize("name", NAMES)
def test_engine_scenario_is_recognised(name):
    need(
        (shutil.which("cc") or shutil.which("gcc")) is not None,
        "building the fake NVML library needs a C compiler (cc)",
    )
    scenario = core.REGISTRY[name]
    result = core.run(scenario)
    assert result.status == "passed", (
        f"{name}: expected {' or '.join(result.expected)}, got {result.verdict} "
        f"({result.reason}); top candidates {result.top}"
    )
