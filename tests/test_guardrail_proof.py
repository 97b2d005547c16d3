"""The guard rail proven on the incident it was written for: its rules replayed by
Debian's promtool on the bundle's own Prometheus history (`promtool test rules`).

Two incidents on a GB10-class box whose node-exporter history Prometheus kept at a
5-minute step, a health check failing at 03:00: on one, available memory fell under 5 %
of the total at 02:15 and stayed (HostMemoryLow, `for: 5m`, fires at 02:20, 40 minutes
before the failure); on the other it never fell (the rule stays silent: said, exit 11,
and the written test fails under promtool).
"""

import json
import shutil
import subprocess

import orjson
import pytest
from conftest import bundle_errors, need, run_evidence
from test_guardrail import AT, GIB, NODE, base, prometheus

from evidence.analyze.ingest import ingest

STEP = 300
HISTORY = [AT - 86400 + i * STEP for i in range(86400 // STEP + 1)]  # a day, 5-min step


def _promtool() -> None:
    need(shutil.which("promtool") is not None, "Debian's promtool is not installed")


def _incident(tmp_path, falls_at: float | None) -> str:
    """A GB10 box's bundle: available memory at 60 GiB of 128 GiB, falling to 3 GiB at
    `falls_at` (never, when None); a health check failed at AT."""
    b = base("spark-9").gpu()  # one shared pool: host memory is the accelerator's too
    b.trigger = ("healthcheck", "gateway", "port 8080 accepted, nothing answered")

    def available(t: float) -> float:
        return 3 * GIB if falls_at is not None and t >= falls_at else 60 * GIB

    series = {
        "host_memory_available": [
            ({"__name__": "node_memory_MemAvailable_bytes", **NODE},
             [(t, available(t)) for t in HISTORY])
        ],
        "host_memory_total": [
            ({"__name__": "node_memory_MemTotal_bytes", **NODE}, [(t, 128 * GIB) for t in HISTORY])
        ],
    }  # fmt: skip
    bundle = prometheus(b, series).write(tmp_path)
    assert bundle_errors(bundle) == []
    assert not ingest(tmp_path).quarantined
    return orjson.loads((bundle / "manifest.json").read_bytes())["bundle_id"]


def _promtool_test(test_file) -> subprocess.CompletedProcess:
    """The written test run by hand, as a rules repository's CI would."""
    return subprocess.run(
        ["promtool", "test", "rules", test_file.name], cwd=test_file.parent,
        capture_output=True, text=True,
    )  # fmt: skip


def _guardrail(tmp_path, bundle_id: str) -> subprocess.CompletedProcess:
    out = tmp_path / "guard" / "host-exhaustion.yml"
    return run_evidence(
        "guardrail", bundle_id, "--archive", str(tmp_path), "--fault", "host-exhaustion",
        "--out", str(out), timeout=300,
    )  # fmt: skip


def test_a_rule_that_would_have_fired_40_minutes_before_is_proven_by_promtool(tmp_path):
    _promtool()
    bundle_id = _incident(tmp_path, falls_at=AT - 45 * 60)
    result = _guardrail(tmp_path, bundle_id)
    assert result.returncode == 0, result.stderr
    assert "HostMemoryLow: would have fired 40 min before the failure" in result.stderr
    test_file = tmp_path / "guard" / "host-exhaustion.test.yml"
    assert f"promtool test rules {test_file}: passes" in result.stderr
    # The written file stands on its own: promtool, run by hand, passes it too...
    rerun = _promtool_test(test_file)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    document = json.loads(test_file.read_text())
    (group,) = document["tests"]
    (check,) = [c for c in group["alert_rule_test"] if c["alertname"] == "HostMemoryLow"]
    assert check["eval_time"] == f"{86400 - 40 * 60}s"
    (expected,) = check["exp_alerts"]
    assert expected["exp_labels"]["instance"] == NODE["instance"]
    assert expected["exp_labels"]["fault"] == "host-exhaustion"
    # The history went in as it was read: 289 points at the bundle's own step.
    (available,) = [s for s in group["input_series"] if "MemAvailable" in s["series"]]
    assert group["interval"] == f"{STEP}s" and len(available["values"].split()) == 289

    # ... and fails the day someone loosens the rule so it no longer fires in time.
    rules = (tmp_path / "guard" / "host-exhaustion.yml").read_text()
    assert "< 0.05" in rules
    (tmp_path / "guard" / "host-exhaustion.yml").write_text(rules.replace("< 0.05", "< 0.01"))
    loosened = _promtool_test(test_file)
    assert loosened.returncode == 1 and "HostMemoryLow" in loosened.stdout + loosened.stderr


def test_a_rule_whose_metric_never_crossed_is_said_silent_and_its_test_fails(tmp_path):
    _promtool()
    bundle_id = _incident(tmp_path, falls_at=None)
    result = _guardrail(tmp_path, bundle_id)
    assert result.returncode == 11, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if "HostMemoryLow:" in x]
    assert "would not have fired" in line and "never fired before the failure" in line
    test_file = tmp_path / "guard" / "host-exhaustion.test.yml"
    assert f"promtool test rules {test_file}: FAILS" in result.stderr
    rerun = _promtool_test(test_file)
    assert rerun.returncode == 1 and "got:[]" in (rerun.stdout + rerun.stderr).replace(" ", "")


@pytest.mark.parametrize("as_json", [False, True])
def test_without_history_the_rule_file_is_still_written_and_nothing_is_claimed(tmp_path, as_json):
    from test_guardrail import engine_only

    bundle = engine_only().write(tmp_path)
    assert not ingest(tmp_path).quarantined
    bundle_id = orjson.loads((bundle / "manifest.json").read_bytes())["bundle_id"]
    args = ["--json"] if as_json else []
    result = run_evidence(
        "guardrail", bundle_id, "--archive", str(tmp_path), "--fault", "concurrency-overload",
        *args, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    if as_json:
        assert json.loads(result.stdout)["proof"] == []
    else:
        assert "no Prometheus history" in result.stderr and "groups:" in result.stdout


def test_dcgm_memory_the_collector_asked_in_bytes_is_read_back_and_proven(tmp_path):
    """The probe asks `DCGM_FI_DEV_FB_USED * 1024 * 1024` (and used + free for the total):
    Prometheus drops the metric name, so the rule's DCGM series are read back from them."""
    _promtool()
    gpu = {"gpu": "0", "UUID": "GPU-1", "instance": "box:9400", "job": "dcgm"}
    b = base("rtx-9").gpu("NVIDIA RTX 6000 Ada", total=48 * GIB, used=46 * GIB, unified=False)
    b.trigger = ("alert", "GatewayDown", None)

    def used(t: float) -> float:  # creeping from 30 GiB; past 90 % of 48 GiB at 01:55
        return min(47 * GIB, 30 * GIB + max(0.0, t - (AT - 6 * 3600)) * (14 * GIB / (5 * 3600)))

    series = {
        "accelerator_memory_used": [(gpu, [(t, used(t)) for t in HISTORY])],
        "accelerator_memory_total": [(gpu, [(t, 48 * GIB) for t in HISTORY])],
    }
    bundle = prometheus(b, series).write(tmp_path)
    assert bundle_errors(bundle) == []
    assert not ingest(tmp_path).quarantined
    bundle_id = orjson.loads((bundle / "manifest.json").read_bytes())["bundle_id"]
    out = tmp_path / "guard" / "creep.yml"
    result = run_evidence(
        "guardrail", bundle_id, "--archive", str(tmp_path), "--fault", "context-creep",
        "--out", str(out), timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if "AcceleratorMemoryHigh:" in x]
    assert "would have fired" in line and "before the failure" in line, line
    document = json.loads(out.with_name("creep.test.yml").read_text())
    names = {s["series"].split("{")[0] for s in document["tests"][0]["input_series"]}
    assert {"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"} <= names
    (free,) = [s for s in document["tests"][0]["input_series"] if "FB_FREE" in s["series"]]
    assert free["values"].split()[0] == str(18 * 1024)  # MiB, as dcgm-exporter publishes
    assert _promtool_test(out.with_name("creep.test.yml")).returncode == 0
