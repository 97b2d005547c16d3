"""The one TOML configuration file, validated into plain dataclasses.

Invariant: a configuration error names the offending key and raises ConfigError,
which the command line turns into one line and exit status 2. The keys of the
design document are the contract: more may be added, none renamed.
"""

import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from evidence.archive.clock import duration_s
from evidence.capture.redact import redact_text
from evidence.schemas import engine_kinds

ENGINE_KINDS = tuple(engine_kinds())  # evidence/schemas/engines.toml
CHECK_KINDS = ("http", "completion", "command", "tcp")
RUNTIMES = ("docker", "podman")
SYSTEM_CONFIG = Path("/etc/evidence/config.toml")
MAX_WINDOW_S = 3600


class ConfigError(Exception):
    """A configuration problem, worded for the operator: `where: what is wrong`."""


@dataclass(frozen=True)
class LogSource:
    name: str
    path: str | None = None
    unit: str | None = None
    container: str | None = None
    runtime: str | None = None


@dataclass(frozen=True)
class Engine:
    kind: str
    url: str
    name: str
    container: str | None = None
    unit: str | None = None
    timeout_s: float = 1.0


@dataclass(frozen=True)
class Check:
    name: str
    kind: str
    url: str | None = None
    model: str | None = None
    command: str | None = None
    timeout_s: float = 10.0
    expect_status: int = 200
    expect_text: str | None = None
    json_field: str | None = None
    json_value: str | None = None
    prompt: str = "Reply with one word: ready."
    max_tokens: int = 1024
    api_key_env: str | None = None


@dataclass(frozen=True)
class CaptureLimits:
    """Bounds of the collector; the defaults keep a 30 s bundle under about 5 MB."""

    log_bytes: int = 512 * 1024
    log_lines: int = 5000
    log_since_s: int = 6 * 3600
    kernel_lookback_s: int = 24 * 3600
    kernel_tail: int = 300
    lock_wait_s: float = 10.0
    top_n: int = 20
    # One capture per trigger (kind:name) per this interval; manual ones are never limited.
    min_interval_s: int = 60


@dataclass(frozen=True)
class RecorderSettings:
    """The resident recorder (`evidence record`): its ring, its pace, what makes it capture."""

    ring_bytes: int = 64 * 2**20
    history_s: int = 3600  # what a capture takes from the ring
    host_interval_s: float = 1.0  # memory, vmstat, pressure
    process_interval_s: float = 5.0  # the top processes, the GPU
    engine_interval_s: float = 10.0
    # It captures by itself when memory PSI (some, avg10) stays above psi_pct for psi_for_s,
    # when available memory falls under available_share of the total, when the OOM-kill
    # counter moves, and when an engine that answered stops answering.
    psi_pct: float = 20.0
    psi_for_s: int = 30
    available_share: float = 0.05


@dataclass(frozen=True)
class Config:
    source: str | None = None
    archive: str | None = None
    window_s: float = 30.0
    prometheus_url: str | None = None
    prometheus_lookback_s: int = 24 * 3600
    prometheus_queries: tuple[tuple[str, str], ...] = ()
    engines: tuple[Engine, ...] = ()
    logs: tuple[LogSource, ...] = ()
    checks: tuple[Check, ...] = ()
    limits: CaptureLimits = field(default_factory=CaptureLimits)
    recorder: RecorderSettings = field(default_factory=RecorderSettings)
    # node-exporter's textfile directory: evidence's own metrics are written there too.
    metrics_textfile: str | None = None
    # Alertmanager's base URL: a classified incident's verdict is posted there.
    notify_alertmanager: str | None = None

    def log_sources(self) -> list[LogSource]:
        """Configured logs plus the journald units and containers named by engines."""
        sources = list(self.logs)
        for engine in self.engines:
            if engine.unit:
                sources.append(LogSource(name=f"{engine.name}:unit", unit=engine.unit))
            if engine.container:
                sources.append(
                    LogSource(name=f"{engine.name}:container", container=engine.container)
                )
        return sources


def parse_duration(text: Any, where: str) -> int:
    """`90s`, `15m`, `24h`, `7d` -> seconds."""
    seconds = duration_s(str(text))
    if seconds is None:
        raise ConfigError(f"{where}: expected a duration such as 30m, 24h or 7d, got {text!r}")
    return seconds


