"""The guard rail names only metrics the machine publishes, and the file is a rule file.

Bundles come from lab/builder.py; their Prometheus history is written here with the
probe's real expressions and the `__name__` labels Prometheus returns (a bare selector
keeps it, arithmetic drops it), so what is inferred is what a real bundle would carry.
Every generated file goes through Debian's promtool.
"""

import json
import re
import shutil
import subprocess
import tomllib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from conftest import bundle_errors, need
from synth import iso

from evidence.analyze.guardrail import catalog, guardrail
from evidence.analyze.ingest import connect, ingest
from evidence.analyze.published import published
from evidence.capture.probes.prometheus import NODE_QUERIES, SEED_QUERIES
from evidence.reports.render import quote, rules_file
from evidence.schemas import SCHEMA_DIR
from lab.builder import Builder, engine

GIB = 1024**3
AT = datetime(2026, 11, 10, 3, tzinfo=UTC).timestamp()
DAY = [AT - 86400 + i * 3600 for i in range(25)]
EXPR = dict(SEED_QUERIES + NODE_QUERIES)
FAULTS = [f["id"] for f in tomllib.loads((SCHEMA_DIR / "faults.toml").read_text())["fault"]]
NODE = {"instance": "box:9100", "job": "node"}

# The test's own reading of PromQL: identifiers that are not functions, keywords, label
# names (in braces or grouping lists) or durations. Independent of analyze.published.
PROMQL_WORDS = set((
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
    "offset", "bool", "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
    "count_values", "bottomk", "topk", "quantile", "abs", "absent", "absent_over_time", "ceil",
    "changes", "clamp", "clamp_max", "clamp_min", "day_of_month", "day_of_week",
    "days_in_month", "delta", "deriv", "exp", "floor", "histogram_quantile", "holt_winters",
    "hour", "idelta", "increase", "irate", "label_join", "label_replace", "ln", "log2", "log10",
    "minute", "month", "predict_linear", "rate", "resets", "round", "scalar", "sgn", "sort",
    "sort_desc", "sqrt", "time", "timestamp", "vector", "year", "avg_over_time",
    "min_over_time", "max_over_time", "sum_over_time", "count_over_time", "quantile_over_time",
    "stddev_over_time", "stdvar_over_time", "last_over_time", "present_over_time", "inf", "nan"
))  # fmt: skip


