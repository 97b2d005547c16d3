"""What the resident recorder says about itself to Prometheus (archive.exposition writes
it): that it runs, which sources answer, how far back its ring reaches, what it captured.

Written every METRICS_EVERY_S and once more on a clean stop with up 0. A recorder that
died without a word leaves its last file behind: node-exporter's
node_textfile_mtime_seconds{file="evidence_recorder.prom"} then stops moving, which is
what an alert on a dead recorder reads.
"""

import time
from pathlib import Path
from typing import Any

from evidence.archive.exposition import Family, publish

METRICS_EVERY_S = 30.0


def recorded(
    root: Path,
    textfile: str | None,
    up: bool,
    sources: dict[str, dict[str, Any]],
    readings: dict[str, int],
    captures: dict[str, int],
    oldest: float | None,
) -> list[str]:
    """The recorder part. `sources`: each source's state (status ok when it answers)."""
    source_up = Family(
        "evidence_recorder_source_up",
        "gauge",
        "1 while the recorder's source answers in time; 0 when stale, missing or failing.",
    ).each("source", {name: float(s["status"] == "ok") for name, s in sources.items()})
    kept = Family(
        "evidence_recorder_readings_total",
        "counter",
        "Readings the recorder kept in its ring since it started, by source.",
    ).each("source", readings)
    started = Family(
        "evidence_recorder_captures_total",
        "counter",
        "Captures the recorder started by itself since it started, by reason.",
    ).each("reason", captures)
    reach = Family(
        "evidence_recorder_history_seconds",
        "gauge",
        "How far back the recorder's ring reaches: what a capture now would take with it.",
    ).add(0.0 if oldest is None else max(0.0, time.time() - oldest))
    running = Family(
        "evidence_recorder_up", "gauge", "1 while the resident recorder runs; 0 after it stopped."
    ).add(1.0 if up else 0.0)
    return publish(root, "recorder", [running, source_up, kept, started, reach], textfile)
