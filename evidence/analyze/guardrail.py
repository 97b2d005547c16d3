"""The guard rail of a fault: the Prometheus rules (and the settings) that make it announce
itself next time, naming only metrics this machine publishes.

The catalog is schemas/guardrails.toml. For each alert guarding the fault, the first
candidate whose metrics the bundle saw published (analyze.published) is used, preferring
one Prometheus already scrapes over one seen only at an engine's /metrics; an alert with
no usable candidate is skipped, with what it needed. A rule over a metric only an engine
exposes is kept but flagged: it fires once Prometheus scrapes that engine, and the
result carries the scrape job that does it.

Invariants: reading only; a rule's expression names no metric outside published(); the
rendered file is a Prometheus rule file in which every string is a JSON string (YAML
reads it as a double-quoted scalar), so annotations keep their colons and quotes;
reports.render.rules_file writes it.
"""

import tomllib
from typing import Any
from urllib.parse import urlsplit

import duckdb

from evidence.analyze.published import PROMETHEUS, asked, scan
from evidence.schemas import SCHEMA_DIR

SHARED_POOL = "shared-pool"


def catalog() -> dict[str, Any]:
    return tomllib.loads((SCHEMA_DIR / "guardrails.toml").read_text())


def _faults() -> dict[str, dict[str, Any]]:
    book = tomllib.loads((SCHEMA_DIR / "faults.toml").read_text())
    return {entry["id"]: entry for entry in book["fault"]}


def _machine(con: duckdb.DuckDBPyConnection, bundle_id: str) -> dict[str, Any]:
    """What the candidates' conditions and parameters read from the bundle."""
    if not con.execute("SELECT 1 FROM bundles WHERE bundle_id = ?", [bundle_id]).fetchone():
        raise LookupError(f"no bundle {bundle_id!r} in the archive")
    (shared,) = con.execute(
        "SELECT bool_or(unified_memory) FROM gpu_devices WHERE bundle_id = ?", [bundle_id]
    ).fetchone()
    (n_ctx,) = con.execute(
        "SELECT min(value) FROM samples WHERE bundle_id = ? AND source = 'engine' "
        "AND metric = '/props:n_ctx' AND value > 0",
        [bundle_id],
    ).fetchone()
    prometheus = con.execute(
        "SELECT status, reason FROM probes WHERE bundle_id = ? AND probe = 'prometheus'",
        [bundle_id],
    ).fetchone()
    engines = con.execute(
        "SELECT name, kind, url FROM engines WHERE bundle_id = ? ORDER BY name", [bundle_id]
    ).fetchall()
    return {
        "shared_pool": bool(shared),
        "params": {"n_ctx": None if n_ctx is None else f"{n_ctx:g}"},
        "prometheus": prometheus,
        "engines": {name: (kind, url) for name, kind, url in engines},
    }


