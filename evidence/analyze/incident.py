"""One bundle as an incident: its classification, the figures of each section of the seeds'
procedure (when, memory, load, logs, fault), and the fingerprint that makes a recurring
fault recognisable across months.

The figures are the ones an operator writes on the recording sheet: memory floor and
peak, requests waiting at their peak, what the log said, and the engine with its version
and flags. Unknown stays None, so a comparison can say "not measured" instead of 0.
"""

import hashlib
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import duckdb

from evidence.analyze import shapes
from evidence.analyze.classify import judge
from evidence.analyze.facts import Facts, derive
from evidence.analyze.recognise import belongs

NOT_FAULTS = ("no-fault", "ambiguous", "insufficient-evidence")
# What the collector's baseline timer and cron captures are; every other trigger
# (manual, healthcheck, alert, systemd, hook) is someone or something noticing a problem.
ROUTINE_TRIGGERS = ("cron",)
COLLECTOR = "evidence"  # the collector's process name (its console script)


@dataclass
class Incident:
    bundle_id: str
    host: str
    started_at: datetime
    trigger: str
    routine: bool
    verdict: str
    result: dict[str, Any]  # the classification contract
    sections: dict[str, dict[str, Any]]  # section -> figure -> value, in the seeds' order
    offender: dict[str, str | None]  # engine, model, process
    fingerprint: str
    signature: str

    @property
    def fault(self) -> str | None:
        return None if self.verdict in NOT_FAULTS else self.verdict


@lru_cache(maxsize=4096)
def profile(con: duckdb.DuckDBPyConnection, bundle_id: str) -> Incident:
    """The incident of one bundle. Kept per connection for the life of the process, so
    comparing many incidents classifies each once; a command's connection is read-only,
    so what it reads cannot change under it. Callers must not modify the result."""
    facts = derive(con, bundle_id)
    result = judge(facts)
    b = facts.bundle
    offender = _offender(facts)
    signature = " · ".join([result["verdict"], *(offender[k] or "-" for k in offender)])
    return Incident(
        bundle_id=bundle_id,
        host=b["host"],
        started_at=b["started_at"],
        trigger=b["trigger_kind"] + (f":{b['trigger_name']}" if b["trigger_name"] else ""),
        routine=b["trigger_kind"] in ROUTINE_TRIGGERS,
        verdict=result["verdict"],
        result=result,
        sections=_sections(facts, result, _engine_line(con, facts, offender)),
        offender=offender,
        fingerprint=hashlib.sha256(signature.encode()).hexdigest()[:12],
        signature=signature,
    )


def _known(facts: Facts, name: str) -> list[float]:
    return [v for _, v in facts.series.get(name, []) if v is not None]


def _peak(facts: Facts, name: str) -> float | None:
    values = _known(facts, name)
    return max(values) if values else None


def memory_shape(facts: Facts) -> str | None:
    """The shape of memory in use, in the seeds' words; None if it was not measured."""
    series = facts.series.get("memory_used", [])
    if not facts.has("memory_used"):
        return None
    for name, test in (
        ("ratchets (floor rises after each burst)", shapes.ratchet),
        ("steps up and stays", shapes.step),
        ("climbs", shapes.climb),
        ("collapses", shapes.collapse),
        # The healthy shape before the spike test: bursts that return to a flat floor.
        ("holds a flat floor (bursts return to it)", shapes.flat_floor),
        ("spikes", shapes.spike),
    ):
        if test(series).verdict:
            return name
    return "flat"


