"""What a generated scenario is: the contract between the generator and the harness.

A Scenario is everything the collector could have seen on the box at the moment of the
capture, plus the truth the harness scores against. The generator decides what happened;
the harness only renders it (a bundle, OpenMetrics for promtool, answers to range queries)
and never reads `truth`, `strength` or `story` when it builds the evidence.

Invariants:
- `series` are scraped samples as the exporter published them (real metric names and
  labels), at the scrape times; a missed scrape is a missing sample, never a zero or NaN.
- Times are unix seconds; `end` is the moment the capture started.
- A process or an engine that was dead at the capture is absent from `processes`, or an
  engine with `answering=False`; the bundle never holds readings of a dead engine.
"""

from dataclasses import dataclass, field

TRUTHS = (
    "no-fault",
    "context-creep",
    "concurrency-overload",
    "leak-ratchet",
    "swap-not-unloaded",
    "host-exhaustion",
    "memory-pressure-stall",
)


@dataclass
class RawSeries:
    name: str  # the metric name as exported, e.g. "vllm:num_requests_waiting"
    labels: dict[str, str]  # job and instance included, as Prometheus stores them
    points: list[tuple[float, float]]  # (unix seconds, value) per successful scrape


@dataclass
class EngineAtCapture:
    name: str
    kind: str  # llama-server | vllm | sglang | ollama | llama-swap
    url: str
    answering: bool
    reason: str | None = None  # why not, in the collector's words ("connection refused")
    metrics: dict[str, float] = field(default_factory=dict)  # its /metrics at the capture
    loaded: list[str] = field(default_factory=list)  # models a manager says are loaded


@dataclass
class ProcessAtCapture:
    pid: int
    ppid: int
    name: str
    cmdline: list[str]
    rss_bytes: int
    gpu_bytes: int | None = None  # per-process accelerator memory; None when not listed
    started: float | None = None  # unix seconds; None: up since the box booted


@dataclass
class CheckAtCapture:
    name: str
    kind: str  # http | completion | tcp | command
    ok: bool
    status: str  # ok | error | timeout
    reason: str | None = None


@dataclass
class Scenario:
    id: str  # "<truth>-<seed>", stable for a seed
    seed: int
    truth: str  # one of TRUTHS
    strength: float  # 0..1, how strongly the fault was injected (0 for no-fault)
    deployment: str  # household | office | nightly-batch | agents | retry-loop
    engine: str  # the main engine's kind
    story: str  # one line: what was injected, when, what failed
    hostname: str
    memory_total: int  # host bytes
    unified: bool  # CPU and GPU share one pool (GB10): no separate accelerator total
    end: float  # capture start
    scrape_s: float
    trigger: tuple[str, str | None, str | None]  # kind, name, detail
    failure_at: float | None  # when the service went down (None: nothing failed)
    prometheus: bool  # False: no Prometheus on this box (history only from baselines)
    series: list[RawSeries] = field(default_factory=list)
    # The host in the capture's own 30 s window, at 1 s, ending at `end` + 30.
    window: list[tuple[float, int, int, int]] = field(default_factory=list)  # t, used, avail, swap
    psi_some: float = 0.0  # memory some avg10 during the window
    psi_full: float = 0.0
    swap_total: int = 0
    # A discrete NVIDIA card as NVML reports it (None on a shared pool or without one):
    # its memory and what was in use at the capture.
    card_total: int | None = None
    card_used: int | None = None
    engines: list[EngineAtCapture] = field(default_factory=list)
    processes: list[ProcessAtCapture] = field(default_factory=list)
    kernel: list[tuple[float, str]] = field(default_factory=list)  # (unix seconds, dmesg line)
    logs: list[tuple[float, str]] = field(default_factory=list)  # engine log lines
    checks: list[CheckAtCapture] = field(default_factory=list)
    # Earlier cron baselines of this host (--window 0): (t, used, available, top processes,
    # the card's memory in use as NVML read it then, None where there is no card).
    baselines: list[tuple[float, int, int, list[ProcessAtCapture], int | None]] = field(
        default_factory=list
    )
