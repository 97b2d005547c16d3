"""Bundles into the archive's DuckDB file, each exactly once; broken ones quarantined.

Invariants:
- A bundle is never modified, moved or deleted. A broken one is listed in
  <archive>/quarantine.jsonl with its reason and left where it is; it is listed again
  only if its reason changes (a later ingest does not repeat itself).
- Ingesting the same bundle twice changes nothing: a bundle_id already present is skipped.
- One writer at a time (an exclusive lock on <archive>/.ingest.lock, waited for a bounded
  time). Bundles are committed in transactions of whole bundles, so a reader never sees
  half of one. A batch that fails to load is retried bundle by bundle, so one bundle the
  database refuses is quarantined and the others still go in.
- One bad bundle never stops the rest.
- The database and its WAL are private (0600) whatever the umask: they hold command lines.
- A damaged database is never deleted: a rebuild re-ingests the bundles into a new file and
  keeps the old one beside it.
"""

import contextlib
import errno
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import orjson

from evidence.analyze import load, validate
from evidence.analyze.ddl import migrate
from evidence.archive.clock import iso, stamp
from evidence.archive.layout import DATABASE, private_files
from evidence.archive.lock import INGEST_LOCK, Busy, CaptureLock

QUARANTINE = "quarantine.jsonl"
BATCH = 250  # bundles per transaction; their series are not held in memory


class Unwritable(Exception):
    """The archive's database cannot be written (a full or read-only disk)."""


# What makes the database refuse one bundle, where the others still go in: a value DuckDB
# rejects, or a time no calendar holds (an overflow in converting it).
REFUSED = (duckdb.Error, ValueError, OverflowError, OSError)


# How DuckDB words a disk that will not take its writes, whatever the exception's class
# (a failed WAL write surfaces as a fatal or transaction error too).
DISK_ERRORS = ("No space left on device", "Read-only file system", "Disk quota exceeded")


# How DuckDB words a database file it cannot trust, at open or at the first read of a block.
DAMAGE = (
    "Corrupt database file",
    "not a valid DuckDB database file",
    "Could not read enough bytes",
    "Serialization Error",
)


class Locked(Exception):
    """Another ingest holds the archive."""


def damaged(exc: BaseException) -> bool:
    """Whether a DuckDB error says the database file itself is broken."""
    return isinstance(exc, duckdb.Error) and any(m in str(exc) for m in DAMAGE)