def locate(explicit: str | None) -> Path | None:
    """--config, then $EVIDENCE_CONFIG, then the user's and the system's; None if none exist."""
    named = explicit or os.environ.get("EVIDENCE_CONFIG")
    if named:
        path = Path(named).expanduser().absolute()
        if not _is_file(path):
            raise ConfigError(f"{path}: configuration file not found")
        return path
    for path in default_paths():
        if _is_file(path):
            return path
    return None


def default_paths() -> tuple[Path, Path]:
    """The user's configuration first: it overrides the system's, as XDG says."""
    user = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return Path(user) / "evidence" / "config.toml", SYSTEM_CONFIG


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError as exc:  # a folder on the way that this user may not enter
        raise ConfigError(f"{path}: cannot be read: {exc.strerror}") from None


def load(explicit: str | None = None) -> Config:
    """Read and validate the configuration; an absent default file means defaults."""
    path = locate(explicit)
    if path is None:
        return Config()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    try:
        return from_dict(data, source=str(path))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


class _Table:
    """Typed access to one TOML table that remembers where it is, for error messages."""

    def __init__(self, data: Any, where: str, allowed: set[str]):
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a table")
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ConfigError(f"{self._key(where, unknown[0])}: unknown key")
        self.data, self.where = data, where

    @staticmethod
    def _key(where: str, key: str) -> str:
        return f"{where}.{key}" if where else key

    def text(self, key: str, required: bool = False) -> str | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise ConfigError(f"{self._key(self.where, key)}: required")
            return None
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{self._key(self.where, key)}: expected a non-empty string")
        return value

    def number(self, key: str, default: float, minimum: float, maximum: float) -> float:
        value = self.data.get(key, default)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not minimum <= value <= maximum
        ):
            raise ConfigError(
                f"{self._key(self.where, key)}: expected a number from {minimum:g} to {maximum:g}"
            )
        return value

    def choice(self, key: str, choices: tuple[str, ...], required: bool = False) -> str | None:
        value = self.text(key, required)
        if value is not None and value not in choices:
            raise ConfigError(
                f"{self._key(self.where, key)}: unknown {key} {value!r} "
                f"(expected one of {', '.join(choices)})"
            )
        return value

    def url(self, key: str, required: bool = False) -> str | None:
        value = self.text(key, required)
        if value is not None:
            try:
                parsed = urlparse(value)
                valid = parsed.scheme in ("http", "https") and bool(parsed.hostname)
            except ValueError:  # e.g. an unclosed IPv6 bracket
                valid = False
            if not valid:  # the password of a mistyped URL is still a password
                raise ConfigError(
                    f"{self._key(self.where, key)}: not an http(s) URL: {redact_text(value)!r}"
                )
        return value

    def duration(self, key: str, default: int) -> int:
        value = self.data.get(key)
        return default if value is None else parse_duration(value, self._key(self.where, key))

    def tables(self, key: str) -> list[tuple[Any, str]]:
        value = self.data.get(key, [])
        if not isinstance(value, list):
            raise ConfigError(
                f"{self._key(self.where, key)}: expected an array of tables ([[{key}]])"
            )
        return [(item, f"{key}[{i}]") for i, item in enumerate(value)]


