"""The manifest: a bundle's table of contents, and the repair of one whose collector died.

Invariants:
- manifest.json exists from the first moment of a bundle (provisional, complete=false)
  and is replaced atomically as probes finish, so a killed capture still says what it
  had done.
- Recovery never deletes evidence: it trims a half-written JSONL line (the one thing
  the collector itself left half done), renames an unparseable file aside, marks the
  bundle partial and makes it visible.
"""

import os
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

from evidence import __version__
from evidence.archive.clock import iso, stamp
from evidence.archive.layout import partial_path
from evidence.capture.bundle import INCOMPLETE, MANIFEST, BundleWriter, fsync_dir
from evidence.schemas import SCHEMA_VERSION

TRIGGER_KINDS = ("manual", "cron", "healthcheck", "alert", "systemd", "hook", "recorder")


def new_manifest(
    started: float,
    window_s: float,
    trigger: dict[str, Any],
    hostname: str,
    config_source: str | None,
) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "bundle_id": f"{stamp(started)}-{uuid.uuid4().hex[:12]}",
        "host": {"hostname": hostname, "boot_id": None, "kernel": None, "uptime_s": None},
        "trigger": trigger,
        "collector": {"version": __version__, "pid": os.getpid()},
        "config_source": config_source,
        "started_at": iso(started),
        "finished_at": None,
        "window_s": window_s,
        "complete": False,
        "partial_reason": "capture in progress",
        "probes": {},
        "files": [],
        "dropped": [],
    }


def recover(leftover: Path, expected_probes: list[str]) -> Path:
    """Turn the hidden directory of a capture that died into a visible partial bundle."""
    notes = []
    try:
        manifest = orjson.loads((leftover / MANIFEST).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        manifest = None
    if not isinstance(manifest, dict):
        started = leftover.stat().st_mtime
        manifest = new_manifest(
            started,
            0,
            {"kind": "manual", "name": None, "detail": None, "fired_at": iso(started)},
            os.uname().nodename,
            None,
        )
        manifest["collector"]["pid"] = None  # unknown: not the pid of this recovering process
        notes.append("its manifest was missing and has been rebuilt from the files present")
    dropped = manifest.setdefault("dropped", [])
    for path in sorted(leftover.iterdir()):
        if (
            path.name != MANIFEST
            and not path.name.startswith(".")
            and not path.name.endswith(INCOMPLETE)
        ):
            _repair(path, dropped)
    writer = BundleWriter.adopt(leftover, dropped)
    for name in expected_probes:
        manifest["probes"].setdefault(
            name,
            {
                "status": "error",
                "reason": "the collector stopped before this probe finished",
                "duration_ms": None,
            },
        )
    for name, entry in manifest["probes"].items():
        # Samples files join a probe's list only at the end of the watch: list by name.
        entry["files"] = [f for f, e in writer.files.items() if e.probe == name]
    manifest["complete"] = False
    pid = manifest.get("collector", {}).get("pid")
    who = f"the collector (pid {pid})" if pid else "the collector"
    manifest["partial_reason"] = "; ".join(
        [f"{who} stopped before sealing this bundle; kept what it had written", *notes]
    )
    manifest["recovered_at"] = iso(time.time())
    writer.write_manifest(manifest)
    target = partial_path(leftover)
    os.rename(leftover, target)
    fsync_dir(target.parent)
    return target


def _repair(path: Path, dropped: list[dict[str, str]]) -> None:
    """Make a file the dead collector left readable, or set it aside if it cannot be."""
    data = path.read_bytes()
    if path.suffix == ".jsonl":
        end = data.rfind(b"\n") + 1
        if end < len(data):
            with open(path, "r+b") as f:
                f.truncate(end)
            dropped.append(
                {
                    "file": path.name,
                    "probe": path.name.split(".")[0],
                    "reason": f"trimmed {len(data) - end} bytes of a record the "
                    "collector was writing when it stopped",
                }
            )
        return
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        os.rename(path, path.with_name(path.name + INCOMPLETE))
        dropped.append(
            {
                "file": path.name,
                "probe": path.name.split(".")[0],
                "reason": f"half written when the collector stopped; kept as "
                f"{path.name}{INCOMPLETE}",
            }
        )
