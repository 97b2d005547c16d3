"""The evaluation harness (lab/eval): PromQL answered as Prometheus answers it, a scenario
rendered as bundles the schemas accept and ingest takes, and the report's arithmetic.

The scenarios here are built by hand, so that these tests do not depend on the generator;
tests/test_eval.py holds the bars on the generated suite.
"""

import json
import math
import time
import urllib.parse
import urllib.request

import orjson
import pytest
from conftest import bundle_errors, need

from evidence.analyze.ingest import connect, ingest
from evidence.capture.probes.prometheus import QUERIES, step_for
from lab.eval import harness, peer, promql
from lab.eval.generate import generate
from lab.eval.world import (
    CheckAtCapture,
    EngineAtCapture,
    ProcessAtCapture,
    RawSeries,
    Scenario,
)
from lab.promserver import Prometheus, missing

GIB = 1024**3
END = 1_796_000_000.0  # a fixed capture time, far from now: nothing reads the clock


def _every(step: float, value, start: float = END - 86400 - 600, end: float = END):
    n = int((end - start) // step) + 1
    return [(start + i * step, float(value(start + i * step))) for i in range(n)]


def scenario(
    sid: str = "no-fault-1",
    truth: str = "no-fault",
    prometheus: bool = True,
    gpu: bool = True,
) -> Scenario:
    """A day of a household box: llama-server behind a gateway, node-exporter, DCGM."""
    total = 128 * GIB
    node = {"job": "node", "instance": "box:9100"}
    engine = {"job": "llama-server", "instance": "127.0.0.1:8080"}
    used = (
        (lambda t: 40 * GIB + 0.2 * GIB * math.sin(t / 3600))
        if truth == "no-fault"
        else (lambda t: 40 * GIB + 80 * GIB * (t - END + 86400) / 86400)
    )
    series = [
        RawSeries("node_memory_MemAvailable_bytes", node, _every(15, lambda t: total - used(t))),
        RawSeries("node_memory_MemTotal_bytes", node, _every(15, lambda t: total)),
        RawSeries("node_memory_SwapTotal_bytes", node, _every(15, lambda t: 0)),
        RawSeries("node_memory_SwapFree_bytes", node, _every(15, lambda t: 0)),
        RawSeries("up", {**node}, _every(15, lambda t: 1)),
        RawSeries("up", engine, _every(15, lambda t: 1)),
        RawSeries("up", {"job": "gateway", "instance": "127.0.0.1:4000"}, _every(15, lambda t: 1)),
        RawSeries("llamacpp:requests_processing", engine, _every(15, lambda t: 1)),
        RawSeries("llamacpp:requests_deferred", engine, _every(15, lambda t: 0)),
        RawSeries("llamacpp:n_tokens_max", engine, _every(15, lambda t: 4096)),
    ]
    window = [(END + i, int(used(END)), int(total - used(END)), 0) for i in range(31)]
    llama = ProcessAtCapture(
        4242,
        1,
        "llama-server",
        ["/opt/llama.cpp/bin/llama-server", "-m", "/models/qwen.gguf", "--port", "8080"],
        int(30 * GIB),
        int(20 * GIB) if gpu else None,
    )
    return Scenario(
        id=sid,
        seed=1,
        truth=truth,
        strength=0.0 if truth == "no-fault" else 0.8,
        deployment="household",
        engine="llama-server",
        story="hand-made for the harness tests",
        hostname=f"box-{sid}",
        memory_total=total,
        unified=True,
        end=END,
        scrape_s=15,
        trigger=("alert", "HostMemoryHigh", "1 alert: HostMemoryHigh"),
        failure_at=None,
        prometheus=prometheus,
        series=series if prometheus else [],
        window=window,
        psi_some=0.5,
        psi_full=0.0,
        swap_total=0,
        engines=[
            EngineAtCapture(
                "chat",
                "llama-server",
                "http://127.0.0.1:8080",
                True,
                metrics={"llamacpp:requests_processing": 1.0, "llamacpp:requests_deferred": 0.0},
                loaded=["qwen"],
            ),
            EngineAtCapture(
                "swap", "llama-swap", "http://127.0.0.1:9292", True, loaded=["qwen", "gemma"]
            ),
            EngineAtCapture(
                "old",
                "vllm",
                "http://127.0.0.1:8000",
                False,
                "nothing is listening (connection refused)",
            ),
        ],
        processes=[llama, ProcessAtCapture(900, 1, "sshd", ["/usr/sbin/sshd"], 8 * 2**20)],
        kernel=[(END - 3600, "NVRM: Xid (PCI:0000:01:00): 31, pid=4242")],
        logs=[(END - 60, "srv  update_slots: all slots are idle")],
        checks=[CheckAtCapture("chat", "completion", True, "ok")],
        baselines=[
            (END - 86400 * d, int(40 * GIB), int(88 * GIB), [llama], None) for d in (3, 2, 1)
        ],
    )


def _values(answer: list[dict]) -> list[tuple[dict, list[tuple[float, float]]]]:
    return [(s["metric"], [(t, float(v)) for t, v in s["values"]]) for s in answer]


# -- PromQL ------------------------------------------------------------------------------


def test_a_gap_longer_than_the_lookback_stays_a_gap():
    points = [(t, 1.0) for t in range(0, 1000, 100)] + [(t, 2.0) for t in range(2000, 3001, 100)]
    series = [RawSeries("m", {"job": "a"}, points)]
    (only,) = _values(promql.query_range(series, "m", 0, 3000, 100))
    times = [t for t, _ in only[1]]
    # The last sample before the gap (900) is still read 5 minutes on (1200), not after.
    assert 1200 in times and 1300 not in times and 1900 not in times
    assert dict(only[1])[1200] == 1.0 and dict(only[1])[2000] == 2.0
    assert only[0] == {"__name__": "m", "job": "a"}


def test_the_latest_sample_at_or_before_each_instant():
    series = [RawSeries("m", {}, [(10, 1.0), (20, 2.0), (31, 3.0)])]
    (only,) = _values(promql.query_range(series, "m", 0, 40, 10))
    assert only[1] == [(10, 1.0), (20, 2.0), (30, 2.0), (40, 3.0)]


def test_or_keeps_the_left_and_adds_the_right_where_no_left_series_matches():
    a = RawSeries("a", {"gpu": "0"}, [(t, 1.0) for t in range(0, 301, 60)])
    b_same = RawSeries("b", {"gpu": "0"}, [(t, 2.0) for t in range(0, 1201, 60)])
    b_other = RawSeries("b", {"gpu": "1"}, [(t, 3.0) for t in range(0, 1201, 60)])
    answer = {
        tuple(sorted(m.items())): v
        for m, v in _values(promql.query_range([a, b_same, b_other], "a or b", 0, 1200, 300))
    }
    assert answer[(("__name__", "a"), ("gpu", "0"))] == [(0, 1.0), (300, 1.0), (600, 1.0)]
    # b{gpu="0"} fills only the instants where a{gpu="0"} has no point, as Prometheus does.
    assert answer[(("__name__", "b"), ("gpu", "0"))] == [(900, 2.0), (1200, 2.0)]
    assert [v for _, v in answer[(("__name__", "b"), ("gpu", "1"))]] == [3.0] * 5


def test_vector_arithmetic_matches_label_sets_and_drops_the_name():
    used = [RawSeries("u", {"gpu": str(g), "job": "dcgm"}, [(0, 10.0 + g)]) for g in (0, 1, 2)]
    free = [RawSeries("f", {"gpu": str(g), "job": "dcgm"}, [(0, 5.0)]) for g in (0, 1)]
    answer = promql.query_range(used + free, "(u + f) * 1024 * 1024", 0, 0, 15)
    assert [(s["metric"], s["values"]) for s in answer] == [
        ({"gpu": "0", "job": "dcgm"}, [[0, str(15 * 2**20)]]),
        ({"gpu": "1", "job": "dcgm"}, [[0, str(16 * 2**20)]]),
    ]  # gpu 2 has no match on the right: no result for it


def test_matchers_select_by_label_and_regex():
    series = [
        RawSeries("up", {"job": j, "instance": "x"}, [(0, 1.0)])
        for j in ("gateway", "vllm", "llama-server", "node")
    ]
    jobs = lambda expr: sorted(  # noqa: E731
        s["metric"]["job"] for s in promql.query_range(series, expr, 0, 0, 15)
    )
    assert jobs('up{job="gateway"}') == ["gateway"]
    assert jobs('up{job=~"llama-server|vllm|sglang"}') == ["llama-server", "vllm"]
    assert jobs('up{job!~"node|vllm"}') == ["gateway", "llama-server"]
    assert jobs("up") == ["gateway", "llama-server", "node", "vllm"]


@pytest.mark.parametrize(
    "expr", ["rate(m[5m])", "sum(m)", "m and n", "m > 1", "m offset 5m", 'm{job="a"', "m[5m]"]
)
def test_an_expression_it_cannot_answer_raises_naming_it(expr):
    with pytest.raises(ValueError, match="unsupported PromQL") as raised:
        promql.query_range([RawSeries("m", {}, [(0, 1.0)])], expr, 0, 0, 15)
    assert repr(expr) in str(raised.value)


def test_every_query_of_the_probe_is_answerable():
    store = promql.Store(scenario().series)
    for _name, expr in QUERIES:
        store.query_range(expr, END - 86400, END, step_for(86400))


def test_values_are_written_as_prometheus_writes_them():
    assert [promql.format_value(v) for v in (1.0, 0.5, 1.5e9, 1e22, 1e-7, math.nan)] == [
        "1",
        "0.5",
        "1500000000",
        "10000000000000000000000",
        "0.0000001",
        "NaN",
    ]


def test_openmetrics_families_sorted_by_series_then_time():
    text = promql.openmetrics(
        [
            RawSeries("m", {"job": "b"}, [(20, 2.0), (10, 1.0)]),
            RawSeries("n_total", {"job": 'q"'}, [(10, 3.0)]),
            RawSeries("m", {"job": "a"}, [(10, 0.5)]),
        ],
        shift=100,
    )
    assert text.splitlines() == [
        "# TYPE m gauge",
        'm{job="a"} 0.5 110',
        'm{job="b"} 1 110',
        'm{job="b"} 2 120',
        "# TYPE n_total gauge",
        'n_total{job="q\\""} 3 110',
        "# EOF",
    ]


def test_the_fake_prometheus_answers_each_scenario_in_the_api_envelope():
    s = scenario()
    with promql.FakePrometheus() as server:
        now = time.time()
        url = server.add(s.id, s.series, shift=s.end - now)
        query = urllib.parse.urlencode(
            {"query": "node_memory_MemTotal_bytes", "start": now - 3600, "end": now, "step": "5m"}
        )
        with urllib.request.urlopen(f"{url}/api/v1/query_range?{query}", timeout=5) as answer:
            body = json.load(answer)
        assert body["status"] == "success" and body["data"]["resultType"] == "matrix"
        (series,) = body["data"]["result"]
        assert len(series["values"]) == 13
        assert abs(series["values"][-1][0] - now) < 1  # answered in the asker's time
        assert series["values"][-1][1] == str(128 * GIB)
        with urllib.request.urlopen(f"{url}/api/v1/status/buildinfo", timeout=5) as answer:
            assert json.load(answer)["data"]["version"] == promql.VERSION
        bad = urllib.parse.urlencode({"query": "rate(x[5m])", "start": 0, "end": 1, "step": 1})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{url}/api/v1/query_range?{bad}", timeout=5)
        assert refused.value.code == 400
        assert json.load(refused.value)["errorType"] == "bad_data"
        with pytest.raises(urllib.error.HTTPError) as unknown:
            urllib.request.urlopen(f"{server.url}/s/nobody/api/v1/status/buildinfo", timeout=5)
        assert unknown.value.code == 404


def test_the_answers_are_those_of_a_real_prometheus(tmp_path):
    """Every query of the probe, on history with gaps, jitter and `or` overlaps, against
    Debian's Prometheus backfilled with the same samples."""
    reason = missing()
    need(reason is None, reason or "")
    dcgm = {"gpu": "0", "job": "dcgm", "instance": "box:9400"}
    drm = {"card": "card1", "job": "node", "instance": "box:9100"}
    llama = {"job": "llama-server", "instance": "box:8081"}
    old = {"job": "llama-server", "instance": "box:8082"}
    jitter = lambda points: [(t + (i % 7) * 0.1, v) for i, (t, v) in enumerate(points)]  # noqa: E731
    series = scenario().series + [
        RawSeries("DCGM_FI_DEV_FB_USED", dcgm, jitter(_every(30, lambda t: t % 80000))),
        RawSeries(
            "DCGM_FI_DEV_FB_FREE",
            dcgm,
            [(t, v) for t, v in jitter(_every(30, lambda t: 5000)) if not 0 < END - t < 7200],
        ),
        RawSeries(
            "local_llm_accelerator_memory_used_bytes",
            dcgm,
            [(t, v) for t, v in _every(60, lambda t: 7e9) if not END - 30000 < t < END - 20000],
        ),
        # node-exporter's drm collector on an AMD card, and llama.cpp's prompt counters
        # with the cached ones beside them (added per target) and without (as they were).
        RawSeries("node_drm_memory_vram_used_bytes", drm, _every(15, lambda t: 3e9 + t % 7)),
        RawSeries("node_drm_memory_vram_size_bytes", drm, _every(15, lambda t: 24e9)),
        RawSeries("llamacpp:prompt_tokens_total", llama, _every(15, lambda t: t // 10)),
        RawSeries("llamacpp:prompt_tokens_cached_total", llama, _every(15, lambda t: t // 20)),
        RawSeries("llamacpp:prompt_tokens_total", old, _every(15, lambda t: t // 30)),
        RawSeries("vllm:kv_cache_usage_perc", {"job": "vllm"}, _every(15, lambda t: t % 1)),
        RawSeries("sglang:token_usage", {"job": "vllm"}, _every(15, lambda t: 0.25)),
    ]
    shift = int(time.time()) - 60 - END
    server = Prometheus(tmp_path, promql.openmetrics(series, shift=shift))
    store = promql.Store(series)
    end = END + shift + 0.123
    try:
        for name, expr in QUERIES:
            query = {"query": expr, "start": end - 86400, "end": end, "step": step_for(86400)}
            url = f"{server.url}/api/v1/query_range?{urllib.parse.urlencode(query)}"
            with urllib.request.urlopen(url, timeout=10) as answer:
                real = json.load(answer)["data"]["result"]
            ours = store.query_range(expr, end - 86400, end, step_for(86400), shift=-shift)
            assert _values(ours) == _values(real), name
    finally:
        server.close()


# -- rendering ---------------------------------------------------------------------------


def test_a_scenario_renders_as_valid_bundles_that_ingest(tmp_path):
    s = scenario()
    paths = harness.bundle(s, tmp_path)
    assert len(paths) == 4  # three baselines, then the incident
    for path in paths:
        assert bundle_errors(path) == []
    manifest = orjson.loads((paths[-1] / "manifest.json").read_bytes())
    assert manifest["trigger"]["detail"] == "1 alert: HostMemoryHigh"
    assert manifest["probes"]["prometheus"]["status"] == "ok"
    baseline = orjson.loads((paths[0] / "manifest.json").read_bytes())
    assert baseline["trigger"]["kind"] == "cron" and baseline["window_s"] == 0
    summary = ingest(tmp_path)
    assert summary.quarantined == [] and len(summary.ingested) == 4
    con = connect(tmp_path, read_only=True)
    try:
        bundle_id = manifest["bundle_id"]
        statuses = dict(
            con.execute(
                "SELECT name, status FROM engines WHERE bundle_id = ?", [bundle_id]
            ).fetchall()
        )
        assert statuses == {"chat": "ok", "swap": "ok", "old": "absent"}
        models = con.execute(
            "SELECT engine, model, state FROM engine_models WHERE bundle_id = ? ORDER BY ALL",
            [bundle_id],
        ).fetchall()
        assert ("swap", "gemma", "ready") in models and ("chat", "qwen", None) in models
        (kernel_t,) = con.execute(
            "SELECT epoch(t) FROM kernel_events WHERE bundle_id = ?", [bundle_id]
        ).fetchone()
        assert kernel_t == pytest.approx(END - 3600)
        queries = dict(
            con.execute(
                "SELECT query, any_value(status) FROM prometheus_series WHERE bundle_id = ? "
                "GROUP BY query",
                [bundle_id],
            ).fetchall()
        )
        assert queries.keys() == {name for name, _ in QUERIES}
        assert queries["host_memory_available"] == "ok" and queries["kv_cache_usage"] == "absent"
        (gpu_used,) = con.execute(
            "SELECT sum(used_bytes) FROM gpu_processes WHERE bundle_id = ?", [bundle_id]
        ).fetchone()
        assert gpu_used == 20 * GIB
    finally:
        con.close()


def test_a_host_culprit_started_when_its_memory_first_appeared():
    """The process that grew and ran the box out (where the kernel took the engine, and it
    is still there) started inside the day, before the capture: a start time is a time,
    never a grid index taken for one twice."""
    started = [
        p.started
        for seed in range(8)
        for p in generate(seed, "host-exhaustion", END).processes
        if p.started is not None
    ]
    assert started and all(END - 86400 <= t <= END for t in started), started


def test_no_prometheus_and_no_nvml_are_said_as_the_collector_says_them(tmp_path):
    path = harness.bundle(scenario(prometheus=False, gpu=False), tmp_path)[-1]
    assert bundle_errors(path) == []
    probes = orjson.loads((path / "manifest.json").read_bytes())["probes"]
    assert probes["prometheus"] == {
        "status": "absent",
        "reason": harness.NO_PROMETHEUS,
        "duration_ms": 0.5,
        "files": [],
    }
    assert (probes["gpu"]["status"], probes["gpu"]["reason"]) == ("absent", "no NVML")


def test_scenarios_of_one_hostname_are_never_each_others_past(tmp_path):
    first, second = scenario("a"), scenario("b")
    second.hostname = first.hostname
    rows = harness.evaluate([first, second], tmp_path, peer=False)
    assert [r.id for r in rows] == ["a", "b"]
    assert (tmp_path / "archive").is_dir() and (tmp_path / "archive-2").is_dir()
    with pytest.raises(ValueError, match="ids repeat"):
        harness.evaluate([scenario("a"), scenario("a")], tmp_path / "again", peer=False)


def test_evaluate_classifies_every_scenario_and_the_report_adds_up(tmp_path):
    scenarios = [scenario("no-fault-1"), scenario("host-exhaustion-2", "host-exhaustion")]
    timing: dict[str, float] = {}
    rows = harness.evaluate(scenarios, tmp_path, peer=False, timing=timing)
    assert [r.id for r in rows] == ["no-fault-1", "host-exhaustion-2"]
    assert all(r.peer is None and r.top for r in rows)
    assert set(timing) == {"render_s", "ingest_s", "classify_s", "peer_wait_s"}
    text = harness.report(rows)
    print(text)
    assert "no-fault" in text and "host-exhaustion" in text


def test_a_kept_evaluation_is_judged_again_without_rendering(tmp_path):
    scenarios = [scenario("no-fault-1"), scenario("host-exhaustion-2", "host-exhaustion")]
    rows = harness.evaluate(scenarios, tmp_path, peer=False)
    for archive in (tmp_path / "archive").glob("bundles/*/*"):
        (archive / "manifest.json").unlink()  # rejudging must not read the bundles again
    again = harness.rejudge(tmp_path)
    assert [(r.id, r.truth, r.ours, r.our_score) for r in again] == [
        (r.id, r.truth, r.ours, r.our_score) for r in rows
    ]
    with pytest.raises(ValueError, match="no evaluation to rejudge"):
        harness.rejudge(tmp_path / "nowhere")


def test_the_report_counts_the_bars():
    def row(truth, ours, theirs="context-creep"):
        return harness.Row("x", truth, 0.5, "household", "vllm", ours, 5, theirs, 2, "", [])

    rows = [
        row("no-fault", "no-fault"),
        row("no-fault", "ambiguous"),
        row("leak-ratchet", "no-fault"),
        row("leak-ratchet", "context-creep"),
        row("context-creep", "context-creep"),
    ]
    ours = harness.figures(rows)
    assert (len(ours.right), ours.total, len(ours.confident_wrong)) == (2, 5, 1)
    assert ours.healthy_called_fault == [rows[1]] and ours.failed_called_healthy == [rows[2]]
    assert not ours.holds
    theirs = harness.figures(rows, "peer")
    assert [len(theirs.right), len(theirs.healthy_called_fault)] == [1, 2]
    assert len(theirs.confident_wrong) == 4
    text = harness.report(rows)
    assert "2/5 (40.0 %)" in text and "our misses (3)" in text


def test_the_peer_reads_the_same_history_through_the_fake_prometheus(tmp_path):
    try:
        peer.seed_script(tmp_path)
    except FileNotFoundError as missing:
        need(False, str(missing))
    scenarios = [scenario("no-fault-1"), scenario("no-prom-2", prometheus=False)]
    rows = harness.evaluate(scenarios, tmp_path, peer=True)
    answers = {r.id: (r.peer, r.peer_score) for r in rows}
    # Without Prometheus the seed reads nothing, and nothing is its only "no fault".
    assert answers["no-prom-2"] == ("no-fault", 0)
    assert answers["no-fault-1"][0] in {*peer.SEED_NAMES.values(), "no-fault"}


def test_the_real_path_skips_saying_why_or_runs(tmp_path):
    result = harness.real([scenario("no-fault-1")], tmp_path)
    need(not isinstance(result, str), str(result))
    (row,) = result
    assert row.ours and row.peer
