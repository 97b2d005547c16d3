"""Tonight against last month: one incident side by side with another, section by section.

The other is named (--with), the most similar past incident of the archive (--auto), or
the host's healthy baseline (--baseline: the seeds' healthy report against the broken
one). "Past" is relative to the bundle, never to the machine clock, so replaying an old
incident compares it with what came before it. Sections follow the seeds' procedure
(when, memory, load, logs, fault) and the first section that differs is marked: the
seeds observe that it usually names the fault.
"""

from dataclasses import dataclass
from typing import Any

import duckdb

from evidence.analyze.incident import Incident, profile

# How much each resemblance counts when choosing the most similar past incident.
WEIGHTS = {"verdict": 0.40, "shape": 0.15, "host": 0.15, "engine": 0.15, "model": 0.10}
WEIGHTS["process"] = 1.0 - sum(WEIGHTS.values())
HISTORY_LIMIT = 200  # past incidents considered, newest first: bounds the classifying
BASELINE_LIMIT = 50  # earlier bundles of the host tried when looking for a healthy one
# Figures that describe a bundle but do not distinguish faults: shown, never compared.
INFO = ("started_at", "trigger")
# (relative, absolute) change that counts as a difference, by figure.
_GIB = 2**30
TOLERANCE = {
    "_bytes": (0.15, 0.5 * _GIB),
    "psi_some_peak": (0.5, 5.0),
    "kv_cache_peak": (0.2, 0.1),
    "requests_running_peak": (0.5, 0.5),
    "requests_waiting_peak": (0.5, 0.5),
}


NOTHING = {
    "auto": "no earlier incident in the archive to compare with",
    "baseline": f"none of the host's {BASELINE_LIMIT} earlier bundles classifies as no fault",
}


@dataclass
class Match:
    incident: Incident
    score: float
    why: list[str]


def past_incidents(con: duckdb.DuckDBPyConnection, this: Incident) -> list[Incident]:
    """Every non-routine bundle captured before this one, newest first."""
    rows = con.execute(
        """SELECT bundle_id FROM bundles WHERE started_at < ? AND bundle_id <> ?
           AND trigger_kind NOT IN ('cron') ORDER BY started_at DESC LIMIT ?""",
        [this.started_at, this.bundle_id, HISTORY_LIMIT],
    ).fetchall()
    return [profile(con, bundle_id) for (bundle_id,) in rows]


def similarity(a: Incident, b: Incident) -> Match:
    """How alike two incidents are (0..1), and why, in words."""
    score, why = 0.0, []

    def same(key: str, x: Any, y: Any, words: str) -> None:
        nonlocal score
        if x is not None and x == y:
            score += WEIGHTS[key]
            why.append(words)

    same("verdict", a.verdict, b.verdict, f"the same verdict ({a.verdict})")
    shape = a.sections["memory"]["shape"]
    same("shape", shape, b.sections["memory"]["shape"], f"memory {shape} in both")
    same("host", a.host, b.host, f"the same host ({a.host})")
    for key in ("engine", "model", "process"):
        value = a.offender[key]
        same(key, value, b.offender[key], f"the same {key} ({value})")
    return Match(b, round(score, 2), why)


def most_similar(this: Incident, history: list[Incident]) -> Match | None:
    """The most similar past incident; among equals, the most recent."""
    matches = [similarity(this, past) for past in history]
    return max(matches, key=lambda m: (m.score, m.incident.started_at), default=None)


def healthy_baseline(con: duckdb.DuckDBPyConnection, this: Incident) -> Incident | None:
    """The host's most recent earlier bundle that classifies as no fault."""
    rows = con.execute(
        """SELECT bundle_id FROM bundles WHERE host = ? AND started_at < ?
           ORDER BY started_at DESC LIMIT ?""",
        [this.host, this.started_at, BASELINE_LIMIT],
    ).fetchall()
    for (bundle_id,) in rows:
        candidate = profile(con, bundle_id)
        if candidate.verdict == "no-fault":
            return candidate
    return None


def recurrence(this: Incident, history: list[Incident]) -> dict[str, Any] | None:
    """How often this fault, with this offender, was seen before; None for a non-fault."""
    if this.fault is None:
        return None
    seen = sorted(i.started_at for i in history if i.fingerprint == this.fingerprint)
    return {
        "fingerprint": this.fingerprint,
        "signature": this.signature,
        "seen_before": len(seen),
        "first": seen[0].date().isoformat() if seen else None,
        "last": seen[-1].date().isoformat() if seen else None,
    }


def differs(figure: str, a: Any, b: Any) -> bool | None:
    """Whether a figure changed; None when one side was not measured (not comparable)."""
    if figure in INFO:
        return False
    if a is None or b is None:
        return None
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        rel, floor = next(
            (t for suffix, t in TOLERANCE.items() if figure.endswith(suffix)), (0.2, 0.0)
        )
        return abs(a - b) > max(rel * max(abs(a), abs(b)), floor)
    return a != b


def side_by_side(this: Incident, other: Incident | None) -> dict[str, Any]:
    sections = []
    first = None
    for name, figures in this.sections.items():
        rows = []
        for figure, value in figures.items():
            theirs = other.sections[name][figure] if other else None
            rows.append(
                {
                    "figure": figure,
                    "this": value,
                    "other": theirs,
                    "differs": differs(figure, value, theirs) if other else None,
                }
            )
        changed = any(r["differs"] for r in rows)
        if changed and first is None:
            first = name
        sections.append({"name": name, "differs": changed, "rows": rows})
    return {"sections": sections, "first_difference": first}


def summary(incident: Incident) -> dict[str, Any]:
    return {
        "bundle_id": incident.bundle_id,
        "host": incident.host,
        "started_at": incident.started_at.isoformat(timespec="seconds"),
        "trigger": incident.trigger,
        "verdict": incident.verdict,
        "fingerprint": incident.fingerprint,
        "signature": incident.signature,
    }


def compare(
    con: duckdb.DuckDBPyConnection,
    bundle_id: str,
    how: str = "auto",
    other_id: str | None = None,
) -> dict[str, Any]:
    """The comparison contract: this bundle, what it is compared with and why, and the
    sections side by side. `how` is auto, with (other_id given) or baseline."""
    this = profile(con, bundle_id)
    history = past_incidents(con, this)
    match: Match | None = None
    if how == "with":
        if other_id is None:
            raise ValueError("compare with what: no other bundle named")
        match = similarity(this, profile(con, other_id))
    elif how == "baseline":
        healthy = healthy_baseline(con, this)
        match = similarity(this, healthy) if healthy else None
    elif how == "auto":
        match = most_similar(this, history)
    else:
        raise ValueError(f"unknown comparison {how!r}")
    other = match.incident if match else None
    return {
        "bundle": summary(this),
        "how": how,
        "against": summary(other) if other else None,
        "reason": None if other else NOTHING[how],
        "similarity": match.score if match else None,
        "why": match.why if match else [],
        "recurrence": recurrence(this, history),
        **side_by_side(this, other),
    }
