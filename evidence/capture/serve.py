"""`evidence serve`: an Alertmanager webhook receiver; a firing alert captures a bundle.

Alertmanager POSTs a notification (webhook payload version 4) for a group of alerts; each
firing alert is captured through the same runner `evidence capture` uses, with trigger
alert:<alertname> and the alerts themselves in the manifest's trigger.alerts.

Invariants:
- The webhook answers at once: a request only validates, records and queues. Captures
  run one at a time, each in a child process (`evidence serve-capture`) that one worker
  thread waits for; Alertmanager never waits for a capture. What a capture abandons (a
  probe thread, an NVML call that never returns) dies with its child, and a child past
  its bound is stopped: the server stays the same size for months.
- Nothing received is lost silently: every alert of every accepted notification gets one
  line in <archive>/alerts.jsonl (0600) saying what was done with it and why (captured,
  coalesced into the next capture, cooled down, resolved). Every capture attempt that
  ends (sealed, failed, abandoned at shutdown) gets a line too, naming its alerts. The
  journal is bounded (rotated past JOURNAL_MAX_BYTES, one older generation kept) and
  says where it was rotated or trimmed by prune.
- Alerts that arrive while a capture runs are coalesced into the next one. While another
  capture (cron, a check) holds the archive lock no capture starts: the alerts waiting
  and those that arrive meanwhile are retried together, as one capture.
- The same alert (Alertmanager's fingerprint) is captured at most once per cool-down;
  the repeats are recorded, not captured. Alerts of one name (one rule, many instances,
  each a fingerprint of its own) start at most one capture per capture.min_interval;
  the rest are recorded, or join a capture of that name that has not started yet.
- Labels, annotations and URLs pass capture.redact before they reach disk or the log.
- A bad request is one answer (400, 401, 404, 405, 411, 413) and one log line; it never
  stops the server. A body is never read past MAX_BODY_BYTES.
- SIGTERM/SIGINT: stop accepting, let a running capture finish (it is bounded by its
  window + 3 s, plus the lock wait), record what was still queued, return.
- Stdlib only (plus orjson, as the rest of the collector): no duckdb, no jinja2, no click.
"""

import contextlib
import hashlib
import hmac
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socketserver import TCPServer
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import orjson

from evidence.archive.clock import iso
from evidence.archive.exposition import scrape
from evidence.archive.layout import ArchiveError, private_dir
from evidence.archive.lock import Busy, CaptureLock
from evidence.capture.config import Config
from evidence.capture.own_metrics import Attempt, refused
from evidence.capture.redact import MARK, redact_text, scrub
from evidence.capture.runner import SEAL_MARGIN_S, Capture, Outcome, Stopped, Trigger

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9095
PATHS = ("/", "/alertmanager")
METRICS_PATH = "/metrics"  # GET: evidence's own metrics, as node-exporter's textfiles hold them
EXPOSITION_TYPE = "text/plain; version=0.0.4; charset=utf-8"
JOURNAL = "alerts.jsonl"
JOURNAL_MAX_BYTES = 8 * 2**20  # about 10,000 alerts; past it the journal is rotated
ROTATED = f"{JOURNAL}.1"  # the one older generation kept
JOURNAL_LOCK = f".{JOURNAL}.lock"
JOURNAL_LOCK_WAIT_S = 10.0  # prune's trim rewrites at most twice JOURNAL_MAX_BYTES
MAX_BODY_BYTES = 1024 * 1024  # one notification; a group past it wants max_alerts
READ_TIMEOUT_S = 5.0  # a client that stops sending mid-body costs one thread this long
RETRY_S = 5.0  # after Busy: another capture (cron, a check) holds the archive lock
LOCK_POLL_S = 0.1  # while waiting lock_wait_s for that lock, as CaptureLock.acquire polls
CHILD_STARTUP_S = 30.0  # a capture process's start and imports on a box that is swapping
CHILD_GRACE_S = 5.0  # after SIGTERM, for an overrunning capture to keep what it read
MAX_PENDING = 1000  # alerts waiting for the next capture; past it they are recorded as dropped
DETAIL_NAMES = 10  # alert names spelled out in a trigger's detail
LOG_ALERTS = 20  # per-alert log lines per request; the rest are in alerts.jsonl

FIRING, RESOLVED = "firing", "resolved"
# What became of a received alert (alerts.jsonl `action`).
CAPTURE = "capture"  # it starts the next capture (none is running)
COALESCED = "coalesced"  # a capture is running: it joins the next one
COOL_DOWN = "cool-down"  # the same fingerprint was taken for a capture less than cooldown ago
RATE_LIMITED = "rate-limited"  # a capture of this alertname started less than min_interval ago
RECORDED = "resolved"  # a resolved alert: recorded, never captured
DROPPED = "dropped"  # the queue was full
REFUSALS = (COOL_DOWN, RATE_LIMITED, DROPPED)  # counted in evidence_triggers_refused_total


def log(message: str) -> None:
    """One line on stderr (journald keeps it), its secrets removed; never a traceback.

    Redacted here, not at each call: http.server logs a malformed request's words as they
    came, and a capture's own errors quote URLs.
    """
    line = redact_text(message).replace("\r", "\\r").replace("\n", "\\n")
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"evidence serve: {line}\n")
        sys.stderr.flush()


