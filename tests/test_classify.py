"""Every fault of the catalog named from its evidence, and not from its look-alike.

Bundles come from lab/builder.py (the faults this machine cannot stage), validated
against schemas/ before they are classified, so what is classified is what the
collector would have written.
"""

import random
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from conftest import bundle_errors, run_evidence, write_config

from evidence.analyze.classify import _weigh_endings, catalog, classify
from evidence.analyze.ingest import connect, ingest
from evidence.analyze.rules import Judgement
from lab.builder import Builder, engine

GIB = 1024**3
AT = datetime(2026, 11, 10, 3, tzinfo=UTC).timestamp()  # the small hours
DAY = [AT - 86400 + i * 300 for i in range(288)]  # a day of Prometheus at a 5 min step
WINDOW = [AT + i for i in range(30)]  # the bundle's own 30 one-second samples
TOTAL = 128 * GIB


def noisy(values: list[float], scale: float, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [v + rng.uniform(-scale, scale) for v in values]


def base(host: str = "spark-1", **kwargs) -> Builder:
    """A bundle whose core sources (memory, pressure, processes, host, kernel, logs) were
    all measured and look quiet; each test adds the evidence of its fault."""
    b = Builder(host, AT, total=TOTAL, **kwargs)
    b.memory([(t, 40 * GIB + (t - AT) * 1e5) for t in WINDOW])
    b.pressure([(t, 0.0) for t in WINDOW])
    b.processes([{"pid": 100 + i, "name": "worker", "rss_bytes": GIB} for i in range(5)])
    b.host().kernel([]).logs(["server listening on 127.0.0.1:8080"])
    return b


def verdict(tmp_path: Path, *builders: Builder) -> dict:
    bundles = [b.write(tmp_path) for b in builders]
    for bundle in bundles:
        assert bundle_errors(bundle) == []
    summary = ingest(tmp_path)
    assert not summary.quarantined, summary.quarantined
    con = connect(tmp_path, read_only=True)
    try:
        last = orjson.loads((bundles[-1] / "manifest.json").read_bytes())["bundle_id"]
        return classify(con, last)
    finally:
        con.close()


def answered_while_timed_out(answered: tuple[str, str], timed_out: str, reason: str) -> list:
    """Health checks where a shallow one (name, kind) answered and a completion timed out."""
    name, kind = answered
    return [
        {"name": name, "kind": kind, "ok": True, "status": "ok", "answer": {}},
        {"name": timed_out, "kind": "completion", "ok": False, "status": "timeout",
         "reason": reason, "answer": {}},
    ]  # fmt: skip


def scores(result: dict) -> dict[str, int]:
    return {c["fault"]: c["score"] for c in result["candidates"]}


def available(used: list[float]) -> list[tuple[float, float]]:
    return [(t, TOTAL - u) for t, u in zip(DAY, used, strict=True)]


def ratcheting() -> list[float]:
    """Bursts every two hours; after each the floor sits 1.5 GiB higher and never returns."""
    out = []
    for i in range(len(DAY)):
        burst = 1 if (i % 24) in (10, 11, 12) else 0
        after = (i - 13) // 24 + 1 if i >= 13 else 0  # bursts already over: each left 1.5 GiB
        out.append(30 * GIB + after * 1.5 * GIB + burst * 12 * GIB)
    return noisy(out, 0.2 * GIB)


def healthy_bursts() -> list[float]:
    out = [30 * GIB + (12 * GIB if (i % 24) in (10, 11, 12) else 0) for i in range(len(DAY))]
    return noisy(out, 0.2 * GIB)


# -- the four overnight faults, and their look-alikes ------------------------------------------


def test_leak_ratchet(tmp_path):
    b = base().prometheus(
        {
            "host_memory_available": available(ratcheting()),
            "kv_cache_usage": [(t, 0.3) for t in DAY],
        }
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "leak-ratchet", scores(result)


def _minutes(used: list[tuple[float, float]]) -> Builder:
    """A bundle whose memory readings are all it has of memory (no Prometheus)."""
    b = Builder("spark-1", AT, total=TOTAL)
    b.memory([(AT + t, u * GIB) for t, u in used])
    b.pressure([(AT + t, 0.0) for t, _ in used])
    b.processes([{"pid": 100 + i, "name": "worker", "rss_bytes": GIB} for i in range(5)])
    return b.host().kernel([]).logs(["server listening on 127.0.0.1:8080"])


def test_a_staircase_seen_in_seconds_is_a_leak_not_one_model_kept(tmp_path):
    """The lab's leak under the recorder (tests/test_shapes.py): its best single split is a
    step that stays too, but the floor rose after each burst: no one load made it."""
    from test_shapes import LAB_LEAK_RECORDED

    result = verdict(tmp_path / "leak", _minutes(LAB_LEAK_RECORDED))
    assert result["verdict"] == "leak-ratchet", scores(result)
    swap = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert swap["score"] == 0 and any("one after each burst" in e for e in swap["evidence_against"])
    # The look-alike: one step that stays, no bursts (a model loaded and kept).
    one_step = [(t, 0.6 if t < 20 else 2.2) for t, _ in LAB_LEAK_RECORDED]
    result = verdict(tmp_path / "step", _minutes(one_step))
    swap = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert any("stepped up and stayed" in e for e in swap["evidence_for"])


def test_a_flat_floor_with_bursts_is_not_a_leak(tmp_path):
    b = base().prometheus(
        {
            "host_memory_available": available(healthy_bursts()),
            "kv_cache_usage": [(t, 0.3) for t in DAY],
            "requests_waiting": [(t, 0.0) for t in DAY],
        }
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "no-fault", scores(result)
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert any("flat" in e for e in leak["evidence_against"])


def test_context_creep_tracks_the_cache_with_flat_load(tmp_path):
    climb = noisy([30 * GIB + i * 0.15 * GIB for i in range(len(DAY))], 0.1 * GIB)
    b = base().prometheus(
        {
            "host_memory_available": available(climb),
            "kv_cache_usage": [(t, 0.2 + 0.75 * i / len(DAY)) for i, t in enumerate(DAY)],
            "requests_running": [(t, 4.0) for t in DAY],
            "requests_waiting": [(t, 0.0) for t in DAY],
        }
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "context-creep", scores(result)
    assert scores(result)["leak-ratchet"] < scores(result)["context-creep"]


def test_concurrency_overload_is_sustained_waiting(tmp_path):
    b = base().prometheus(
        {
            "host_memory_available": available(healthy_bursts()),
            "requests_running": [(t, 4.0) for t in DAY],
            "requests_waiting": [(t, 6.0 if i > 150 else 0.0) for i, t in enumerate(DAY)],
            "kv_cache_usage": [(t, 0.5) for t in DAY],
        }
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "concurrency-overload", scores(result)
    assert scores(result)["context-creep"] < 3


def _queue_in_the_last_minutes(running_now: float) -> Builder:
    """An evaluation script twenty hours ago: 16 running (the slots) and 24 waiting for a
    quarter hour. Tonight, scraped every minute through the last hour, `running_now` ran,
    the slots filled in its last minutes and 9, 15, then 24 waited when the completion
    check timed out."""
    stamps = DAY[:-12] + [DAY[-12] + 60 * k for k in range(60)]
    running = [16.0 if 40 <= i < 43 else 4.0 for i in range(len(DAY) - 12)]
    running += [running_now] * 56 + [16.0] * 4
    waiting = [24.0 if 40 <= i < 43 else 0.0 for i in range(len(stamps) - 3)] + [9.0, 15.0, 24.0]
    b = base(trigger=("healthcheck", "chat", "no answer within 120 s")).prometheus(
        {
            "host_memory_available": available(healthy_bursts()),
            "requests_running": list(zip(stamps, running, strict=True)),
            "requests_waiting": list(zip(stamps, waiting, strict=True)),
            "kv_cache_usage": [(t, 0.02 * r) for t, r in zip(stamps, running, strict=True)],
        }
    )
    return b.checks(answered_while_timed_out(("chat", "http"), "chat", "no answer within 120 s"))


@pytest.mark.parametrize("running_now", [12.0, 4.0], ids=["more-callers", "the-usual-load"])
def test_a_queue_of_minutes_behind_more_callers_than_ever_is_overload(tmp_path, running_now):
    """The queue at the timeout is no deeper than the script's, and lasted minutes: no
    share of the hour. But with more running than in any hour before and every slot taken,
    more callers than slots is what the answer waited behind. At the usual load, the same
    minutes of queue say nothing of callers."""
    result = verdict(tmp_path, _queue_in_the_last_minutes(running_now))
    more = running_now > 4
    assert (result["verdict"] == "concurrency-overload") == more, scores(result)


def _batch_behind_free_slots(**kwargs) -> Builder:
    """A burst ran 18 at once in the afternoon; tonight a batch sent faster than the cache
    takes: ten running, the queue deepening to hundreds over the last two hours."""
    running = [18.0 if 100 <= i < 103 else 10.0 if i >= 264 else 0.0 for i in range(len(DAY))]
    return base(**kwargs).prometheus(
        {
            "host_memory_available": available(healthy_bursts()),
            "requests_running": list(zip(DAY, running, strict=True)),
            "requests_waiting": [
                (t, 35.0 * (i - 263) if i >= 264 else 0.0) for i, t in enumerate(DAY)
            ],  # fmt: skip
            "kv_cache_usage": [(t, 0.01 + 0.05 * r) for t, r in zip(DAY, running, strict=True)],
        }
    )


def test_a_batch_queued_behind_free_slots_with_nothing_failed_is_a_note(tmp_path):
    """Captured by hand, every caller still served in turn, and fewer running than the
    engine had run at once: the engine paced a batch, as it is built to. Said, not blamed."""
    result = verdict(tmp_path, _batch_behind_free_slots())
    assert result["verdict"] == "no-fault", scores(result)
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    assert queue["score"] == 2 and "nothing failed" in queue["evidence_for"][0], queue


def test_the_same_queue_when_an_answer_timed_out_is_the_fault(tmp_path):
    b = _batch_behind_free_slots(trigger=("healthcheck", "chat", "no answer within 60 s"))
    b.checks(answered_while_timed_out(("chat", "http"), "chat", "no answer within 60 s"))
    result = verdict(tmp_path, b)
    assert result["verdict"] == "concurrency-overload", scores(result)


def test_too_few_readings_are_a_gap_not_evidence_against(tmp_path):
    # Five readings of a queue that never emptied: too few to judge, and said so.
    b = base().prometheus({"requests_waiting": [(AT - 60 * i, 4.0) for i in range(5)]})
    result = verdict(tmp_path, b)
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    assert queue["evidence_against"] == []
    assert any("enough readings of requests waiting" in m for m in queue["missing"])


def _llama_swap(name: str, model: str) -> dict:
    """llama-swap's record listing one model ready (its /running, as it answers)."""
    ready = {"models": [{"model": model, "state": "ready"}], "loaded": [model]}
    return engine(name, "llama-swap", readings={"/running": ready})


def test_swap_never_unloaded_is_two_sources_disagreeing(tmp_path):
    step = [30 * GIB if i < 200 else 62 * GIB for i in range(len(DAY))]
    swap = _llama_swap("swap", "qwen3-30b")
    b = (
        base()
        .prometheus({"host_memory_available": available(noisy(step, 0.2 * GIB))})
        .engines([swap])
        .gpu(processes=[(4001, "llama-server", 30 * GIB), (4002, "llama-server", 32 * GIB)])
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "swap-not-unloaded", scores(result)
    top = result["candidates"][0]
    assert any("two sources disagree" in e for e in top["evidence_for"])
    assert scores(result)["leak-ratchet"] < 3  # one step that stays is not a ratchet


def test_an_idle_squatter_is_not_a_forgotten_model(tmp_path):
    comfy = engine(
        "comfy", "comfyui", readings={"/queue": {"running": 0, "pending": 0, "running_ids": []}}
    )
    swap = _llama_swap("swap", "qwen3-30b")
    b = (
        base()
        .engines([comfy, swap], [(t, [comfy, swap]) for t in WINDOW[::5]])
        .gpu(processes=[(4001, "llama-server", 30 * GIB), (5001, "comfyui", 7 * GIB)])
    )
    b.processes(
        [
            {
                "pid": 5001,
                "name": "python3",
                "rss_bytes": 3 * GIB,
                "cmdline": ["python3", "/opt/ComfyUI/main.py"],
            }
        ]
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "idle-squatter", scores(result)
    assert scores(result)["swap-not-unloaded"] < 3


def _beside_llama_swaps_model(parent: int) -> Builder:
    """A 4090 full between two idle engines: llama-swap's qwen3-14b (llama-server, its
    child) and SGLang's llama-3.1-8b, which llama-swap no longer lists; the gateway failed.
    `parent`: SGLang's launcher's parent, llama-swap (1188) or init (started by hand)."""
    swap = _llama_swap("llama-swap", "qwen3-14b")
    idle = {"llamacpp:requests_processing": 0.0, "llamacpp:requests_deferred": 0.0}
    sglang = {"sglang:num_running_reqs": 0.0, "sglang:num_queue_reqs": 0.0}
    engines = [
        engine("qwen3-14b", "llama-server", idle),
        engine("llama-3.1-8b", "sglang", sglang),
        swap,
    ]
    b = base(trigger=("healthcheck", "gateway", "HTTP 502"))
    b.engines(engines, [(t, engines) for t in WINDOW[::5]])
    held = [(4001, "llama-server", int(11.9 * GIB)), (4102, "sglang::scheduler", 11 * GIB)]
    b.gpu("NVIDIA GeForce RTX 4090", 24 * GIB, int(23.5 * GIB), held, False, 0)
    launch = ["python3", "-m", "sglang.launch_server", "--port", "5802"]
    return b.processes(
        [
            {"pid": 1188, "name": "llama-swap", "ppid": 1, "rss_bytes": GIB // 20},
            {"pid": 4001, "name": "llama-server", "ppid": 1188, "rss_bytes": GIB},
            {"pid": 4101, "name": "python3", "ppid": parent, "rss_bytes": GIB, "cmdline": launch},
            {"pid": 4102, "name": "sglang::schedul", "ppid": 4101, "rss_bytes": GIB},
        ]
    )


def test_an_idle_model_its_manager_no_longer_lists_is_one_it_did_not_unload(tmp_path):
    result = verdict(tmp_path, _beside_llama_swaps_model(1188))
    assert result["verdict"] == "swap-not-unloaded", scores(result)
    squat = next(c for c in result["candidates"] if c["fault"] == "idle-squatter")
    assert any("llama-swap lists 1 model loaded while 2 of its processes" in e
               for e in squat["evidence_against"]), squat  # fmt: skip


def test_the_same_idle_engine_started_by_hand_beside_it_is_a_squatter(tmp_path):
    result = verdict(tmp_path, _beside_llama_swaps_model(1))
    assert result["verdict"] == "idle-squatter", scores(result)


def _idle_vllm_on_a_tight_pool(trigger: tuple[str, ...]) -> Builder:
    """vLLM idle at night on a GB10, holding the 94 GiB it reserved at start; 5.7 GiB of
    the 120 GiB pool available; no other tenant on the card."""
    idle = _engine_at("vllm", "vllm", 0, 5000)
    b = Builder("spark-1", AT, total=120 * GIB, trigger=trigger)
    b.memory([(t, 114.3 * GIB) for t in WINDOW]).pressure([(t, 0.0) for t in WINDOW])
    b.host().kernel([]).logs([]).engines([idle], [(t, [idle]) for t in WINDOW[::5]])
    b.processes([{"pid": 6854, "name": "python3", "rss_bytes": 3 * GIB,
                  "cmdline": ["python3", "-m", "vllm.entrypoints.openai.api_server"]}])  # fmt: skip
    return b.gpu(processes=[(6854, "python3", 94 * GIB)], busy_pct=0)


def test_an_idle_engine_on_a_tight_pool_with_nothing_failed_kept_nobody_out(tmp_path):
    result = verdict(tmp_path, _idle_vllm_on_a_tight_pool(("manual", "")))
    assert result["verdict"] == "no-fault", scores(result)
    squat = next(c for c in result["candidates"] if c["fault"] == "idle-squatter")
    assert any("no stall, nothing failed" in e
               for e in squat["evidence_against"]), squat  # fmt: skip


def test_the_same_idle_engine_beside_a_service_that_failed_kept_it_out(tmp_path):
    result = verdict(tmp_path, _idle_vllm_on_a_tight_pool(("healthcheck", "comfy", "HTTP 500")))
    assert result["verdict"] == "idle-squatter", scores(result)
    assert "only 5.7 GiB of 120.0 GiB was available" in result["candidates"][0]["evidence_for"][0]


# -- the machine, the accelerator, the pool ----------------------------------------------------


def test_host_exhaustion_from_the_kernel_and_the_collapse(tmp_path):
    kill = (
        "Out of memory: Killed process 4321 (python3) total-vm:66093824kB, "
        "anon-rss:31245380kB, file-rss:4096kB, shmem-rss:0kB, UID:1000 pgtables:65288kB "
        "oom_score_adj:0"
    )
    b = base().kernel(["python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE)", kill])
    b.memory([(t, TOTAL - (2 * GIB if t > AT + 20 else 30 * GIB)) for t in WINDOW])
    result = verdict(tmp_path, b)
    assert result["verdict"] == "host-exhaustion", scores(result)


def test_an_oom_kill_from_hours_before_is_context_not_the_fault(tmp_path):
    kill = "Out of memory: Killed process 4321 (python3) total-vm:66093824kB, anon-rss:3124kB"
    result = verdict(tmp_path, base().kernel([kill], ago_s=5 * 3600))
    assert result["verdict"] == "no-fault", scores(result)
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    assert host["score"] == 1 and "5.0 h before the capture" in host["evidence_for"][0]


def test_a_kill_inside_a_memory_limit_says_it_was_a_limit(tmp_path):
    kill = (
        "Memory cgroup out of memory: Killed process 16168 (model-loader) total-vm:400000kB, "
        "anon-rss:262144kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:692kB oom_score_adj:1000"
    )
    result = verdict(tmp_path, base().kernel([kill]))
    assert result["verdict"] == "host-exhaustion", scores(result)
    host = result["candidates"][0]
    assert host["score"] == 3 and "inside a memory limit" in host["evidence_for"][0]
    assert any("MemoryMax=" in e for e in host["evidence_against"])


def test_accelerator_oom_is_confirmed_by_its_line(tmp_path):
    b = base().logs(
        [
            "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 8192.00 MiB on "
            "device 0: cudaMalloc failed: out of memory"
        ]
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "accelerator-oom", scores(result)


def test_memory_pressure_stall(tmp_path):
    b = base().pressure([(t, 45.0) for t in WINDOW], [(t, 15.0) for t in WINDOW])
    b.vmstat([(t, 1000 + i * 500) for i, t in enumerate(WINDOW)])
    b.memory([(t, 120 * GIB) for t in WINDOW], swap_used=16 * GIB - GIB)
    result = verdict(tmp_path, b)
    assert result["verdict"] == "memory-pressure-stall", scores(result)
    assert scores(result)["wedged-no-progress"] == 0


def test_build_swarm(tmp_path):
    b = base().processes(
        [{"pid": 200 + i, "name": "cc1plus", "rss_bytes": 6 * GIB} for i in range(8)]
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "build-swarm", scores(result)


def test_orphaned_gpu_holder(tmp_path):
    vllm = engine("vllm-1", "vllm", status="absent")
    b = base().engines([vllm]).gpu(processes=[(6001, "python3", 20 * GIB)])
    b.processes(
        [
            {
                "pid": 6001,
                "ppid": 1,
                "name": "python3",
                "rss_bytes": 2 * GIB,
                "cmdline": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
            }
        ]
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "orphaned-gpu-holder", scores(result)


# -- the layer that fails ----------------------------------------------------------------------


def test_false_liveness(tmp_path):
    b = base().checks(
        [
            {"name": "port", "kind": "tcp", "ok": True, "status": "ok", "answer": {}},
            {
                "name": "gateway",
                "kind": "completion",
                "ok": False,
                "status": "timeout",
                "reason": "no answer within 60 s",
                "answer": {},
            },
        ]
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "false-liveness", scores(result)
    assert scores(result)["wedged-no-progress"] == 0  # the look-alike: nothing was measured busy


def test_silent_empty_result(tmp_path):
    b = base().checks(
        [
            {
                "name": "gateway",
                "kind": "completion",
                "ok": False,
                "status": "failed",
                "reason": "the content is empty",
                "answer": {
                    "http_status": 200,
                    "finish_reason": "stop",
                    "content_chars": 0,
                    "reasoning_chars": 4012,
                },
            }
        ]
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "silent-empty-result", scores(result)


def test_an_empty_answer_beside_a_passing_health_check_is_not_false_liveness(tmp_path):
    empty = {"http_status": 200, "finish_reason": "stop", "content_chars": 0}
    b = base().checks(
        [
            {"name": "health", "kind": "http", "ok": True, "status": "ok", "answer": {}},
            {
                "name": "chat",
                "kind": "completion",
                "ok": False,
                "status": "failed",
                "reason": "the content is empty",
                "answer": empty,
            },
        ]  # fmt: skip
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "silent-empty-result", scores(result)
    assert scores(result)["false-liveness"] == 0


def _engine_at(kind: str, name: str, running: float, tokens: float) -> dict:
    return engine(
        name,
        kind,
        metrics={
            "vllm:num_requests_running": running,
            "vllm:num_requests_waiting": 0.0,
            "vllm:generation_tokens_total": tokens,
        },
    )


def test_wedged_is_busy_with_no_progress(tmp_path):
    samples = [(t, [_engine_at("vllm", "vllm-1", 2, 5000)]) for t in WINDOW[::5]]
    b = base().engines([_engine_at("vllm", "vllm-1", 2, 5000)], samples)
    result = verdict(tmp_path, b)
    assert result["verdict"] == "wedged-no-progress", scores(result)


def test_busy_but_progressing_is_not_wedged(tmp_path):
    samples = [
        (t, [_engine_at("vllm", "vllm-1", 2, 5000 + i * 300)]) for i, t in enumerate(WINDOW[::5])
    ]
    b = base().engines([_engine_at("vllm", "vllm-1", 2, 5000)], samples)
    result = verdict(tmp_path, b)
    assert scores(result)["wedged-no-progress"] == 0
    wedged = next(c for c in result["candidates"] if c["fault"] == "wedged-no-progress")
    assert any("progressing" in e for e in wedged["evidence_against"])
    assert any(f.startswith("busy but progressing: 1500 tokens") for f in result["findings"])


def test_orphaned_result(tmp_path):
    job = {
        "prompt_id": "a1b2",
        "status": "success",
        "completed": True,
        "outputs": [
            {
                "node": "9",
                "kind": "images",
                "filename": "ComfyUI_00042_.png",
                "subfolder": "",
                "type": "output",
            }
        ],
        "execution_start": int((AT - 900) * 1000),
        "execution_success": int((AT - 600) * 1000),
    }
    comfy = engine("comfy", "comfyui", readings={"/history?max_items=20": {"jobs": [job]}})
    b = base(trigger=("healthcheck", "render-watcher")).engines([comfy])
    result = verdict(tmp_path, b)
    assert result["verdict"] == "orphaned-result", scores(result)


def test_power_cycled_after_severe_pressure(tmp_path):
    before = base(boot_id="boot-1")
    before.at = AT - 3600
    before.memory([(AT - 3600 + i, TOTAL - GIB) for i in range(30)])
    after = base(boot_id="boot-2", uptime_s=600)
    result = verdict(tmp_path, before, after)
    assert result["verdict"] == "power-cycled", scores(result)


def test_admission_without_a_budget(tmp_path):
    manager = engine(
        "ollama",
        "ollama",
        readings={
            "/api/ps": {
                "models": [
                    {"name": "llama3.3:70b", "state": "starting", "size": 43 * GIB, "size_vram": 0}
                ]
            }
        },
    )
    b = base().engines([manager])
    b.memory([(t, TOTAL - 20 * GIB) for t in WINDOW])
    result = verdict(tmp_path, b)
    assert result["verdict"] == "admission-overcommit", scores(result)


# -- the verdicts that are not a fault ---------------------------------------------------------


def test_too_little_measured_is_insufficient_evidence_not_no_fault(tmp_path):
    b = Builder("blind-1", AT, total=TOTAL).host().absent("memory", "/proc/meminfo: denied")
    b.absent("pressure", "kernel without PSI").absent("processes", "timeout")
    result = verdict(tmp_path, b)
    assert result["verdict"] == "insufficient-evidence"
    assert {g["source"] for g in result["gaps"]} >= {"memory", "pressure", "processes"}


def test_the_contract_lists_every_fault_even_at_zero(tmp_path):
    result = verdict(tmp_path, base())
    ids = [f["id"] for f in catalog()["fault"]]
    assert sorted(c["fault"] for c in result["candidates"]) == sorted(ids)
    assert len(ids) == 16
    scores_in_order = [c["score"] for c in result["candidates"]]
    assert scores_in_order == sorted(scores_in_order, reverse=True)
    for c in result["candidates"]:
        assert set(c) == {
            "fault",
            "title",
            "score",
            "evidence_for",
            "evidence_against",
            "missing",
            "settle",
            "fix",
            "guard_rail",
        }
    assert set(result) >= {
        "bundle_id",
        "verdict",
        "candidates",
        "gaps",
        "findings",
        "rules_version",
    }


def test_the_command_speaks_json_and_reads_in_the_seeds_order(tmp_path):
    bundle = base().logs(["CUDA error: out of memory"]).write(tmp_path)
    as_json = run_evidence("classify", str(bundle), "--archive", str(tmp_path), "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert orjson.loads(as_json.stdout)["verdict"] == "accelerator-oom"
    human = run_evidence("classify", "latest", "--archive", str(tmp_path)).stdout
    order = [
        "1. When",
        "2. Memory",
        "3. Did the load change",
        "4. What the logs said",
        "5. Candidates",
        "6. What was not measurable",
    ]
    positions = [human.index(h) for h in order]
    assert positions == sorted(positions)
    assert "accelerator-oom" in human.splitlines()[0]
    missing = run_evidence("classify", "no-such-bundle", "--archive", str(tmp_path))
    assert missing.returncode == 2 and "no bundle" in missing.stderr


@pytest.mark.parametrize("fault", [f["id"] for f in catalog()["fault"]])
def test_every_catalog_entry_reads_without_python(fault):
    entry = next(f for f in catalog()["fault"] if f["id"] == fault)
    for key in ("title", "looks_for", "against", "settle", "fix", "guard_rail"):
        assert len(entry[key]) > 20, (fault, key)


def test_two_candidates_within_a_point_are_ambiguous_and_say_what_separates_them(tmp_path):
    b = base().prometheus(
        {
            "host_memory_available": available(healthy_bursts()),
            "kv_cache_usage": [(t, 0.2 + 0.75 * i / len(DAY)) for i, t in enumerate(DAY)],
            "requests_running": [(t, 4.0) for t in DAY],
            "requests_waiting": [(t, 5.0 if i > 150 else 0.0) for i, t in enumerate(DAY)],
        }
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "ambiguous", scores(result)
    assert {c["fault"] for c in result["candidates"][:2]} == {
        "concurrency-overload",
        "context-creep",
    }
    assert any("requests running rose" in f for f in result["findings"])


# The machine's own kernel log is not part of the scenario: the fault lab's tests kill
# processes in cgroups on purpose, and their OOM lines would speak for host-exhaustion.
QUIET_KERNEL = '[capture]\nkernel_lookback = "1s"\nkernel_tail = 0\n'


def test_a_real_build_swarm_on_this_machine(tmp_path):
    """Real processes named like compilers (a copy of the Python binary called cc1plus),
    each holding real memory, captured by the real collector."""
    total = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    per = int(total * 0.36 / 4)
    compiler = tmp_path / "cc1plus"
    shutil.copy(sys.executable, compiler)
    hold = f"b = bytearray({per}); b[::4096] = b'x' * len(b[::4096]); import time; time.sleep(60)"
    procs = [subprocess.Popen([str(compiler), "-c", hold]) for _ in range(4)]
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            rss = 4096 * sum(
                int(Path(f"/proc/{p.pid}/statm").read_text().split()[1]) for p in procs
            )
            if rss >= per * 4 * 0.95:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the compilers hold {rss / total:.0%} of memory after 30 s, not 36 %")
        config = write_config(tmp_path / "c.toml", QUIET_KERNEL)
        captured = run_evidence(
            "capture",
            "--archive",
            str(tmp_path / "a"),
            "--window",
            "2",
            "-q",
            "--config",
            str(config),
        )
        assert captured.returncode == 0, captured.stderr
    finally:
        for p in procs:
            p.kill()
            p.wait()
    result = run_evidence("classify", "latest", "--archive", str(tmp_path / "a"), "--json")
    found = orjson.loads(result.stdout)
    swarm = next(c for c in found["candidates"] if c["fault"] == "build-swarm")
    assert found["verdict"] == "build-swarm", (scores(found), swarm["evidence_for"])
    assert "4 compiler processes" in swarm["evidence_for"][0]


def test_this_quiet_machine_is_no_fault(tmp_path):
    config = write_config(tmp_path / "c.toml", QUIET_KERNEL)
    captured = run_evidence(
        "capture", "--archive", str(tmp_path), "--window", "3", "-q", "--config", str(config)
    )
    assert captured.returncode == 0, captured.stderr
    result = orjson.loads(
        run_evidence("classify", "latest", "--archive", str(tmp_path), "--json").stdout
    )
    assert result["verdict"] == "no-fault", scores(result)
    assert result["gaps"]  # and it says what it could not see (no GPU, no engines here)


def test_a_weak_ending_cannot_tie_with_the_cause_it_ended():
    """The machine ran short beside a leak's floors, nothing killed: two points of
    host-exhaustion, how the leak's three ended. It must not make the verdict ambiguous."""
    leak, short = Judgement(), Judgement(ending=True)
    leak.add(3, "the floor rose in the quiet hours and never came back")
    short.add(2, "available memory fell to 1% and nothing was killed")
    judged = {"leak-ratchet": leak, "host-exhaustion": short}
    _weigh_endings(judged)
    assert leak.score == 3 and short.score < 2
    assert "how the failure ended, not why" in short.evidence_against[0]


@pytest.mark.parametrize(
    ("name", "checked"),
    [("chat", "chat"), ("qwen3-14b", "llama-server")],  # llama-swap names it by its model
)
def test_an_idle_engine_whose_own_check_timed_out_under_a_stall_is_its_victim(
    tmp_path, name, checked
):
    """A job outgrew RAM and the machine stalls; the chat engine sits idle with its model on
    the card, and its own check timed out, named for the engine or for its software. It is
    not keeping another out: it could not work."""
    chat = engine(name, "llama-server", {"llamacpp:requests_processing": 0.0})
    b = base(trigger=("healthcheck", checked, "no answer within 60 s"))
    b.pressure([(t, 45.0) for t in WINDOW], [(t, 15.0) for t in WINDOW])
    b.vmstat([(t, 1000 + i * 500) for i, t in enumerate(WINDOW)])
    b.memory([(t, 126 * GIB) for t in WINDOW], swap_used=16 * GIB - GIB)
    b.engines([chat], [(t, [chat]) for t in WINDOW[::5]])
    b.gpu(processes=[(4001, "llama-server", 30 * GIB)])
    b.checks([{"name": checked, "kind": "http", "ok": False, "status": "timeout",
               "reason": "no answer within 60 s", "answer": {}}])  # fmt: skip
    result = verdict(tmp_path, b)
    assert result["verdict"] == "memory-pressure-stall", scores(result)
    squat = next(c for c in result["candidates"] if c["fault"] == "idle-squatter")
    assert any("a victim of what held the memory" in e for e in squat["evidence_against"]), squat
