"""Engine probes against fake engines that answer in the engines' real formats."""

import time

import orjson
import pytest
from conftest import bundle_errors, bundles, manifest, run_evidence, write_config
from fakes import ENGINES, JSON, BlackHole, FakeServer, closed_port

from evidence.capture.config import Config, from_dict
from evidence.capture.engines import readers
from evidence.capture.probes import Context
from evidence.capture.probes.engines import Engines
from evidence.capture.runner import SEAL_MARGIN_S

KIND_OF_SECTION = {
    "llama-swap": "llama-swap",
    "ollama": "ollama",
    "comfyui": "comfyui",
    "a1111": "a1111",
    "vllm": "vllm",
    "sglang": "sglang",
    "llama-server": "llama-server",
}


@pytest.fixture
def fleet():
    servers = {kind: FakeServer(routes) for kind, routes in ENGINES.items()}
    servers["broken"] = FakeServer(
        {"/api/ps": (500, "text/plain", b"runner crashed: CUDA error: out of memory")}
    )
    hole = BlackHole()
    yield servers, hole
    for server in servers.values():
        server.close()
    hole.close()


def engines_config(servers, hole, timeout_s: float = 1.0) -> str:
    blocks = [
        f'[[engines]]\nkind = "{kind}"\nurl = "{servers[kind].url}"\nname = "{kind}-1"\n'
        for kind in ENGINES
    ]
    blocks.append(
        f'[[engines]]\nkind = "ollama"\nurl = "{servers["broken"].url}"\nname = "ollama-500"\n'
    )
    blocks.append(
        f'[[engines]]\nkind = "llama-server"\nurl = "{hole.url}"\nname = "wedged"\n'
        f"timeout_s = {timeout_s}\n"
    )
    blocks.append(
        f'[[engines]]\nkind = "vllm"\nurl = "http://127.0.0.1:{closed_port()}"\nname = "gone"\n'
    )
    return "\n".join(blocks)


def test_every_engine_kind_is_recorded_in_its_own_words(fleet, tmp_path):
    servers, hole = fleet
    config = write_config(tmp_path / "c.toml", engines_config(servers, hole))
    start = time.monotonic()
    result = run_evidence(
        "capture", "--archive", str(tmp_path / "a"), "--window", "6", "--config", str(config)
    )
    elapsed = time.monotonic() - start
    assert result.returncode == 0, result.stderr
    assert elapsed < 6 + SEAL_MARGIN_S  # the black hole cost its timeout, not the bundle
    (bundle,) = bundles(tmp_path / "a")
    assert bundle_errors(bundle) == []
    record = orjson.loads((bundle / "engines.json").read_bytes())
    by_name = {e["name"]: e for e in record["engines"]}
    assert record["source"] == "config"

    def readings(name, path):
        return by_name[name]["endpoints"][path]["readings"]

    assert readings("llama-swap-1", "/running")["loaded"] == ["qwen3-30b-a3b"]
    states = {m["model"]: m["state"] for m in readings("llama-swap-1", "/running")["models"]}
    assert states == {"qwen3-30b-a3b": "ready", "whisper-large-v3": "starting"}
    assert "Unloading model" in by_name["llama-swap-1"]["endpoints"]["/logs"]["body"]
    ps = readings("ollama-1", "/api/ps")
    assert ps["size_vram_total"] == 18253611008 + 849346560
    assert readings("ollama-1", "/api/version")["version"]
    assert readings("comfyui-1", "/queue") | {"running_ids": None} == {
        "running": 1,
        "pending": 1,
        "running_ids": None,
    }
    jobs = readings("comfyui-1", "/history?max_items=20")["jobs"]
    assert jobs and all(j["outputs"] for j in jobs if j["completed"])
    assert jobs[0]["outputs"][0]["filename"].endswith(".png")
    assert readings("comfyui-1", "/system_stats")["devices"][0]["vram_total"] > 0
    assert readings("a1111-1", "/sdapi/v1/memory")["cuda"]["allocated"]["current"] > 0
    assert readings("a1111-1", "/sdapi/v1/progress?skip_current_image=true")["progress"] == 0.4
    vllm = readings("vllm-1", "/metrics")
    assert vllm["metrics"]["vllm:kv_cache_usage_perc"][0]["value"] == 0.9132
    assert (
        vllm["metrics"]["vllm:num_requests_waiting"][0]["labels"]["model_name"] == "Qwen/Qwen3-8B"
    )
    assert "vllm:gpu_cache_usage_perc" in vllm["absent"]  # removed in 0.12: named, not zero
    assert readings("vllm-1", "/v1/models")["models"][0]["max_model_len"] == 32768
    sglang = readings("sglang-1", "/metrics")["metrics"]
    assert sglang["sglang:num_queue_reqs"][0]["value"] == 5.0
    assert readings("sglang-1", "/get_server_info")["memory_usage"]
    llama = by_name["llama-server-1"]["endpoints"]
    assert llama["/slots"]["readings"]["busy"] >= 1
    assert "llamacpp:n_tokens_max" in llama["/metrics"]["readings"]["metrics"]
    assert "llamacpp:kv_cache_usage_ratio" in llama["/metrics"]["readings"]["absent"]
    assert llama["/props"]["readings"]["total_slots"] == 2

    broken = by_name["ollama-500"]
    assert broken["status"] == "error" and broken["endpoints"]["/api/ps"]["http_status"] == 500
    assert "CUDA error: out of memory" in broken["reason"]
    wedged = by_name["wedged"]
    assert wedged["status"] == "timeout"
    assert 900 <= wedged["endpoints"]["/health"]["elapsed_ms"] < 1500
    assert {e["status"] for p, e in wedged["endpoints"].items() if p != "/health"} == {"skipped"}
    gone = by_name["gone"]
    assert gone["status"] == "absent" and "nothing is listening" in gone["reason"]

    samples = [
        orjson.loads(x) for x in (bundle / "engines.samples.jsonl").read_bytes().splitlines()
    ]
    assert len(samples) == 2  # every 5 s through a 6 s window
    sampled = {e["name"]: e for e in samples[1]["engines"]}
    assert set(sampled) == {f"{k}-1" for k in ENGINES} | {"ollama-500"}
    assert sampled["vllm-1"]["endpoints"]["/metrics"]["readings"]["metrics"]
    assert "/v1/models" not in sampled["vllm-1"]["endpoints"]  # only the sampled endpoints

    for server in servers.values():
        assert server.requests and {m for m, _ in server.requests} == {"GET"}
    assert "engines" in manifest(bundle)["probes"]


