"""Proof that a guard rail would have fired: its rules replayed by promtool on the
incident's own Prometheus history, as a `promtool test rules` file.

The input series are the bundle's Prometheus series of the metrics a rule names, by
their own labels, at the history's own step; a missing point is `_`, never a zero.
Replay is promtool's: a first run asks, at every step up to the failure, which alerts
fire (each answer is a failure of a test that expected none); the last firing stretch
that began before the failure is the rule's proof, and its first moment is how early
it would have fired. The file written then expects exactly that alert at that moment,
so it passes while the rule still fires on this history, and fails the day someone
loosens the rule (or, for a rule that never fired, says so at once). A bundle that shows
no failure (a baseline) is replayed up to its capture: its silence is told, not a proof
that failed.

Invariants: reading only; promtool runs with a timeout; a rule whose metrics the
history does not hold is not provable here and is said, never counted as a rule that
would not have fired. The collector's DCGM queries compute (MiB to bytes, used + free),
which drops the metric name: those series are read back into dcgm-exporter's own.
"""

import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from evidence.analyze.incident import profile
from evidence.analyze.published import nameless_operand
from evidence.archive.exposition import number

PROMTOOL_TIMEOUT_S = 120
EVALUATION_INTERVAL_S = 60
_RESULT = re.compile(r"alertname: (?P<name>[^,]+), time: (?P<time>[^,]+),")
_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass
class Proof:
    """What the replay found for one alert."""

    alert: str
    status: str  # fired, silent, unprovable, unchecked
    said: str
    fired_at: float | None = None  # seconds after the history's start
    alerts: list[dict[str, Any]] = field(default_factory=list)  # labels, annotations


@dataclass
class RuleTest:
    start: float  # unix time of the history's first point
    step_s: int
    failure_at: float  # unix time: the failure, or the capture where none is seen
    failed: bool  # the bundle shows a failure; else the replay runs up to the capture
    series: list[dict[str, str]]
    proofs: list[Proof]

    def checks(self) -> list[dict[str, Any]]:
        """What the written file expects: each fired alert as it fired, at its first
        moment; each silent one firing at the failure (which fails, and says so)."""
        out = []
        for proof in self.proofs:
            if proof.status == "fired" and proof.fired_at is not None:
                out.append(_check(proof.alert, proof.fired_at, proof.alerts))
            elif proof.status == "silent":
                empty = [{"exp_labels": {}, "exp_annotations": {}}]
                out.append(_check(proof.alert, self.failure_at - self.start, empty))
        return out

    def document(self, rule_file: str, checks: list[dict[str, Any]] | None = None) -> dict:
        """The promtool test file (JSON, which YAML reads as it is)."""
        checks = self.checks() if checks is None else checks
        group = {
            "name": "evidence: the guard rail fires before the failure, "
            f"{_duration(self.failure_at - self.start)} into the history",
            "interval": f"{self.step_s}s",
            "input_series": self.series,
            "alert_rule_test": checks,
        }
        return {
            "rule_files": [rule_file],
            "evaluation_interval": f"{EVALUATION_INTERVAL_S}s",
            "tests": [group] if checks else [],
        }


def _check(alert: str, at: float, expected: list[dict[str, Any]]) -> dict[str, Any]:
    return {"eval_time": _duration(at), "alertname": alert, "exp_alerts": expected}


def _duration(seconds: float) -> str:
    return f"{int(seconds // EVALUATION_INTERVAL_S * EVALUATION_INTERVAL_S)}s"


def _seconds(text: str) -> float:
    """promtool's durations: 1h30m, 45m, 2d3h, 90s."""
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
    return sum(float(n) * units[u] for n, u in re.findall(r"([0-9.]+)(ms|d|h|m|s)", text))


def _quote(value: str) -> str:
    return json.dumps(value)


