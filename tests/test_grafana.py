"""grafana/evidence.json, the dashboard for evidence's own metrics.

No Grafana server installs here: it is not in Debian's archive, and grafana.com's
packages are not reachable from this machine. So the dashboard is checked two ways:
- its structure, against Grafana's dashboard JSON model as the documentation lays it
  out (grafana.com/docs/grafana/latest/dashboards/build-dashboards/view-dashboard-json-model/:
  uid, title, schemaVersion, time, templating.list, annotations.list, panels with id,
  type, gridPos on a 24-column grid, targets with refId and datasource), and its
  Prometheus annotations as the Prometheus data source's annotation editor saves them
  (expr, step, titleFormat, textFormat, tagKeys, useValueForTime);
- every query, by a real Prometheus (Debian's, backfilled with promtool with a day of the
  series evidence and node-exporter publish): each must parse, and each panel's query
  must return data, so a misspelt metric or label cannot leave a panel silently empty.
"""

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from promserver import Prometheus, require

DASHBOARD = Path(__file__).resolve().parent.parent / "grafana" / "evidence.json"
PANEL_TYPES = {"row", "timeseries", "stat", "table", "state-timeline"}
# What the dashboard may read: evidence's own families and the exporters' it sits beside.
EXPORTERS = {
    "node_memory_MemAvailable_bytes",
    "node_memory_MemTotal_bytes",
    "node_memory_SwapTotal_bytes",
    "node_memory_SwapFree_bytes",
    "node_pressure_memory_waiting_seconds_total",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
}
PROMQL_WORDS = {
    "sum", "by", "max", "min", "rate", "increase", "changes", "time", "on", "ignoring",
    "and", "or", "unless", "without", "instance", "trigger", "outcome", "result",
}  # fmt: skip


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def queries(board: dict) -> list[tuple[str, str]]:
    """(where, expr) for every panel target and annotation."""
    found = []
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            found.append((f"panel {panel['title']!r}", target["expr"]))
    for note in board["annotations"]["list"]:
        if "expr" in note:
            found.append((f"annotation {note['name']!r}", note["expr"]))
    return found


def concrete(expr: str) -> str:
    """The expression as Grafana sends it: variables replaced by what they stand for."""
    for name, value in {
        "${instance}": ".*",
        "$instance": ".*",
        "$__rate_interval": "5m",
        "$__interval": "1m",
        "$__range": "1h",
    }.items():
        expr = expr.replace(name, value)
    return expr


def metric_names(expr: str) -> set[str]:
    text = re.sub(r'"[^"]*"', "", expr)
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", text)
    words = set(re.findall(r"(?<![\w.])[a-zA-Z_:][a-zA-Z0-9_:]*", text))
    return {w for w in words if w not in PROMQL_WORDS and not w.startswith("$")}


def evidence_families() -> set[str]:
    """Every family name the package writes, read from the code that writes them."""
    root = Path(__file__).resolve().parent.parent / "evidence"
    names = set()
    for path in root.rglob("own_metrics.py"):
        names |= set(re.findall(r'Family\(\s*"(evidence_[a-z_]+)"', path.read_text()))
    return names


# -- structure ----------------------------------------------------------------------------


def test_the_dashboard_has_the_documented_top_level_model():
    board = dashboard()
    assert board["uid"] == "evidence" and board["title"]
    assert isinstance(board["schemaVersion"], int) and board["schemaVersion"] >= 36
    assert set(board["time"]) == {"from", "to"}
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["instance"]["type"] == "query"
    (imported,) = board["__inputs"]  # what Grafana's Import asks for
    assert imported["type"] == "datasource" and imported["pluginId"] == "prometheus"


def test_panels_tile_the_24_column_grid_with_unique_ids_and_wellformed_targets():
    board = dashboard()
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        assert panel["type"] in PANEL_TYPES, panel["type"]
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["w"] > 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        mine = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"])
                for y in range(pos["y"], pos["y"] + pos["h"])}  # fmt: skip
        assert not mine & cells, f"{panel['title']} overlaps another panel"
        cells |= mine
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs))
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"] and target["expr"].strip()


def test_the_captures_are_annotations_of_the_memory_panels():
    board = dashboard()
    notes = {n["name"]: n for n in board["annotations"]["list"]}
    captures = notes["evidence captures"]
    assert captures["enable"] and "evidence_capture_last_timestamp_seconds" in captures["expr"]
    assert "{{trigger}}" in captures["titleFormat"] and "trigger" in captures["tagKeys"]
    assert captures["datasource"]["uid"] == "${datasource}"
    titles = {p["title"] for p in board["panels"]}
    assert {
        "Host memory",
        "Accelerator memory",
        "Checks passing",
        "Last verdict per host",
    } <= titles


def test_every_variable_used_is_defined():
    board = dashboard()
    defined = {v["name"] for v in board["templating"]["list"]}
    used = set(re.findall(r"\$\{?([a-z]\w*)", json.dumps(board["panels"])))
    assert used <= defined | {"__rate_interval", "__interval", "__range", "__all"}, used - defined


def test_every_metric_is_one_evidence_writes_or_an_exporter_publishes():
    ours = evidence_families()
    assert "evidence_verdict_info" in ours and "evidence_check_up" in ours
    for where, expr in queries(dashboard()):
        unknown = metric_names(concrete(expr)) - ours - EXPORTERS
        assert not unknown, f"{where}: {unknown}"


# -- a real Prometheus --------------------------------------------------------------------