# --- the payload -------------------------------------------------------------------------


class PayloadError(ValueError):
    """The body is not an Alertmanager webhook notification; the message says why."""


@dataclass(frozen=True)
class Alert:
    """One alert as Alertmanager sent it (not yet redacted)."""

    status: str
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: str | None
    ends_at: str | None
    generator_url: str | None
    fingerprint: str

    @property
    def alertname(self) -> str:
        return self.labels["alertname"]


@dataclass(frozen=True)
class Notification:
    """One webhook POST: a group of alerts for one receiver."""

    alerts: tuple[Alert, ...]
    status: str | None = None
    receiver: str | None = None
    group_key: str | None = None
    truncated_alerts: int = 0
    external_url: str | None = None


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _optional_text(doc: dict[str, Any], key: str, where: str) -> str | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        raise PayloadError(f"{where}{key} is {_kind(value)}, expected a string")
    return value


def _string_map(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise PayloadError(f"{where} is {_kind(value)}, expected an object of strings")
    for key, item in value.items():
        if not isinstance(item, str):
            raise PayloadError(f"{where}.{key} is {_kind(item)}, expected a string")
    return value


def derived_fingerprint(labels: dict[str, str]) -> str:
    """A stable stand-in for a sender that sent no fingerprint: a hash of the label set."""
    text = "\xff".join(f"{k}\xfe{v}" for k, v in sorted(labels.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _alert(item: Any, i: int) -> Alert:
    where = f"alerts[{i}]"
    if not isinstance(item, dict):
        raise PayloadError(f"{where} is {_kind(item)}, expected an object")
    status = item.get("status")
    if status is None:
        raise PayloadError(f"{where} has no status")
    if status not in (FIRING, RESOLVED):
        raise PayloadError(f'{where}.status is {_show(status)}, expected "firing" or "resolved"')
    if "labels" not in item:
        raise PayloadError(f"{where} has no labels")
    labels = _string_map(item["labels"], f"{where}.labels")
    if not labels.get("alertname", "").strip():
        raise PayloadError(f"{where}.labels has no alertname")
    annotations = item.get("annotations")
    annotations = {} if annotations is None else _string_map(annotations, f"{where}.annotations")
    fingerprint = _optional_text(item, "fingerprint", f"{where}.")
    return Alert(
        status=status,
        labels=labels,
        annotations=annotations,
        starts_at=_optional_text(item, "startsAt", f"{where}."),
        ends_at=_optional_text(item, "endsAt", f"{where}."),
        generator_url=_optional_text(item, "generatorURL", f"{where}."),
        fingerprint=fingerprint or derived_fingerprint(labels),
    )


def _show(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= 40 else text[:37] + "..."


def parse_payload(body: bytes) -> Notification:
    """An Alertmanager webhook body (version 4) -> Notification, or PayloadError naming the
    first thing wrong. Pure: no I/O, no clock."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise PayloadError(f"the body is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise PayloadError(f"the body is {_kind(doc)}, expected a JSON object")
    if "version" not in doc:
        raise PayloadError('no version (an Alertmanager webhook payload has version "4")')
    if doc["version"] != "4":
        raise PayloadError(f'version {_show(doc["version"])} is not supported (expected "4")')
    status = doc.get("status")
    if status is not None and status not in (FIRING, RESOLVED):
        raise PayloadError(f'status is {_show(status)}, expected "firing" or "resolved"')
    truncated = doc.get("truncatedAlerts") or 0
    if not isinstance(truncated, int) or isinstance(truncated, bool) or truncated < 0:
        raise PayloadError(f"truncatedAlerts is {_show(truncated)}, expected a count")
    if "alerts" not in doc:
        raise PayloadError("no alerts (an Alertmanager webhook payload lists its alerts)")
    items = doc["alerts"]
    if not isinstance(items, list):
        raise PayloadError(f"alerts is {_kind(items)}, expected a list")
    if not items:
        raise PayloadError("alerts is empty")
    return Notification(
        alerts=tuple(_alert(item, i) for i, item in enumerate(items)),
        status=status,
        receiver=_optional_text(doc, "receiver", ""),
        group_key=_optional_text(doc, "groupKey", ""),
        truncated_alerts=truncated,
        external_url=_optional_text(doc, "externalURL", ""),
    )


# --- redaction ---------------------------------------------------------------------------


def _names_a_secret(key: str) -> bool:
    """True if redact would hide the value of `key=...`: a label called password or token."""
    probe = f"{key}=x"
    return redact_text(probe) != probe


def redact_map(values: dict[str, str]) -> dict[str, str]:
    """Labels or annotations with secrets removed.

    scrub() (which the bundle writer applies to the manifest) redacts every string but
    does not look at keys, so a label `password: hunter2` would pass it: a value whose key
    names a secret is replaced here whole.
    """
    return {k: MARK if _names_a_secret(k) else redact_text(v) for k, v in values.items()}


def alert_record(alert: Alert, received_at: float) -> dict[str, Any]:
    """The alert as the manifest's trigger.alerts holds it (snake_case, redacted)."""
    return {
        "status": alert.status,
        "fingerprint": redact_text(alert.fingerprint),
        "labels": redact_map(alert.labels),
        "annotations": redact_map(alert.annotations),
        "starts_at": alert.starts_at,
        "ends_at": alert.ends_at,
        "generator_url": redact_text(alert.generator_url) if alert.generator_url else None,
        "received_at": iso(received_at),
    }


def describe(records: list[dict[str, Any]]) -> str:
    """A trigger's detail: `3 alerts: HostOOM, KVCacheFull (2)`."""
    counts: dict[str, int] = {}
    for record in records:
        name = record["labels"]["alertname"]
        counts[name] = counts.get(name, 0) + 1
    names = [f"{n} ({c})" if c > 1 else n for n, c in counts.items()]
    if len(names) > DETAIL_NAMES:
        names = [*names[:DETAIL_NAMES], f"and {len(names) - DETAIL_NAMES} more"]
    plural = "" if len(records) == 1 else "s"
    return f"{len(records)} alert{plural}: {', '.join(names)}"


# --- the journal -------------------------------------------------------------------------


class Journal:
    """<archive>/alerts.jsonl: one line per received alert and per finished capture.

    Bounded: past max_bytes the file becomes alerts.jsonl.1 (replacing the generation
    before it) and a new one starts with a line saying so. The newest lines are kept, and
    the journal never holds more than twice max_bytes.
    """

    def __init__(self, root: Path, max_bytes: int = JOURNAL_MAX_BYTES):
        self.path = root / JOURNAL
        self.max_bytes = max_bytes
        self._lock = threading.Lock()

    def open(self) -> None:
        """Create the file (0600) or tighten it; raises OSError if the archive refuses."""
        fd = self._open()
        os.close(fd)

    def _open(self) -> int:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        fd = os.open(self.path, flags, 0o600)
        try:
            if stat.S_IMODE(os.fstat(fd).st_mode) != 0o600:
                os.fchmod(fd, 0o600)
        except OSError:
            os.close(fd)
            raise
        return fd

    def write(self, record: dict[str, Any]) -> bool:
        """Append one redacted line; a failure is one log line, never an exception."""
        data = _line(scrub(record))
        with self._lock:
            try:
                with _journal_locked(self.path.parent):
                    self._append(data)
            except (ArchiveError, Busy, OSError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                log(f"cannot write {self.path}: {reason}")
                return False
        return True

    def _append(self, data: bytes) -> None:
        """Append under the journal's lock, rotating first if the line would pass the cap."""
        size = _size(self.path)
        if size and size + len(data) > self.max_bytes:
            os.replace(self.path, self.path.with_name(ROTATED))
            note = {
                "event": "rotated",
                "at": iso(time.time()),
                "reason": f"{JOURNAL} reached {self.max_bytes} bytes: the lines before this "
                f"one are in {ROTATED}, and the older ones were dropped",
            }
            data = _line(note) + data
        fd = self._open()
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)


class Trimmed(NamedTuple):
    """What trim_journal removed."""

    lines: int
    freed_bytes: int


def trim_journal(root: Path, keep_days: float, now: float | None = None) -> Trimmed:
    """For `evidence prune --keep-days`: remove the journal's lines older than keep_days
    from alerts.jsonl and alerts.jsonl.1, and say so in the journal. A line whose time
    cannot be read is kept. Safe while a server writes: both take the journal's lock.

    Raises Busy (the lock was held for JOURNAL_LOCK_WAIT_S), ArchiveError or OSError.
    """
    now = time.time() if now is None else now
    cutoff = now - keep_days * 86400
    with _journal_locked(root):
        trimmed = [_trim(root / name, cutoff) for name in (ROTATED, JOURNAL)]
        lines = sum(t.lines for t in trimmed)
        if lines:
            note = {
                "event": "trimmed",
                "at": iso(now),
                "reason": f"prune removed {lines} lines older than {keep_days:g} days",
            }
            Journal(root)._append(_line(note))
    return Trimmed(lines, sum(t.freed_bytes for t in trimmed))


def _trim(path: Path, cutoff: float) -> Trimmed:
    """Drop path's lines older than cutoff; a file left empty goes."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Trimmed(0, 0)
    lines = data.splitlines(keepends=True)
    kept = [line for line in lines if not _older(line, cutoff)]
    if len(kept) == len(lines):
        return Trimmed(0, 0)
    rest = b"".join(kept)
    if rest:
        _replace(path, rest)
    else:
        path.unlink()
    return Trimmed(len(lines) - len(kept), len(data) - len(rest))


def _older(line: bytes, cutoff: float) -> bool:
    """Whether a journal line was written before cutoff: an alert's received_at, an event's at."""
    try:
        doc = orjson.loads(line)
        return datetime.fromisoformat(doc.get("at") or doc["received_at"]).timestamp() < cutoff
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
        return False


@contextlib.contextmanager
def _journal_locked(root: Path) -> Iterator[None]:
    # The server's appends and prune's trim, one at a time, across processes.
    lock = CaptureLock(root, JOURNAL_LOCK)
    lock.acquire(JOURNAL_LOCK_WAIT_S)
    try:
        yield
    finally:
        lock.release()


def _line(record: dict[str, Any]) -> bytes:
    return orjson.dumps(record) + b"\n"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _replace(path: Path, data: bytes) -> None:
    """Replace path's content at once (0600), for a reader and for a crash."""
    tmp = path.with_name(f".{path.name}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(tmp, flags, 0o600)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


# --- the cool-down table and the capture queue -------------------------------------------


class CoolDown:
    """When each key (a fingerprint, an alertname) was last taken for a capture
    (monotonic seconds)."""

    def __init__(self, cooldown_s: float, clock: Callable[[], float] = time.monotonic):
        self.cooldown_s = cooldown_s
        self.clock = clock
        self._taken: dict[str, float] = {}

    def ago(self, key: str) -> float | None:
        """Seconds since this key was taken, if that is within the cool-down."""
        now = self.clock()
        self._taken = {k: t for k, t in self._taken.items() if now - t < self.cooldown_s}
        taken = self._taken.get(key)
        return None if taken is None else now - taken

    def take(self, key: str) -> None:
        if self.cooldown_s > 0:
            self._taken[key] = self.clock()

    def forget(self, keys: list[str]) -> None:
        """A capture that failed did not take them: the next notification may try again."""
        for key in keys:
            self._taken.pop(key, None)


def _alertnames(batch: list[dict[str, Any]]) -> list[str]:
    return [r["labels"]["alertname"] for r in batch]


class Stopping(Exception):
    """The server is shutting down and takes no more alerts."""


class Recorder:
    """Decides what each received alert gets, and runs the captures, one at a time.

    `capture(trigger)` runs one capture and returns its Outcome, or raises Busy,
    ArchiveError, CaptureFailed or OSError (see ChildCapture). `lock_holder()` says who
    holds the archive's capture lock, or None if it is free.
    """

    def __init__(
        self,
        capture: Callable[[Trigger], Outcome],
        lock_holder: Callable[[], str | None],
        journal: Journal,
        cooldown_s: float,
        min_interval_s: float = 0,
        retry_s: float = RETRY_S,
        lock_wait_s: float = 0,
        clock: Callable[[], float] = time.monotonic,
        on_refused: Callable[[int], None] | None = None,
    ):
        self._capture = capture
        self._on_refused = on_refused
        self._lock_holder = lock_holder
        self.lock_wait_s = lock_wait_s
        self.journal = journal
        self.cooldown = CoolDown(cooldown_s, clock)
        # Taken when a capture starts, not when an alert arrives: alerts of one name that
        # arrive before their capture starts join it, and cost no bundle of their own.
        self.per_name = CoolDown(min_interval_s, clock)
        self.retry_s = retry_s
        self._cond = threading.Condition()
        self._pending: list[dict[str, Any]] = []
        self._running = False
        self._stopping = False
        self._thread = threading.Thread(target=self._work, name="evidence-capture", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def receive(
        self, note: Notification, sender: str | None = None, now: float | None = None
    ) -> list[tuple[Alert, str, str]]:
        """Decide, record and queue every alert of a notification; (alert, action, reason)."""
        received = time.time() if now is None else now
        decisions = []
        with self._cond:
            if self._stopping:
                raise Stopping("the server is stopping")
            for alert in note.alerts:
                record = alert_record(alert, received)
                action, reason = self._decide(alert, record)
                decisions.append((alert, action, reason))
                # Written under the queue's lock: an alert's line is always on disk before
                # the line of the capture that takes it.
                self.journal.write(
                    {
                        "event": "alert",
                        "alertname": record["labels"]["alertname"],
                        "action": action,
                        "reason": reason,
                        **record,
                        "receiver": note.receiver,
                        "group_key": note.group_key,
                        "truncated_alerts": note.truncated_alerts,
                        "external_url": note.external_url,
                        "from": sender,
                    }
                )
            self._cond.notify_all()
        turned_away = sum(action in REFUSALS for _, action, _ in decisions)
        if turned_away and self._on_refused is not None:
            self._on_refused(turned_away)
        return decisions

    def _decide(self, alert: Alert, record: dict[str, Any]) -> tuple[str, str]:
        if alert.status == RESOLVED:
            return RECORDED, "a resolved alert is recorded, not captured"
        fingerprint = record["fingerprint"]
        ago = self.cooldown.ago(fingerprint)
        if ago is not None:
            return COOL_DOWN, (
                f"the same alert (fingerprint {fingerprint}) was taken for a "
                f"capture {ago:.0f} s ago; cool-down {self.cooldown.cooldown_s:g} s"
            )
        name = record["labels"]["alertname"]
        ago = self.per_name.ago(name)
        if ago is not None:
            return RATE_LIMITED, (
                f"a capture for {name} started {ago:.0f} s ago; capture.min_interval "
                f"{self.per_name.cooldown_s:g} s"
            )
        if len(self._pending) >= MAX_PENDING:
            return DROPPED, f"{MAX_PENDING} alerts already wait for the next capture"
        self.cooldown.take(fingerprint)
        self._pending.append(record)
        if self._running:
            return COALESCED, "a capture is running; this alert joins the next bundle"
        if len(self._pending) > 1:
            return CAPTURE, f"joins the next capture with {len(self._pending) - 1} other alerts"
        return CAPTURE, "captures a bundle now"

    @property
    def idle(self) -> bool:
        """Nothing running, nothing waiting."""
        with self._cond:
            return not self._running and not self._pending

    def _work(self) -> None:
        attempts = 0
        while True:
            with self._cond:
                while not self._pending and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
            attempts += 1
            # The lock is looked at before a batch is taken: a capture process takes long
            # enough to start that one started while the lock was held may take it once it
            # is freed, and seal without the alerts that arrived while it started. Looked
            # at here, the alerts that arrive while another capture holds the lock wait
            # with the rest, and are captured with them.
            holder = self._wait_for_lock()
            if holder is None:
                with self._cond:
                    if self._stopping:
                        return
                    batch, self._pending = self._pending, []
                    self._running = True
                    for name in _alertnames(batch):
                        self.per_name.take(name)
                holder = self._attempt(batch, attempts)
            if holder is None:
                attempts = 0
                continue
            with self._cond:
                waiting = len(self._pending)
            log(
                f"another capture holds the archive lock ({holder}); {waiting} alerts wait, "
                f"retrying in {self.retry_s:g} s"
            )
            with self._cond:
                self._cond.wait_for(lambda: self._stopping, timeout=self.retry_s)

    def _wait_for_lock(self) -> str | None:
        """None once the archive's capture lock is free; else who held it through
        lock_wait_s, or until the server began to stop."""
        deadline = time.monotonic() + self.lock_wait_s
        while True:
            holder = self._lock_holder()
            if holder is None or time.monotonic() >= deadline:
                return holder
            with self._cond:
                if self._cond.wait_for(lambda: self._stopping, timeout=LOCK_POLL_S):
                    return holder

    def _attempt(self, batch: list[dict[str, Any]], attempts: int) -> str | None:
        """One capture of a batch; who held the lock if it was refused (it is then waiting
        again), else None."""
        holder = None
        try:
            holder = self._run(batch, attempts)
        except Exception as exc:  # a bug must cost this capture, not the server
            reason = f"internal error: {type(exc).__name__}: {exc}"
            log(f"capture failed: {reason}; still serving")
            with contextlib.suppress(Exception):
                self._finished(batch, "failed", None, reason, attempts)
        finally:
            with self._cond:
                self._running = False
                if holder is not None:
                    # Another capture took the lock after it was seen free. Nothing was
                    # read: the batch goes back in front of what arrived since, all of it
                    # retried as one, and its names started no capture.
                    self._pending[:0] = batch
                    self.per_name.forget(_alertnames(batch))
        return holder

    def _run(self, batch: list[dict[str, Any]], attempts: int) -> str | None:
        """One capture of a batch; who held the archive lock if it was refused, else None."""
        names = _alertnames(batch)
        trigger = Trigger(kind="alert", name=names[0], detail=describe(batch), alerts=tuple(batch))
        log(f"capture started: alert:{trigger.name} ({trigger.detail})")
        started = time.monotonic()
        try:
            outcome = self._capture(trigger)
        except Busy as exc:
            return str(exc)
        except (ArchiveError, CaptureFailed, OSError) as exc:
            reason = _os_reason(exc) if isinstance(exc, OSError) else str(exc)
            log(f"capture failed: {reason}; still serving")
            self._finished(batch, "failed", None, reason, attempts)
            return None
        except Exception as exc:
            reason = f"internal error: {type(exc).__name__}: {exc}"
            log(f"capture failed: {reason}; still serving")
            self._finished(batch, "failed", None, reason, attempts)
            return None
        elapsed = time.monotonic() - started
        complete = outcome.manifest.get("complete")
        note = "" if complete else f" (partial: {outcome.manifest.get('partial_reason')})"
        plural = "" if len(batch) == 1 else "s"
        log(f"captured {outcome.path} for {len(batch)} alert{plural} in {elapsed:.1f} s{note}")
        for path in outcome.recovered:
            log(f"kept the unfinished bundle of a capture that died as {path}")
        self._finished(batch, "captured", outcome, None, attempts)
        return None

    def _finished(
        self,
        batch: list[dict[str, Any]],
        result: str,
        outcome: Outcome | None,
        reason: str | None,
        attempts: int,
    ) -> None:
        fingerprints = [r["fingerprint"] for r in batch]
        if result == "failed":
            with self._cond:
                self.cooldown.forget(fingerprints)
                self.per_name.forget(_alertnames(batch))
        self.journal.write(
            {
                "event": "capture",
                "at": iso(time.time()),
                "result": result,
                "reason": reason,
                "bundle": str(outcome.path) if outcome else None,
                "bundle_id": outcome.manifest.get("bundle_id") if outcome else None,
                "complete": outcome.manifest.get("complete") if outcome else None,
                "attempts": attempts,
                "alertnames": _alertnames(batch),
                "fingerprints": fingerprints,
            }
        )

    def close(self) -> None:
        """Take no more alerts, let a running capture finish, record what still waited."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join()
        with self._cond:
            left, self._pending = self._pending, []
        if left:
            log(f"stopping: {len(left)} queued alerts were not captured (see {JOURNAL})")
            self._finished(left, "not-captured", None, "the server stopped first", 0)


# --- the capture process -----------------------------------------------------------------


class CaptureFailed(Exception):
    """The capture process ended without an outcome; the message says how."""


class ChildCapture:
    """Runs each capture in a child `evidence serve-capture` process (what `evidence
    capture` runs, with the alerts passed on stdin) and returns its Outcome, or raises
    Busy, ArchiveError or CaptureFailed as the child reported.

    The child is stopped (SIGTERM, then SIGKILL) past its bound: the window, the seal
    margin, the lock wait and a slow start. It runs in a session of its own, so a Ctrl-C
    at the server's terminal does not cut a capture short; the server waits for it.
    """

    def __init__(self, config: Config, root: Path, window_s: float):
        # -P: the server's working directory must not shadow the package. --window as
        # repr: the child captures exactly the window the server was given.
        self.root = root
        self.argv = [sys.executable, "-P", "-m", "evidence.cli", "serve-capture"]
        self.argv += ["--archive", str(root), "--window", repr(window_s)]
        if config.source:
            self.argv += ["--config", config.source]
        self.bound_s = window_s + SEAL_MARGIN_S + config.limits.lock_wait_s + CHILD_STARTUP_S

    def __call__(self, trigger: Trigger) -> Outcome:
        request = {
            "kind": trigger.kind,
            "name": trigger.name,
            "detail": trigger.detail,
            "alerts": list(trigger.alerts),
        }
        pipe = subprocess.PIPE
        child = subprocess.Popen(
            self.argv, stdin=pipe, stdout=pipe, stderr=pipe, start_new_session=True
        )
        try:
            out, err = child.communicate(orjson.dumps(request), timeout=self.bound_s)
            overran = False
        except subprocess.TimeoutExpired:
            out, err = _stop_child(child)
            overran = True
        said = err.decode("utf-8", "replace").splitlines()
        for line in said:
            log(f"capture process {child.pid}: {line}")
        if overran:
            raise CaptureFailed(f"the capture process ran past {self.bound_s:g} s; stopped")
        return _outcome(out, child.returncode, said)

    def lock_holder(self) -> str | None:
        """Who holds the archive's capture lock, or None if it is free. Released at once:
        the capture process takes it for itself."""
        lock = CaptureLock(self.root)
        try:
            lock.acquire(0)
        except Busy as exc:
            return str(exc)
        except ArchiveError:
            return None  # the capture process meets it too, and its failure is recorded
        lock.release()
        return None


def _stop_child(child: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    child.terminate()  # it seals what it read as a -partial bundle
    try:
        return child.communicate(timeout=CHILD_GRACE_S)
    except subprocess.TimeoutExpired:
        child.kill()
        return child.communicate()


def _outcome(out: bytes, code: int, said: list[str]) -> Outcome:
    """What the child printed, back into an Outcome or the exception it stands for."""
    try:
        result = orjson.loads(out)
    except orjson.JSONDecodeError:
        how = f"was killed by signal {-code}" if code < 0 else f"exited {code}"
        last = f": {said[-1]}" if said else ""
        raise CaptureFailed(f"the capture process {how} without an outcome{last}") from None
    error = result.get("error")
    if error == "busy":
        raise Busy(result["reason"])
    if error == "archive":
        raise ArchiveError(result["reason"])
    if error:
        raise CaptureFailed(result["reason"])
    return Outcome(Path(result["path"]), result["manifest"], [Path(p) for p in result["recovered"]])


def capture_child(config: Config, root: Path, window_s: float, request: bytes) -> dict[str, Any]:
    """The child's side of ChildCapture: one capture of the trigger in `request`; its
    outcome, or the error the server acts on (busy: retried; archive, stopped: failed)."""
    doc = orjson.loads(request)
    trigger = Trigger(doc["kind"], doc["name"], doc["detail"], tuple(doc["alerts"]))
    signal.signal(signal.SIGTERM, _stop_capture)
    attempt = Attempt(root, trigger.kind, config.metrics_textfile)

    def counted(outcome: str, probes: dict[str, Any] | None = None) -> None:
        for problem in attempt.done(outcome, probes):
            log(problem)

    try:
        outcome = Capture(config, trigger, window_s, root, own_process=True).run()
    except Busy as exc:
        counted("busy")
        return {"error": "busy", "reason": str(exc)}
    except ArchiveError as exc:
        counted("failed")
        return {"error": "archive", "reason": str(exc)}
    except OSError as exc:
        counted("failed")
        return {"error": "archive", "reason": _os_reason(exc)}
    except Stopped as exc:
        counted("stopped")
        kept = getattr(exc, "partial", None)
        said = f"kept what was read as {kept}" if kept else "before anything was read"
        return {"error": "stopped", "reason": f"stopped by SIGTERM, {said}"}
    manifest = outcome.manifest
    counted("complete" if manifest["complete"] else "incomplete", manifest["probes"])
    return {
        "path": str(outcome.path),
        "manifest": {k: manifest.get(k) for k in ("bundle_id", "complete", "partial_reason")},
        "recovered": [str(p) for p in outcome.recovered],
    }


def _stop_capture(signum: int, frame: Any) -> None:
    raise Stopped("stopped by SIGTERM")


def _os_reason(exc: OSError) -> str:
    return f"{exc.filename or 'archive'}: {exc.strerror}" if exc.strerror else str(exc)


# --- HTTP --------------------------------------------------------------------------------


class ListenError(Exception):
    """The address cannot be listened on (in use, not local, not permitted)."""


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT, [IPv6]:PORT, :PORT or PORT -> (host, port); ValueError says what is wrong."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep:
        host, port_text = "", text.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{text!r}: write an IPv6 address in brackets, as [::1]:9095")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"{text!r}: expected HOST:PORT with a port from 0 to 65535")
    return host or DEFAULT_HOST, int(port_text)


def is_loopback(host: str) -> bool:
    return host == "localhost" or host.startswith("127.") or host == "::1"


class TokenError(Exception):
    """The token file cannot be used; the message says why."""


def read_token(path: str | os.PathLike[str]) -> str:
    """The bearer token from a file: one line, trimmed as Alertmanager trims its
    credentials_file. A file every user may read (or write) is refused: the token would
    protect nothing from the local users it is there to keep out."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise TokenError(f"{path}: not a regular file")
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = f.read(4097)
        finally:
            os.close(fd)
    except OSError as exc:
        raise TokenError(f"{path}: cannot read: {exc.strerror}") from None
    mode = stat.S_IMODE(info.st_mode)
    if mode & (stat.S_IROTH | stat.S_IWOTH):
        raise TokenError(
            f"{path}: every user can read or write it (mode {mode:04o}); "
            f"chmod o-rwx {path} (the owner, or a group shared with Alertmanager, suffices)"
        )
    if len(data) > 4096:
        raise TokenError(f"{path}: longer than 4096 bytes; expected one token")
    try:
        token = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise TokenError(f"{path}: not ASCII; expected one token") from None
    if not token:
        raise TokenError(f"{path}: empty")
    if any(c.isspace() or not c.isprintable() for c in token):
        raise TokenError(f"{path}: holds whitespace or control characters; expected one token")
    return token


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("latin-1", "replace")).digest()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # Alertmanager sends a burst when many groups fire at once; a connection the backlog
    # cannot hold is reset, and 16 reset 37 of 200. The kernel caps it at somaxconn.
    request_queue_size = 1024
    recorder: Recorder
    token_digest: bytes | None
    root: Path

    def server_bind(self) -> None:
        # HTTPServer.server_bind asks the resolver for a fully qualified name, which on a
        # box without DNS can take seconds; this server never needs it.
        TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        log(f"error answering {client_address[0]}: {type(exc).__name__}: {exc}")


def _byte_count(text: str) -> int | None:
    """A Content-Length's value, or None. ASCII digits only: headers are latin-1, and
    "\xb2" ("²") passes str.isdigit() but not int()."""
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else None


class _HTTPServer6(_HTTPServer):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    server_version = "evidence-serve"
    sys_version = ""
    timeout = READ_TIMEOUT_S

    def do_POST(self) -> None:
        self._handle()

    do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_POST

    def _handle(self) -> None:
        path = urlsplit(self.path).path
        if path == METRICS_PATH:
            return self._metrics()
        if path not in PATHS:
            return self._refuse(404, f"no such path {path[:80]!r}; POST to /alertmanager")
        if self.command != "POST":
            return self._refuse(405, f"{self.command} is not allowed; POST", {"Allow": "POST"})
        length = self._length()
        if length is None:
            return
        if not self._authorized():
            return self._refuse(401, self._why_unauthorized(), {"WWW-Authenticate": "Bearer"})
        if length > MAX_BODY_BYTES:
            return self._answer(
                413,
                {
                    "error": f"the body is {length} bytes, over the {MAX_BODY_BYTES}-byte "
                    "limit (set max_alerts in the webhook_config)"
                },
            )
        body = self._read(length)
        if body is None:
            return
        try:
            note = parse_payload(body)
        except PayloadError as exc:
            return self._answer(400, {"error": str(exc)})
        try:
            decisions = self.server.recorder.receive(note, self.client_address[0])
        except Stopping as exc:
            return self._answer(503, {"error": str(exc)}, {"Retry-After": "10"})
        actions: dict[str, int] = {}
        for _alert, action, _reason in decisions:
            actions[action] = actions.get(action, 0) + 1
        truncated = note.truncated_alerts
        extra = f"; Alertmanager left out {truncated} (max_alerts)" if truncated else ""
        summary = ", ".join(f"{n} {a}" for a, n in actions.items())
        self._answer(
            200, {"received": len(decisions), "actions": actions}, note=f"{summary}{extra}"
        )
        for alert, action, reason in decisions[:LOG_ALERTS]:
            name, fingerprint = redact_text(alert.alertname), redact_text(alert.fingerprint)
            log(f"alert {name} {alert.status} [{fingerprint}]: {action}: {reason}")
        if len(decisions) > LOG_ALERTS:
            log(f"... and {len(decisions) - LOG_ALERTS} more alerts (see {JOURNAL})")

    def _metrics(self) -> None:
        """The archive's metrics parts; behind the same token as the webhook when one is set
        (Prometheus' scrape_config takes it as `authorization: credentials_file`)."""
        if self.command not in ("GET", "HEAD"):
            return self._refuse(405, f"{self.command} is not allowed; GET", {"Allow": "GET"})
        if not self._authorized():
            return self._refuse(401, self._why_unauthorized(), {"WWW-Authenticate": "Bearer"})
        body = scrape(self.server.root).encode()
        self._send(200, body, EXPOSITION_TYPE, {}, f"{len(body)} bytes of metrics")

    def _length(self) -> int | None:
        """The declared body length, or None after answering 400/411."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self._answer(411, {"error": "a chunked body is not accepted; send Content-Length"})
            return None
        text = self.headers.get("Content-Length")
        if text is None:
            self._answer(411, {"error": "no Content-Length"})
            return None
        length = _byte_count(text)
        if length is None:
            self._answer(400, {"error": f"Content-Length {text[:40]!r} is not a byte count"})
        return length

    def _authorized(self) -> bool:
        expected = self.server.token_digest
        if expected is None:
            return True
        scheme, _, credentials = self.headers.get("Authorization", "").strip().partition(" ")
        given = credentials.strip() if scheme.lower() == "bearer" else ""
        # Digests of equal length: the comparison takes the same time whatever was sent.
        return hmac.compare_digest(_digest(given), expected)

    def _why_unauthorized(self) -> str:
        if "Authorization" not in self.headers:
            return "no bearer token (Authorization: Bearer ...)"
        return "wrong bearer token"

    def _read(self, length: int) -> bytes | None:
        """Exactly `length` bytes (at most MAX_BODY_BYTES), or None after answering."""
        try:
            body = self.rfile.read(length)
        except TimeoutError:
            self._answer(408, {"error": f"the body did not arrive within {READ_TIMEOUT_S:g} s"})
            return None
        if len(body) < length:
            self._answer(400, {"error": f"the body ended after {len(body)} of {length} bytes"})
            return None
        return body

    def _refuse(self, code: int, reason: str, headers: dict[str, str] | None = None) -> None:
        """Answer an error before reading the body. A small body is read and discarded
        first: closing a socket with unread data resets it, and the client may never see
        the answer."""
        length = _byte_count(self.headers.get("Content-Length", ""))
        if length is not None and length <= MAX_BODY_BYTES:
            with contextlib.suppress(OSError):
                self.rfile.read(length)
        self._answer(code, {"error": reason}, headers)

    def _answer(
        self,
        code: int,
        payload: dict[str, Any],
        headers: dict[str, str] | None = None,
        note: str | None = None,
    ) -> None:
        why = note if code == 200 else payload.get("error")
        self._send(code, orjson.dumps(payload), "application/json", headers or {}, why)

    def _send(
        self, code: int, body: bytes, kind: str, headers: dict[str, str], why: str | None
    ) -> None:
        if code != 200:
            self.close_connection = True
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        path = urlsplit(self.path).path[:80]
        log(f"{self.client_address[0]} {self.command} {path} {code}: {why}")

    def log_request(self, code: Any = "-", size: Any = "-") -> None:
        pass  # _answer logs one line per request, with the reason

    def log_error(self, format: str, *args: Any) -> None:
        log(f"{self.client_address[0]}: {format % args}")


# --- the server --------------------------------------------------------------------------


class Server:
    """The receiver: an HTTP server thread and a capture worker thread.

    serve() runs one until a signal; tests start and stop one in-process.
    """

    def __init__(
        self,
        config: Config,
        root: Path,
        listen: tuple[str, int],
        token: str | None,
        cooldown_s: float,
        window_s: float | None = None,
        retry_s: float = RETRY_S,
    ):
        self.root = root
        self.window_s = config.window_s if window_s is None else window_s
        private_dir(root)  # ArchiveError, before anything listens
        journal = Journal(root)
        try:
            journal.open()
        except OSError as exc:
            raise ArchiveError(f"{journal.path}: cannot write: {exc.strerror}") from None

        child = ChildCapture(config, root, self.window_s)
        self.recorder = Recorder(
            child,
            child.lock_holder,
            journal,
            cooldown_s,
            config.limits.min_interval_s,
            retry_s,
            config.limits.lock_wait_s,
            on_refused=lambda n: self._refused(n, config.metrics_textfile),
        )
        host, port = listen
        cls = _HTTPServer6 if ":" in host else _HTTPServer
        try:
            self.httpd = cls((host, port), _Handler)
        except OSError as exc:
            raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        self.httpd.recorder = self.recorder
        self.httpd.root = root
        self.httpd.token_digest = _digest(token) if token is not None else None
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True
        )
        self._stopped = False

    def _refused(self, count: int, textfile: str | None) -> None:
        for problem in refused(self.root, "alert", textfile, count):
            log(problem)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.httpd.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/alertmanager"

    def start(self) -> None:
        self.recorder.start()
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting, then wait for a running capture (bounded) and record the rest."""
        if self._stopped:
            return
        self._stopped = True
        if self._thread.is_alive():  # shutdown() waits forever for a loop never started
            self.httpd.shutdown()
        self.httpd.server_close()
        self.recorder.close()


def serve(
    config: Config,
    root: Path,
    listen: tuple[str, int],
    token: str | None,
    cooldown_s: float,
    window_s: float | None = None,
) -> None:
    """Receive Alertmanager webhooks until SIGTERM or SIGINT; returns after a clean stop.

    Raises ArchiveError (the archive cannot be written) or ListenError before serving.
    """
    server = Server(config, root, listen, token, cooldown_s, window_s)
    stop: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        # Only a flag: the main thread polls it. (Setting an Event from a signal handler
        # can deadlock on the Event's own lock.)
        stop.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.start()
        auth = "a bearer token" if token is not None else "no token"
        log(
            f"listening on {server.url} ({auth}); archive {root}, window "
            f"{server.window_s:g} s, cool-down {cooldown_s:g} s"
        )
        while not stop:
            time.sleep(0.2)
        log(f"{signal.Signals(stop[0]).name}: stopping; a running capture is let finish")
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    log("stopped")
