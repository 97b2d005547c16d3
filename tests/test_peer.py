"""Beat the peer: the seed's diagnose-oom.py and `evidence classify`, on the same real
Prometheus (Debian's), backfilled by promtool with a day of history per scenario.

The seed script is read out of the seed document at test time (it is a peer, not our
code). For each scenario the real collector captures a bundle against that Prometheus,
the analyst classifies it, and the seed script ranks its four faults; both answers are
printed side by side. Ours must be right in every case, healthy included; the seed
cannot say "no fault" at all.
"""

import math
import random
import re
import time

import orjson
import pytest
from conftest import need, run_evidence, write_config
from promserver import Prometheus, require

from lab.eval import promql
from lab.eval.peer import SEED_NAMES, seed_answer, seed_script
from lab.eval.world import RawSeries

GIB = 1024**3
STEP = 120  # a day at a 2 min scrape
HOURS = 24


def _bursts(i: int) -> float:
    """Work every two hours for twelve minutes: requests come and go."""
    return 1.0 if (i * STEP) % 7200 < 720 else 0.0


def scenario(name: str, n: int, rng: random.Random) -> dict[str, list[tuple[str, float]]]:
    """Series (labels, value per step) for one scenario, named as the seed's queries ask."""
    noise = lambda s: rng.uniform(-s, s)  # noqa: E731
    total = 128 * GIB
    used, kv, running, waiting = [], [], [], []
    for i in range(n):
        burst = _bursts(i)
        hours = i * STEP / 3600
        u, k, r, w = 40 * GIB + burst * 10 * GIB, 0.3 + burst * 0.3, 1 + burst * 2, 0.0
        if name == "context-creep":
            u, k, r = 40 * GIB + hours / HOURS * 30 * GIB, 0.2 + 0.75 * hours / HOURS, 3.0
        elif name == "concurrency":
            r, w = 4.0, (3.0 + rng.randint(0, 4) if hours > 14 else 0.0)
        elif name == "leak":
            done = sum(1 for j in range(i) if _bursts(j) and not _bursts(j + 1))
            u, k = 40 * GIB + done * 1.2 * GIB + burst * 10 * GIB, 0.3
        elif name == "swap":
            u = (20 if hours < 16 else 45) * GIB
        used.append(u + noise(0.2 * GIB))
        kv.append(min(1.0, max(0.0, k + noise(0.01))))
        running.append(r)
        waiting.append(w)
    available = [total - 30 * GIB - noise(0.3 * GIB) for _ in range(n)]
    if name == "host-exhaustion":
        available = [a if i < n - 10 else 0.01 * total for i, a in enumerate(available)]
    series = {
        'node_memory_MemAvailable_bytes{instance="box:9100",job="node"}': available,
        'node_memory_MemTotal_bytes{instance="box:9100",job="node"}': [total] * n,
        'DCGM_FI_DEV_FB_USED{gpu="0",job="dcgm"}': [u / 2**20 for u in used],
        'DCGM_FI_DEV_FB_FREE{gpu="0",job="dcgm"}': [(80 * GIB - u) / 2**20 for u in used],
        'vllm:kv_cache_usage_perc{engine="0",job="vllm",model_name="qwen3"}': kv,
        'vllm:num_requests_running{engine="0",job="vllm",model_name="qwen3"}': running,
        'vllm:num_requests_waiting{engine="0",job="vllm",model_name="qwen3"}': waiting,
        'up{instance="127.0.0.1:9292",job="gateway"}': [1.0] * n,
        'up{instance="127.0.0.1:8000",job="vllm"}': [1.0] * n,
    }
    if name == "swap":  # a second model server came up at the step, and stayed
        series['up{instance="127.0.0.1:8080",job="llama-server"}'] = [
            0.0 if i * STEP / 3600 < 16 else 1.0 for i in range(n)
        ]
    if name == "no-metrics":
        series = {'up{instance="127.0.0.1:9292",job="gateway"}': [1.0] * n}
    return series


def openmetrics(series: dict[str, list[float]], end: int) -> str:
    """The scenario's series, one sample per STEP up to end, as promtool reads them."""
    n = len(next(iter(series.values())))
    stamps = [end - (n - i) * STEP for i in range(n)]
    raw = []
    for key, values in series.items():
        name, _, labels = key.partition("{")
        raw.append(
            RawSeries(
                name,
                dict(re.findall(r'(\w+)="([^"]*)"', labels)),
                list(zip(stamps, values, strict=True)),
            )
        )
    return promql.openmetrics(raw)


EXPECTED = {
    "healthy": "no-fault",
    "context-creep": "context-creep",
    "concurrency": "concurrency-overload",
    "leak": "leak-ratchet",
    "swap": "swap-not-unloaded",
    "host-exhaustion": "host-exhaustion",
    "no-metrics": ("no-fault", "insufficient-evidence"),
}


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    require()
    work = tmp_path_factory.mktemp("peer")
    try:
        script = seed_script(work)
    except FileNotFoundError as missing:
        need(False, str(missing))
    end = int(time.time()) - 60
    n = HOURS * 3600 // STEP
    rows = {}
    for name in EXPECTED:
        place = work / name
        place.mkdir()
        prometheus = Prometheus(place, openmetrics(scenario(name, n, random.Random(5)), end))
        try:
            config = write_config(
                place / "c.toml",
                f'[prometheus]\nurl = "{prometheus.url}"\nlookback = "24h"\n'
                # The scenario is the Prometheus history; this machine's own kernel log
                # (where the fault lab kills processes on purpose) is not part of it.
                '[capture]\nkernel_lookback = "1s"\nkernel_tail = 0\n',
            )
            archive = place / "archive"
            captured = run_evidence(
                "capture", "--archive", str(archive), "--window", "0", "-q", "--config", str(config)
            )
            assert captured.returncode == 0, captured.stderr
            classified = run_evidence("classify", "latest", "--archive", str(archive), "--json")
            assert classified.returncode == 0, classified.stderr
            ours = orjson.loads(classified.stdout)
            seed = seed_answer(script, prometheus.url, place)
        finally:
            prometheus.close()
        rows[name] = (ours, seed)
    table = ["scenario          expected              evidence classify      seed diagnose-oom"]
    for name, (ours, (seed_fault, seed_score)) in rows.items():
        expected = EXPECTED[name]
        expected = expected if isinstance(expected, str) else " or ".join(expected)
        table.append(f"{name:<17} {expected:<21} {ours['verdict']:<22} {seed_fault} ({seed_score})")
    print("\n" + "\n".join(table))
    (work / "comparison.txt").write_text("\n".join(table) + "\n")
    return rows


@pytest.mark.parametrize("name", list(EXPECTED))
def test_ours_is_right_in_every_case(comparison, name):
    ours, _ = comparison[name]
    expected = EXPECTED[name]
    top = {c["fault"]: c["score"] for c in ours["candidates"][:3]}
    if isinstance(expected, str):
        assert ours["verdict"] == expected, top
    else:
        assert ours["verdict"] in expected, top


def test_the_seed_cannot_say_no_fault_and_reads_healthy_as_a_fault(comparison):
    _, (seed_fault, seed_score) = comparison["healthy"]
    assert seed_fault in SEED_NAMES.values()  # it always names one of its faults
    assert seed_score > 0
    assert not math.isnan(seed_score)