MIB = 1024 * 1024
# The collector's queries that compute (and so drop __name__) over a metric the rules name:
# the operand behind a nameless series -> (the metric it is, how to read it back from the
# value and the same labels' series already recovered). dcgm-exporter publishes MiB.
UNDONE: dict[str, tuple[str, Callable[[float, dict[str, float]], float | None]]] = {
    "DCGM_FI_DEV_FB_USED * 1024 * 1024": ("DCGM_FI_DEV_FB_USED", lambda v, known: v / MIB),
    "(DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) * 1024 * 1024": (
        "DCGM_FI_DEV_FB_FREE",
        lambda v, known: (
            None
            if known.get("DCGM_FI_DEV_FB_USED") is None
            else v / MIB - known["DCGM_FI_DEV_FB_USED"]
        ),
    ),
}


def _history(
    con: duckdb.DuckDBPyConnection, bundle_id: str, metrics: set[str]
) -> tuple[dict[tuple, dict[float, float]], set[str]]:
    """Each series of the metrics, by its labels: time -> value; and the metrics held.
    A series a query computed (no __name__) is read back where UNDONE knows how."""
    rows = con.execute(
        "SELECT query, expr, labels, epoch(t), value FROM prometheus_series "
        "WHERE bundle_id = ? AND status = 'ok' AND t IS NOT NULL AND labels IS NOT NULL "
        "ORDER BY query = 'accelerator_memory_total', query, t",  # USED before FREE
        [bundle_id],
    ).fetchall()
    named: dict[tuple[str, str], set[str]] = {}
    for query, expr, labels, _, _ in rows:
        if labels.get("__name__"):
            named.setdefault((query, expr or ""), set()).add(labels["__name__"])
    found: dict[tuple, dict[float, float]] = {}
    for query, expr, labels, t, value in rows:
        if value is None or value != value:  # NaN is no reading
            continue
        name = labels.get("__name__")
        if not name:
            operand, _ = nameless_operand(expr or "", named.get((query, expr or ""), set()))
            if operand not in UNDONE:
                continue
            name, undo = UNDONE[operand]
            known = {
                metric: found.get(tuple(sorted({**labels, "__name__": metric}.items())), {}).get(
                    float(t)
                )
                for metric, _ in UNDONE.values()
            }
            value = undo(value, known)
            if value is None:
                continue
        if name not in metrics:
            continue
        key = tuple(sorted({**labels, "__name__": name}.items()))
        found.setdefault(key, {})[float(t)] = value
    return found, {dict(k)["__name__"] for k in found}


def _series(found: dict[tuple, dict[float, float]], start: float, step: int, end: float):
    """promtool's input_series: values at start + i*step, `_` where none was read."""
    out = []
    steps = int((end - start) // step) + 1
    for key, points in sorted(found.items()):
        labels = dict(key)
        name = labels.pop("__name__")
        inner = ",".join(f"{k}={_quote(v)}" for k, v in sorted(labels.items()))
        by_slot = {round((t - start) / step): v for t, v in points.items()}
        values = " ".join(number(by_slot[i]) if i in by_slot else "_" for i in range(steps))
        out.append({"series": f"{name}{{{inner}}}", "values": values})
    return out


def _step(found: dict[tuple, dict[float, float]]) -> int:
    gaps = [
        round(b - a)
        for points in found.values()
        for a, b in zip(sorted(points), sorted(points)[1:], strict=False)
    ]
    return max(1, min(gaps)) if gaps else EVALUATION_INTERVAL_S


def _parse_failures(text: str) -> dict[tuple[str, float], list[dict[str, Any]]]:
    """promtool's failure report: (alertname, time) -> the alerts it got."""
    got: dict[tuple[str, float], list[dict[str, Any]]] = {}
    current: tuple[str, float] | None = None
    for line in text.splitlines():
        head = _RESULT.search(line)
        if head:
            current = (head["name"].strip(), _seconds(head["time"].strip()))
            got[current] = []
        elif current and line.strip().startswith("Labels:"):
            got[current].append({"exp_labels": _pairs(line), "exp_annotations": {}})
        elif current and line.strip().startswith("Annotations:") and got[current]:
            got[current][-1]["exp_annotations"] = _pairs(line)
    return got


def _pairs(line: str) -> dict[str, str]:
    pairs = {k: json.loads(f'"{v}"') for k, v in _PAIR.findall(line.split(":", 1)[1])}
    pairs.pop("alertname", None)  # promtool adds it from the test's alertname
    return pairs


def promtool() -> str | None:
    return shutil.which("promtool")


def run(test_file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool() or "promtool", "test", "rules", str(test_file)],
        capture_output=True,
        text=True,
        timeout=PROMTOOL_TIMEOUT_S,
        cwd=test_file.parent,
    )


