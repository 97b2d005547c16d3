"""What the written entries say, as data: the runbook entry of one incident, and the
changelog entry with its recording sheet (healthy baseline, fault reproduced, after one
change). The templates in reports/ only word it.

Dates are the bundle's, never the machine clock's: an entry written a month later
still says when the fault happened.
"""

from typing import Any

import duckdb

from evidence.analyze.compare import healthy_baseline, past_incidents, recurrence, similarity
from evidence.analyze.guardrail import guardrail
from evidence.analyze.incident import Incident, profile

# How far the load may move between two rows and still count as "the same load".
SAME_LOAD_WITHIN = 0.25


def _row(state: str, incident: Incident | None) -> dict[str, Any]:
    """One row of the seeds' recording sheet."""
    if incident is None:
        return {"state": state, "bundle_id": None}
    memory, load, logs = (incident.sections[k] for k in ("memory", "load", "logs"))
    return {
        "state": state,
        "bundle_id": incident.bundle_id,
        "date": incident.started_at.isoformat(timespec="minutes"),
        "verdict": incident.verdict,
        "floor_bytes": memory["floor_bytes"],
        "peak_bytes": memory["peak_bytes"],
        "waiting_peak": load["requests_waiting_peak"],
        "log_said": logs["said"] or logs["tags"],
        "engine": load["engine"],
        "shape": memory["shape"],
    }


def runbook(con: duckdb.DuckDBPyConnection, bundle_id: str, path: str) -> dict[str, Any]:
    this = profile(con, bundle_id)
    return {
        "bundle_id": bundle_id,
        "path": path,
        "host": this.host,
        "date": this.started_at.date().isoformat(),
        "started_at": this.started_at.isoformat(timespec="seconds"),
        "trigger": this.trigger,
        "result": this.result,
        "sections": this.sections,
        "offender": this.offender,
        "engines": [
            {"kind": kind, "url": url}
            for kind, url in con.execute(
                "SELECT kind, url FROM engines WHERE bundle_id = ? AND status = 'ok' ORDER BY name",
                [bundle_id],
            ).fetchall()
        ],
        "recurrence": recurrence(this, past_incidents(con, this)),
    }


def shape_change(fault: Incident, after: Incident) -> dict[str, Any]:
    """Whether the graph changed shape under the same load: the seeds' proof of a fix."""
    before_load = fault.sections["load"]["requests_running_peak"]
    after_load = after.sections["load"]["requests_running_peak"]
    if before_load is None or after_load is None:
        same_load = None
    else:
        same_load = abs(before_load - after_load) <= SAME_LOAD_WITHIN * max(
            before_load, after_load, 1
        )
    before, now = fault.sections["memory"]["shape"], after.sections["memory"]["shape"]
    changed = None if before is None or now is None else before != now
    return {
        "same_load": same_load,
        "running_before": before_load,
        "running_after": after_load,
        "shape_before": before,
        "shape_after": now,
        "changed": changed,
        "verdict_after": after.verdict,
    }


def changelog(
    con: duckdb.DuckDBPyConnection,
    bundle_id: str,
    change: str | None,
    guard_rail: str | None,
    after_id: str | None,
) -> dict[str, Any]:
    this = profile(con, bundle_id)
    after = profile(con, after_id) if after_id else None
    healthy = healthy_baseline(con, this)
    top = next((c for c in this.result["candidates"] if c["fault"] == this.verdict), None)
    rail = guardrail(con, bundle_id, this.verdict) if this.fault else None
    return {
        "key": f"{bundle_id}|{change or ''}|{after_id or ''}",
        "bundle_id": bundle_id,
        "host": this.host,
        "date": this.started_at.date().isoformat(),
        "started_at": this.started_at.isoformat(timespec="seconds"),
        "verdict": this.verdict,
        "title": top["title"] if top else this.verdict,
        "evidence": top["evidence_for"] if top else this.result["findings"],
        "fix": top["fix"] if top else None,
        "change": change,
        "guard_rail": guard_rail or (top["guard_rail"] if top else None),
        "rules": [
            {k: r[k] for k in ("alert", "expr", "for", "scraped_by_prometheus")}
            for r in (rail["rules"] if rail else [])
        ],
        "rules_skipped": rail["skipped"] if rail else [],
        "signature": this.signature,
        "sheet": [
            _row("healthy baseline", healthy),
            _row("fault reproduced", this),
            _row("after one change", after),
        ],
        "after": shape_change(this, after) if after else None,
        "after_similarity": similarity(this, after).why if after else None,
    }