def _history() -> tuple[str, int]:
    """A day at one-minute steps of what evidence and node-exporter publish, in OpenMetrics
    as promtool backfills it; one capture and one verdict an hour before the end."""
    end = 1_796_000_000
    start = end - 86400
    at = end - 3600
    target = 'instance="box:9100",job="node"'
    lines = []

    def series(name: str, labels: str, value) -> None:
        for t in range(start, end + 1, 60):
            lines.append(f"{name}{{{target}{labels}}} {value(t)} {t}")

    series("node_memory_MemAvailable_bytes", "", lambda t: 60e9)
    series("node_memory_MemTotal_bytes", "", lambda t: 128e9)
    series("node_memory_SwapTotal_bytes", "", lambda t: 8e9)
    series("node_memory_SwapFree_bytes", "", lambda t: 7e9)
    series("node_pressure_memory_waiting_seconds_total", "", lambda t: (t - start) * 0.01)
    gpu = 'instance="box:9400",job="dcgm",gpu="0"'
    for t in range(start, end + 1, 60):
        lines.append(f"DCGM_FI_DEV_FB_USED{{{gpu}}} 40000 {t}")
        lines.append(f"DCGM_FI_DEV_FB_FREE{{{gpu}}} 8000 {t}")
    series("evidence_check_up", ',check="gateway",kind="http"', lambda t: 0 if t >= at else 1)
    series("evidence_check_duration_seconds", ',check="gateway",kind="http"', lambda t: 0.05)
    for outcome in ("complete", "incomplete", "busy", "failed", "stopped"):
        series("evidence_capture_last_outcome", f',outcome="{outcome}"',
               lambda t, o=outcome: int(o == "complete"))  # fmt: skip
    series("evidence_captures_total", ',outcome="complete",trigger="healthcheck"',
           lambda t: int(t >= at))  # fmt: skip
    series("evidence_triggers_refused_total", ',trigger="healthcheck"', lambda t: int(t > at + 60))
    series("evidence_capture_last_timestamp_seconds", ',trigger="healthcheck"',
           lambda t: at if t >= at else start - 600)  # fmt: skip
    series("evidence_capture_duration_seconds", "", lambda t: 31.2)
    series("evidence_capture_probe_status", ',probe="memory",status="ok"', lambda t: 1)
    series("evidence_archive_bundles", ',host="box"', lambda t: 12)
    series("evidence_archive_size_bytes", "", lambda t: 4e6)
    series("evidence_analyst_bundles", "", lambda t: 12)
    series("evidence_ingest_last_bundles", ',result="quarantined"', lambda t: 0)
    series("evidence_verdict_info",
           ',bundle="20261205T000000Z-aaaa",fault="host-exhaustion",host="box",trigger="healthcheck:gateway"',
           lambda t: 1)  # fmt: skip
    series("evidence_verdict_timestamp_seconds", ',host="box"',
           lambda t: at if t >= at else start - 600)  # fmt: skip
    series("evidence_recorder_up", "", lambda t: 1)
    series("evidence_recorder_history_seconds", "", lambda t: 3600)
    return "\n".join(lines) + "\n# EOF\n", end


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    require()
    text, end = _history()
    server = Prometheus(tmp_path_factory.mktemp("grafana-prometheus"), text)
    yield server, end
    server.close()


def _ask(url: str, path: str, params: dict[str, str]) -> dict:
    try:
        with urllib.request.urlopen(f"{url}{path}?{urllib.parse.urlencode(params)}") as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as exc:  # a parse error is a 400 with the reason
        return json.loads(exc.read())


def test_every_query_parses_and_every_panel_shows_data_on_a_real_prometheus(prometheus):
    server, end = prometheus
    empty = []
    for where, expr in queries(dashboard()):
        answer = _ask(server.url, "/api/v1/query_range", {
            "query": concrete(expr), "start": str(end - 86400), "end": str(end), "step": "60",
        })  # fmt: skip
        assert answer["status"] == "success", f"{where}: {expr}: {answer.get('error')}"
        if not answer["data"]["result"]:
            empty.append(f"{where}: {expr}")
    assert not empty, "queries that return nothing on the history:\n" + "\n".join(empty)


def test_the_instance_variable_and_the_capture_annotation_find_what_they_should(prometheus):
    server, end = prometheus
    variable = next(v for v in dashboard()["templating"]["list"] if v["name"] == "instance")
    metric, label = re.fullmatch(r"label_values\((\w+), (\w+)\)", variable["definition"]).groups()
    values = _ask(server.url, f"/api/v1/label/{label}/values", {"match[]": metric})
    assert values["data"] == ["box:9100"]
    note = next(n for n in dashboard()["annotations"]["list"] if n["name"] == "evidence captures")
    answer = _ask(server.url, "/api/v1/query_range", {
        "query": concrete(note["expr"]), "start": str(end - 86400), "end": str(end), "step": "60",
    })  # fmt: skip
    (marked,) = answer["data"]["result"]
    times = [int(float(t)) for t, _ in marked["values"]]
    # The capture an hour before the end is marked there, and only around there.
    assert all(end - 3600 <= t <= end - 3600 + 120 for t in times), times
    assert marked["metric"]["trigger"] == "healthcheck"


def test_the_families_the_history_uses_are_written_by_the_package():
    # The history above is only a stand-in if its names are the package's own.
    text, _ = _history()
    used = {line.split("{")[0] for line in text.splitlines() if line.startswith("evidence_")}
    assert used <= evidence_families()
