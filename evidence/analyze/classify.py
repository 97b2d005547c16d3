"""Name the fault of one bundle, and show the working.

Every catalog entry is scored by its rule; the verdict is the top one, `ambiguous` when
the top two are within AMBIGUOUS_WITHIN points (collect more evidence rather than pick
the interesting one), `no-fault` when the instruments were there and nothing scored
enough, and `insufficient-evidence` when too little was measurable to tell. The last
two are different claims: one about the machine, the other about the instruments.
The JSON is the contract of the design document.
"""

import tomllib
from functools import cache
from typing import Any

import duckdb
import orjson

from evidence.analyze.facts import Facts, derive
from evidence.analyze.rules import RULES, Judgement, preallocated
from evidence.schemas import SCHEMA_DIR

MIN_SCORE = 3  # less than one distinguishing observation is not a verdict
# The faults that are a cause with a shape before the failure; an ending confirms them.
CAUSES = (
    "context-creep",
    "concurrency-overload",
    "leak-ratchet",
    "swap-not-unloaded",
    "admission-overcommit",
    "build-swarm",
)
ENDING_DISCOUNT = 3
AMBIGUOUS_WITHIN = 1
# What a verdict of no-fault needs measured; without them the answer is about the instruments.
CORE = ("memory", "pressure", "processes")
# For the pairs the seeds warn are confused: what would separate them.
SEPARATE = {
    frozenset(
        {"context-creep", "leak-ratchet"}
    ): "whether the rise tracks the KV-cache metric (creep) or is independent of it (leak)",
    frozenset(
        {"concurrency-overload", "context-creep"}
    ): "whether requests running rose (concurrency) or stayed flat while context grew (creep)",
    frozenset(
        {"swap-not-unloaded", "leak-ratchet"}
    ): "whether the model manager's loaded set disagrees with resident memory (swap) or the "
    "floor rises burst after burst (leak)",
    frozenset(
        {"idle-squatter", "swap-not-unloaded"}
    ): "whether the holder is an engine with an empty queue (squatter) or a model its "
    "manager forgot (swap)",
    frozenset(
        {"memory-pressure-stall", "wedged-no-progress"}
    ): "whether the work advanced slowly under stall (pressure) or not at all (wedged)",
    frozenset(
        {"false-liveness", "wedged-no-progress"}
    ): "whether the engine answers a request at all (liveness) or answers but makes no "
    "progress (wedged)",
}


@cache
def catalog() -> dict[str, Any]:
    """The fault catalog; read once per process (callers read it, never change it)."""
    return tomllib.loads((SCHEMA_DIR / "faults.toml").read_text())


def classify(con: duckdb.DuckDBPyConnection, bundle_id: str) -> dict[str, Any]:
    return judge(derive(con, bundle_id))


def judge(facts: Facts) -> dict[str, Any]:
    """The classification contract, from facts already derived."""
    book = catalog()
    judgements = {entry["id"]: RULES[entry["id"]](facts) for entry in book["fault"]}
    _weigh_endings(judgements)
    candidates = []
    for order, entry in enumerate(book["fault"]):
        judgement = judgements[entry["id"]]
        candidates.append(
            (
                order,
                {
                    "fault": entry["id"],
                    "title": entry["title"],
                    "score": judgement.score,
                    "evidence_for": judgement.evidence_for,
                    "evidence_against": judgement.evidence_against,
                    "missing": judgement.missing,
                    "settle": entry["settle"],
                    "fix": entry["fix"],
                    "guard_rail": entry["guard_rail"],
                },
            )
        )
    ranked = [c for _, c in sorted(candidates, key=lambda oc: (-oc[1]["score"], oc[0]))]
    by_design = preallocated(facts)
    verdict, findings = _verdict(facts, ranked, by_design)
    # Beside a fault the share may be what the fault is about (a squatter, an orphan).
    findings += (by_design if verdict == "no-fault" else []) + _not_faults(facts)
    return {
        "bundle_id": facts.bundle["bundle_id"],
        "host": facts.bundle["host"],
        "rules_version": book["rules_version"],
        "verdict": verdict,
        "candidates": ranked,
        "gaps": _gaps(facts),
        "findings": findings,
        "context": _context(facts),
    }


def _weigh_endings(judgements: dict[str, Judgement]) -> None:
    """How a failure ended is not why: an allocation failure, or the OOM killer taking the
    engine that grew, confirms the shape that led there (the seeds read the graphs first
    and the log after). The strongest cause, where one has enough, takes the ending as its
    confirmation; the ending keeps its evidence, less ENDING_DISCOUNT points."""
    causes = [(j.score, fault) for fault, j in judgements.items() if fault in CAUSES]
    score, cause = max(causes, default=(0, None))
    if cause is None or score < MIN_SCORE:
        return
    for fault, j in judgements.items():
        if not j.ending or j.score <= 0:
            continue
        discount = 0
        if j.score >= MIN_SCORE:
            judgements[cause].add(1, f"and it ended as {fault}: {j.evidence_for[0]}")
            discount = ENDING_DISCOUNT
        # Below the cause by more than a tie: an ending, however weak, cannot make it
        # ambiguous.
        j.score = min(j.score - discount, judgements[cause].score - AMBIGUOUS_WITHIN - 1)
        j.evidence_against.append(
            f"this is how the failure ended, not why: {cause} explains the memory before it"
        )


