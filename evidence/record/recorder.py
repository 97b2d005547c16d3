"""The recorder's loop: sample every source at its pace into the ring, answer captures,
and start one when the box begins to fail.

Invariants:
- Read-only towards the machine, as the collector: the probes only read; the one thing it
  starts is `evidence capture` (trigger recorder:<reason>), under the capture's own rate
  limit, and never more than one at a time. It signals nothing.
- Everything reaches the ring redacted (the collector's scrub), as it would reach a bundle.
- Bounded: the ring never grows; a hung source stalls only itself (sources.py).
"""

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from evidence.archive.clock import iso
from evidence.archive.layout import private_dir
from evidence.archive.recorder import HISTORY_SUFFIX, RING
from evidence.capture.config import Config
from evidence.capture.probes import Context, ordered
from evidence.capture.redact import scrub
from evidence.record.own_metrics import METRICS_EVERY_S, recorded
from evidence.record.ring import Ring
from evidence.record.sources import Source
from evidence.record.triggers import Triggers

SYNC_EVERY_S = 10.0  # the ring reaches the disk at least this often
TICK_S = 0.1
# vmstat holds some 180 counters; the ring keeps those the analyst and the triggers read
# (swap, reclaim, refaults, compaction, migration, faults, OOM kills), a fifth of the bytes.
VMSTAT_KEPT = (
    "oom_kill",
    "pswp",
    "pgmajfault",
    "pgfault",
    "workingset_",
    "compact_",
    "pgmigrate_",
    "pgscan",
    "pgsteal",
    "allocstall",
    "thp_fault",
)
# How often a source that discovers what to read looks again for what started since.
REDISCOVER_S = {"engines": 300.0}
# The pace each source is sampled at, by the name of its setting.
PACE = {
    "memory": "host_interval_s",
    "vmstat": "host_interval_s",
    "pressure": "host_interval_s",
    "processes": "process_interval_s",
    "gpu": "process_interval_s",
    "engines": "engine_interval_s",
}


def slim(name: str, record: dict[str, Any]) -> dict[str, Any]:
    """What the ring keeps of a source's sample."""
    if name != "vmstat":
        return record
    counters = record.get("counters") or {}
    return {"counters": {k: v for k, v in counters.items() if k.startswith(VMSTAT_KEPT)}}


class Recorder:
    def __init__(
        self,
        config: Config,
        root: Path,
        ring_bytes: int | None = None,
        say: Callable[[str], None] | None = None,
        textfile: str | None = None,
    ):
        self.config, self.root, self.textfile = config, root, textfile
        self.settings = config.recorder
        private_dir(root)
        self.ring = Ring(root / RING, ring_bytes or self.settings.ring_bytes)
        self.lock = threading.Lock()  # the ring, between the loop and the socket's answers
        self.say = say or (lambda text: None)
        self.triggers = Triggers(self.settings)
        self.sources: list[Source] = []
        self.capture: subprocess.Popen[bytes] | None = None
        self.started = time.time()
        self.readings: dict[str, int] = {}
        self.captures: dict[str, int] = {}

    def start(self) -> None:
        ctx = Context(config=self.config, started=time.time(), root=self.root)
        for cls in ordered():
            if cls.name in PACE:
                interval = getattr(self.settings, PACE[cls.name])
                self.sources.append(Source(cls(ctx), interval, REDISCOVER_S.get(cls.name)))

    def run(self, stop: threading.Event, for_s: float | None = None) -> None:
        """Record until stop is set (SIGTERM) or for_s seconds have passed."""
        until = None if for_s is None else time.monotonic() + for_s
        synced = time.monotonic()
        told = synced - METRICS_EVERY_S
        while not stop.is_set() and (until is None or time.monotonic() < until):
            now = time.monotonic()
            for source in self.sources:
                got = source.tick(now)
                if got is not None:
                    self._keep(source.name, *got)
            if now - synced >= SYNC_EVERY_S:
                with self.lock:
                    self.ring.sync()
                synced = now
            if now - told >= METRICS_EVERY_S:
                self._tell(up=True)
                told = now
            self._reap()
            stop.wait(TICK_S)

    def _keep(self, name: str, t: float, record: dict[str, Any], sample: bool) -> None:
        if sample:
            line = orjson.dumps(scrub({"t": iso(t), **slim(name, record)}))
            with self.lock:
                self.ring.append(t, name.encode() + b"\t" + line)
            self.readings[name] = self.readings.get(name, 0) + 1
        reason = getattr(self.triggers, name, lambda t, r: None)(t, record)
        if reason:
            self._capture(reason)

    def _capture(self, reason: str) -> None:
        """Start `evidence capture` for the reason, unless one of ours is still running."""
        if self.capture is not None and self.capture.poll() is None:
            self.say(f"not capturing for {reason}: the capture started before is still running")
            return
        argv = [sys.executable, "-P", "-m", "evidence.cli", "capture", "--quiet"]
        argv += ["--trigger", f"recorder:{reason}", "--archive", str(self.root)]
        if self.config.source:
            argv += ["--config", self.config.source]
        if self.textfile:
            argv += ["--textfile", self.textfile]
        self.say(f"capturing: {reason}")
        self.captures[reason] = self.captures.get(reason, 0) + 1
        self.capture = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)

    def _reap(self) -> None:
        if self.capture is not None and self.capture.poll() is not None:
            code = self.capture.returncode
            if code not in (0, 5, 6):  # sealed, sealed incomplete, refused by the rate limit
                self.say(f"the capture it started exited {code}")
            self.capture = None

    def answer(self, since: float) -> tuple[dict[str, Any], list[tuple[str, bytes]]]:
        """The history from `since` on: the head and one file per source, oldest first."""
        lines: dict[str, list[bytes]] = {}
        first = last = None
        count = damaged = 0
        with self.lock:
            for entry, payload in self.ring.since(since):
                name, tab, line = payload.partition(b"\t")
                if not tab:
                    damaged += 1
                    continue
                lines.setdefault(name.decode(), []).append(line)
                first = entry.t if first is None else min(first, entry.t)
                last = entry.t if last is None else max(last, entry.t)
                count += 1
            oldest = self.ring.index[0].t if self.ring.index else None
            skipped = self.ring.skipped + damaged
        head = {
            "from": iso(first) if first is not None else None,
            "to": iso(last) if last is not None else None,
            "records": count,
            "skipped": skipped,
            "recorder": {
                "pid": os.getpid(),
                "started_at": iso(self.started),
                "ring_bytes": self.ring.size,
                "oldest": iso(oldest) if oldest is not None else None,
            },
            "sources": {s.name: s.state() for s in self.sources},
        }
        files = [(f"{n}{HISTORY_SUFFIX}", b"\n".join(ls) + b"\n") for n, ls in lines.items()]
        return head, files

    def _tell(self, up: bool) -> None:
        with self.lock:
            oldest = self.ring.index[0].t if self.ring.index else None
        sources = {s.name: s.state() for s in self.sources}
        said = recorded(self.root, self.textfile, up, sources, self.readings, self.captures, oldest)
        for problem in said:
            self.say(problem)

    def close(self) -> None:
        self._tell(up=False)
        for source in self.sources:
            source.close()
        with self.lock:
            self.ring.sync()
            self.ring.close()
