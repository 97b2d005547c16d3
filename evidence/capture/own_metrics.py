"""What the collector says about itself to Prometheus: the health checks, the captures,
the triggers refused, the archive (archive.exposition writes and serves them).

A check's result is a gauge of its last run. Captures are counted by trigger and
outcome across processes: the counts and the last capture of each trigger kind live in
<archive>/metrics/captures.json, changed under its own lock, so a capture, a check's
capture and a refused alert arriving together each keep their count.

Outcomes: complete, incomplete (sealed, some evidence dropped or not read in time),
busy (another capture held the archive), failed (the archive could not be written),
stopped (SIGTERM; a -partial bundle keeps what was read).
"""

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evidence.archive.exposition import METRICS, Family, publish
from evidence.archive.state import LockedState
from evidence.capture.retention import inventory

OUTCOMES = ("complete", "incomplete", "busy", "failed", "stopped")
STATE = "captures.json"


def _counted(root: Path, change: Callable[[dict[str, Any]], None]) -> list[Family] | str:
    """The capture part's families after `change` to the shared counts, or why the counts
    could not be kept (an unwritable archive: the capture says so already)."""
    try:
        (root / METRICS).mkdir(mode=0o700, exist_ok=True)
        with LockedState(root / METRICS / STATE) as state:
            change(state)
            return _capture_families(state)
    except OSError as exc:
        return f"{root / METRICS / STATE}: cannot count the capture: {exc.strerror}"


def checked(root: Path, results: list[dict[str, Any]], textfile: str | None) -> list[str]:
    """The part `check` writes after every run: each check's up and duration."""
    up = Family("evidence_check_up", "gauge", "1 when the health check passed on its last run.")
    took = Family(
        "evidence_check_duration_seconds", "gauge", "How long the health check's last run took."
    )
    for r in results:
        up.add(1.0 if r["ok"] else 0.0, check=r["name"], kind=r["kind"])
        took.add(r["elapsed_ms"] / 1000, check=r["name"], kind=r["kind"])
    ran = Family(
        "evidence_check_last_run_timestamp_seconds",
        "gauge",
        "When `evidence check` last ran its checks (Unix time).",
    ).add(time.time())
    return publish(root, "check", [up, took, ran], textfile)


class Attempt:
    """One capture attempt, timed from its creation; `done` counts it and rewrites the
    capture and archive parts."""

    def __init__(self, root: Path, trigger: str, textfile: str | None):
        self.root, self.trigger, self.textfile = root, trigger, textfile
        self.started = time.monotonic()

    def done(self, outcome: str, probes: dict[str, Any] | None = None) -> list[str]:
        """`probes`: the sealed manifest's probes (none when nothing was sealed)."""
        took = time.monotonic() - self.started

        def change(state: dict[str, Any]) -> None:
            key = f"{self.trigger}|{outcome}"
            state.setdefault("total", {})[key] = state.get("total", {}).get(key, 0) + 1
            if outcome in ("complete", "incomplete"):
                state.setdefault("sealed", {})[self.trigger] = time.time()
            last = state.setdefault("last", {"probes": {}})
            last.update(outcome=outcome, duration_s=took)
            if probes:  # an attempt that sealed nothing leaves the last bundle's probes
                last["probes"] = {name: p["status"] for name, p in probes.items()}

        counted = _publish_counts(self.root, change, self.textfile)
        return counted + archived(self.root, self.textfile)


def refused(root: Path, trigger: str, textfile: str | None, count: int = 1) -> list[str]:
    """Triggers turned away without a capture (rate limit or cool-down): counted."""

    def change(state: dict[str, Any]) -> None:
        counts = state.setdefault("refused", {})
        counts[trigger] = counts.get(trigger, 0) + count

    return _publish_counts(root, change, textfile)


def _publish_counts(
    root: Path, change: Callable[[dict[str, Any]], None], textfile: str | None
) -> list[str]:
    families = _counted(root, change)
    if isinstance(families, str):
        return [families]
    return publish(root, "capture", families, textfile)


def _capture_families(state: dict[str, Any]) -> list[Family]:
    total = Family(
        "evidence_captures_total",
        "counter",
        "Capture attempts by trigger kind and outcome (complete, incomplete, busy, failed, "
        "stopped).",
    )
    for key, count in sorted(state.get("total", {}).items()):
        trigger, outcome = key.split("|")
        total.add(count, trigger=trigger, outcome=outcome)
    sealed = Family(
        "evidence_capture_last_timestamp_seconds",
        "gauge",
        "When the last bundle of each trigger kind was sealed (Unix time).",
    ).each("trigger", state.get("sealed", {}))
    refused = Family(
        "evidence_triggers_refused_total",
        "counter",
        "Triggers turned away without a capture: within capture.min_interval of the same "
        "trigger's last capture, or within serve's cool-down for the same alert.",
    ).each("trigger", state.get("refused", {}))
    families = [total, sealed, refused]
    last = state.get("last")
    if last and "outcome" in last:
        families.append(
            Family(
                "evidence_capture_duration_seconds",
                "gauge",
                "How long the last capture attempt took, start to seal.",
            ).add(last["duration_s"])
        )
        outcome = Family(
            "evidence_capture_last_outcome",
            "gauge",
            "The outcome of the last capture attempt: 1 on its outcome, 0 on the others.",
        )
        for name in OUTCOMES:
            outcome.add(1.0 if name == last["outcome"] else 0.0, outcome=name)
        probe = Family(
            "evidence_capture_probe_status",
            "gauge",
            "Each probe's status in the last sealed bundle (ok, absent, unsupported, denied, "
            "timeout, error, skipped): 1 on the status it had.",
        )
        for name, status in sorted(last["probes"].items()):
            probe.add(1.0, probe=name, status=status)
        families += [outcome, probe]
    return families


def archived(root: Path, textfile: str | None) -> list[str]:
    """The archive part: bundles per host and their size on disk."""
    bundles = Family(
        "evidence_archive_bundles", "gauge", "Bundles kept in the archive, by the host captured."
    )
    size = Family(
        "evidence_archive_size_bytes", "gauge", "Bytes the archive's bundles take on disk."
    )
    counts: dict[str, float] = {}
    total = 0
    try:
        found = inventory(root)
    except OSError as exc:
        return [f"{root}: cannot count the archive's bundles: {exc.strerror}"]
    for bundle in found:
        counts[bundle.host] = counts.get(bundle.host, 0) + 1
        total += bundle.size
    bundles.each("host", counts)
    size.add(total)
    return publish(root, "archive", [bundles, size], textfile)
