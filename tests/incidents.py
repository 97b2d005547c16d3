"""A generated archive of incidents: several of each kind over two months, on two hosts,
with healthy baseline snapshots between them, for compare, runbook, changelog and report.

Every bundle comes from lab/builder.py (the collector's record formats, checked against
schemas/ by the tests that use it). Each incident carries a day of Prometheus history in
the shape of its fault (the recipes of tests/test_classify.py), a llama-server answering
with its build, and the processes an operator would see, so its fingerprint (fault,
engine, model, process) is what a real one would have.
"""

import random
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from lab.builder import Builder, engine

GIB = 1024**3
TOTAL = 128 * GIB
DAY_S = 86400
# The night of the latest incident; everything else is placed before it.
TONIGHT = datetime(2026, 11, 10, 3, 12, tzinfo=UTC).timestamp()


def _day(at: float) -> list[float]:
    return [at - DAY_S + i * 300 for i in range(288)]


def _noisy(values: list[float], seed: int) -> list[float]:
    rng = random.Random(seed)
    return [v + rng.uniform(-0.2 * GIB, 0.2 * GIB) for v in values]


def _available(at: float, used: list[float]) -> list[tuple[float, float]]:
    return [(t, TOTAL - u) for t, u in zip(_day(at), used, strict=True)]


def _bursts(i: int) -> int:
    return 1 if (i % 24) in (10, 11, 12) else 0


def leak(at: float, seed: int) -> dict[str, list[tuple[float, float]]]:
    used = [
        30 * GIB + ((i - 13) // 24 + 1 if i >= 13 else 0) * 1.5 * GIB + _bursts(i) * 12 * GIB
        for i in range(288)
    ]
    return {
        "host_memory_available": _available(at, _noisy(used, seed)),
        "kv_cache_usage": [(t, 0.3) for t in _day(at)],
        "requests_running": [(t, 2.0) for t in _day(at)],
        "requests_waiting": [(t, 0.0) for t in _day(at)],
    }


def concurrency(at: float, seed: int) -> dict[str, list[tuple[float, float]]]:
    used = [30 * GIB + _bursts(i) * 12 * GIB for i in range(288)]
    return {
        "host_memory_available": _available(at, _noisy(used, seed)),
        "requests_running": [(t, 4.0) for t in _day(at)],
        "requests_waiting": [(t, 6.0 if i > 150 else 0.0) for i, t in enumerate(_day(at))],
        "kv_cache_usage": [(t, 0.5) for t in _day(at)],
    }


def creep(at: float, seed: int) -> dict[str, list[tuple[float, float]]]:
    used = [30 * GIB + i * 0.15 * GIB for i in range(288)]
    return {
        "host_memory_available": _available(at, _noisy(used, seed)),
        "kv_cache_usage": [(t, 0.2 + 0.75 * i / 288) for i, t in enumerate(_day(at))],
        "requests_running": [(t, 4.0) for t in _day(at)],
        "requests_waiting": [(t, 0.0) for t in _day(at)],
    }


def healthy(at: float, seed: int) -> dict[str, list[tuple[float, float]]]:
    used = [30 * GIB + _bursts(i) * 12 * GIB for i in range(288)]
    return {
        "host_memory_available": _available(at, _noisy(used, seed)),
        "kv_cache_usage": [(t, 0.3) for t in _day(at)],
        "requests_running": [(t, 2.0) for t in _day(at)],
        "requests_waiting": [(t, 0.0) for t in _day(at)],
    }


KINDS: dict[str, Callable[[float, int], dict[str, list[tuple[float, float]]]]] = {
    "leak-ratchet": leak,
    "concurrency-overload": concurrency,
    "context-creep": creep,
    "no-fault": healthy,
}

LLAMA_ARGV = [
    "/opt/llama.cpp/bin/llama-server",
    "-m",
    "/models/qwen2.5-7b-instruct-q4_k_m.gguf",
    "--ctx-size",
    "32768",
    "--parallel",
    "4",
    "--port",
    "8080",
]


def bundle(
    archive: Path,
    kind: str,
    at: float,
    host: str = "spark-1",
    seed: int = 1,
    trigger: tuple[str, str | None] = ("alert", "AcceleratorMemoryHigh"),
    model: str = "qwen2.5-7b-instruct",
    gpu: bool = False,
) -> Path:
    """One bundle of `kind` (a fault id of KINDS, or no-fault) captured at `at`."""
    window = [at + i for i in range(30)]
    history = KINDS[kind](at, seed)
    last_used = TOTAL - history["host_memory_available"][-1][1]
    server = engine(
        "chat",
        "llama-server",
        metrics={"llamacpp:requests_processing": 2.0, "llamacpp:requests_deferred": 0.0},
        readings={
            "/props": {"total_slots": 4, "n_ctx": 32768, "build_info": "b4521-5fa07c2f"},
            "/v1/models": {"models": [{"id": model, "state": "loaded"}]},
        },
    )
    b = Builder(host, at, total=TOTAL, trigger=trigger)
    b.memory([(t, last_used) for t in window])
    b.pressure([(t, 0.0) for t in window])
    b.processes(
        [
            {
                "pid": 4242,
                "name": "llama-server",
                "rss_bytes": int(last_used * 0.6),
                "cmdline": LLAMA_ARGV,
            },
            *({"pid": 100 + i, "name": "worker", "rss_bytes": GIB} for i in range(4)),
        ]
    )
    b.host().kernel([]).logs(["srv  log_server_r: request: POST /completion 200"])
    b.engines([server])
    b.prometheus(history)
    if gpu:  # a GB10: one pool, so NVML has per-process figures and no aggregate
        b.gpu(processes=[(4242, "llama-server", int(last_used * 0.5))])
    return b.write(archive)


# (kind, days before tonight, host): two months of a small lab's incidents.
SCHEDULE = (
    ("leak-ratchet", 61, "spark-1"),
    ("no-fault", 50, "spark-1"),
    ("concurrency-overload", 45, "spark-1"),
    ("leak-ratchet", 40, "spark-1"),
    ("context-creep", 33, "spark-2"),
    ("leak-ratchet", 30, "spark-1"),
    ("concurrency-overload", 21, "spark-2"),
    ("no-fault", 14, "spark-1"),
    ("context-creep", 7, "spark-1"),
    ("no-fault", 2, "spark-1"),
    ("leak-ratchet", 0, "spark-1"),
)


def archive(root: Path) -> list[Path]:
    """Write the schedule's bundles into root; returns them oldest first."""
    out = []
    for seed, (kind, days, host) in enumerate(SCHEDULE):
        trigger = ("cron", "baseline") if kind == "no-fault" else ("alert", "MemoryHigh")
        out.append(bundle(root, kind, TONIGHT - days * DAY_S, host, seed + 1, trigger))
    return out