def from_dict(data: dict[str, Any], source: str | None = None) -> Config:
    """Validate a parsed TOML document; raises ConfigError naming the first bad key."""
    top = _Table(
        data,
        "",
        {
            "archive",
            "window_s",
            "prometheus",
            "engines",
            "logs",
            "checks",
            "capture",
            "recorder",
            "metrics",
            "notify",
        },
    )
    metrics = _Table(data.get("metrics", {}), "metrics", {"textfile"})
    notify = _Table(data.get("notify", {}), "notify", {"alertmanager"})
    prometheus = _Table(data.get("prometheus", {}), "prometheus", {"url", "lookback", "queries"})
    queries = prometheus.data.get("queries", {})
    if not isinstance(queries, dict) or not all(
        isinstance(v, str) and v.strip() for v in queries.values()
    ):
        raise ConfigError('prometheus.queries: expected a table of name = "PromQL expression"')
    capture = _Table(
        data.get("capture", {}),
        "capture",
        {
            "log_bytes",
            "log_lines",
            "log_since",
            "kernel_lookback",
            "kernel_tail",
            "lock_wait_s",
            "top_n",
            "min_interval",
        },
    )
    defaults = CaptureLimits()
    limits = CaptureLimits(
        log_bytes=int(capture.number("log_bytes", defaults.log_bytes, 1024, 64 * 2**20)),
        log_lines=int(capture.number("log_lines", defaults.log_lines, 1, 10**6)),
        log_since_s=capture.duration("log_since", defaults.log_since_s),
        kernel_lookback_s=capture.duration("kernel_lookback", defaults.kernel_lookback_s),
        kernel_tail=int(capture.number("kernel_tail", defaults.kernel_tail, 0, 10**5)),
        lock_wait_s=capture.number("lock_wait_s", defaults.lock_wait_s, 0, 600),
        top_n=int(capture.number("top_n", defaults.top_n, 1, 1000)),
        min_interval_s=capture.duration("min_interval", defaults.min_interval_s),
    )
    recorder = _recorder(_Table(data.get("recorder", {}), "recorder", set(_RECORDER_KEYS)))

    engines = []
    for item, where in top.tables("engines"):
        t = _Table(item, where, {"kind", "url", "name", "container", "unit", "timeout_s"})
        kind = t.choice("kind", ENGINE_KINDS, required=True)
        engines.append(
            Engine(
                kind=kind,
                url=t.url("url", required=True),
                name=t.text("name") or kind,
                container=t.text("container"),
                unit=t.text("unit"),
                timeout_s=t.number("timeout_s", 1.0, 0.05, 60),
            )
        )

    logs = []
    for item, where in top.tables("logs"):
        t = _Table(item, where, {"path", "unit", "container", "runtime", "name"})
        origins = [k for k in ("path", "unit", "container") if t.text(k)]
        if len(origins) != 1:
            raise ConfigError(f"{where}: give exactly one of path, unit or container")
        origin = t.text(origins[0])
        logs.append(
            LogSource(
                name=t.text("name") or origin,
                path=t.text("path"),
                unit=t.text("unit"),
                container=t.text("container"),
                runtime=t.choice("runtime", RUNTIMES),
            )
        )

    checks = []
    for item, where in top.tables("checks"):
        t = _Table(
            item,
            where,
            {
                "name",
                "kind",
                "url",
                "model",
                "command",
                "timeout_s",
                "expect_status",
                "expect_text",
                "json_field",
                "json_value",
                "prompt",
                "max_tokens",
                "api_key_env",
            },
        )
        kind = t.choice("kind", CHECK_KINDS, required=True)
        checks.append(
            Check(
                name=t.text("name", required=True),
                kind=kind,
                url=t.url("url", required=kind != "command"),
                model=t.text("model"),
                command=t.text("command", required=kind == "command"),
                timeout_s=t.number("timeout_s", 10.0, 0.1, 600),
                expect_status=int(t.number("expect_status", 200, 100, 599)),
                expect_text=t.text("expect_text"),
                json_field=t.text("json_field"),
                json_value=t.text("json_value"),
                prompt=t.text("prompt") or Check.prompt,
                max_tokens=int(t.number("max_tokens", Check.max_tokens, 1, 10**6)),
                api_key_env=t.text("api_key_env"),
            )
        )
        if [c.name for c in checks].count(checks[-1].name) > 1:
            raise ConfigError(f"{where}.name: {checks[-1].name!r} is used by two checks")

    return Config(
        source=source,
        archive=top.text("archive"),
        window_s=top.number("window_s", 30.0, 0, MAX_WINDOW_S),
        prometheus_url=prometheus.url("url"),
        prometheus_lookback_s=prometheus.duration("lookback", 24 * 3600),
        prometheus_queries=tuple(queries.items()),
        engines=tuple(engines),
        logs=tuple(logs),
        checks=tuple(checks),
        limits=limits,
        recorder=recorder,
        metrics_textfile=metrics.text("textfile"),
        notify_alertmanager=notify.url("alertmanager"),
    )


_RECORDER_KEYS = (
    "ring_size",
    "history",
    "host_interval_s",
    "process_interval_s",
    "engine_interval_s",
    "psi_pct",
    "psi_for",
    "available_share",
)


def _recorder(t: _Table) -> RecorderSettings:
    d = RecorderSettings()
    return RecorderSettings(
        ring_bytes=int(t.number("ring_size", d.ring_bytes, 2**20, 2**40)),
        history_s=t.duration("history", d.history_s),
        host_interval_s=t.number("host_interval_s", d.host_interval_s, 0.1, 60),
        process_interval_s=t.number("process_interval_s", d.process_interval_s, 0.1, 600),
        engine_interval_s=t.number("engine_interval_s", d.engine_interval_s, 1, 600),
        psi_pct=t.number("psi_pct", d.psi_pct, 0, 100),
        psi_for_s=t.duration("psi_for", d.psi_for_s),
        available_share=t.number("available_share", d.available_share, 0, 1),
    )
