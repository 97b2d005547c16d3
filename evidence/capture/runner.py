"""The capture timeline: lock, freeze, watch, seal. The runner owns every bound.

Invariants:
- The whole capture ends within window + SEAL_MARGIN_S of its start, whatever a source
  does: each probe call runs in its worker's daemon thread, is abandoned at its timeout
  and recorded as `timeout`; an abandoned call's result is never written.
- Probes run in freeze order (what vanishes first is read first); the freeze as a
  whole has FREEZE_BUDGET_S, and a probe reached after it is `timeout` with the reason,
  which makes the bundle incomplete. The essential probes (memory, processes, GPU) are
  read whatever start-up cost.
- Each probe has one worker thread, started before the freeze, for all its calls: the
  watch starts no thread. A sampler whose last call is still running misses its tick (a
  counted gap) instead of queueing: a slow source cannot stall the others.
- The bundle is written under a hidden name and renamed into place when sealed.
"""

import contextlib
import os
import queue
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evidence.archive import layout as archive
from evidence.archive.clock import iso, stamp
from evidence.archive.lock import CaptureLock
from evidence.capture.bundle import BundleWriter, fsync_dir
from evidence.capture.config import Config
from evidence.capture.manifest import new_manifest, recover
from evidence.capture.probes import Context, Probe, Reading, ordered
from evidence.capture.procfs import parse_pid_stat

FREEZE_BUDGET_S = 2.4
SEAL_MARGIN_S = 3.0
SAMPLE_GRACE_S = 0.3
SEAL_RESERVE_S = 0.5  # what sealing (fsync, manifest, rename) is left, out of SEAL_MARGIN_S
# The least an essential probe (memory, processes, GPU) is given when the budget is spent.
ESSENTIAL_FLOOR_S = 1.5
CLOSE_TIMEOUT_S = 1.0


class Stopped(BaseException):
    """The capture was told to stop (SIGTERM); raised in the main thread by the handler."""


@dataclass
class Trigger:
    kind: str = "manual"
    name: str | None = None
    detail: str | None = None
    alerts: tuple[dict[str, Any], ...] = ()  # the Alertmanager alerts a capture answers
    skipped: dict[str, Any] | None = None  # triggers refused by the rate limit since the last

    @property
    def slug(self) -> str:
        return archive.slug(f"{self.kind}-{self.name}" if self.name else self.kind)


@dataclass
class Outcome:
    path: Path
    manifest: dict[str, Any]
    recovered: list[Path] = field(default_factory=list)
    headlines: dict[str, str] = field(default_factory=dict)


class Call:
    """One call of a probe (its freeze, a sample, its close), run by the probe's Worker; the
    runner may wait for it or abandon it."""

    def __init__(self, fn: Callable[[], Any]):
        self.fn = fn
        self.box: dict[str, Any] = {}
        self.started = time.monotonic()
        self.at = time.time()
        self.abandoned = False
        self.finished: float | None = None
        self._done = threading.Event()

    def run(self) -> None:
        self.at = time.time()  # a sample is of the moment it was read, not of its asking
        try:
            self.box["value"] = self.fn()
        except Exception as exc:  # a probe's failure is evidence, not a crash of the capture
            self.box["error"] = exc
        finally:
            self.finished = time.monotonic()
            self._done.set()

    @property
    def elapsed(self) -> float:
        """How long the call took, or has taken so far if it is still running."""
        return (self.finished or time.monotonic()) - self.started

    def wait(self, timeout: float) -> bool:
        return self._done.wait(max(0.0, timeout))

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def outcome(self) -> tuple[str, Any]:
        if "error" in self.box:
            return "error", self.box["error"]
        return "ok", self.box.get("value")


class Worker:
    """A probe's one daemon thread for the whole capture: its freeze, its samples, then its
    close, one after another.

    All are started before the freeze, because on a saturated box a thread start can wait
    seconds for a CPU: the watch starts none. A call still running when the next is due is
    the runner's to count as a gap; nothing queues behind it.
    """

    def __init__(self, name: str):
        self.last: Call | None = None
        self._jobs: queue.SimpleQueue[Call | None] = queue.SimpleQueue()
        threading.Thread(target=self._loop, name=f"evidence-{name}", daemon=True).start()

    def submit(self, fn: Callable[[], Any]) -> Call:
        self.last = Call(fn)
        self._jobs.put(self.last)
        return self.last

    @property
    def idle(self) -> bool:
        return self.last is None or self.last.done

    def stop(self) -> None:
        """End the thread once its current call returns (never, for a call hung for good)."""
        self._jobs.put(None)

    def _loop(self) -> None:
        while (call := self._jobs.get()) is not None:
            call.run()


