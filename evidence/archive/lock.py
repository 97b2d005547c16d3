"""The locks that keep two writers of one archive from trampling each other.

One capture at a time per archive, by an exclusive flock on <root>/.capture.lock; ingest
and prune share <root>/.ingest.lock, so a bundle is not read while it is removed.
"""

import contextlib
import errno
import fcntl
import os
import time
from pathlib import Path

from evidence.archive.layout import ArchiveError

LOCK_NAME = ".capture.lock"
INGEST_LOCK = ".ingest.lock"


class Busy(Exception):
    """Another capture holds the archive lock."""


class CaptureLock:
    """An exclusive, bounded-wait lock on the archive (by default the captures'; ingest and
    prune share another). Released when the process dies."""

    def __init__(self, root: Path, name: str = LOCK_NAME):
        self.path = root / name
        self.fd: int | None = None

    def acquire(self, wait_s: float) -> None:
        try:
            fd = self._open()
        except OSError as exc:
            raise ArchiveError(f"{self.path}: cannot open lock: {exc.strerror}") from None
        if fd is None:
            return
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                    os.close(fd)
                    raise ArchiveError(f"{self.path}: cannot lock: {exc.strerror}") from None
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
                    os.close(fd)
                    raise Busy(holder or "another capture") from None
                time.sleep(0.1)
        self.fd = fd
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        try:  # a courtesy for the next capture's message; a full disk must not cost the capture
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} since {since}".encode(), 0)
        except OSError:
            pass

    def _open(self) -> int | None:
        """The lock file; None on a read-only file system that has none, where no writer can
        run and there is nothing to exclude (a read there still gets its one clear error)."""
        # O_NOFOLLOW: a symlink planted at the lock's name must not be truncated through.
        flags = os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            return os.open(self.path, flags | os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            if exc.errno != errno.EROFS:
                raise
        try:
            return os.open(self.path, flags | os.O_RDONLY)  # flock needs no write access
        except FileNotFoundError:
            return None

    def release(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, 0)
            os.close(self.fd)
            self.fd = None
