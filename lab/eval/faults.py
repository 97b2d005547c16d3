"""The injected faults: when each starts, how strong it is, how it changes the traffic, the
engine's speed and memory, and how it ends.

A fault begins in the hours before the failure (one to six; a leak six to twenty; an
extra caller one to three), on top of the day's rhythm, at a strength in [0.2, 1]. Its
memory growth has a shape (a ratchet, a step, a climb that follows the context high-water,
a culprit's sawtooth) and a size; the machine's own headroom is fitted afterwards
(generate.fit) so that what was left is what the fault took, at the failure and not
before.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from random import Random

from lab.eval import traffic as tr
from lab.eval.profiles import GIB, TIME_ZONES, Deployment, Grid, lognorm, weights_bytes

HOUR = 3600.0
# Local hours when a rhythm has callers: a household's afternoon and evening, an office's
# working day, a nightly batch's run; agents and periodic clients call at every hour.
BUSY_HOURS = {
    "household": frozenset({12, 16, 17, 18, 19, 20, 21, 22}),
    "office": frozenset(range(8, 18)),
    "nightly-batch": frozenset({2, 3}),  # the batch begins by 01:30 (traffic.batch)
}


@dataclass
class Plan:
    truth: str
    strength: float = 0.0
    start: float | None = None  # onset of the fault
    failure_at: float | None = None
    ending: str = "none"  # oom-kill | memcg-oom | abort | torch-oom | load-fail | timeout
    where: str = "acc"  # the pool the fault's memory lands in: acc | host
    shape: str = ""  # the fault's variant (culprit, caller, leak site)
    victim: str = "engine"  # host-exhaustion: who the OOM killer picked
    swap_at: float | None = None
    escalate_at: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def dies(self) -> bool:
        """The main engine's process is gone at the failure."""
        if self.truth == "host-exhaustion":
            return self.victim == "engine"
        return self.ending in ("oom-kill", "memcg-oom", "abort", "torch-oom")


def plan(rng: Random, truth: str, dep: Deployment, end: float) -> Plan:
    """When the fault starts and fails, how strong it is, and how it ends on this engine
    and machine (an engine that allocates up front times out where another would die)."""
    if truth == "no-fault":
        return Plan(truth)
    s = round(rng.uniform(0.2, 1.0), 3)
    failure = end - rng.uniform(2.0, 15.0) * 60.0
    lead = {
        "leak-ratchet": rng.uniform(6.0, 20.0),
        "concurrency-overload": rng.uniform(1.0, 3.0),
    }.get(truth, rng.uniform(1.0, 6.0))
    p = Plan(truth, s, failure - lead * HOUR, failure)
    unified = dep.machine.unified
    eng = dep.engine
    pick = rng.random()
    if truth == "context-creep":
        if eng in ("vllm", "sglang"):
            p.ending = "timeout" if pick < 0.75 else "torch-oom"
        elif eng == "ollama":
            p.ending = "load-fail" if pick < 0.7 or not unified else "oom-kill"
        elif unified and not dep.macos:
            p.ending = "oom-kill" if pick < 0.5 else ("abort" if pick < 0.8 else "timeout")
        else:
            p.ending = "abort" if pick < 0.78 else "timeout"
        p.where = "host" if unified else "acc"
    elif truth == "concurrency-overload":
        p.shape = rng.choice(["agent-loop", "retry-storm", "cron-overlap"])
        if eng == "ollama" or pick < 0.6:
            p.ending = "timeout"
        elif eng in ("vllm", "sglang"):
            p.ending = "torch-oom"
        else:
            p.ending = "oom-kill" if unified and not dep.macos and rng.random() < 0.5 else "abort"
        p.where = "host" if unified else "acc"
    elif truth == "leak-ratchet":
        if eng in ("vllm", "sglang") or unified:
            p.where = "host"
        else:  # a heap leak has to be large to empty a big host: rarer there
            big = dep.machine.host_total > 130 * GIB
            p.where = "host" if pick < (0.15 if big else 0.45) else "acc"
        p.shape = "allocator" if p.where == "acc" else "rss"
        if unified and eng in ("llama-server", "ollama") and dep.prometheus and rng.random() < 0.5:
            # The driver's allocations on a shared pool, not the heap (invisible in RSS, so
            # only where a Prometheus history shows the pool).
            p.shape = "allocator"
        if p.shape == "allocator":
            p.ending = "abort"
        elif not dep.systemd and rng.random() < 0.5 and not dep.macos:
            p.ending = "memcg-oom"
        else:
            p.ending = "oom-kill"
        if eng == "ollama":
            dep.keep_alive = 0.0  # OLLAMA_KEEP_ALIVE=-1: the runner lives all day
    elif truth == "swap-not-unloaded":
        p.swap_at = failure - rng.uniform(0.3, min(5.0, lead)) * HOUR
        p.start = p.swap_at
        p.ending = (
            "load-fail" if pick < 0.6 else ("oom-kill" if unified and not dep.macos else "abort")
        )
        p.where = "host" if unified else "acc"
        dep.keep_alive = 0.0
    elif truth == "host-exhaustion":
        p.shape = rng.choice(["build", "notebook", "data-job", "browser", "container"])
        p.victim = "engine" if pick < 0.65 else "culprit"
        p.ending = "oom-kill" if p.victim == "engine" else "timeout"
        p.where = "host"
    elif truth == "memory-pressure-stall":
        p.shape = rng.choice(["notebook", "data-job", "container", "offload"])
        if p.shape == "offload" and eng != "llama-server":
            p.shape = "data-job"  # only llama-server keeps layers on the CPU (-ngl)
        p.ending = "timeout"
        p.where = "host"
    if dep.macos and p.ending in ("oom-kill", "memcg-oom"):
        p.ending = "abort" if truth != "host-exhaustion" else "oom-kill"
    return p