def _seal_partial(
    tmp: Path, writer: BundleWriter, manifest: dict[str, Any], exc: BaseException
) -> Path | None:
    """Make a capture that was stopped half way a visible partial bundle; None if not even
    that could be written (the next capture's recovery will try again)."""
    why = str(exc) or type(exc).__name__
    manifest.update(
        complete=False,
        finished_at=iso(time.time()),
        partial_reason=f"the capture stopped early: {why}; kept what it had read",
    )
    try:
        writer.write_manifest(manifest)
        target = archive.partial_path(tmp)
        os.rename(tmp, target)
        fsync_dir(target.parent)
    except OSError:
        return None
    return target


def _reading(call: Call) -> Reading:
    """What a probe's read came to: its Reading, its exception, or its silence."""
    if not call.done:
        call.abandoned = True
        waited = call.elapsed
        return Reading("timeout", f"no answer within {waited:.2f} s; abandoned")
    kind, value = call.outcome()
    if kind == "error":
        return Reading("error", f"{type(value).__name__}: {value}")
    return value


def _starved_reason(starved: list[str]) -> str | None:
    """Why a bundle that left probes unread for lack of time is not complete; None if none."""
    if not starved:
        return None
    return f"the capture ran out of time; not read: {', '.join(starved)}"


def _headline(probe: Probe) -> str:
    """A probe's one-line finding; a summary that fails must not cost the sealed bundle."""
    try:
        return probe.headline(probe.reading.record)
    except Exception as exc:  # the bundle is already sealed; the summary is a courtesy
        return f"(no summary: {type(exc).__name__}: {exc})"


def process_age_s(pid: int | str = "self") -> float:
    """Seconds since this process (or `pid`) started, to the clock tick.

    Boot time from /proc/stat is in whole seconds and would put this up to a second off;
    the start tick against CLOCK_BOOTTIME is exact to the tick (10 ms).
    """
    with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
        start_ticks = parse_pid_stat(f.read())["start_ticks"]
    return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")


class _Cost:
    """The collector's own cost per phase: wall time, CPU seconds, peak RSS."""

    def __init__(self) -> None:
        self.phases: dict[str, dict[str, float]] = {}
        self._mark = self._now()

    @staticmethod
    def _now() -> tuple[float, float]:
        own = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
        return time.monotonic(), cpu

    def end(self, phase: str) -> None:
        now = self._now()
        self.phases[phase] = {
            "wall_s": round(now[0] - self._mark[0], 4),
            "cpu_s": round(now[1] - self._mark[1], 4),
        }
        self._mark = now

    def summary(self) -> dict[str, Any]:
        own = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return {
            "cpu_s": round(own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime, 4),
            "peak_rss_bytes": own.ru_maxrss * 1024,
            "phases": self.phases,
        }