def test_an_answer_that_does_not_parse_is_an_error_with_the_raw_kept(tmp_path):
    server = FakeServer(
        {
            "/api/ps": (200, JSON, b"<html>proxy error</html>"),
            "/api/version": (200, JSON, b'{"version":"0.12.11"}'),
        }
    )
    try:
        config = from_dict({"engines": [{"kind": "ollama", "url": server.url}]})
        probe = Engines(Context(config=config, started=time.time()))
        reading = probe.freeze()
    finally:
        server.close()
    (engine,) = reading.record["engines"]
    ps = engine["endpoints"]["/api/ps"]
    assert engine["status"] == "error" and "could not be parsed" in ps["reason"]
    assert ps["body"] == "<html>proxy error</html>"
    assert engine["endpoints"]["/api/version"]["readings"]["version"] == "0.12.11"


def test_hung_endpoints_cost_their_timeout_not_the_readings_after_them():
    # A busy vLLM: /metrics answers, /health and /v1/models hang. One after another, the two
    # hangs would spend the probe's two seconds and /version would never be asked.
    server = FakeServer(ENGINES["vllm"], stalls={"/health": 4.0, "/v1/models": 4.0})
    try:
        config = from_dict({"engines": [{"kind": "vllm", "url": server.url, "timeout_s": 1.0}]})
        reading = Engines(Context(config=config, started=time.time())).freeze()
    finally:
        server.close()
    (engine,) = reading.record["engines"]
    endpoints = engine["endpoints"]
    assert engine["status"] == "ok"
    assert endpoints["/health"]["status"] == endpoints["/v1/models"]["status"] == "timeout"
    assert endpoints["/version"]["readings"]["version"]
    assert endpoints["/metrics"]["readings"]["metrics"]["vllm:num_requests_running"]


def test_discovery_identifies_what_answers_on_the_usual_ports(monkeypatch):
    kinds = readers()
    ollama = FakeServer(ENGINES["ollama"])
    swap = FakeServer(ENGINES["llama-swap"])
    stranger = FakeServer({"/": (200, "text/html", b"<h1>a wiki</h1>")})
    silent = closed_port()
    try:
        monkeypatch.setattr(kinds["ollama"], "ports", (ollama.port,))
        # llama-swap and llama-server share 8080: the answers decide which one it is.
        monkeypatch.setattr(kinds["llama-swap"], "ports", (swap.port,))
        monkeypatch.setattr(kinds["llama-server"], "ports", (swap.port, stranger.port))
        for kind in ("comfyui", "a1111", "vllm", "sglang"):
            monkeypatch.setattr(kinds[kind], "ports", (silent,))
        probe = Engines(Context(config=Config(), started=time.time()))
        reading = probe.freeze()
        sample = probe.sample()
    finally:
        for server in (ollama, swap, stranger):
            server.close()
    assert reading.status == "ok" and reading.record["source"] == "discovery"
    found = {e["kind"]: e for e in reading.record["engines"]}
    assert set(found) == {"ollama", "llama-swap"}
    discovery = {d["port"]: d for d in reading.record["discovery"]}
    assert discovery[stranger.port]["kind"] is None
    assert "answers like none of llama-server" in discovery[stranger.port]["note"]
    assert silent not in discovery  # refused: nothing there, nothing recorded
    assert {e["kind"] for e in sample["engines"]} == {"ollama", "llama-swap"}


def test_nothing_configured_and_nothing_listening_is_absent(monkeypatch):
    kinds = readers()
    silent = closed_port()
    for cls in kinds.values():
        monkeypatch.setattr(cls, "ports", (silent,))
    reading = Engines(Context(config=Config(), started=time.time())).freeze()
    assert reading.status == "absent" and "no [[engines]] configured" in reading.reason
