"""The recorder's ring: one preallocated file of fixed size, written round and round.

Invariants:
- The file never grows after it is made: a full disk cannot stop the recorder once its
  ring exists (the blocks are allocated up front, not just a sparse size).
- Each record is self-describing and checksummed: MAGIC, payload length, sequence number,
  time, CRC-32 of all three and the payload. Reading never trusts an offset kept from
  before: it scans for MAGIC and keeps every record whose checksum holds.
- A torn write (the recorder killed mid-record) damages only that record: the next scan
  skips it, counts it, and writing resumes after the newest record that holds.
- MAGIC holds the byte 0xFF, which UTF-8 (every payload is JSON text) never contains, so a
  payload cannot be mistaken for the start of a record.
"""

import os
import struct
import zlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"\xffEVR"
# magic, payload length, sequence, time (Unix seconds), CRC-32 of the rest of the header
# and the payload.
_HEAD = struct.Struct("<4sIQdI")
_CRC_PART = struct.Struct("<IQd")  # the header fields the checksum covers
MIN_SIZE = 64 * 1024
_SCAN_CHUNK = 4 * 1024 * 1024


class RingError(Exception):
    """The ring cannot be made or used (no room to allocate it, not a ring file)."""


@dataclass(frozen=True)
class Entry:
    """Where one record lies in the ring; the payload stays on disk until asked for."""

    seq: int
    t: float
    offset: int
    length: int  # of the payload


def _checksum(length: int, seq: int, t: float, payload: bytes) -> int:
    return zlib.crc32(payload, zlib.crc32(_CRC_PART.pack(length, seq, t)))


class Ring:
    """A fixed-size file of records, oldest overwritten first, indexed in memory.

    Not thread-safe: the recorder appends and reads from one thread at a time (its lock).
    """

    def __init__(self, path: Path, size: int):
        if size < MIN_SIZE:
            raise RingError(f"a ring of {size} bytes is too small (at least {MIN_SIZE})")
        self.path, self.size = path, size
        self.skipped = 0  # damaged records found by the last scan
        self.index: deque[Entry] = deque()
        self._fd = self._open(path, size)
        self.seq, self.offset = 0, 0
        self._scan()

    @staticmethod
    def _open(path: Path, size: int) -> int:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise RingError(f"{path}: cannot open the ring: {exc.strerror}") from None
        try:
            have = os.fstat(fd).st_size
            if have not in (0, size):
                # Another size was asked for: the ring is remade, its records lost. Kept
                # rather than resized in place, whose offsets would no longer wrap alike.
                os.ftruncate(fd, 0)
            os.posix_fallocate(fd, 0, size)
        except OSError as exc:
            os.close(fd)
            raise RingError(
                f"{path}: cannot allocate {size} bytes for the ring: {exc.strerror}"
            ) from None
        return fd

    def _scan(self) -> None:
        """Index every record that holds; resume writing after the newest."""
        found: list[Entry] = []
        skipped = 0
        pos = 0
        data = self._read_all()
        while True:
            at = data.find(MAGIC, pos)
            if at < 0 or at + _HEAD.size > len(data):
                break
            _, length, seq, t, crc = _HEAD.unpack_from(data, at)
            start = at + _HEAD.size
            end = start + length
            if end <= len(data) and _checksum(length, seq, t, data[start:end]) == crc:
                found.append(Entry(seq, t, start, length))
                pos = end
            else:
                skipped += 1
                pos = at + 1
        found.sort(key=lambda e: e.seq)
        self.index = deque(found)
        self.skipped = skipped
        if found:
            newest = found[-1]
            self.seq, self.offset = newest.seq, newest.offset + newest.length
        else:
            self.seq, self.offset = 0, 0

    def _read_all(self) -> bytes:
        parts = []
        for start in range(0, self.size, _SCAN_CHUNK):
            parts.append(os.pread(self._fd, min(_SCAN_CHUNK, self.size - start), start))
        return b"".join(parts)

    def append(self, t: float, payload: bytes) -> Entry:
        """Write one record after the newest, wrapping to the start when it does not fit."""
        need = _HEAD.size + len(payload)
        if need > self.size // 4:
            raise RingError(f"a record of {need} bytes is too large for a ring of {self.size}")
        if self.offset + need > self.size:
            # The tail left behind holds the previous lap's last records, the oldest of all:
            # they leave the index now, or the overlap test below would stop at them.
            while self.index and self.index[0].offset >= self.offset:
                self.index.popleft()
            self.offset = 0
        start, end = self.offset, self.offset + need
        # Records this one overwrites leave the index first: the oldest are at its left.
        while self.index and self._overlaps(self.index[0], start, end):
            self.index.popleft()
        self.seq += 1
        head = _HEAD.pack(
            MAGIC, len(payload), self.seq, t, _checksum(len(payload), self.seq, t, payload)
        )
        os.pwrite(self._fd, head + payload, start)
        entry = Entry(self.seq, t, start + _HEAD.size, len(payload))
        self.index.append(entry)
        self.offset = end
        return entry

    @staticmethod
    def _overlaps(entry: Entry, start: int, end: int) -> bool:
        first = entry.offset - _HEAD.size
        return first < end and start < entry.offset + entry.length

    def since(self, t: float) -> Iterator[tuple[Entry, bytes]]:
        """Every record from time t on, oldest first, with its payload."""
        for entry in self.index:
            if entry.t >= t:
                yield entry, os.pread(self._fd, entry.length, entry.offset)

    def sync(self) -> None:
        os.fdatasync(self._fd)

    def close(self) -> None:
        os.close(self._fd)
