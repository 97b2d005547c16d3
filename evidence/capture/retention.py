"""A bounded archive: prune by age and by total size, oldest baselines first, never a
bundle something refers to.

References live in <root>/references.jsonl, one line per bundle and reason: `evidence
keep`, a changelog entry (its incident, the bundle after the change, the healthy
baseline of its recording sheet), and a written report (its bundle and the incident it
is compared with). Besides those, the newest bundle of each host is kept, so a host never
loses its last baseline, and a bundle still being written is never looked at.

Only a real directory holding a sealed manifest is a bundle, and no symlink is followed:
whatever else lies under bundles/ (a link planted to a directory outside the archive, a
folder someone made by hand, a manifest that cannot be read) is not prune's to remove.

A bundle goes by being renamed to a hidden name first (it vanishes at once for readers),
then removed. The archive's database keeps what was ingested from it: prune frees the
raw files, not the history.
"""

import shutil
import stat
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from evidence.archive.clock import iso
from evidence.archive.layout import BUNDLES, sealed
from evidence.capture.bundle import MANIFEST

ROUTINE = ("cron",)  # baselines: the first to go


@dataclass
class Bundle:
    path: Path
    bundle_id: str
    host: str
    started: float
    routine: bool
    size: int

    def describe(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "bundle_id": self.bundle_id,
            "host": self.host,
            "started_at": iso(self.started),
            "baseline": self.routine,
            "bytes": self.size,
        }


def inventory(root: Path) -> list[Bundle]:
    """Every sealed or partial bundle of the archive, oldest first."""
    found = []
    for host in _folders(root / BUNDLES):
        for path in _folders(host):
            bundle = _bundle(host.name, path)
            if bundle is not None:
                found.append(bundle)
    return sorted(found, key=lambda b: b.started)


def _folders(parent: Path) -> list[Path]:
    """The visible real directories in parent; a symlink, even to a directory, is not one."""
    if parent.is_symlink() or not parent.is_dir():
        return []
    return sorted(p for p in parent.iterdir() if not p.name.startswith(".") and _real_dir(p))


def _real_dir(path: Path) -> bool:
    return stat.S_ISDIR(path.lstat().st_mode)


def _bundle(host: str, path: Path) -> Bundle | None:
    """The bundle in path; None if path holds no sealed manifest of its own."""
    manifest_path = path / MANIFEST
    try:
        if not stat.S_ISREG(manifest_path.lstat().st_mode):
            return None
        manifest = orjson.loads(manifest_path.read_bytes())
        if not sealed(manifest):
            return None
        bundle_id, kind = manifest["bundle_id"], manifest["trigger"]["kind"]
        started = datetime.fromisoformat(manifest["started_at"]).timestamp()
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
    return Bundle(path, bundle_id, host, started, kind in ROUTINE, size)


def plan(
    bundles: list[Bundle],
    keep: dict[str, list[str]],
    now: float,
    keep_days: float | None,
    max_bytes: int | None,
) -> tuple[list[Bundle], list[dict[str, Any]]]:
    """What goes, and what stays although a limit asked for it (and why)."""
    newest = {b.host: b for b in bundles}  # bundles are oldest first
    held: list[dict[str, Any]] = []

    def protected(b: Bundle) -> list[str]:
        why = list(keep.get(b.bundle_id, []))
        if newest[b.host] is b:
            why.append(f"the newest bundle of {b.host}")
        return why

    # Oldest first, baselines before incidents at any age.
    order = sorted(bundles, key=lambda b: (not b.routine, b.started))
    gone: list[Bundle] = []
    total = sum(b.size for b in bundles)
    for b in order:
        too_old = keep_days is not None and now - b.started > keep_days * 86400
        too_big = max_bytes is not None and total > max_bytes
        if not (too_old or too_big):
            continue
        why = protected(b)
        if why:
            held.append({**b.describe(), "kept_because": why})
            continue
        gone.append(b)
        total -= b.size
    return gone, held


def remove(bundle: Bundle) -> None:
    hidden = bundle.path.with_name(f".pruning-{bundle.path.name}")
    bundle.path.rename(hidden)
    shutil.rmtree(hidden)