def _families(alert: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Candidates grouped: one group per engine family where the alert says `each`."""
    if not alert.get("each"):
        return [alert["candidate"]]
    groups: dict[str, list[dict[str, Any]]] = {}
    for candidate in alert["candidate"]:
        groups.setdefault(candidate.get("family", ""), []).append(candidate)
    return list(groups.values())


def _blocked(candidate: dict[str, Any], seen: dict[str, list[str]], machine: dict) -> str | None:
    """Why a candidate cannot be used here, or None. "" when its metrics are not published:
    the skip reason says that once for all the candidates."""
    if any(m not in seen for m in candidate["metrics"]):
        return ""
    if candidate.get("when") == SHARED_POOL and not machine["shared_pool"]:
        return (
            f"{', '.join(candidate['metrics'])} published, but host memory is the accelerator's "
            "only on one shared pool, and this bundle saw no unified-memory accelerator"
        )
    for param in candidate.get("params", []):
        if machine["params"].get(param) is None:
            return f"{param} (llama-server's /props) was not read in this bundle"
    return None


def _needs(candidates: list[dict[str, Any]]) -> str:
    return "; or ".join(
        ", ".join(c["metrics"]) + (" on one shared pool" if c.get("when") == SHARED_POOL else "")
        for c in candidates
    )


def _rule(
    alert: dict[str, Any], candidate: dict[str, Any], fault: str, seen: dict, machine: dict
) -> dict[str, Any]:
    expr = candidate["expr"]
    for param in candidate.get("params", []):
        expr = expr.replace("{" + param + "}", machine["params"][param])
    return {
        "alert": alert["name"],
        "expr": expr,
        "for": alert.get("for_fault", {}).get(fault, alert["for"]),
        "labels": {"severity": alert["severity"], "fault": fault},
        "annotations": {
            "summary": candidate.get("summary", alert["summary"]),
            "description": candidate.get("description", alert["description"]),
        },
        "metrics": list(candidate["metrics"]),
        "scraped_by_prometheus": all(PROMETHEUS in seen[m] for m in candidate["metrics"]),
    }


def _choose(
    alert: dict[str, Any], fault: str, seen: dict[str, list[str]], machine: dict
) -> tuple[list[dict[str, Any]], str | None]:
    """The rules of one alert (one per family where `each`), or none and the skip reason."""
    rules, why_not = [], []
    for group in _families(alert):
        usable = []
        for candidate in group:
            blocked = _blocked(candidate, seen, machine)
            if blocked is None:
                usable.append(candidate)
            elif blocked:
                why_not.append(blocked)
        scraped = [c for c in usable if all(PROMETHEUS in seen[m] for m in c["metrics"])]
        if usable:
            rules.append(_rule(alert, (scraped or usable)[0], fault, seen, machine))
    if rules:
        return rules, None
    return [], f"needs {_needs(alert['candidate'])}: " + "; ".join(["not published here", *why_not])


def _scrape_job(rules: list[dict], seen: dict[str, list[str]], machine: dict) -> dict | None:
    """The Prometheus scrape job for the engines whose metrics only they expose."""
    targets: dict[str, set[str]] = {}
    for rule in rules:
        for metric in rule["metrics"]:
            if PROMETHEUS in seen[metric]:
                continue
            for where in seen[metric]:
                name = where.removeprefix("/metrics of ")
                if name in machine["engines"]:
                    kind, url = machine["engines"][name]
                    if url:
                        targets.setdefault(kind, set()).add(urlsplit(url).netloc)
    if not targets:
        return None
    jobs = "".join(
        f"  - job_name: {kind}\n    static_configs:\n      - targets: "
        + "["
        + ", ".join(f'"{t}"' for t in sorted(hosts))
        + "]\n"
        for kind, hosts in sorted(targets.items())
    )
    return {
        "tool": "prometheus",
        "where": "prometheus.yml, under scrape_configs: the rules above read metrics only "
        "these engines expose; until Prometheus scrapes them the rules cannot fire "
        "(llama-server serves /metrics only when started with --metrics)",
        "snippet": "scrape_configs:\n" + jobs,
    }


def _ask_for(missing: list[str]) -> dict[str, str]:
    """evidence's own config: ask Prometheus for what the skipped rules needed."""
    lines = "".join(f'{m.replace(":", "_")} = "{m}"\n' for m in missing)
    return {
        "tool": "evidence",
        "where": "evidence's config.toml: the next bundle asks Prometheus for the metrics the "
        "skipped rules need, and tells published from absent",
        "snippet": "[prometheus.queries]\n" + lines,
    }


def guardrail(con: duckdb.DuckDBPyConnection, bundle_id: str, fault: str) -> dict[str, Any]:
    """The rules, the skipped alerts, the settings and the notes that guard `fault` on the
    machine of `bundle_id`. ValueError for a fault id the catalog does not know."""
    faults = _faults()
    if fault not in faults:
        raise ValueError(f"unknown fault {fault!r}; known: {', '.join(faults)}")
    book = catalog()
    machine = _machine(con, bundle_id)
    seen, notes = scan(con, bundle_id)
    rules: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    missing: list[str] = []
    alerts = [a for a in book["alert"] if fault in a["faults"]]
    for alert in alerts:
        chosen, reason = _choose(alert, fault, seen, machine)
        rules += chosen
        if reason:
            skipped.append({"alert": alert["name"], "reason": reason})
            missing += [m for c in alert["candidate"] for m in c["metrics"] if m not in seen]
        elif alert.get("for_fault", {}).get(fault):
            notes.append(
                f"{alert['name']} waits {alert['for_fault'][fault]} for {fault} ({alert['for']} "
                "for the other faults): a long `for` catches a rise that stays, not the bursts"
            )
    settings = [
        {"tool": s["tool"], "where": s["where"], "snippet": s["snippet"].strip("\n") + "\n"}
        for s in book["setting"]
        if fault in s["faults"]
    ]
    for rule in rules:
        for metric in rule["metrics"]:
            if PROMETHEUS not in seen[metric]:
                notes.append(
                    f"{rule['alert']}: {metric} is seen only at {', '.join(seen[metric])}, not "
                    "in Prometheus: the rule will only fire once Prometheus scrapes it"
                )
    job = _scrape_job(rules, seen, machine)
    if job:
        settings.append(job)
    status = machine["prometheus"]
    unasked = sorted(set(missing) - asked(con, bundle_id))
    if unasked and status and status[0] == "ok":
        settings.append(_ask_for(unasked))
        notes.append(
            f"not asked of Prometheus by this bundle, so unknown rather than absent: "
            f"{', '.join(unasked)}"
        )
    if status and status[0] != "ok":
        notes.append(
            f"Prometheus was not read in this bundle ({status[0]}: {status[1]}): only the "
            "engines' own /metrics could show what is published"
        )
    if not alerts:
        notes.append(f"no Prometheus rule guards {fault}: its guard rail is a setting")
    elif not rules:
        notes.append(
            f"no rule for {fault} can name only metrics this machine publishes: "
            "the settings are the guard rail until it publishes them"
        )
    notes.append(f"the catalog's guard rail: {faults[fault]['guard_rail']}")
    return {
        "fault": fault,
        "bundle_id": bundle_id,
        "rules": rules,
        "skipped": skipped,
        "settings": settings,
        "notes": notes,
    }