def _verdict(
    facts: Facts, ranked: list[dict[str, Any]], by_design: list[str]
) -> tuple[str, list[str]]:
    top, second = ranked[0], ranked[1]
    failure = facts.window.failure if facts.window else None
    findings = [f"what failed: {failure.said()}"] if failure else []
    if top["score"] >= MIN_SCORE and second["score"] >= top["score"] - AMBIGUOUS_WITHIN:
        pair = frozenset({top["fault"], second["fault"]})
        split = SEPARATE.get(pair, "evidence that speaks for one and against the other")
        findings.append(
            f"{top['fault']} and {second['fault']} score within "
            f"{AMBIGUOUS_WITHIN} point: collect more evidence; what separates them "
            f"is {split}"
        )
        return "ambiguous", findings
    if top["score"] >= MIN_SCORE:
        return top["fault"], findings
    if failure:
        # Something went down: "healthy" is the one answer that cannot be given. Say what
        # failed, what came closest, and what would have told.
        leading = [c for c in ranked[:3] if c["score"] > 0]
        close = (
            "the closest: " + ", ".join(f"{c['fault']} ({c['score']})" for c in leading)
            if leading
            else "no fault had any evidence"
        )
        wanted = list(dict.fromkeys(m for c in (leading or ranked[:3]) for m in c["missing"]))
        told = "; what would have told: " + "; ".join(wanted[:4]) if wanted else ""
        findings.append(f"a service failed and no fault had enough evidence to name: {close}{told}")
        return "insufficient-evidence", findings
    unmeasured = [p for p in CORE if not facts.measured(p)]
    if by_design and top["score"] == 0:
        # Nothing failed and no rule saw anything: what was measured, the card, is explained
        # by the engine's own design. That answers the question the look was for.
        if unmeasured:
            findings.append(f"not measured: {', '.join(unmeasured)}")
        return "no-fault", findings
    if unmeasured or not facts.has("memory_used"):
        findings.append(
            "too little was measurable to tell: "
            + (", ".join(unmeasured) if unmeasured else "no memory series")
            + " missing"
        )
        return "insufficient-evidence", findings
    findings.append("the measured sources look healthy: no rule found enough evidence")
    # What was seen below the line is still said: a note an operator may want, not a fault.
    findings += [
        f"noted, not a fault ({c['fault']}, {c['score']}): {c['evidence_for'][0]}"
        for c in ranked
        if 0 < c["score"] < MIN_SCORE and c["evidence_for"]
    ]
    return "no-fault", findings


def _not_faults(facts: Facts) -> list[str]:
    """Findings that are not faults: what looks alarming and is not (Plate 02)."""
    found = []
    tokens = [v for _, v in facts.series.get("tokens_generated", []) if v is not None]
    busy = [v for values in facts.engine_load.values() for v in values]
    if len(tokens) >= 2 and tokens[-1] > tokens[0] and busy and max(busy) > 0:
        note = f"busy but progressing: {tokens[-1] - tokens[0]:.0f} tokens generated in the window"
        for d in facts.gpu_devices:
            util, clock = d["utilization_gpu_pct"], d["sm_clock_mhz"]
            if util is not None and util >= 90 and clock is not None:
                note += (
                    f"; GPU {d['device_index']} at {util:.0f}% utilisation and "
                    f"{clock:.0f} MHz is working, whatever the clock looks like"
                )
        found.append(note)
    return found


def _gaps(facts: Facts) -> list[dict[str, Any]]:
    gaps = [
        {"source": probe, "status": status, "reason": reason}
        for probe, (status, reason) in sorted(facts.probes.items())
        if status != "ok"
    ]
    for device in facts.gpu_devices:
        for field, why in (_json(device["unavailable"]) or {}).items():
            gaps.append(
                {
                    "source": f"gpu{device['device_index']}.{field}",
                    "status": why["status"],
                    "reason": why["reason"],
                }
            )
    for query, (status, reason) in sorted(facts.prometheus.items()):
        if status != "ok":
            gaps.append({"source": f"prometheus.{query}", "status": status, "reason": reason})
    return gaps


def _json(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, str) else value


def _context(facts: Facts) -> dict[str, Any]:
    """What the human report shows before the candidates, in the seeds' order."""
    b = facts.bundle
    failure = facts.window.failure if facts.window else None
    return {
        "trigger": f"{b['trigger_kind']}" + (f":{b['trigger_name']}" if b["trigger_name"] else ""),
        "started_at": b["started_at"].isoformat(),
        "failed_at": failure.at if failure else None,
        "failure": failure.said() if failure else None,
        "series": {
            name: {"origin": facts.origin.get(name), "points": len(points)}
            for name, points in sorted(facts.series.items())
        },
        "log_tags": {tag: len(lines) for tag, lines in sorted(facts.lines.items())},
        "unmeasured": facts.unmeasured,
    }
