"""Each source the recorder samples: one of the collector's probes, on its own worker
thread and at its own pace, with what an operator asks of it (is it current?).

A probe's first read (its freeze) sets it up (the NVML session, the engines found); then
its sample runs every interval. A source this box did not have at the start (a GPU
driver loaded later, an engine started after the recorder at boot) is looked for again
every RETRY_S; one that discovers (the engines) looks again every `rediscover_s` for
what started since. A call that has not returned after STALE_AFTER intervals
makes the source stale, said so in every capture, while the others go on: the worker is
the only thing waiting on it, and nothing is queued behind it.
"""

import time
from typing import Any

from evidence.archive.clock import iso
from evidence.capture.probes import Probe, Reading
from evidence.capture.runner import Call, Worker

STALE_AFTER = 3  # intervals without an answer
STALE_MIN_S = 5.0
RETRY_S = 60.0


class Source:
    def __init__(self, probe: Probe, interval_s: float, rediscover_s: float | None = None):
        self.probe, self.interval_s, self.rediscover_s = probe, interval_s, rediscover_s
        self.name = probe.name
        self.worker = Worker(f"record-{probe.name}")
        self.status, self.reason = "starting", "its first read has not returned"
        self.last_at: float | None = None  # the time of the last reading kept
        self._ready = False
        self._due = 0.0
        self._setup_at = time.monotonic() + (rediscover_s or RETRY_S)  # the next freeze
        self._setting_up = True
        self._call: Call | None = self._start(probe.freeze, probe.timeout_s)

    def _start(self, fn: Any, timeout_s: float) -> Call:
        self.probe.deadline = time.monotonic() + timeout_s
        return self.worker.submit(fn)

    @property
    def stale_after_s(self) -> float:
        return max(STALE_MIN_S, STALE_AFTER * self.interval_s)

    def tick(self, now: float) -> tuple[float, dict[str, Any], bool] | None:
        """Advance the source: a finished read as (its time, its record, whether it is a
        sample), else None. A freeze's record (the engines' discovery) is not a sample
        line, but what it found is news all the same (an engine gone)."""
        got = None
        call = self._call
        if call is not None:
            if not call.done:
                if call.elapsed > self.stale_after_s and self.status != "stale":
                    self.status = "stale"
                    self.reason = f"no answer since {iso(call.at)}; the other sources go on"
                return None
            self._call = None
            got = self._finished(call)
        again = self.rediscover_s if self._ready else RETRY_S
        if again is not None and now >= self._setup_at:
            self._setup_at = now + again
            self._setting_up = True
            self._call = self._start(self.probe.freeze, self.probe.timeout_s)
        elif self._ready and now >= self._due:
            # On the schedule, not after the last answer: a slow read does not slow the pace.
            self._due = max(self._due + self.interval_s, now)
            self._call = self._start(self.probe.sample, self.probe.sample_timeout_s)
        return got

    def _finished(self, call: Call) -> tuple[float, dict[str, Any], bool] | None:
        kind, value = call.outcome()
        if self._setting_up:
            self._setting_up = False
            reading = (
                value if kind == "ok" else Reading("error", f"{type(value).__name__}: {value}")
            )
            self._ready = reading.status == "ok"
            found = None if reading.record is None else (call.at, reading.record, False)
            if not self._ready:
                # Not on this box now (no GPU, no engine answering): looked for again later.
                self.status, self.reason = reading.status, reading.reason
                self._setup_at = time.monotonic() + RETRY_S
                return found
            self.status, self.reason = "ok", None
            return found
        if kind == "error":
            self.status, self.reason = "error", f"{type(value).__name__}: {value}"
            return None
        self.status, self.reason = "ok", None
        if value is None:
            return None
        self.last_at = call.at
        return call.at, value, True

    def state(self) -> dict[str, Any]:
        """What a capture is told about this source."""
        return {
            "status": self.status,
            "reason": self.reason,
            "interval_s": self.interval_s,
            "last": iso(self.last_at) if self.last_at else None,
        }

    def close(self) -> None:
        if self._ready and self._call is None:
            self.worker.submit(self.probe.close).wait(1.0)
        self.worker.stop()
