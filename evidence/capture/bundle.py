"""Writes the files of one bundle: redacted, private, checksummed, and ranked for a full disk.

Invariants:
- Every record passes redact.scrub before it is serialised; nothing else writes bundle files.
  The one exception is the recorder's history, scrubbed by the same function before it
  reached the recorder's ring, and written as it came (write_scrubbed).
- Files are created 0600 with O_EXCL inside the (hidden, 0700) bundle directory.
- Each file has a priority. When the disk fills, a write evicts already-written files of
  lower priority (logs first) to make room, and every eviction or refusal is listed in
  `dropped`, which the manifest carries. The manifest outranks everything. A samples file
  that finds no room keeps its earlier lines and is listed as cut short.
- A failed append is rolled back to the last complete line, so a JSONL file never holds
  half a record written by us.
"""

import errno
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from evidence.capture.redact import scrub

MANIFEST = "manifest.json"
INCOMPLETE = ".incomplete"  # a file a dead collector left half written, kept aside
MANIFEST_PRIORITY = 1000
_FULL = (errno.ENOSPC, errno.EDQUOT)


@dataclass
class _File:
    probe: str
    priority: int
    size: int = 0
    digest: Any = field(default_factory=hashlib.sha256)


class BundleWriter:
    def __init__(self, directory: Path):
        self.dir = directory
        self.files: dict[str, _File] = {}
        self.dropped: list[dict[str, str]] = []
        self._gone: set[str] = set()

    @classmethod
    def adopt(cls, directory: Path, dropped: list[dict[str, str]]) -> "BundleWriter":
        """A writer for a bundle already on disk (a dead capture's): its files as they are."""
        writer = cls(directory)
        writer.dropped = list(dropped)
        for path in sorted(directory.iterdir()):
            if path.name == MANIFEST or path.name.startswith(".") or path.name.endswith(INCOMPLETE):
                continue
            data = path.read_bytes()
            entry = writer.files[path.name] = _File(path.name.split(".")[0], 0, len(data))
            entry.digest.update(data)
        return writer

    def write_json(self, name: str, record: Any, probe: str, priority: int) -> bool:
        """Write one whole JSON file. False if the disk could not hold it."""
        return self._put(name, orjson.dumps(scrub(record)), probe, priority)

    def append_jsonl(self, name: str, record: Any, probe: str, priority: int) -> bool:
        """Append one record as a JSON line. False if the file was dropped for space."""
        return self._put(name, orjson.dumps(scrub(record)) + b"\n", probe, priority)

    def write_scrubbed(self, name: str, data: bytes, probe: str, priority: int) -> bool:
        """Write one whole file of bytes already scrubbed at their source. False if the disk
        could not hold it."""
        return self._put(name, data, probe, priority)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Replace manifest.json atomically, evicting anything else if the disk is full.

        The inventory (files, dropped, each probe's files) is taken from what is on disk
        at each attempt, so a manifest never lists a file its own write evicted.
        """
        tmp = self.dir / f".{MANIFEST}.tmp"
        while True:
            self._inventory(manifest)
            data = orjson.dumps(scrub(manifest), option=orjson.OPT_INDENT_2)
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
                try:
                    _write_all(fd, data)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(tmp, self.dir / MANIFEST)
                return
            except OSError as exc:
                tmp.unlink(missing_ok=True)
                if exc.errno not in _FULL or not self._evict_below(MANIFEST_PRIORITY, MANIFEST):
                    raise

    def _inventory(self, manifest: dict[str, Any]) -> None:
        manifest["files"] = self.table()
        manifest["dropped"] = list(self.dropped)
        for entry in manifest.get("probes", {}).values():
            entry["files"] = [f for f in entry.get("files", []) if f in self.files]
        if self.dropped and manifest.get("complete"):
            manifest["complete"] = False
            manifest["partial_reason"] = "the disk filled; some evidence was dropped (see dropped)"

    def table(self) -> list[dict[str, Any]]:
        """The files present, for the manifest: name, probe, bytes, sha256."""
        return [
            {"name": name, "probe": f.probe, "bytes": f.size, "sha256": f.digest.hexdigest()}
            for name, f in sorted(self.files.items())
        ]

    def sync(self) -> None:
        """Flush every file and the directory to stable storage before the seal."""
        for name in self.files:
            fd = os.open(self.dir / name, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(self.dir)

    def _put(self, name: str, data: bytes, probe: str, priority: int) -> bool:
        if name in self._gone:
            return False
        entry = self.files.get(name)
        while True:
            try:
                self._write(name, data, entry is not None)
                break
            except OSError as exc:
                if exc.errno not in _FULL:
                    raise
                if not self._evict_below(priority, name):
                    self._refuse(name, len(data), probe)
                    return False
        if entry is None:
            entry = self.files[name] = _File(probe, priority)
        entry.size += len(data)
        entry.digest.update(data)
        return True

    def _write(self, name: str, data: bytes, append: bool) -> None:
        path = self.dir / name
        flags = os.O_WRONLY | os.O_CLOEXEC | (os.O_APPEND if append else os.O_CREAT | os.O_EXCL)
        fd = os.open(path, flags, 0o600)
        start = os.lseek(fd, 0, os.SEEK_END)
        try:
            _write_all(fd, data)
        except OSError:
            # Roll back what landed: a new file goes, an append returns to its last line.
            if append:
                os.ftruncate(fd, start)
            else:
                path.unlink(missing_ok=True)
            raise
        finally:
            os.close(fd)

    def _evict_below(self, priority: int, for_name: str) -> bool:
        """Remove the least important written file ranked below priority; False if none."""
        victims = [
            (f.priority, -f.size, n)
            for n, f in self.files.items()
            if f.priority < priority and n != for_name
        ]
        if not victims:
            return False
        _, _, victim = min(victims)
        (self.dir / victim).unlink(missing_ok=True)
        self._drop(victim, f"disk full; removed to make room for {for_name}")
        return True

    def _refuse(self, name: str, needed: int, probe: str) -> None:
        """No room for a write even after evictions. A samples file keeps the lines it has
        (they are still evidence, and still in the inventory) and takes no more."""
        why = f"disk full; no room even after dropping less important files (needed {needed} bytes)"
        entry = self.files.get(name)
        if entry is None:
            self._drop(name, why, probe)
            return
        self._gone.add(name)
        self.dropped.append(
            {
                "file": name,
                "probe": entry.probe,
                "reason": f"{why}; cut short at {entry.size} bytes",
            }
        )

    def _drop(self, name: str, reason: str, probe: str | None = None) -> None:
        entry = self.files.pop(name, None)
        self._gone.add(name)
        self.dropped.append(
            {"file": name, "probe": entry.probe if entry else str(probe), "reason": reason}
        )


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