def _sections(facts: Facts, result: dict[str, Any], engine: str | None) -> dict[str, Any]:
    used = _known(facts, "memory_used")
    gpu_held = sum(p["used_bytes"] or 0 for p in facts.gpu_processes) or None
    gateway = facts.series.get("gateway_up", [])
    loaded = sorted(
        {m["model"] for m in facts.models if (m["state"] or "loaded") in ("loaded", "ready")}
    )
    answering = [e for e in facts.engines if e["status"] == "ok"]
    log_tags = {tag: len(lines) for tag, lines in sorted(facts.lines.items())}
    top = result["candidates"][0]
    return {
        "when": {
            "started_at": facts.bundle["started_at"].isoformat(timespec="seconds"),
            "trigger": facts.bundle["trigger_kind"],
            "gateway_went_down": (any(v == 0 for _, v in gateway) if gateway else None),
            "rebooted_since_previous": _rebooted(facts),
        },
        "memory": {
            "floor_bytes": shapes.quantile(used, shapes.FLOOR_QUANTILE) if used else None,
            "peak_bytes": max(used) if used else None,
            "shape": memory_shape(facts),
            "min_available_bytes": min(_known(facts, "available"), default=None),
            "swap_peak_bytes": _peak(facts, "swap_used"),
            "gpu_held_bytes": gpu_held,
            "psi_some_peak": _peak(facts, "psi_some"),
        },
        "load": {
            "requests_running_peak": _peak(facts, "requests_running"),
            "requests_waiting_peak": _peak(facts, "requests_waiting"),
            "kv_cache_peak": _peak(facts, "kv_cache"),
            "engines_answering": f"{len(answering)}/{len(facts.engines)}"
            if facts.engines
            else None,
            "models_loaded": ", ".join(loaded) or None,
            "engine": engine,
        },
        "logs": {
            "tags": ", ".join(f"{t} x{n}" for t, n in log_tags.items()) or "nothing tagged",
            "said": _said(facts),
        },
        "fault": {
            "verdict": result["verdict"],
            "top": f"{top['fault']} ({top['score']})",
        },
    }


def _rebooted(facts: Facts) -> bool | None:
    if facts.previous is None:
        return None
    return facts.previous["boot_id"] != facts.bundle["boot_id"]


def _said(facts: Facts) -> str | None:
    """The first tagged line of the most telling kind: what the log said, in one line."""
    for tag in ("oom-killer", "cuda-oom", "hip-oom", "nv-no-memory", "host-alloc-fail", "xid"):
        if facts.lines.get(tag):
            return facts.lines[tag][0][:200]
    for lines in facts.lines.values():
        return lines[0][:200]
    return None


def _offender(facts: Facts) -> dict[str, str | None]:
    """The key offender's signature: the engine kind, the model and the process name
    holding the most memory (GPU memory where a process holds any, else resident)."""
    holders = sorted(facts.gpu_processes, key=lambda p: -(p["used_bytes"] or 0))
    if holders and holders[0]["used_bytes"]:
        process = holders[0]["name"]
    else:
        # The collector is in its own process list; on a quiet machine it can be the
        # largest there, and it is never the offender.
        others = [p for p in facts.processes if p["name"] != COLLECTOR]
        biggest = max(others, key=lambda p: p["rss_bytes"] or 0, default=None)
        process = biggest["name"] if biggest else None
    models = sorted(
        (m for m in facts.models if (m["state"] or "loaded") in ("loaded", "ready")),
        key=lambda m: (-(m["size_vram_bytes"] or m["size_bytes"] or 0), m["model"]),
    )
    kinds = sorted({e["kind"] for e in facts.engines if e["status"] == "ok"})
    return {
        "engine": "+".join(kinds) or None,
        "model": models[0]["model"] if models else None,
        "process": process,
    }


def _engine_line(
    con: duckdb.DuckDBPyConnection, facts: Facts, offender: dict[str, str | None]
) -> str | None:
    """The engine, its version and the flags it was started with, where known."""
    engines = [e for e in facts.engines if e["status"] == "ok"]
    if not engines:
        return None
    versions = dict(
        con.execute(
            "SELECT name, version FROM engines WHERE bundle_id = ?", [facts.bundle["bundle_id"]]
        ).fetchall()
    )
    parts = []
    for e in engines:
        text = e["kind"] + (f" {versions[e['name']]}" if versions.get(e["name"]) else "")
        flags = _flags(facts, e["kind"])
        parts.append(text + (f" ({flags})" if flags else ""))
    return "; ".join(parts)


def _flags(facts: Facts, kind: str) -> str | None:
    for p in sorted(facts.processes, key=lambda p: -(p["rss_bytes"] or 0)):
        argv = p["cmdline"] or []
        if belongs(p, kind):
            first = next((i for i, a in enumerate(argv) if a.startswith("-")), len(argv))
            return " ".join(argv[first:])[:300] or None
    return None