def adjust(rng: Random, p: Plan, dep: Deployment) -> None:
    """Configuration a fault needs to be possible at all (a context long enough to creep
    in, a slot limit an extra caller can exceed), and a context the machine can hold."""
    _adjust(rng, p, dep)
    if dep.engine in ("vllm", "sglang"):
        return
    mach = dep.machine
    room = mach.acc_total * 0.9 if not mach.unified else mach.host_total * 0.6
    unit = dep.kv_bytes * (dep.slots if dep.engine == "ollama" else 1)
    most = (room - weights_bytes(dep) - 1.0 * GIB) / unit
    while dep.ctx > most and dep.slots > 1:
        dep.slots //= 2
        if dep.engine == "llama-server":
            dep.ctx //= 2
        else:
            unit = dep.kv_bytes * dep.slots
            most = (room - weights_bytes(dep) - 1.0 * GIB) / unit
    if dep.ctx > most:
        dep.ctx = max(2048 * dep.slots, int(most) // 256 * 256)


def _adjust(rng: Random, p: Plan, dep: Deployment) -> None:
    if p.truth == "context-creep":
        _callers_at_failure(rng, p, dep)
        if dep.engine == "llama-server":
            per_slot = rng.choice([16384, 24576, 32768, 32768, 65536])
            while dep.slots > 1 and per_slot * dep.slots > dep.model.max_ctx:
                dep.slots //= 2
            dep.ctx = min(dep.model.max_ctx, per_slot * dep.slots)
        elif dep.engine == "ollama":
            dep.ctx = rng.choice([2048, 4096, 8192])
        else:
            dep.ctx = min(dep.model.max_ctx, rng.choice([32768, 65536, 131072]))
    if p.truth == "concurrency-overload" and dep.engine in ("vllm", "sglang"):
        dep.slots = rng.choice([4, 8, 8, 16])
    if p.truth == "swap-not-unloaded" and dep.engine in ("vllm", "sglang"):
        # Set low to leave room for the models it swaps with, but with a cache to speak of.
        need = (weights_bytes(dep) + 2.5 * GIB + 3 * dep.ctx * dep.kv_bytes) / dep.machine.acc_total
        dep.util = min(0.9, max(rng.uniform(0.4, 0.6), need))


def _callers_at_failure(rng: Random, p: Plan, dep: Deployment) -> None:
    """A creep fails when a grown conversation arrives: one failing in the small hours of a
    household nobody calls would be a fault without its cause. The time zone is drawn
    again among those that put the failure in the rhythm's busy hours."""
    busy = BUSY_HOURS.get(dep.rhythm)
    if busy is None or p.failure_at is None:
        return
    fits = [tz for tz in TIME_ZONES if int((p.failure_at / HOUR + tz) % 24.0) in busy]
    if fits:
        dep.tz = rng.choice(fits)


def creep_offset(rng: Random, p: Plan, dep: Deployment, ctx_slot: int) -> Callable[[float], float]:
    """Extra context every conversation carries while the fault runs: a chat never closed,
    an agent that keeps every tool result, a RAG step that retrieves more each turn."""
    start, failure = p.start or 0.0, p.failure_at or 0.0
    room = ctx_slot * 0.93 - 2500.0
    height = max(2000.0, room * (0.55 + 0.45 * p.strength))
    gamma = rng.uniform(0.8, 1.6)
    wobble = [rng.uniform(0.85, 1.15) for _ in range(64)]

    def offset(t: float) -> float:
        if t < start:
            return 0.0
        x = min(1.0, (t - start) / (failure - start))
        return height * (x**gamma) * wobble[int(x * 63)]

    return offset


def extra_requests(
    rng: Random, p: Plan, dep: Deployment, grid: Grid, base: list[tr.Request], scale: float
) -> list[tr.Request]:
    """A new caller's requests: an agent loop, a retry storm or a cron job that overlaps
    itself, filling what the usual traffic leaves of the engine in the last hours, and
    then more (the escalation just before the failure). `scale` trims the earlier part."""
    start, failure = p.start or 0.0, p.failure_at or 0.0
    if p.escalate_at is None:
        if p.dies:
            p.escalate_at = failure - rng.uniform(4.0, 10.0) * 60.0
        else:  # the checks start failing a few minutes into it; the capture follows
            p.escalate_at = grid.end - rng.uniform(6.0, 16.0) * 60.0
    p_med, o_med = 1500.0, 260.0
    cap = tr.capacity_per_s(dep, int(p_med * 1.2), int(o_med * 1.2))
    base_busy: dict[int, float] = {}
    slots_eff = dep.slots / (1 + 0.08 * (dep.slots - 1))
    for a, pt, o, _ in base:
        if a >= start - 600:
            k = int(a // 300)
            base_busy[k] = base_busy.get(k, 0.0) + tr.service_s(dep, pt, o)
    # Just about what the engine can take with the usual traffic: a queue that comes and
    # goes through the hours, every slot busy, waits that a health check still tolerates.
    early = (0.93 + 0.1 * p.strength) * scale
    late = 1.6 + 1.4 * p.strength
    ramp = rng.uniform(0.1, 0.35)
    period = rng.uniform(10, 20) * 60.0
    out: list[tr.Request] = []
    t = start
    stop = grid.end
    while t < stop:
        x = (t - start) / max(1.0, failure - start)
        if p.shape == "agent-loop":
            shape = min(1.0, 0.55 + x / ramp)
        elif p.shape == "retry-storm":
            shape = 0.75 + 0.25 * x
        else:  # cron-overlap: each run starts every period and lasts longer each time
            phase = ((t - start) % period) / period
            shape = 1.04 if phase < 0.35 + 0.6 * x else 0.8
        target = late if t >= p.escalate_at else early * shape
        used = base_busy.get(int(t // 300), 0.0) / (300.0 * slots_eff)
        rate = cap * max(0.05 * scale, target - used)
        t += rng.expovariate(max(rate, 1e-4))
        if t >= stop:
            break
        pt = lognorm(rng, p_med, 0.5)
        o = lognorm(rng, o_med, 0.5)
        out.append((t, int(pt), int(o), tr.EXTRA))
    return out


def stall_level(p: Plan, grid: Grid, rng: Random) -> list[float]:
    """How hard the working set presses (0..1) at each scrape: builds over the fault's hours
    with waves (the job's phases), holds after the failure."""
    out = [0.0] * grid.n
    if p.truth != "memory-pressure-stall":
        return out
    start, failure = p.start or 0.0, p.failure_at or 0.0
    gamma = rng.uniform(0.8, 1.8)
    period = rng.uniform(8, 30) * 60.0
    phase = rng.uniform(0, 2 * math.pi)
    for k in range(grid.after(start), grid.n):
        t = grid.time(k)
        x = min(1.0, (t - start) / (failure - start))
        wave = 0.8 + 0.2 * math.sin(2 * math.pi * t / period + phase)
        out[k] = min(1.0, (x**gamma) * wave + (0.15 if t >= failure else 0.0))
    return out


def ratchet(
    rng: Random, grid: Grid, activity: list[float], start: float, failure: float
) -> list[float]:
    """A leak's shape, 0 at the start and 1 at the failure: each burst of work leaves a
    little behind, quiet hours leave nothing, nothing is ever given back."""
    out = [0.0] * grid.n
    k0, k1 = grid.after(start), grid.at(failure)
    total = 0.0
    steps = []
    for k in range(k0, grid.n):
        a = activity[k]
        # Fragmentation leaves a remainder only now and then: a piece of some bursts.
        bit = a * (rng.expovariate(1.0) if rng.random() < 0.35 else 0.0)
        steps.append(bit)
        if k <= k1:
            total += bit
    if total <= 0:
        for k in range(k0, grid.n):
            out[k] = min(1.0, (k - k0 + 1) / max(1, k1 - k0 + 1))
        return out
    acc = 0.0
    for i, k in enumerate(range(k0, grid.n)):
        acc += steps[i]
        out[k] = acc / total
    return out


def culprit_shape(rng: Random, p: Plan, grid: Grid) -> list[float]:
    """Another process's memory, 0 before it starts growing and 1 at the failure: a
    build's parallel jobs (a rising sawtooth), a notebook's cells (steps that stay), a
    data job (a climb), a browser (slow growth), a container's heap."""
    out = [0.0] * grid.n
    start, failure = p.start or 0.0, p.failure_at or 0.0
    k0, k1 = grid.after(start), grid.at(failure)
    span = max(1, k1 - k0)
    shape = p.shape
    steps: list[tuple[int, float]] = []
    if shape == "notebook":
        at = sorted(rng.randrange(k0, k1 + 1) for _ in range(rng.randint(5, 14)))
        sizes = [rng.expovariate(1.0) for _ in at]
        steps = list(zip(at, sizes, strict=True))
        whole = sum(sizes) or 1.0
    saw = rng.uniform(3, 9) * 60.0 / grid.dt
    g = rng.uniform(1.0, 1.6)
    level = 0.0
    for k in range(k0, grid.n):
        x = min(1.0, (k - k0) / span)
        if shape == "build":
            # Jobs start and finish; the last tooth tops out at the failure.
            tooth = 1.0 - ((k1 - k) % max(1.0, saw)) / max(1.0, saw)
            v = (0.25 + 0.75 * x) * (0.72 + 0.28 * tooth) if k < k1 else 1.0
        elif shape == "notebook":
            while steps and steps[0][0] <= k:
                level += steps.pop(0)[1] / whole
            v = min(1.0, level)
        elif shape == "browser":
            v = x**0.8
        else:
            v = x**g
        if k >= k1:
            v = 1.0
        out[k] = v
    return out


def concurrency_memory(running: list[float], waiting: list[float], per_seq: float) -> list[float]:
    """Memory that tracks the sequences in flight (compute and pool space per sequence,
    buffers for the queued ones), smoothed over a scrape or two."""
    out = []
    level = 0.0
    for r, w in zip(running, waiting, strict=True):
        level = 0.6 * level + 0.4 * (r + 0.25 * w) * per_seq
        out.append(level)
    return out


def describe(p: Plan, dep: Deployment, zone: float) -> str:
    """The scenario's one line."""
    if p.truth == "no-fault":
        return ""

    def hm(t: float | None) -> str:
        if t is None:
            return "?"
        h = ((t / 3600.0) + zone) % 24.0
        return f"{int(h):02d}:{int((h % 1) * 60):02d}"

    end = {
        "oom-kill": "jetsam killed it" if dep.macos else "the kernel OOM killer took it",
        "memcg-oom": "its container's memory limit killed it",
        "abort": "it aborted on an allocation failure",
        "torch-oom": "its engine core died of a CUDA OOM",
        "load-fail": "the next model load failed to allocate",
        "timeout": "the health check timed out",
    }.get(p.ending, p.ending)
    what = {
        "context-creep": "conversations grew longer",
        "concurrency-overload": f"a new caller ({p.shape}) added load",
        "leak-ratchet": f"the engine leaked ({p.shape})",
        "swap-not-unloaded": f"a second model ({dep.other_model.key}) loaded, the first kept",
        "host-exhaustion": f"another process ({p.shape}) grew; victim {p.victim}",
        "memory-pressure-stall": f"the working set outgrew RAM ({p.shape}); swap filled",
    }[p.truth]
    return (
        f"{p.truth} at strength {p.strength:.2f}: {what} from {hm(p.start)} local, "
        f"failure {hm(p.failure_at)}: {end}" + (f"; {'; '.join(p.notes)}" if p.notes else "")
    )


def stall_psi(level: float, strength: float) -> tuple[float, float]:
    """Share of time some / all tasks stall on memory at a stall level."""
    peak = 0.2 + 0.4 * (strength - 0.2) / 0.8
    some = peak * level
    return some, some * 0.45
