"""What the analyst says about itself to Prometheus: the last ingest, and each host's last
verdict as an info metric (archive.exposition writes and serves them).

A host's verdict is that of its newest incident (any trigger but the ten-minute cron
baseline): a baseline sealed after the failure must not paint the panel "no-fault" over
the incident an operator is looking for. A host with only baselines shows its newest.
"""

import time
from pathlib import Path

import duckdb

from evidence.analyze.incident import ROUTINE_TRIGGERS, profile
from evidence.analyze.ingest import Summary
from evidence.archive.exposition import Family, publish


def _latest(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """(host, bundle_id) of each host's newest incident, else its newest bundle."""
    routine = ", ".join(f"'{kind}'" for kind in ROUTINE_TRIGGERS)
    return con.execute(
        f"""SELECT host, arg_max(bundle_id, (trigger_kind NOT IN ({routine}), started_at))
            FROM bundles GROUP BY host ORDER BY host"""
    ).fetchall()


def verdicts(con: duckdb.DuckDBPyConnection, root: Path, textfile: str | None) -> list[str]:
    """The verdict part: rewritten by ingest and classify."""
    info = Family(
        "evidence_verdict_info",
        "gauge",
        "The verdict on each host's newest incident (its newest bundle where it has only "
        "baselines): always 1, the verdict in the labels.",
    )
    when = Family(
        "evidence_verdict_timestamp_seconds",
        "gauge",
        "When the bundle behind each host's verdict was captured (Unix time).",
    )
    for host, bundle_id in _latest(con):
        incident = profile(con, bundle_id)
        info.add(1.0, host=host, bundle=bundle_id, trigger=incident.trigger, fault=incident.verdict)
        when.add(incident.started_at.timestamp(), host=host)
    return publish(root, "verdict", [info, when], textfile)


def ingested(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    summary: Summary,
    took_s: float,
    textfile: str | None,
) -> list[str]:
    """The ingest part: what the last run brought in, and what the database holds."""
    last = Family(
        "evidence_ingest_last_bundles",
        "gauge",
        "Bundles the last ingest brought in, found already present, or quarantined.",
    )
    last.add(len(summary.ingested), result="ingested")
    last.add(summary.present, result="present")
    last.add(len(summary.quarantined), result="quarantined")
    (count,) = con.execute("SELECT count(*) FROM bundles").fetchone()
    families = [
        last,
        Family(
            "evidence_ingest_last_run_timestamp_seconds",
            "gauge",
            "When the last ingest ended (Unix time).",
        ).add(time.time()),
        Family("evidence_ingest_duration_seconds", "gauge", "How long the last ingest took.").add(
            took_s
        ),
        Family("evidence_analyst_bundles", "gauge", "Bundles the archive's database holds.").add(
            count
        ),
    ]
    return publish(root, "ingest", families, textfile)