@dataclass
class Summary:
    ingested: list[str] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)
    present: int = 0
    quarantined: list[dict[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ingested": len(self.ingested),
            "partial": len(self.partial),
            "already_present": self.present,
            "quarantined": self.quarantined,
            "bundle_ids": self.ingested,
        }

    def line(self) -> str:
        text = (
            f"ingested {len(self.ingested)} bundle(s)"
            + (f" ({len(self.partial)} partial)" if self.partial else "")
            + f", {self.present} already present, {len(self.quarantined)} quarantined"
        )
        reasons = "; ".join(f"{q['path']}: {q['reason']}" for q in self.quarantined[:3])
        more = f" (+{len(self.quarantined) - 3} more)" if len(self.quarantined) > 3 else ""
        return text + (f": {reasons}{more}" if reasons else "")


def connect(root: Path, read_only: bool = False, name: str = DATABASE) -> duckdb.DuckDBPyConnection:
    """The archive's database, in UTC; migrated to the latest schema when writable."""
    con = duckdb.connect(str(root / name), read_only=read_only)
    con.execute("SET TimeZone = 'UTC'")
    if not read_only:
        migrate(con)
    return con


def candidates(root: Path, paths: Iterable[Path]) -> list[Path]:
    """The bundle directories to consider: those given (a bundle, or a tree of bundles), or
    every visible bundle under <archive>/bundles/.

    A directory holding record files but no manifest is still a candidate, so that it is
    quarantined ("manifest.json is missing") rather than silently passed over. Hidden
    directories are captures still writing, not ours to read.
    """
    found: list[Path] = []

    def walk(directory: Path) -> None:
        if directory.name.startswith(".") and directory != start:
            return
        try:
            entries = list(directory.iterdir())
        except OSError:
            found.append(directory)  # unreadable: let the check say so
            return
        if any(
            e.name == validate.MANIFEST or e.suffix in (".json", ".jsonl")
            for e in entries
            if not e.is_dir()
        ):
            found.append(directory)
            return
        for entry in sorted(entries):
            if entry.is_dir() and not entry.is_symlink():
                walk(entry)

    for start in list(paths) or [root / "bundles"]:
        if start.is_dir() and not start.is_symlink():
            walk(start)
        elif start.exists():
            found.append(start)
    return found


def ingest(
    root: Path,
    paths: Iterable[Path] = (),
    wait_s: float = 30.0,
    progress: Callable[[int, int], None] | None = None,
) -> Summary:
    with private_files(), _locked(root, wait_s):
        con = _open(root, DATABASE)
        try:
            return _ingest(con, root, candidates(root, paths), progress)
        finally:
            con.close()


def rebuild(
    root: Path,
    paths: Iterable[Path] = (),
    wait_s: float = 30.0,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Summary, Path | None]:
    """Ingest every bundle into a new database file that then takes the archive's place.

    Returns the summary and where the old file was kept (None if there was none). The old
    file is renamed, never deleted: it may hold bundles pruned from disk since.
    """
    fresh = f"{DATABASE}.rebuilding"
    with private_files(), _locked(root, wait_s):
        for leftover in (root / fresh, root / f"{fresh}.wal"):
            leftover.unlink(missing_ok=True)  # a rebuild that died half way: ours to redo
        con = _open(root, fresh)
        try:
            summary = _ingest(con, root, candidates(root, paths), progress)
        finally:
            con.close()
        old = root / DATABASE
        kept = root / f"{DATABASE}.before-rebuild-{stamp(time.time())}"
        if old.exists():
            os.rename(old, kept)
            wal = old.with_name(f"{DATABASE}.wal")
            if wal.exists():
                os.rename(wal, kept.with_name(f"{kept.name}.wal"))
        os.rename(root / fresh, old)
        return summary, kept if kept.exists() else None


@contextlib.contextmanager
def _locked(root: Path, wait_s: float) -> Iterator[None]:
    """The archive's one writer: this process, for the block."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = CaptureLock(root, INGEST_LOCK)
    try:
        lock.acquire(wait_s)
    except Busy:
        raise Locked(f"another ingest is writing {root / DATABASE}") from None
    try:
        yield
    finally:
        lock.release()


def _open(root: Path, name: str) -> duckdb.DuckDBPyConnection:
    """A writable connection; a disk that cannot hold even a new database is Unwritable."""
    new = not (root / name).exists()
    try:
        return connect(root, name=name)
    except duckdb.Error as exc:
        if new:  # what the failed creation left holds nothing, and would read as damaged
            for path in (root / name, root / f"{name}.wal"):
                path.unlink(missing_ok=True)
        if any(m in str(exc) for m in DISK_ERRORS):
            raise Unwritable(str(exc).splitlines()[0]) from None
        raise


def _ingest(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    bundles: list[Path],
    progress: Callable[[int, int], None] | None,
) -> Summary:
    summary = Summary()
    known = {row[0] for row in con.execute("SELECT bundle_id FROM bundles").fetchall()}
    quarantined = _quarantined(root)
    batch: list[load.Loaded] = []
    for i, path in enumerate(bundles, start=1):
        try:
            manifest, sha, records, unknown = validate.check(path)
        except validate.Invalid as exc:
            _quarantine(root, summary, quarantined, path, str(exc))
        except OSError as exc:
            _quarantine(root, summary, quarantined, path, f"unreadable: {exc.strerror}")
        else:
            if manifest["bundle_id"] in known:
                summary.present += 1
            else:
                known.add(manifest["bundle_id"])
                kept = {k: v for k, v in records.items() if k not in load.SQL_FILES}
                files = frozenset(records)
                batch.append(load.Loaded(path, manifest, sha, kept, files, tuple(unknown)))
        if len(batch) >= BATCH:
            _commit(con, root, summary, quarantined, batch)
            batch = []
        if progress:
            progress(i, len(bundles))
    if batch:
        _commit(con, root, summary, quarantined, batch)
    return summary


def _commit(
    con: duckdb.DuckDBPyConnection,
    root: Path,
    summary: Summary,
    quarantined: dict[str, str],
    batch: list[load.Loaded],
) -> None:
    now = iso(time.time())
    try:
        _transaction(con, lambda: load.load(con, batch, now))
        done = batch
    except REFUSED:
        done = []
        for bundle in batch:  # find the one the database refuses; keep the others
            try:
                _transaction(con, lambda b=bundle: load.load(con, [b], now))
                done.append(bundle)
            except REFUSED as exc:
                _quarantine(
                    root,
                    summary,
                    quarantined,
                    bundle.path,
                    f"the archive refused it: {str(exc).splitlines()[0]}",
                )
    for bundle in done:
        summary.ingested.append(bundle.bundle_id)
        if not bundle.manifest["complete"]:
            summary.partial.append(bundle.bundle_id)


def _transaction(con: duckdb.DuckDBPyConnection, work: Callable[[], None]) -> None:
    con.execute("BEGIN TRANSACTION")
    try:
        work()
        con.execute("COMMIT")
    except duckdb.Error as exc:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        if any(m in str(exc) for m in DISK_ERRORS):
            # The database's own disk, not the bundle: stop, and quarantine nothing.
            raise Unwritable(str(exc).splitlines()[0]) from None
        raise
    except OSError as exc:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
            raise Unwritable(f"{exc.filename or 'the archive'}: {exc.strerror}") from None
        raise
    except BaseException:
        # A failed COMMIT has already ended the transaction: the error that matters is the
        # one that got here, not ROLLBACK's complaint that nothing is open.
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise


def _quarantined(root: Path) -> dict[str, str]:
    """What quarantine.jsonl already says: path -> its latest reason."""
    found: dict[str, str] = {}
    path = root / QUARANTINE
    if path.exists():
        for line in path.read_bytes().splitlines():
            try:
                entry = orjson.loads(line)
                found[entry["path"]] = entry["reason"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                continue
    return found


def _quarantine(
    root: Path, summary: Summary, known: dict[str, str], path: Path, reason: str
) -> None:
    key = load.path_text(path.resolve())
    entry = {"path": key, "reason": reason, "at": iso(time.time())}
    summary.quarantined.append({"path": key, "reason": reason})
    if known.get(key) == reason:
        return
    known[key] = reason
    fd = os.open(root / QUARANTINE, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, orjson.dumps(entry) + b"\n")
    finally:
        os.close(fd)
