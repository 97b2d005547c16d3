"""The Prometheus window, read from a real Prometheus (Debian's package) that the test
starts on a loopback port after backfilling hours of history with promtool."""

import re
import time
from pathlib import Path

import orjson
import pytest
from conftest import bundle_errors, bundles, run_evidence, write_config
from fakes import closed_port
from promserver import Prometheus, require

from evidence.capture.probes.prometheus import ENGINE_JOBS, step_for

HOURS = 6
GIB = 1024**3
NVIDIA_SMI = (
    '{instance="box:9835",job="nvidia_gpu_exporter",name="NVIDIA GeForce RTX 4090",'
    'uuid="GPU-5a1b7c0e-94d2-4f1e-8c3a-2b6d9e0f1a47"}'
)


def history(now: int) -> str:
    """OpenMetrics text: six hours of a machine whose available memory falls while vLLM's
    queue builds and llama-server's context high-water climbs (the shapes the analyst reads)."""
    start = now - HOURS * 3600
    stamps = range(start, now - 60, 60)
    families = {
        "node_memory_MemAvailable_bytes": (
            '{instance="box:9100",job="node"}',
            lambda i: 100 * GIB - i * 200 * 1024**2,
        ),
        "node_memory_MemTotal_bytes": ('{instance="box:9100",job="node"}', lambda i: 128 * GIB),
        "vllm:num_requests_waiting": (
            '{engine="0",job="vllm",model_name="Qwen/Qwen3-8B"}',
            lambda i: float(i // 60),
        ),
        "llamacpp:n_tokens_max": ('{job="llama-server"}', lambda i: 1000 + 10 * i),
        # A llama-server built before May 2025 (PR #13660) still publishes its cache gauge.
        "llamacpp:kv_cache_usage_ratio": ('{job="llama-old"}', lambda i: min(1.0, i / 400)),
        # A job named as an operator names it: a vLLM server for one model.
        "up": ('{instance="127.0.0.1:8000",job="vLLM-qwen3"}', lambda i: 1.0),
        "process_resident_memory_bytes": (
            '{instance="127.0.0.1:8000",job="vLLM-qwen3"}',
            lambda i: 2 * GIB + i * 1024**2,
        ),
        # A GeForce card read by utkuozdemir/nvidia_gpu_exporter (nvidia-smi's, in bytes).
        "nvidia_smi_memory_used_bytes": (NVIDIA_SMI, lambda i: 12 * GIB + i * 2 * 1024**2),
        "nvidia_smi_memory_total_bytes": (NVIDIA_SMI, lambda i: 24 * GIB),
    }
    lines = []
    for name, (labels, value) in families.items():
        lines.append(f"# TYPE {name} gauge")
        lines += [f"{name}{labels} {value(i)} {ts}" for i, ts in enumerate(stamps)]
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    require()
    server = Prometheus(tmp_path_factory.mktemp("prometheus"), history(int(time.time())))
    try:
        yield server.url
    finally:
        server.close()


def prometheus_record(tmp_path: Path, config_text: str, window: str = "2") -> tuple[dict, dict]:
    config = write_config(tmp_path / "c.toml", config_text)
    result = run_evidence(
        "capture",
        "--archive",
        str(tmp_path / "a"),
        "--window",
        window,
        "--config",
        str(config),
        "--json",
    )
    assert result.returncode == 0, result.stderr
    (bundle,) = bundles(tmp_path / "a")
    assert bundle_errors(bundle) == []
    summary = orjson.loads(result.stdout)
    path = bundle / "prometheus.json"
    return summary, orjson.loads(path.read_bytes()) if path.exists() else {}


def test_the_bundle_holds_hours_of_history_from_a_real_prometheus(prometheus, tmp_path):
    summary, record = prometheus_record(
        tmp_path,
        f'[prometheus]\nurl = "{prometheus}"\n'
        'lookback = "8h"\n[prometheus.queries]\n'
        'queue_peak = "max_over_time(vllm:num_requests_waiting[1h])"\n',
    )
    assert summary["probes"]["prometheus"]["status"] == "ok"
    assert record["step_s"] == step_for(8 * 3600) == 40
    assert record["version"].startswith("2.")
    queries = {q["name"]: q for q in record["queries"]}
    available = queries["host_memory_available"]
    assert available["status"] == "ok"
    (series,) = available["series"]
    assert series["metric"]["instance"] == "box:9100"
    values = [float(v) for _, v in series["values"]]
    assert len(values) > 360  # about six hours at a 40 s step
    assert values[0] > values[-1] + 50 * GIB  # it fell: memory read backwards from the end
    waiting = queries["requests_waiting"]["series"][0]
    assert waiting["metric"]["model_name"] == "Qwen/Qwen3-8B"
    assert queries["context_high_water"]["status"] == "ok"
    (old_cache,) = queries["kv_cache_usage_legacy"]["series"]
    assert old_cache["metric"]["job"] == "llama-old"
    assert float(old_cache["values"][0][1]) < 0.1 < 0.8 < float(old_cache["values"][-1][1])
    assert queries["queue_peak"]["status"] == "ok"  # the config's own query
    # An engine's job is known by its name whatever the operator added to it.
    (engine,) = queries["engine_up"]["series"]
    assert engine["metric"]["job"] == "vLLM-qwen3"
    (own,) = queries["engine_resident_memory"]["series"]
    assert float(own["values"][0][1]) < float(own["values"][-1][1])
    # No DCGM here: the card is read from nvidia_gpu_exporter's names, in bytes.
    (card,) = queries["accelerator_memory_used"]["series"]
    assert card["metric"]["name"] == "NVIDIA GeForce RTX 4090"
    assert 12 * GIB <= float(card["values"][0][1]) < float(card["values"][-1][1]) < 13 * GIB
    (size,) = queries["accelerator_memory_total"]["series"]
    assert float(size["values"][-1][1]) == 24 * GIB
    # Nothing publishes these on this box: absent, with the reason, and no series.
    for name in ("gateway_up", "kv_cache_usage", "accelerator_gtt_used", "host_swap_free"):
        assert queries[name]["status"] == "absent", name
        assert queries[name]["series"] == [] and "nothing publishes" in queries[name]["reason"]


def test_a_bad_query_is_an_error_of_that_query_only(prometheus, tmp_path):
    _, record = prometheus_record(
        tmp_path,
        f'[prometheus]\nurl = "{prometheus}"\n'
        'lookback = "1h"\n[prometheus.queries]\nbroken = "rate(("\n',
    )
    queries = {q["name"]: q for q in record["queries"]}
    assert queries["broken"]["status"] == "error" and "bad_data" in queries["broken"]["reason"]
    assert queries["host_memory_available"]["status"] == "ok"


def test_prometheus_unreachable_is_not_a_missing_series(tmp_path):
    url = f"http://127.0.0.1:{closed_port()}"
    summary, record = prometheus_record(tmp_path, f'[prometheus]\nurl = "{url}"\n', window="0")
    probe = summary["probes"]["prometheus"]
    assert probe["status"] == "absent" and "nothing is listening" in probe["reason"]
    assert record == {}  # no per-query "absent": the instrument, not the series, is missing


@pytest.mark.parametrize(
    ("job", "engine"),
    [
        ("vllm", True),
        ("vllm-qwen3-32b", True),
        ("sglang", True),
        ("llama-server", True),
        ("llama_cpp", True),
        ("LlamaServer", True),
        ("llama-swap", False),
        ("ollama", False),
        ("gateway", False),
        ("node", False),
    ],
)
def test_an_engine_job_is_known_by_its_name_and_a_manager_is_not_one(job, engine):
    # Prometheus anchors a label regex at both ends, as fullmatch does (RE2 reads (?i)).
    assert (re.fullmatch(ENGINE_JOBS, job) is not None) is engine
