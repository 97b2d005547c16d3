"""One registry, one interface: every source of evidence is a Probe in its own module.

A probe declares what it reads; the runner owns timing, deadlines, redaction, file
writing and the manifest, so no probe re-implements safety.

Invariants:
- A probe only reads. It never writes, signals or POSTs; it returns data.
- A source that does not exist is a Reading with status `absent` and a reason,
  never an exception and never a zero.
- `order` is the freeze order (what vanishes fastest is read first); `priority` is the
  rank of the probe's files when the disk is full (higher is kept longer).
"""

import errno
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from evidence.capture.config import Config

STATUSES = ("ok", "absent", "unsupported", "denied", "timeout", "error", "skipped")
MODULES = (
    "health",
    "recorder",
    "gpu",
    "processes",
    "engines",
    "memory",
    "vmstat",
    "pressure",
    "host",
    "kernel",
    "logs",
    "prometheus",
)


@dataclass
class Reading:
    """What a probe's freeze returns: a status, a reason when not ok, and its record."""

    status: str = "ok"
    reason: str | None = None
    record: dict[str, Any] | None = None
    # Whole files a probe brings beside its record (the recorder's history), by name.
    files: list[tuple[str, bytes]] = field(default_factory=list)


@dataclass
class Context:
    """What probes may know: the configuration, the capture's start, and the system roots.

    `shared` carries facts one probe leaves for a later one (the processes probe names the
    cgroups of the largest processes for the pressure probe). Roots are parameters so the
    tests can point a probe at a fixture tree.
    """

    config: Config
    started: float
    health: list[dict[str, Any]] | None = None  # the checks that failed, when they triggered us
    root: Path | None = None  # the archive the bundle goes to
    trigger: str = "manual"  # the trigger's kind
    shared: dict[str, Any] = field(default_factory=dict)
    proc: Path = Path("/proc")
    sys: Path = Path("/sys")
    kmsg: Path = Path("/dev/kmsg")


class Probe:
    name: ClassVar[str]
    order: ClassVar[int]
    priority: ClassVar[int]
    timeout_s: ClassVar[float] = 1.0
    samples: ClassVar[bool] = False
    sample_interval_s: ClassVar[float] = 1.0
    sample_timeout_s: ClassVar[float] = 0.8
    # A deferred probe reads history that thirty seconds will not change (Prometheus): it
    # runs beside the watch instead of delaying the freeze of what does change.
    deferred: ClassVar[bool] = False
    # An essential probe is read even when start-up spent the freeze budget (a saturated
    # box): without memory, processes and the GPU (and why it was captured) a bundle
    # explains nothing.
    essential: ClassVar[bool] = False

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.reading: Reading | None = None  # set by the runner after the freeze
        self.deadline = 0.0  # monotonic time by which the runner abandons this call

    def freeze(self) -> Reading:
        """Read the source once, as early as its order allows."""
        raise NotImplementedError

    def sample(self) -> dict[str, Any] | None:
        """One record of the watch, every sample_interval_s; only when `samples` is true."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the probe holds open (a driver session); called once, at the seal."""

    def headline(self, record: dict[str, Any]) -> str:
        """What the freeze found, in one line for the operator watching the capture."""
        return ""


def human_bytes(value: float | None) -> str:
    if value is None:
        return "unknown"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{value:.0f} B"
        value /= 1024
    return f"{value:.1f} GiB"


REGISTRY: dict[str, type[Probe]] = {}


def register(cls: type[Probe]) -> type[Probe]:
    REGISTRY[cls.name] = cls
    return cls


def ordered() -> list[type[Probe]]:
    """Every registered probe, in freeze order."""
    for module in MODULES:
        importlib.import_module(f"evidence.capture.probes.{module}")
    return sorted(REGISTRY.values(), key=lambda cls: cls.order)


def unreadable(exc: OSError, what: str) -> Reading:
    """Map an OSError on a source to the status an operator should read."""
    reason = f"{what}: {exc.strerror or exc}"
    if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENODEV, errno.ENXIO):
        return Reading("absent", reason)
    if exc.errno in (errno.EACCES, errno.EPERM):
        return Reading("denied", reason)
    if exc.errno in (errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL):
        return Reading("unsupported", reason)
    return Reading("error", reason)