def _when(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def prove(
    con: duckdb.DuckDBPyConnection, bundle_id: str, result: dict[str, Any], rules_text: str
) -> RuleTest | None:
    """Replay the guard rail's rules on the bundle's history; None when the bundle holds
    no Prometheus history of any metric the rules name."""
    metrics = {m for rule in result["rules"] for m in rule["metrics"]}
    found, held = _history(con, bundle_id, metrics)
    if not found:
        return None
    start = min(min(points) for points in found.values())
    step = _step(found)
    incident = profile(con, bundle_id)
    failed_at = incident.result["context"].get("failed_at")
    failure_at = failed_at or incident.started_at.timestamp()
    end = max(failure_at, max(max(points) for points in found.values()))
    series = _series(found, start, step, end)
    test = RuleTest(start, step, failure_at, failed_at is not None, series, [])
    names = list(dict.fromkeys(rule["alert"] for rule in result["rules"]))
    for name in names:
        needs = {m for rule in result["rules"] if rule["alert"] == name for m in rule["metrics"]}
        if not needs <= held:
            missing = ", ".join(sorted(needs - held))
            test.proofs.append(
                Proof(
                    name,
                    "unprovable",
                    f"{name}: not provable on this bundle: its Prometheus "
                    f"history holds no series named {missing}",
                )  # fmt: skip
            )
        else:
            test.proofs.append(Proof(name, "unchecked", f"{name}: promtool not found: not run"))
    if promtool() is not None:
        _replay(test, rules_text)
    return test


def _replay(test: RuleTest, rules_text: str) -> None:
    """Ask promtool which alerts fire at every step up to the failure."""
    upto = test.failure_at - test.start
    probes = [p for p in test.proofs if p.status == "unchecked"]
    tick = max(test.step_s, EVALUATION_INTERVAL_S)  # what one step of the replay can see
    times = range(0, int(upto) + 1, -(-tick // EVALUATION_INTERVAL_S) * EVALUATION_INTERVAL_S)
    asked = [_check(p.alert, t, []) for p in probes for t in times]
    with tempfile.TemporaryDirectory(prefix="evidence-proof-") as work:
        place = Path(work)
        (place / "rules.yml").write_text(rules_text)
        (place / "probe.yml").write_text(json.dumps(test.document("rules.yml", asked)))
        answer = run(place / "probe.yml")
    said = answer.stdout + answer.stderr
    if answer.returncode != 0 and "FAILED:" not in said:
        last = " ".join(said.strip().splitlines()[-1:])
        for proof in probes:
            proof.said = f"{proof.alert}: promtool could not replay it: {last}"
        return
    got = _parse_failures(said)
    moment = "the failure" if test.failed else "the capture (this bundle shows no failure)"
    for proof in probes:
        firing = sorted(t for (name, t), alerts in got.items() if name == proof.alert and alerts)
        if not firing:
            proof.status = "silent"
            proof.said = (
                f"{proof.alert}: would not have fired: on this history it never fired before "
                f"{moment} ({_when(upto)} of history replayed)"
            )
            continue
        begun = firing[-1]  # the start of the last stretch that began before the failure
        for earlier in reversed(firing[:-1]):
            if begun - earlier > tick:
                break
            begun = earlier
        proof.status, proof.fired_at = "fired", begun
        proof.alerts = got[(proof.alert, begun)]
        still = firing[-1] >= upto - tick
        proof.said = f"{proof.alert}: would have fired {_when(upto - begun)} before {moment}"
        proof.said += "" if still else ", and stopped before it"