class Capture:
    def __init__(
        self,
        config: Config,
        trigger: Trigger,
        window_s: float,
        root: Path,
        on_progress: Callable[[float, float], None] | None = None,
        probes: list[type[Probe]] | None = None,
        health: list[dict[str, Any]] | None = None,
        own_process: bool = False,
    ):
        """own_process: this capture is all the process was started for (`evidence
        capture`), so its start-up counts against the window + 3 s bound. Otherwise (a
        check that ran first, the long-running serve, a test) the bound starts here."""
        self.config, self.trigger, self.window_s, self.root = config, trigger, window_s, root
        self.on_progress = on_progress
        self.probe_classes = probes if probes is not None else ordered()
        self.health = health
        self.own_process = own_process

    def run(self) -> Outcome:
        age = process_age_s()
        process_started = time.time() - age
        startup = age if self.own_process else 0.0  # the interpreter and the imports
        archive.private_dir(self.root)
        lock = CaptureLock(self.root)
        lock.acquire(self.config.limits.lock_wait_s)
        try:
            return self._locked(process_started, startup)
        finally:
            lock.release()

    def _locked(self, process_started: float, startup: float) -> Outcome:
        hostname = os.uname().nodename
        parent = archive.host_dir(self.root, hostname)
        # The budgets run from when the process started, not from here: on a box too busy
        # to start Python quickly, start-up is part of what the bound promises. A wait for
        # the lock (another capture) is not.
        started, mono0 = time.time(), time.monotonic() - startup
        name = archive.new_bundle_name(parent, stamp(started), self.trigger.slug)
        tmp = archive.inprogress_path(parent, name)
        tmp.mkdir(mode=0o700)
        writer = BundleWriter(tmp)
        trigger = {
            "kind": self.trigger.kind,
            "name": self.trigger.name,
            "detail": self.trigger.detail,
            "fired_at": iso(started),
        }
        if self.trigger.alerts:
            trigger["alerts"] = list(self.trigger.alerts)
        if self.trigger.skipped:
            trigger["skipped"] = self.trigger.skipped
        manifest = new_manifest(started, self.window_s, trigger, hostname, self.config.source)
        manifest["collector"]["process_started_at"] = iso(process_started)
        try:
            writer.write_manifest(manifest)
            probes = self._capture(writer, manifest, started, mono0, process_started)
            final = parent / name
            os.rename(tmp, final)
        except BaseException as exc:
            # Whatever stopped us (SIGTERM, a bug, a disk error), what was read is kept visible.
            exc.partial = _seal_partial(tmp, writer, manifest, exc)  # type: ignore[attr-defined]
            if exc.partial is None:
                # Not even a manifest fitted: an empty folder is no evidence, and left hidden
                # the next capture would present it as the leftover of one that died.
                with contextlib.suppress(OSError):
                    tmp.rmdir()
            raise
        fsync_dir(parent)
        # Leftovers of captures that died are made visible only now: after this capture's
        # own freeze, and each on its own, so one unreadable leftover costs nothing else.
        names = [cls.name for cls in self.probe_classes]
        recovered = []
        for left in archive.leftovers(parent):
            with contextlib.suppress(OSError):
                recovered.append(recover(left, names))
        headlines = {p.name: _headline(p) for p in probes if p.reading and p.reading.record}
        return Outcome(final, manifest, recovered, headlines)

    def _capture(
        self,
        writer: BundleWriter,
        manifest: dict[str, Any],
        started: float,
        mono0: float,
        process_started: float,
    ) -> list[Probe]:
        cost = _Cost()
        ctx = Context(
            config=self.config,
            started=started,
            health=self.health,
            root=self.root,
            trigger=self.trigger.kind,
        )
        probes = [cls(ctx) for cls in self.probe_classes]
        workers = {p.name: Worker(p.name) for p in probes}
        try:
            return self._timeline(probes, workers, writer, manifest, mono0, process_started, cost)
        finally:
            for worker in workers.values():
                worker.stop()

    def _timeline(
        self,
        probes: list[Probe],
        workers: dict[str, Worker],
        writer: BundleWriter,
        manifest: dict[str, Any],
        mono0: float,
        process_started: float,
        cost: _Cost,
    ) -> list[Probe]:
        seal_by = mono0 + self.window_s + SEAL_MARGIN_S - SEAL_RESERVE_S
        frozen = [p for p in probes if not p.deferred]
        startup = time.monotonic() - mono0
        starved = self._freeze(frozen, workers, writer, manifest, mono0, seal_by)
        deferred_end = mono0 + max(self.window_s, FREEZE_BUDGET_S)
        deferred = []
        for probe in (p for p in probes if p.deferred):
            if deferred_end - time.monotonic() <= 0.05:
                self._unread(probe, startup, writer, manifest)
                starved.append(probe.name)
            else:
                deferred.append((probe, self._start(probe, workers[probe.name], deferred_end)))
        manifest["collector"]["freeze_done_after_process_start_s"] = round(
            time.time() - process_started, 4
        )
        cost.end("freeze")
        writer.write_manifest(manifest)

        self._watch(probes, workers, writer, manifest, mono0)
        for probe, call in deferred:
            call.wait(probe.deadline - time.monotonic())
            self._record(probe, _reading(call), call.elapsed, writer, manifest)
        self._close(probes, workers, seal_by)
        cost.end("watch")

        host = next((p.reading.record for p in probes if p.name == "host"), None) or {}
        manifest["host"].update({k: host.get(k) for k in ("boot_id", "kernel", "uptime_s")})
        manifest["finished_at"] = iso(time.time())
        manifest["complete"], manifest["partial_reason"] = not starved, _starved_reason(starved)
        writer.sync()
        cost.end("seal")
        manifest["collector"].update(cost.summary())
        writer.write_manifest(manifest)
        return probes

    def _freeze(
        self,
        probes: list[Probe],
        workers: dict[str, Worker],
        writer: BundleWriter,
        manifest: dict[str, Any],
        mono0: float,
        seal_by: float,
    ) -> list[str]:
        """Read each probe in freeze order; the names of those left unread for lack of time.

        The budget runs from process start, but a slow start-up does not spend it where the
        window can afford the freeze: only a snapshot must end it at FREEZE_BUDGET_S. An
        essential probe is read whatever start-up or a hung source before it cost: until
        the seal's own deadline, and for at least ESSENTIAL_FLOOR_S.
        """
        opened = time.monotonic()
        budget_end = max(mono0 + FREEZE_BUDGET_S, min(opened + FREEZE_BUDGET_S, seal_by))
        starved = []
        for probe in probes:
            end = budget_end
            if probe.essential:
                end = max(budget_end, seal_by, time.monotonic() + ESSENTIAL_FLOOR_S)
            if end - time.monotonic() <= 0.05:
                self._unread(probe, opened - mono0, writer, manifest)
                starved.append(probe.name)
                continue
            call = self._start(probe, workers[probe.name], end)
            call.wait(probe.deadline - time.monotonic())
            self._record(probe, _reading(call), call.elapsed, writer, manifest)
        return starved

    def _unread(
        self, probe: Probe, startup: float, writer: BundleWriter, manifest: dict[str, Any]
    ) -> None:
        why = (
            "not read: the capture ran out of time before this probe "
            f"(start-up took {startup:.2f} s)"
        )
        self._record(probe, Reading("timeout", why), None, writer, manifest)

    @staticmethod
    def _start(probe: Probe, worker: Worker, latest: float) -> Call:
        """Start a probe's read with its deadline: its own timeout, or `latest` if sooner."""
        probe.deadline = min(time.monotonic() + probe.timeout_s, latest)
        return worker.submit(probe.freeze)

    @staticmethod
    def _close(probes: list[Probe], workers: dict[str, Worker], seal_by: float) -> None:
        """Close every probe side by side, in what is left before the seal and never more.
        A worker still in a hung call is passed over: its close would only queue behind it."""
        closing = [workers[p.name].submit(p.close) for p in probes if workers[p.name].idle]
        until = min(time.monotonic() + CLOSE_TIMEOUT_S, seal_by)
        for call in closing:
            call.wait(until - time.monotonic())

    def _record(
        self,
        probe: Probe,
        reading: Reading,
        elapsed: float,
        writer: BundleWriter,
        manifest: dict[str, Any],
    ) -> None:
        probe.reading = reading
        files = []
        if reading.record is not None:
            fname = f"{probe.name}.json"
            record = {"probe": probe.name, "collected_at": iso(time.time()), **reading.record}
            if writer.write_json(fname, record, probe.name, probe.priority):
                files.append(fname)
        for fname, data in reading.files:
            if writer.write_scrubbed(fname, data, probe.name, probe.priority - 50):
                files.append(fname)
        manifest["probes"][probe.name] = {
            "status": reading.status,
            "reason": reading.reason,
            "duration_ms": None if elapsed is None else round(elapsed * 1000, 2),
            "files": files,
        }

    def _watch(
        self,
        probes: list[Probe],
        workers: dict[str, Worker],
        writer: BundleWriter,
        manifest: dict[str, Any],
        mono0: float,
    ) -> None:
        """Sample each probe at its own interval; calls run side by side, never stacked."""
        samplers = [p for p in probes if p.samples and p.reading.status == "ok"]
        end = mono0 + self.window_s
        inflight: dict[str, Call] = {}
        stats = {
            p.name: {"samples": 0, "gaps": 0, "errors": 0, "last_error": None} for p in samplers
        }
        tick = 0
        while samplers and time.monotonic() < end - 0.05:
            tick += 1
            tick_end = min(mono0 + tick, end)
            for probe in samplers:
                if tick == 1 or (tick - 1) % max(1, round(probe.sample_interval_s)) == 0:
                    if probe.name in inflight:
                        stats[probe.name]["gaps"] += 1  # still busy with the previous one
                    else:
                        inflight[probe.name] = workers[probe.name].submit(probe.sample)
            for call in inflight.values():
                call.wait(tick_end - time.monotonic())
            self._collect(samplers, inflight, stats, writer, final=False)
            if self.on_progress:
                self.on_progress(min(time.monotonic() - mono0, self.window_s), self.window_s)
            time.sleep(max(0.0, tick_end - time.monotonic()))
        for call in inflight.values():
            call.wait(end + SAMPLE_GRACE_S - time.monotonic())
        self._collect(samplers, inflight, stats, writer, final=True)
        for probe in samplers:
            entry = manifest["probes"][probe.name]
            entry["sampling"] = stats[probe.name]
            fname = f"{probe.name}.samples.jsonl"
            if fname in writer.files:
                entry["files"].append(fname)

    def _collect(
        self,
        samplers: list[Probe],
        inflight: dict[str, Call],
        stats: dict[str, dict[str, Any]],
        writer: BundleWriter,
        final: bool,
    ) -> None:
        """Write finished samples; abandon calls past their timeout (a counted gap)."""
        for probe in samplers:
            call = inflight.get(probe.name)
            if call is None:
                continue
            stat = stats[probe.name]
            if not call.done:
                late = call.elapsed > probe.sample_timeout_s
                if (late or final) and not call.abandoned:
                    call.abandoned = True
                    stat["gaps"] += 1
                if final:
                    del inflight[probe.name]
                continue
            del inflight[probe.name]
            if call.abandoned:
                continue  # too late to be a sample of its second
            kind, value = call.outcome()
            if kind == "error":
                stat["errors"] += 1
                stat["last_error"] = f"{type(value).__name__}: {value}"
            elif value is not None and writer.append_jsonl(
                f"{probe.name}.samples.jsonl",
                {"t": iso(call.at), **value},
                probe.name,
                probe.priority - 50,
            ):
                stat["samples"] += 1