def names_in(expr: str) -> set[str]:
    text = re.sub(r'"[^"]*"', "", expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    words = re.findall(r"(?<![\w.:])[a-zA-Z_:][a-zA-Z0-9_:]*", text)
    return {w for w in words if w.lower() not in PROMQL_WORDS}


# -- bundles ---------------------------------------------------------------------------------

Series = list[tuple[dict[str, str], list[tuple[float, float]]]]


def prometheus(
    b: Builder,
    queries: dict[str, Series],
    absent: tuple[str, ...] = (),
    exprs: dict[str, str] | None = None,
) -> Builder:
    """The prometheus probe's record, with the probe's expressions (or those a config asked,
    `exprs`) and real label sets."""
    exprs = {**EXPR, **(exprs or {})}
    entries = [
        {
            "name": name,
            "expr": exprs[name],
            "status": "ok",
            "reason": None,
            "series": [
                {"metric": labels, "values": [[t, repr(float(v))] for t, v in points]}
                for labels, points in series
            ],
        }
        for name, series in queries.items()
    ]
    entries += [
        {
            "name": name,
            "expr": exprs[name],
            "status": "absent",
            "reason": "no series: nothing publishes this here",
            "series": [],
        }
        for name in absent
    ]
    record = {
        "url": "http://127.0.0.1:9090",
        "version": "2.42.0",
        "start": iso(DAY[0]),
        "end": iso(AT),
        "step_s": 3600,
        "queries": entries,
    }
    b._put("prometheus", record)
    return b


def flat(value: float) -> list[tuple[float, float]]:
    return [(t, value) for t in DAY]


def named(name: str, value: float, labels: dict[str, str] = NODE) -> Series:
    return [({"__name__": name, **labels}, flat(value))]


def node_exporter() -> dict[str, Series]:
    return {
        "host_memory_available": named("node_memory_MemAvailable_bytes", 60 * GIB),
        "host_memory_total": named("node_memory_MemTotal_bytes", 128 * GIB),
        "host_swap_total": named("node_memory_SwapTotal_bytes", 16 * GIB),
        "host_swap_free": named("node_memory_SwapFree_bytes", 15 * GIB),
        "host_swap_out_pages": named("node_vmstat_pswpout", 1000),
        "host_oom_kills": named("node_vmstat_oom_kill", 0),
        "host_psi_memory_some_seconds": named("node_pressure_memory_waiting_seconds_total", 5),
        "host_psi_memory_full_seconds": named("node_pressure_memory_stalled_seconds_total", 2),
    }


def base(host: str) -> Builder:
    b = Builder(host, AT)
    b.memory([(AT + i, 40 * GIB) for i in range(3)])
    b.processes([{"pid": 100, "name": "worker", "rss_bytes": GIB}])
    return b.host()


def dcgm() -> Builder:
    """A discrete GPU behind dcgm-exporter, node-exporter, and vLLM in Prometheus; the
    vLLM token counter only at the engine's /metrics."""
    gpu = {"gpu": "0", "UUID": "GPU-1", "instance": "box:9400", "job": "dcgm"}
    vllm = {"engine": "0", "model_name": "chat", "instance": "box:8000", "job": "vllm"}
    b = base("rtx-1").gpu("NVIDIA RTX 6000 Ada", total=48 * GIB, used=40 * GIB, unified=False)
    b.engines(
        [
            engine(
                "vllm-1",
                "vllm",
                {
                    "vllm:num_requests_running": 2,
                    "vllm:num_requests_waiting": 0,
                    "vllm:kv_cache_usage_perc": 0.4,
                    "vllm:generation_tokens_total": 12345,
                },
            )
        ]
    )
    return prometheus(
        b,
        {
            **node_exporter(),
            "accelerator_memory_used": [(gpu, flat(40 * GIB))],  # arithmetic: no __name__
            "accelerator_memory_total": [(gpu, flat(48 * GIB))],
            "kv_cache_usage": named("vllm:kv_cache_usage_perc", 0.4, vllm),
            "requests_running": named("vllm:num_requests_running", 2, vllm),
            "requests_waiting": named("vllm:num_requests_waiting", 0, vllm),
        },
        absent=("context_high_water", "gateway_up", "engine_up"),
    )


def gb10() -> Builder:
    """One shared pool: NVML says memory is not supported, node-exporter is the meter."""
    b = base("spark-1").gpu()  # GB10, unified, memory unsupported
    return prometheus(
        b,
        node_exporter(),
        absent=("accelerator_memory_used", "accelerator_memory_total", "kv_cache_usage"),
    )


def gb10_llama() -> Builder:
    """GB10 with llama-server scraped by Prometheus, its context size read from /props."""
    llama = {"instance": "spark-2:8080", "job": "llama-server"}
    b = base("spark-2").gpu()
    b.engines(
        [
            engine(
                "chat",
                "llama-server",
                {"llamacpp:n_tokens_max": 7000, "llamacpp:requests_deferred": 0},
                readings={"/props": {"total_slots": 2, "n_ctx": 8192}},
            )
        ]
    )
    return prometheus(
        b,
        {
            **node_exporter(),
            "context_high_water": named("llamacpp:n_tokens_max", 7000, llama),
            "requests_waiting": named("llamacpp:requests_deferred", 0, llama),
            "requests_running": named("llamacpp:requests_processing", 1, llama),
        },
    )


def discrete_without_dcgm() -> Builder:
    """node-exporter only, on a machine whose GPU has its own memory."""
    b = base("box-2").gpu("NVIDIA RTX 4090", total=24 * GIB, used=20 * GIB, unified=False)
    return prometheus(b, node_exporter(), absent=("accelerator_memory_used",))


def engine_only() -> Builder:
    """No Prometheus at all; vLLM's own /metrics, and a reading that is not a metric."""
    b = base("laptop-1").absent("prometheus", "Prometheus at http://127.0.0.1:9090: refused")
    return b.engines(
        [
            engine(
                "vllm-1",
                "vllm",
                {"vllm:num_requests_waiting": 4, "vllm:num_requests_running": 8},
                readings={"/load": {"server_load": 12}},
            )
        ]
    )


def nothing() -> Builder:
    b = base("bare-1").absent("prometheus", "Prometheus at http://127.0.0.1:9090: refused")
    return b.absent("gpu", "no NVIDIA or AMD GPU")


PROFILES: dict[str, Callable[[], Builder]] = {
    "dcgm": dcgm,
    "gb10": gb10,
    "gb10-llama": gb10_llama,
    "discrete-without-dcgm": discrete_without_dcgm,
    "engine-only": engine_only,
    "nothing": nothing,
}


@pytest.fixture
def archive(tmp_path):
    """open(builder) -> (connection, bundle_id): the bundle written, validated, ingested."""
    cons = []

    def open_(b: Builder):
        bundle = b.write(tmp_path)
        assert bundle_errors(bundle) == []
        summary = ingest(tmp_path)
        assert not summary.quarantined, summary.quarantined
        con = connect(tmp_path, read_only=True)
        cons.append(con)
        return con, orjson.loads((bundle / "manifest.json").read_bytes())["bundle_id"]

    yield open_
    for con in cons:
        con.close()


def rule(result: dict, alert: str) -> dict:
    found = [r for r in result["rules"] if r["alert"] == alert]
    assert len(found) == 1, [r["alert"] for r in result["rules"]]
    return found[0]


def promtool(*files: Path) -> None:
    need(
        shutil.which("promtool") is not None,
        "Debian's prometheus package (promtool) is not installed",
    )
    done = subprocess.run(
        ["promtool", "check", "rules", *map(str, files)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


# -- what is published -----------------------------------------------------------------------


def test_published_names_prometheus_and_engine_sources(archive):
    con, bundle_id = archive(dcgm())
    seen = published(con, bundle_id)
    # inferred from the nameless series of `DCGM_FI_DEV_FB_USED * 1024 * 1024 or ...`
    assert seen["DCGM_FI_DEV_FB_USED"] == ["prometheus"]
    assert seen["DCGM_FI_DEV_FB_FREE"] == ["prometheus"]
    assert "local_llm_accelerator_memory_used_bytes" not in seen
    assert seen["vllm:num_requests_waiting"] == ["prometheus", "/metrics of vllm-1"]
    assert seen["vllm:generation_tokens_total"] == ["/metrics of vllm-1"]
    assert "node_boot_time_seconds" not in seen  # never asked: unknown, not published


def test_readings_that_are_not_metrics_are_not_published(archive):
    con, bundle_id = archive(engine_only())
    seen = published(con, bundle_id)
    assert seen == {
        "vllm:num_requests_running": ["/metrics of vllm-1"],
        "vllm:num_requests_waiting": ["/metrics of vllm-1"],
    }


def test_a_nameless_series_two_operands_could_have_made_counts_for_neither(archive):
    # a config's own query: either side may have answered, so neither counts
    b = prometheus(
        base("odd-1"),
        {"custom": [({"job": "x"}, flat(1.0))]},
        exprs={"custom": "foo_bytes * 2 or bar_bytes * 2"},
    )
    con, bundle_id = archive(b)
    assert published(con, bundle_id) == {}


# -- the rule follows the machine ------------------------------------------------------------


def test_dcgm_machine_gets_the_dcgm_expression(archive):
    con, bundle_id = archive(dcgm())
    result = guardrail(con, bundle_id, "context-creep")
    memory = rule(result, "AcceleratorMemoryHigh")
    assert (
        memory["expr"] == "DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) > 0.9"
    )
    assert memory["scraped_by_prometheus"] is True
    assert memory["labels"] == {"severity": "warning", "fault": "context-creep"}
    assert rule(result, "ContextNearlyFull")["expr"] == "vllm:kv_cache_usage_perc > 0.9"


def test_gb10_with_only_node_exporter_gets_the_host_memory_expression(archive):
    con, bundle_id = archive(gb10())
    result = guardrail(con, bundle_id, "context-creep")
    memory = rule(result, "AcceleratorMemoryHigh")
    assert memory["expr"] == "1 - node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes > 0.9"
    assert memory["scraped_by_prometheus"] is True
    assert [s["alert"] for s in result["skipped"]] == ["ContextNearlyFull"]


def test_host_memory_is_no_stand_in_for_a_gpu_with_its_own_memory(archive):
    con, bundle_id = archive(discrete_without_dcgm())
    result = guardrail(con, bundle_id, "context-creep")
    assert not [r for r in result["rules"] if r["alert"] == "AcceleratorMemoryHigh"]
    (skip,) = [s for s in result["skipped"] if s["alert"] == "AcceleratorMemoryHigh"]
    assert "no unified-memory accelerator" in skip["reason"]


def test_a_machine_publishing_nothing_gets_no_rule_a_reason_and_the_settings(archive, tmp_path):
    con, bundle_id = archive(nothing())
    result = guardrail(con, bundle_id, "context-creep")
    assert result["rules"] == []
    memory = next(s for s in result["skipped"] if s["alert"] == "AcceleratorMemoryHigh")
    assert memory["reason"].startswith("needs DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_FB_FREE; or ")
    assert "not published here" in memory["reason"]
    tools = {s["tool"] for s in result["settings"]}
    assert {"llama-swap", "llama-server", "litellm"} <= tools
    ttl = next(s for s in result["settings"] if "ttl:" in s["snippet"])
    assert "models:" in ttl["snippet"] and "llama-swap.yaml" in ttl["where"]
    assert any("Prometheus was not read" in n for n in result["notes"])
    text = rules_file(result)
    assert "rules: []" in text
    (tmp_path / "none.yml").write_text(text)
    promtool(tmp_path / "none.yml")


def test_a_metric_only_at_the_engine_is_used_and_flagged_unscraped(archive):
    con, bundle_id = archive(engine_only())
    result = guardrail(con, bundle_id, "concurrency-overload")
    queueing = rule(result, "RequestsQueueing")
    assert queueing["expr"] == "vllm:num_requests_waiting > 0"
    assert queueing["scraped_by_prometheus"] is False
    assert any(
        "vllm:num_requests_waiting" in n and "once Prometheus scrapes it" in n
        for n in result["notes"]
    )
    job = next(s for s in result["settings"] if s["tool"] == "prometheus")
    assert "job_name: vllm" in job["snippet"] and '"127.0.0.1:1"' in job["snippet"]
    assert "# not scraped by Prometheus yet: vllm:num_requests_waiting" in rules_file(result)


def test_a_candidate_prometheus_scrapes_is_preferred_to_one_only_an_engine_exposes(archive):
    # vLLM 0.10 publishes both cache names; Prometheus was asked only for the old one
    vllm = {"instance": "box:8000", "job": "vllm"}
    b = base("old-vllm").engines([engine("vllm-1", "vllm", {"vllm:kv_cache_usage_perc": 0.5})])
    b = prometheus(
        b,
        {"old_cache": named("vllm:gpu_cache_usage_perc", 0.5, vllm)},
        exprs={"old_cache": "vllm:gpu_cache_usage_perc"},
    )
    con, bundle_id = archive(b)
    cache = rule(guardrail(con, bundle_id, "context-creep"), "ContextNearlyFull")
    assert cache["expr"] == "vllm:gpu_cache_usage_perc > 0.9"
    assert cache["scraped_by_prometheus"] is True


def test_a_rule_mixing_prometheus_and_engine_metrics_is_flagged(archive):
    con, bundle_id = archive(dcgm())
    result = guardrail(con, bundle_id, "wedged-no-progress")
    wedge = rule(result, "NoProgressWhileBusy")
    assert "vllm:generation_tokens_total" in wedge["expr"]
    assert wedge["scraped_by_prometheus"] is False  # the counter is only at /metrics


def test_llama_server_context_size_comes_from_props(archive):
    con, bundle_id = archive(gb10_llama())
    result = guardrail(con, bundle_id, "context-creep")
    assert rule(result, "ContextNearlyFull")["expr"] == "llamacpp:n_tokens_max > 0.9 * 8192"


def test_the_leak_is_the_memory_alert_with_a_long_for(archive):
    con, bundle_id = archive(gb10())
    result = guardrail(con, bundle_id, "leak-ratchet")
    assert rule(result, "AcceleratorMemoryHigh")["for"] == "2h"
    assert rule(result, "HostMemoryLow")["for"] == "2h"
    assert "offset 1d" in rule(result, "MemoryFloorRising")["expr"]
    creep = guardrail(con, bundle_id, "context-creep")
    assert rule(creep, "AcceleratorMemoryHigh")["for"] == "15m"


def test_a_metric_never_asked_is_unknown_and_the_config_asks_for_it(archive):
    con, bundle_id = archive(gb10())
    result = guardrail(con, bundle_id, "power-cycled")
    assert [s["alert"] for s in result["skipped"]] == ["HostRebooted"]
    ask = next(s for s in result["settings"] if "[prometheus.queries]" in s["snippet"])
    assert 'node_boot_time_seconds = "node_boot_time_seconds"' in ask["snippet"]
    tomllib.loads(ask["snippet"])  # the snippet is the config's own syntax


def test_unknown_fault_is_refused(archive):
    con, bundle_id = archive(gb10())
    with pytest.raises(ValueError, match="unknown fault"):
        guardrail(con, bundle_id, "gremlins")


# -- every file, every fault, every machine --------------------------------------------------


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_fault_renders_a_valid_rule_file_naming_only_published_metrics(
    archive, tmp_path, profile
):
    con, bundle_id = archive(PROFILES[profile]())
    seen = published(con, bundle_id)
    files = []
    for fault in FAULTS:
        result = guardrail(con, bundle_id, fault)
        for r in result["rules"]:
            assert names_in(r["expr"]) <= set(seen), (fault, r["expr"])
            assert names_in(r["expr"]) == set(r["metrics"]), r["expr"]
            assert r["scraped_by_prometheus"] == all("prometheus" in seen[m] for m in r["metrics"])
        path = tmp_path / f"{profile}-{fault}.yml"
        path.write_text(rules_file(result))
        assert f'name: "evidence-{fault}"' in path.read_text()
        files.append(path)
    promtool(*files)


def test_every_catalog_candidate_is_valid_promql_naming_its_metrics(tmp_path):
    book = catalog()
    rules = []
    for alert in book["alert"]:
        assert set(alert["faults"]) <= set(FAULTS), alert["name"]
        for c in alert["candidate"]:
            expr = c["expr"]
            for param in c.get("params", []):
                expr = expr.replace("{" + param + "}", "8192")
            assert names_in(expr) == set(c["metrics"]), expr
            rules.append(
                {
                    "alert": alert["name"],
                    "expr": expr,
                    "for": alert["for"],
                    "labels": {"severity": alert["severity"]},
                    "annotations": {
                        "summary": c.get("summary", alert["summary"]),
                        "description": c.get("description", alert["description"]),
                    },
                    "metrics": c["metrics"],
                    "scraped_by_prometheus": True,
                }
            )
    result = {"fault": "catalog", "rules": rules, "skipped": [], "settings": [], "notes": []}
    (tmp_path / "catalog.yml").write_text(rules_file(result))
    promtool(tmp_path / "catalog.yml")
    guarded = {f for a in book["alert"] for f in a["faults"]}
    required = {
        "context-creep", "concurrency-overload", "leak-ratchet", "swap-not-unloaded",
        "host-exhaustion", "accelerator-oom", "memory-pressure-stall", "idle-squatter",
        "wedged-no-progress", "power-cycled", "build-swarm",
    }  # fmt: skip
    assert required <= guarded
    for setting in book["setting"]:
        assert set(setting["faults"]) <= set(FAULTS), setting["tool"]


def test_annotations_with_quotes_and_colons_survive(tmp_path):
    nasty = {
        "summary": 'He said: "free it" \\ then {{ $labels.instance }}: done',
        "description": "line one\nline two: tab\there, unicode 내 메모리, a # not a comment",
    }
    result = {
        "fault": "leak-ratchet",
        "rules": [
            {
                "alert": "AcceleratorMemoryHigh",
                "expr": 'up{job="a:b"} == 0',
                "for": "5m",
                "labels": {"severity": "warning", "note": "key: value, 'single' \"double\""},
                "annotations": nasty,
                "metrics": ["up"],
                "scraped_by_prometheus": True,
            }
        ],
        "skipped": [{"alert": "X", "reason": "needs a\nb: not published here"}],
        "settings": [],
        "notes": ["two\nlines: # still one comment"],
    }
    text = rules_file(result)
    (tmp_path / "nasty.yml").write_text(text)
    promtool(tmp_path / "nasty.yml")
    # the tiny check: every `key: "value"` line holds a JSON string that reads back as given
    values = {}
    for line in text.splitlines():
        match = re.fullmatch(r'\s+(?:- )?("?[\w-]+"?): (".*")', line)
        if match:
            values[match.group(1).strip('"')] = json.loads(match.group(2))
    assert values["summary"] == nasty["summary"]
    assert values["description"] == nasty["description"]
    assert values["note"] == result["rules"][0]["labels"]["note"]
    assert values["expr"] == 'up{job="a:b"} == 0'
    assert all(line.startswith("#") for line in text.splitlines()[:4])
    assert text.splitlines()[4] == "groups:"


def test_quote_escapes_what_yaml_would_not_keep():
    assert quote("a\u2028b\x85c\x00") == '"a\\u2028b\\u0085c\\u0000"'
    assert json.loads(quote('é "q" \\')) == 'é "q" \\'
