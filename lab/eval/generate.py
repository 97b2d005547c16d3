"""Day-long histories of local AI deployments, healthy or with one injected fault, for
`make eval`.

    generate(seed, truth, end) -> Scenario   one day ending at `end`, reproducible alone
    suite(seed, count, end) -> list[Scenario]

Each scenario is built in stages, all from one random.Random: a machine and a deployment
(profiles), a plan for the fault (faults), the day's requests (traffic), the engine
serving them (engine), the host around it (host), a fit of the machine's headroom so the
fault's memory runs out exactly at the failure (fit below), then what the exporters
published (exporters) and what the collector found at the capture (atcapture).
"""

import gc
from bisect import bisect_left
from collections.abc import Iterator
from contextlib import contextmanager
from random import Random

from lab.eval import atcapture, exporters, faults, lines
from lab.eval import engine as en
from lab.eval import host as hs
from lab.eval import traffic as tf
from lab.eval.profiles import (
    GIB,
    MIB,
    MODELS,
    Deployment,
    Grid,
    deployment,
    machine,
    static_bytes,
    weights_bytes,
)
from lab.eval.world import TRUTHS, Scenario

HOUR = 3600.0


def _mask(grid: Grid, spans: list[tuple[float, float]]) -> list[bool]:
    out = [False] * grid.n
    for a, b in spans:
        for k in range(grid.after(a), min(grid.n, grid.after(b))):
            out[k] = True
    return out


class World:
    """One scenario under construction."""

    def __init__(self, seed: int, truth: str, end: float) -> None:
        if truth not in TRUTHS:
            raise ValueError(f"unknown truth {truth!r}")
        self.seed, self.truth, self.end = seed, truth, float(end)
        self.rng = rng = Random(f"{seed}:{truth}")
        self.mach = machine(rng, truth)
        self.dep: Deployment = deployment(rng, truth, self.mach)
        self.grid = Grid.make(self.end, self.dep.scrape_s)
        self.plan = faults.plan(rng, truth, self.dep, self.end)
        faults.adjust(rng, self.plan, self.dep)
        self.kills: list[float] = []
        self.kernel: list[tuple[float, str]] = []
        self.logs: list[tuple[float, str]] = []
        self.notes: list[str] = []
        self.culprit = [0.0] * self.grid.n
        self.other_gpu = 0.0
        self.filler_services = 0.0
        self.procs: list[en.Proc] = []
        self.memcg_kill: float | None = None
        self.ollama_steps: list[int] = []  # scrapes where Ollama reloaded with more context

    # -- stage 1: who calls, and when the engine is there to answer ----------------------

    def traffic(self) -> None:
        dep, p, rng, grid = self.dep, self.plan, self.rng, self.grid
        if dep.engine == "llama-server":
            ctx_slot = dep.ctx // dep.slots
        elif dep.engine == "ollama" and p.truth == "context-creep":
            ctx_slot = min(dep.model.max_ctx, dep.ctx * 8)
        else:
            ctx_slot = dep.ctx
        self.ctx_slot = ctx_slot
        offset = None
        if p.truth == "context-creep":
            offset = faults.creep_offset(rng, p, dep, ctx_slot)
        self.tr, self.batch = tf.day(rng, grid, dep, ctx_slot, offset, p.start)
        self.load_s = weights_bytes(dep) / (rng.uniform(1.5, 5.0) * GIB) + rng.uniform(3, 15)

    def timeline(self) -> None:
        """The main engine's life: restarts by the operator, unloads after an idle timeout,
        a swap to another model and back (llama-swap), its death at the failure."""
        dep, p, rng, grid = self.dep, self.plan, self.rng, self.grid
        onset = p.start if p.start is not None else grid.end
        self.down: list[tuple[float, float]] = []
        if rng.random() < 0.15:
            latest = min(onset - HOUR, grid.end - HOUR)
            if latest > grid.t0 + HOUR:
                r = rng.uniform(grid.t0 + HOUR, latest)
                self.down.append((r, r + rng.uniform(20, 150) + self.load_s))
                self.notes.append("operator restarted the engine")
        self.b_spans: list[tuple[float, float]] = []
        if dep.managed and p.truth != "swap-not-unloaded" and rng.random() < 0.3:
            latest = onset - 1.5 * HOUR
            if latest > grid.t0 + HOUR:
                b0 = rng.uniform(grid.t0 + HOUR, latest)
                self.b_spans.append((b0, b0 + rng.uniform(10, 40) * 60.0))
                self.notes.append(f"llama-swap swapped to {dep.other_model.key} and back")
        reqs = sorted(self.tr.requests)
        reqs = [r for r in reqs if not any(a <= r[0] < b for a, b in self.down)]
        if p.dies and p.failure_at is not None:
            reqs = [r for r in reqs if r[0] < p.failure_at]
        self.base = reqs
        spans = [(grid.t0 - 1.0, grid.end + 1.0)]
        resident = rng.random() < 0.5
        if dep.keep_alive > 0:
            spans = en.loaded_spans(reqs, dep.keep_alive, grid.t0 - 1.0, grid.end, resident)
        alive_spans = []
        for a, b in spans:
            cuts = sorted(self.down + [(x, y + self.load_s) for x, y in self.b_spans])
            cur = a
            for x, y in cuts:
                if y <= cur or x >= b:
                    continue
                if x > cur:
                    alive_spans.append((cur, x))
                cur = max(cur, y)
            if cur < b:
                alive_spans.append((cur, b))
        if p.dies and p.failure_at is not None and p.truth != "swap-not-unloaded":
            alive_spans = [(a, min(b, p.failure_at)) for a, b in alive_spans if a < p.failure_at]
        self.alive_spans = alive_spans
        # Requests that found the model unloaded wait for its load: the first of each span,
        # and the first after a swap back.
        self.cold_at: set[float] = set()
        loads = [a for a, _ in spans if not (a < grid.t0 and resident)]
        loads += [y for _, y in self.b_spans]
        arrivals = [r[0] for r in reqs]
        for t in loads:
            j = bisect_left(arrivals, t)
            if j < len(reqs):
                self.cold_at.add(arrivals[j])

    # -- stage 2: the engine serving it --------------------------------------------------

    def serve(self) -> None:
        dep, p, rng, grid = self.dep, self.plan, self.rng, self.grid
        self.slow = [1.0] * grid.n
        level = faults.stall_level(p, grid, rng)
        self.stall = [faults.stall_psi(v, p.strength) if v > 0 else (0.0, 0.0) for v in level]
        for k, (some, _) in enumerate(self.stall):
            if some > 0:
                self.slow[k] = 1.0 / (1.0 - 0.9 * some)
        if p.truth == "host-exhaustion" and p.failure_at is not None:
            k1 = grid.at(p.failure_at)
            for k in range(max(0, k1 - int(900 / grid.dt)), grid.n):
                self.slow[k] = 2.5
        w = weights_bytes(dep)
        self.act = rng.uniform(1.0, 3.0) * GIB
        cap = float("inf")
        if dep.engine in ("vllm", "sglang"):
            dep.util = max(dep.util, (w + self.act + 2 * GIB) / dep.machine.acc_total)
            dep.util = min(dep.util, 0.95)
            cap = max(4096.0, (dep.util * dep.machine.acc_total - w - self.act) / dep.kv_bytes)
        self.check_timeout = rng.choice([30.0, 60.0, 60.0, 120.0])
        if p.truth == "concurrency-overload":  # a completion check sized for a busy engine
            self.check_timeout = rng.choice([60.0, 90.0, 120.0])
        if p.ending == "timeout" and p.truth != "concurrency-overload":
            self.base = self._retries(self.base)
        reqs = self.base
        if p.truth == "concurrency-overload":
            reqs, served = self._overload(cap)
        else:
            if p.truth == "context-creep" and dep.engine in ("vllm", "sglang"):
                reqs, cap = self._creep_capacity(reqs)
                self.base = reqs
            cold = self._cold_for(reqs)
            served = en.simulate(reqs, dep, dep.slots, cap, self.slow, grid, cold, self.load_s)
        self.cap = cap
        self.reqs, self.served = reqs, served
        self.g = en.gauges(grid, reqs, served, self.tr.max_out)

    def _retries(self, reqs: list[tf.Request]) -> list[tf.Request]:
        """Users retrying while the service hangs: in the minutes around the failure the
        requests keep coming at more than it can take, the size they have been lately."""
        p, rng, dep, grid = self.plan, self.rng, self.dep, self.grid
        fail = p.failure_at or grid.end
        recent = (
            [r for r in reqs if fail - 3600.0 <= r[0] < fail] or reqs[-20:] or [(0, 800, 200, 0)]
        )
        # The people (or scripts) still using it press retry: each about once per client
        # timeout. A handful in a household, more in an office; never a flood.
        users = {"household": (2, 5), "office": (4, 16), "agents": (3, 10)}.get(dep.rhythm, (2, 6))
        rate = rng.randint(*users) / rng.uniform(60.0, 180.0)
        t = fail - rng.uniform(2.0, 6.0) * 60.0
        grown = self.tr.offset
        extra = []
        while True:
            t += rng.expovariate(rate)
            if t >= grid.end:
                break
            q = recent[rng.randrange(len(recent))]
            # The conversation retried now carries what a creeping context added since.
            pt = min(q[1] + max(0.0, grown(t) - grown(q[0])), (self.ctx_slot - q[2]) * 0.985)
            extra.append((t, int(pt), q[2], tf.HUMAN))
        return sorted(reqs + extra)

    def _creep_capacity(self, reqs: list[tf.Request]) -> tuple[list[tf.Request], float]:
        """A KV cache that the grown conversations overfill in the last minutes and the
        ordinary day did not: sized for the conversations of last week."""
        dep, p, grid, rng = self.dep, self.plan, self.grid, self.rng
        inf = float("inf")
        start, fail = p.start or grid.t0, p.failure_at or grid.end
        kf, k0 = grid.at(fail), grid.after(start)
        win = max(1, int(1200 / grid.dt))

        def demand(rs: list[tf.Request]) -> tuple[float, float]:
            cold = self._cold_for(rs)
            sv = en.simulate(rs, dep, dep.slots, inf, self.slow, grid, cold, self.load_s)
            kv = en.gauges(grid, rs, sv, self.tr.max_out).kv_tokens
            return max(kv[:k0] or [1.0]), max(kv[max(0, kf - win) : kf + 1] or [1.0])

        early, near = demand(reqs)
        for _ in range(3):
            if near >= early * 1.4:
                break
            # The conversations that day were longer still than the offset made them.
            boost = min(4.0, 1.5 * early / max(near, 1.0))
            limit = dep.ctx * 0.97
            out = []
            for a, pt, o, src in reqs:
                if a >= start:
                    x = min(1.0, (a - start) / max(1.0, fail - start))
                    pt = int(min(limit - o, pt * (1.0 + (boost - 1.0) * x)))
                out.append((a, max(16, pt), o, src))
            reqs = out
            early, near = demand(reqs)
        cap = min(early * rng.uniform(1.1, 1.3), near / rng.uniform(1.03, 1.2))
        w = weights_bytes(dep)
        total = dep.machine.acc_total
        top = 0.75 if self.mach.unified else 0.92  # what people leave the rest of the box
        cap = max(4096.0, min(cap, (top * total - w - self.act) / dep.kv_bytes))
        dep.util = min(top, max(0.3, (w + self.act + cap * dep.kv_bytes) / total))
        return reqs, cap

    def _overload(self, cap: float) -> tuple[list[tf.Request], en.Served]:
        """The new caller's requests, trimmed until the health check's first sustained
        timeouts come at the end and not hours earlier."""
        dep, p, rng, grid = self.dep, self.plan, self.rng, self.grid
        scale = 1.0
        reqs: list[tf.Request] = self.base
        served = None
        fixed_failure = p.dies
        for _ in range(6):
            state = rng.getstate()
            extra = faults.extra_requests(rng, p, dep, grid, self.base, scale)
            if p.dies and p.failure_at is not None:
                extra = [r for r in extra if r[0] < p.failure_at]
            reqs = sorted(self.base + extra)
            cold = self._cold_for(reqs)
            served = en.simulate(reqs, dep, dep.slots, cap, self.slow, grid, cold, self.load_s)
            if fixed_failure:
                break
            first = self._first_timeout(reqs, served, p.start or grid.t0)
            esc = p.escalate_at or grid.end
            if first is None or first >= esc - 120.0:
                if first is not None and first <= grid.end - 90.0:
                    p.failure_at = first
                break
            scale *= 0.8
            rng.setstate(state)  # the same caller, less of it
        assert served is not None
        return reqs, served

    def _cold_for(self, reqs: list[tf.Request]) -> set[int]:
        """Indices, in this list of requests, of those that waited for a model load."""
        return {j for j, r in enumerate(reqs) if r[0] in self.cold_at}

    def _first_timeout(
        self, reqs: list[tf.Request], served: en.Served, since: float
    ) -> float | None:
        t, run, first = since, 0, None
        while t < self.grid.end - 60.0:
            if en.check_latency(reqs, served, t) > self.check_timeout:
                run += 1
                first = first if first is not None else t
                if run >= 3:
                    return first
            else:
                run, first = 0, None
            t += 60.0
        return None

    # -- stage 3: the processes and their memory ------------------------------------------

    def processes(self) -> None:
        dep, p, rng, grid = self.dep, self.plan, self.rng, self.grid
        n = grid.n
        alive = _mask(grid, self.alive_spans)
        serving = alive[:]
        swap_k = grid.after(p.swap_at) if p.swap_at is not None else n
        for k in range(swap_k, n):
            serving[k] = False
        kind = "ollama-runner" if dep.engine == "ollama" else dep.engine
        a = en.Proc(
            key=dep.model.key,
            kind=kind,
            model=dep.model,
            port=dep.port,
            job=dep.engine if dep.scraped else None,
            metrics=dep.metrics,
            alive=alive,
            serving=serving,
            static=float(static_bytes(dep, rng)),
            dyn=[0.0] * n,
            rss=self._rss(dep.engine, weights_bytes(dep)),
            rss_dyn=[0.0] * n,
            ctx=dep.ctx,
        )
        self.procs.append(a)
        g = self.g
        per_seq = rng.uniform(20, 120) * MIB if dep.engine in ("llama-server", "ollama") else 0.0
        if dep.engine == "llama-server":
            # The CUDA pool keeps the largest attention scratch it needed (no flash attention:
            # heads x ubatch x context); on a unified box the host prompt cache grows too.
            per_tok = rng.uniform(8, 64)
            if p.truth == "context-creep":
                per_tok = rng.uniform(96, 256) if self.mach.unified else rng.uniform(48, 128)
            pool = self.ctx_slot * per_tok * 1024
            if self.mach.kind == "nvidia":
                room = self.acc_limit() - a.static - self.other_gpu - 0.35 * GIB
                pool = min(pool, max(0.4 * GIB, 0.8 * room))
            nt = en.high_water(g.high_water, alive, serving)
            cs = float(self.ctx_slot)
            if p.truth == "context-creep" and p.start is not None and p.failure_at is not None:
                # What the pool gained past the onset's high-water is the fault's: a shape
                # the fit sizes like any other fault's memory.
                at = nt[max(0, grid.after(p.start) - 1)]
                kf = grid.at(p.failure_at)
                grown = [pool * max(0.0, min(1.0, v / cs) - min(1.0, at / cs)) for v in nt]
                if grown[kf] > 16 * MIB:
                    self.creep = ([v / grown[kf] for v in grown], grown[kf])
                nt = [min(v, at) if k >= grid.after(p.start) else v for k, v in enumerate(nt)]
            for k in range(n):
                a.dyn[k] = pool * min(1.0, nt[k] / cs) + per_seq * g.running[k]
        elif dep.engine == "ollama":
            for k in range(n):
                a.dyn[k] = per_seq * g.running[k]
            if p.truth == "context-creep":
                self._ollama_reloads(a)
        if self.b_spans or p.truth == "swap-not-unloaded":
            self._second(a)
        if dep.engine == "ollama" and rng.random() < 0.6 and p.truth != "swap-not-unloaded":
            self._ollama_other()
        for proc in self.procs:
            self._pids(proc)

    def _rss(self, engine: str, weights: int) -> float:
        rng, mach = self.rng, self.mach
        if mach.kind == "mac":
            return weights * rng.uniform(0.9, 1.0)
        if engine in ("vllm", "sglang"):
            return rng.uniform(3.5, 8.0) * GIB
        if engine == "ollama":
            return rng.uniform(0.3, 0.9) * GIB
        return rng.uniform(0.3, 1.3) * GIB

    def _ollama_reloads(self, a: en.Proc) -> None:
        """Clients asking for a longer num_ctx make Ollama reload the model bigger: steps up,
        and the last reload, at the failure, does not fit."""
        dep, p, grid = self.dep, self.plan, self.grid
        per = dep.kv_bytes * dep.slots
        num = dep.ctx
        longest = 0.0
        j = 0
        reqs = self.reqs
        steps = []
        for k in range(grid.n):
            t = grid.time(k)
            while j < len(reqs) and reqs[j][0] <= t:
                longest = max(longest, reqs[j][1] + reqs[j][2])
                j += 1
            if p.start is not None and t >= p.start and longest > num * 0.9 and len(steps) < 3:
                if p.failure_at is not None and t >= p.failure_at - 600:
                    break
                num *= 2
                steps.append(k)
            a.dyn[k] += per * (num - dep.ctx)
        self.final_step = per * num  # the reload that fails asks for twice the context again
        a.ctx = num
        self.ollama_steps = steps

    def _second(self, a: en.Proc) -> None:
        """The other model llama-swap (or Ollama) started: briefly and properly on a healthy
        day, for good and beside the first in a swap that never unloaded."""
        dep, p, rng, grid = self.dep, self.plan, self.rng, self.grid
        n = grid.n
        if p.truth == "swap-not-unloaded":
            unified = self.mach.unified and self.mach.kind != "mac"
            self.swap_margin = rng.uniform(1.5, 6.0) * GIB
            margin = self.swap_margin if p.ending == "load-fail" else rng.uniform(0.3, 1.5) * GIB
            if unified:
                limit = self.host_limit(False)
                others = max(self.bg.fixed(k) for k in range(n)) + a.rss
            else:
                limit = self.acc_limit()
                others = self.other_gpu + 0.7 * GIB
            room = limit - others - a.static - margin
            if room < 4.6 * GIB:  # only then does the first model's cache have to give
                floor = weights_bytes(dep) + 0.6 * GIB
                if dep.engine in ("vllm", "sglang"):
                    floor += self.act + 1.0 * GIB
                room = limit - others - floor - margin
            pool = self.mach.acc_total if not self.mach.unified else self.mach.host_total
            want = min(40 * GIB, max(8 * GIB, pool * (0.12 + 0.25 * p.strength)))
            want = max(8 * GIB, min(want, 0.9 * room))
            fits = [m for m in MODELS if m is not dep.model and m.q4_gib * GIB < want * 1.1]
            other = max(fits, key=lambda m: m.q4_gib) if fits else dep.other_model
            dep.other_model = other
            b0 = p.swap_at or grid.end
            b1 = grid.end + 1.0
            if p.ending in ("abort", "oom-kill"):
                b1 = p.failure_at or b1
            spans = [(b0, b1)]
            ctx_b = min(other.max_ctx, rng.choice([8192, 16384, 32768]))
            compute = rng.uniform(0.3, 1.0) * GIB
            static = other.q4_gib * GIB + dep.kv_bytes * ctx_b + compute
            if static < want:  # a longer context for the second model, as configured
                ctx_b = min(
                    other.max_ctx, int((want - other.q4_gib * GIB - compute) / dep.kv_bytes)
                )
                ctx_b = ctx_b // 1024 * 1024
                static = other.q4_gib * GIB + dep.kv_bytes * ctx_b + compute
        else:
            other = dep.other_model
            spans = self.b_spans
            ctx_b = min(other.max_ctx, 16384)
            static = other.q4_gib * GIB + dep.kv_bytes * ctx_b + 0.5 * GIB
        alive = _mask(grid, spans)
        kind = "ollama-runner" if dep.engine == "ollama" else "llama-server"
        port = a.port + 1 if dep.engine != "ollama" else a.port
        b = en.Proc(
            key=other.key,
            kind=kind,
            model=other,
            port=port,
            job="llama-server" if dep.scraped and kind == "llama-server" else None,
            metrics=dep.metrics or dep.engine != "llama-server",
            alive=alive,
            serving=alive[:],
            static=float(static),
            dyn=[0.0] * n,
            rss=self._rss("llama-server", int(other.q4_gib * GIB)),
            rss_dyn=[0.0] * n,
            ctx=ctx_b,
        )
        if b.kind == "llama-server" and b.job is None and dep.scraped:
            b.job = "llama-server"
        if dep.engine in ("vllm", "sglang") and b.job is None and dep.prometheus:
            b.job = "llama-server"
        self.procs.append(b)

    def _ollama_other(self) -> None:
        """A second model some client asks for now and then (a coder, an embedder): Ollama
        loads it beside the first and unloads it after keep_alive, steps that come back."""
        dep, rng, grid = self.dep, self.rng, self.grid
        other = min(MODELS, key=lambda m: m.q4_gib) if rng.random() < 0.4 else dep.other_model
        spans = []
        for _ in range(rng.randint(1, 5)):
            t = rng.uniform(grid.t0, grid.end - 1800)
            spans.append((t, t + rng.uniform(5, 30) * 60.0 + dep.keep_alive))
        alive = _mask(grid, spans)
        n = grid.n
        static = other.q4_gib * GIB + dep.kv_bytes * 4096 + 0.3 * GIB
        self.procs.append(
            en.Proc(
                other.key,
                "ollama-runner",
                other,
                dep.port,
                None,
                False,
                alive,
                [False] * n,
                static,
                [0.0] * n,
                self._rss("ollama", 0),
                [0.0] * n,
                ctx=4096,
            )
        )

    def _pids(self, proc: en.Proc) -> None:
        rng = self.rng
        base = rng.randint(1800, 60000)
        for k in en.starts(proc.alive):
            base += rng.randint(50, 40000)
            proc.pids.append((k, base))
        if not proc.pids:
            proc.pids.append((0, base))

    # -- stage 4: the host, the fault's memory, and the fit --------------------------------

    def host(self) -> None:
        dep, p, rng, grid = self.dep, self.plan, self.rng, self.grid
        self.bg = hs.background(rng, grid, dep, p.start if p.start is not None else grid.end)
        if dep.workstation and not self.mach.unified:
            self.other_gpu += rng.uniform(0.2, 1.2) * GIB
        if not self.mach.unified and rng.random() < 0.3:
            self.other_gpu += rng.uniform(0.4, 1.6) * GIB  # an embedder, whisper, a UI
        self.overhead = rng.uniform(250, 550) * MIB  # the driver's reserve
        self.n_services = rng.randint(1, 3)

    def died_at(self, proc: en.Proc) -> float | None:
        """When this engine process died of the fault (None if it did not)."""
        p = self.plan
        if p.failure_at is None:
            return None
        if proc is self.procs[0] and p.dies and p.truth != "swap-not-unloaded":
            return p.failure_at
        second = len(self.procs) > 1 and proc is self.procs[1]
        if p.truth == "swap-not-unloaded" and p.ending in ("abort", "oom-kill") and second:
            return p.failure_at
        return None

    def pool(self) -> str:
        p, mach = self.plan, self.mach
        if p.truth in ("host-exhaustion", "memory-pressure-stall"):
            return "host"
        if mach.kind == "nvidia":
            return "acc" if p.where == "acc" else "host"
        if mach.kind == "mac":
            return "acc"
        return "host"

    def acc_limit(self) -> float:
        mach = self.mach
        if mach.kind == "mac":
            return mach.host_total * 0.75  # Metal's recommended working set
        return mach.acc_total - self.overhead

    def fixed(self, where: str) -> list[float]:
        """What the pool holds at each scrape, without the fitted filler."""
        grid, procs = self.grid, self.procs
        n = grid.n
        if where == "acc":
            cuda = 0.0 if self.mach.kind == "mac" else 0.35 * GIB  # each process's context
            out = [self.other_gpu] * n
            for pr in procs:
                base = pr.static + cuda
                dyn, alive = pr.dyn, pr.alive
                for k in range(n):
                    if alive[k]:
                        out[k] += base + dyn[k]
            return out
        unified = self.mach.unified and self.mach.kind != "mac"
        bg = self.bg
        out = [
            a + b + c + d + bg.shmem + e
            for a, b, c, d, e in zip(
                bg.kernel, bg.services, bg.desktop, bg.jobs, self.culprit, strict=True
            )
        ]
        for pr in procs:
            base = pr.rss + (pr.static if unified else 0.0)
            rdyn, dyn, alive = pr.rss_dyn, pr.dyn, pr.alive
            for k in range(n):
                if alive[k]:
                    out[k] += base + rdyn[k] + (dyn[k] if unified else 0.0)
        return out

    def host_limit(self, spill: bool) -> float:
        """Anonymous memory the host holds before the OOM killer: RAM less the reserves,
        plus the swap still free when `spill`."""
        bg = self.bg
        limit = self.mach.host_total - bg.wmark - bg.floor
        if spill:
            limit += self.mach.swap_total - bg.swap_base[-1]
        return limit

    def fault_memory(self) -> None:
        """The fault's own memory as a shape (0 at its onset, 1 at the failure) and a
        target size relative to its pool; the fit decides what fits."""
        dep, p, rng, grid = self.dep, self.plan, self.rng, self.grid
        n = grid.n
        self.shape = [0.0] * n
        self.target = 0.0
        where = self.pool()
        size = self.acc_limit() if where == "acc" else float(self.mach.host_total)
        s = p.strength
        if p.truth == "context-creep" and dep.engine == "llama-server":
            shape, grown = getattr(self, "creep", (None, 0.0))
            if shape is None:  # the high-water was already there: the prompt cache grows
                k0, k1 = grid.after(p.start or grid.end), grid.at(p.failure_at or grid.end)
                shape = [min(1.0, max(0.0, (k - k0) / max(1, k1 - k0))) for k in range(n)]
                grown = 0.5 * GIB
            self.shape, self.target = shape, grown
        elif p.truth == "leak-ratchet":
            activity = [a + b for a, b in zip(self.g.d_prompt, self.g.d_gen, strict=True)]
            self.shape = faults.ratchet(rng, grid, activity, p.start or 0.0, p.failure_at or 0.0)
            self.target = size * (0.03 + 0.22 * s)
        elif p.truth == "concurrency-overload" and p.dies:
            level = faults.concurrency_memory(self.g.running, self.g.waiting, 1.0)
            kf = grid.at(p.failure_at or grid.end)
            k0 = grid.after(p.start or grid.end)
            base = sorted(level[max(0, k0 - 120) : k0])
            floor = base[len(base) // 2] if base else 0.0
            top = max(level[max(0, kf - 20) : kf + 1]) - floor
            self.shape = [
                max(0.0, (v - floor) / top) if k >= k0 and top > 0 else 0.0
                for k, v in enumerate(level)
            ]
            self.target = size * (0.03 + 0.12 * s)
        elif p.truth in ("host-exhaustion", "memory-pressure-stall"):
            swap_free = self.mach.swap_total - self.bg.swap_base[-1]
            if p.truth == "host-exhaustion":
                # From a box with room to spare to RAM and swap both full.
                self.target = swap_free + size * (0.06 + 0.35 * s)
            else:
                self.swap_fill = swap_free * (0.35 + 0.55 * s)
                self.target = self.swap_fill + size * (0.04 + 0.12 * s)
            most = {"browser": 16 * GIB, "container": 31 * GIB}.get(p.shape)
            if most is not None and self.target > most:
                p.shape = rng.choice(["build", "notebook", "data-job"])
            self.shape = faults.culprit_shape(rng, p, grid)

    def memory_end(self) -> bool:
        """The failure is the pool running out (rather than a timeout, or an allocation
        spike the scrapes never see)."""
        t, e = self.plan.truth, self.plan.ending
        if t in ("leak-ratchet", "swap-not-unloaded", "host-exhaustion", "memory-pressure-stall"):
            return True
        if t == "context-creep":
            return e in ("oom-kill", "abort", "load-fail")
        if t == "concurrency-overload":
            return e in ("oom-kill", "abort")
        return False

    def fit(self) -> None:
        """Fill the machine so the fault runs out of room at the failure: the engine's
        context or cache, other services and GPU users take what the fault does not."""
        p, grid = self.plan, self.grid
        discrete = self.mach.kind in ("nvidia", "mac")
        spent = None  # the pool the fault ends in: already fitted
        if p.ending == "memcg-oom":
            self._fit_memcg()
        elif p.failure_at is not None and self.memory_end():
            kf = grid.at(p.failure_at)
            where = self.pool()
            rng = self.rng
            margin = rng.uniform(0.05, 0.9) * GIB if where == "acc" else rng.uniform(0, 0.15) * GIB
            if p.truth == "swap-not-unloaded" and p.ending == "load-fail":
                margin = self.swap_margin  # the next model did not fit in what was left
            if p.truth == "context-creep" and self.dep.engine == "ollama":
                margin = self.final_step * rng.uniform(0.3, 0.8)
            if where == "acc":
                limit = self.acc_limit()
            elif p.truth == "memory-pressure-stall":
                limit = self.host_limit(False) + self.swap_fill
                margin = 0.0
            else:
                limit = self.host_limit(p.ending == "oom-kill" or p.truth == "host-exhaustion")
            self._fit_death(where, kf, limit, margin)
            spent = where
        if discrete and spent != "acc":
            self._fit_comfort("acc")
        if spent != "host":
            self._fit_comfort("host")

    def _apply_fault(self, amp: float) -> None:
        p = self.plan
        a = self.procs[0]
        add = [amp * v for v in self.shape]
        if p.truth in ("host-exhaustion", "memory-pressure-stall"):
            self.culprit = [c + v for c, v in zip(self.culprit, add, strict=True)]
        elif p.truth == "leak-ratchet" and (p.where == "host" and not self._unified_gpu()):
            a.rss_dyn = [c + v for c, v in zip(a.rss_dyn, add, strict=True)]
        else:
            a.dyn = [c + v for c, v in zip(a.dyn, add, strict=True)]

    def _unified_gpu(self) -> bool:
        """A leak on a unified box lands in the driver's allocations (GB10, Strix) when the
        engine allocates there, else in the process's own heap."""
        return self.mach.kind in ("gb10", "strix") and self.plan.shape == "allocator"

    def _fit_death(self, where: str, kf: int, limit: float, margin: float) -> None:
        grid = self.grid
        w = max(1, int(300 / grid.dt))
        lo = max(0, kf - w)
        fixed = self.fixed(where)
        shape = self.shape
        amp = self.target
        room = limit - margin - max(fixed[lo : kf + 1])
        if amp > 0 and room < amp:
            # The fault needs more room than the box had: a smaller cache, fewer services.
            self._place(where, room - amp)
            fixed = self.fixed(where)
            room = limit - margin - max(fixed[lo : kf + 1])
        if amp > 0:
            amp = max(0.25 * amp, min(amp, 0.97 * room))
        near = max(fixed[k] + amp * shape[k] for k in range(lo, kf + 1))
        early = max((fixed[k] + amp * shape[k] for k in range(0, lo)), default=-1e30)
        filler = limit - margin - near
        # The ordinary day's peaks stayed well clear of the limit: it was the fault.
        guard = limit - margin - self.rng.uniform(0.05, 0.12) * limit
        if early + filler > guard:
            # The ordinary day came closer to the limit than the fault: the fault is larger.
            deficit = early + filler - guard
            if amp > 0:
                amp += deficit / max(0.5, shape[kf])
            elif self.plan.truth == "swap-not-unloaded" and len(self.procs) > 1:
                self.procs[1].static += deficit  # the second model was given more context
            else:
                filler -= deficit
            fixed = self.fixed(where)
            near = max(fixed[k] + amp * shape[k] for k in range(lo, kf + 1))
            filler = min(filler, limit - margin - near)
        left = self._place(where, filler)
        if amp > 0 and abs(left) > 32 * MIB:
            amp = max(0.1 * self.target, amp + left / max(0.5, shape[kf]))
        self._apply_fault(amp)
        self.fault_amp = amp

    def _fit_comfort(self, where: str) -> None:
        """A pool the fault does not end in only has to hold what it holds: shrink the
        engine's context or cache if the configuration could not have fitted."""
        limit = self.acc_limit() if where == "acc" else self.host_limit(False)
        if self.plan.ending == "memcg-oom" and where == "host":
            return
        peak = max(self.fixed(where))
        ceiling = limit * self.rng.uniform(0.9, 0.97)
        if peak > ceiling:
            self._place(where, ceiling - peak)

    def _fit_memcg(self) -> None:
        """A leak in a container with a memory limit: the limit is what runs out."""
        a = self.procs[0]
        kf = self.grid.at(self.plan.failure_at or self.grid.end)
        amp = max(self.target, 1.5 * GIB)
        self._apply_fault(amp)
        self.fault_amp = amp
        self.memcg_limit = a.rss + a.rss_dyn[kf] + self.rng.uniform(0.0, 0.05) * GIB

    def service_room(self) -> float:
        """What the box's other services may plausibly hold: a few of them, each at most a
        database's or a search index's heap."""
        total = self.mach.host_total
        each = min(32 * GIB, max(3 * GIB, 0.15 * total))
        if total > 96 * GIB:  # a big host runs big things: a VM, a search cluster
            each = min(64 * GIB, 0.25 * total)
        return self.n_services * each - self.filler_services

    def _services(self, by: float) -> float:
        """Add to the other services (capped); returns what did not fit."""
        take = max(-self.filler_services, min(by, self.service_room()))
        if take:
            self.filler_services += take
            self.bg.services = [v + take for v in self.bg.services]
        return by - take

    def _place(self, where: str, filler: float) -> float:
        """Turn a filler into something real: a longer context or a larger cache for the
        engine, another GPU user, more services on the host; a negative one into a shorter
        context or fewer services. Returns what could not be placed."""
        rng, a = self.rng, self.procs[0]
        unified = self.mach.unified and self.mach.kind != "mac"
        host_engine = where == "host" and unified
        if filler >= 0:
            if where == "acc":
                part = filler * rng.uniform(0.6, 1.0)
            elif host_engine:
                part = filler * rng.uniform(0.3, 1.0)
            else:
                part = 0.0
            left = filler - part + self._grow_engine(a, part)
            if where == "acc" and self.mach.kind == "nvidia":
                self.other_gpu += left
                return 0.0
            left = self._services(left)
            if left > 0 and (where == "acc" or host_engine):
                left = self._grow_engine(a, left)
            return left
        left = filler
        if where == "acc" or host_engine:
            left = self._grow_engine(a, left)
        if where == "acc" and self.mach.kind == "nvidia":
            take = max(left, -self.other_gpu)
            self.other_gpu += take
            return left - take
        return self._services(left)

    def _grow_engine(self, a: en.Proc, by: float) -> float:
        """Resize the engine's cache by `by` bytes within what its configuration allows;
        returns what it could not take (or give back)."""
        dep = self.dep
        if by == 0:
            return 0.0
        w = weights_bytes(dep)
        if dep.engine in ("vllm", "sglang"):
            total = dep.machine.acc_total
            top = 0.93 if self.mach.unified else 0.95
            low = (w + self.act + 1.0 * GIB) / total
            util = min(top, max(low, (a.static + by) / total))
            new = util * total
            if self.plan.truth == "context-creep" and util < dep.util:
                return by  # its cache size is the fault's premise
            dep.util = round(util, 3)
        elif dep.engine == "ollama" and self.plan.truth == "context-creep":
            return by
        else:
            unit = dep.kv_bytes * (dep.slots if dep.engine == "ollama" else 1)
            most = dep.model.max_ctx * (dep.slots if dep.engine == "llama-server" else 1)
            least = dep.slots * 2048
            if self.plan.truth == "context-creep":
                least = max(least, dep.ctx)
            base = a.static - a.ctx * unit
            ctx = int(max(0.0, a.static + by - base) / unit) // 256 * 256
            ctx = max(least, min(ctx, most))
            new = base + ctx * unit
            a.ctx = dep.ctx = ctx
        taken = new - a.static
        a.static = new
        return by - taken

    def resize_cache(self) -> None:
        """A vLLM or SGLang whose memory share the fit changed has a different KV cache:
        serve the day again with it."""
        dep, grid = self.dep, self.grid
        if dep.engine not in ("vllm", "sglang") or self.plan.truth in (
            "context-creep",
            "concurrency-overload",
        ):
            return
        w = weights_bytes(dep)
        cap = max(4096.0, (dep.util * dep.machine.acc_total - w - self.act) / dep.kv_bytes)
        if abs(cap - self.cap) <= 0.03 * self.cap:
            return
        self.cap = cap
        self.served = en.simulate(
            self.reqs, dep, dep.slots, cap, self.slow, grid, self._cold_for(self.reqs), self.load_s
        )
        self.g = en.gauges(grid, self.reqs, self.served, self.tr.max_out)

    # -- stage 5: the host's counters, the endings' evidence -------------------------------

    def settle(self) -> None:
        p, rng, grid = self.plan, self.rng, self.grid
        n = grid.n
        if p.truth == "host-exhaustion" and p.victim == "culprit" and p.failure_at is not None:
            kill = p.failure_at + rng.uniform(0.5, 3.0) * 60.0
            kill = min(kill, grid.end - 30.0)
            self.culprit_kill = kill
            for k in range(grid.after(kill), n):
                self.culprit[k] = 0.0
            self.kills.append(kill)
        elif p.truth == "host-exhaustion" and p.failure_at is not None:
            self.kills.append(p.failure_at)
            kf = grid.after(p.failure_at)
            for k in range(kf, n):  # the culprit holds what it had, and keeps going slowly
                self.culprit[k] = self.culprit[kf - 1] * (1 + 0.02 * (k - kf) / max(1, n - kf))
        elif p.ending in ("oom-kill", "memcg-oom") and p.failure_at is not None and p.dies:
            self.kills.append(p.failure_at)
        if not self.dep.macos and rng.random() < (0.1 if p.truth == "no-fault" else 0.05):
            self.memcg_kill = rng.uniform(grid.t0 + HOUR, grid.end - 1800)
            self.kills.append(self.memcg_kill)
        unified = self.mach.unified and self.mach.kind != "mac"
        extra = self.culprit[:]
        for pr in self.procs:
            base = pr.rss + (pr.static if unified else 0.0)
            for k in range(n):
                if pr.alive[k]:
                    extra[k] += base + pr.rss_dyn[k] + (pr.dyn[k] if unified else 0.0)
        self.extra = extra
        self.hs = hs.settle(rng, grid, self.dep, self.bg, extra, self.stall, self.kills)

    def build(self) -> Scenario:
        self.traffic()
        self.timeline()
        self.serve()
        self.host()
        self.processes()
        self.fault_memory()
        self.fit()
        self.resize_cache()
        self.settle()
        lines.events(self)
        sc = Scenario(
            id=f"{self.truth}-{self.seed}",
            seed=self.seed,
            truth=self.truth,
            strength=self.plan.strength,
            deployment=self.dep.rhythm,
            engine=self.dep.engine,
            story="",
            hostname=self.mach.hostname,
            memory_total=int(self.mach.host_total),
            unified=self.mach.unified,
            end=self.end,
            scrape_s=self.dep.scrape_s,
            trigger=("manual", None, None),
            failure_at=self.plan.failure_at if self.truth != "no-fault" else None,
            prometheus=self.dep.prometheus,
            swap_total=int(self.mach.swap_total),
        )
        if self.dep.prometheus:
            sc.series = exporters.series(self)
        atcapture.fill(self, sc)
        sc.kernel = sorted(self.kernel)
        sc.logs = sorted(self.logs)
        sc.story = self.story()
        return sc

    def story(self) -> str:
        dep, p = self.dep, self.plan
        where = f"{dep.engine} {dep.model.key} on {self.mach.gpu} ({dep.rhythm})"
        if p.truth == "no-fault":
            extras = "; ".join(self.notes) or "nothing unusual"
            return f"no-fault: a healthy day of {where}; {extras}"
        p.notes = self.notes
        return f"{faults.describe(p, dep, dep.tz)} — {where}"


def generate(seed: int, truth: str, end: float) -> Scenario:
    """One day of one deployment ending at `end` (the capture), with `truth` injected."""
    with _no_gc():
        return World(seed, truth, end).build()


@contextmanager
def _no_gc() -> Iterator[None]:
    """A day is some hundred thousand small objects and no cycles: the cyclic collector
    would only walk them over and over (a suite holds them all)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def suite(seed: int, count: int, end: float) -> list[Scenario]:
    """count scenarios: about 30% no-fault, the rest spread evenly over the six faults of
    world.TRUTHS; each from its own derived seed so one scenario is reproducible alone."""
    rng = Random(f"suite:{seed}")
    faulty = TRUTHS[1:]
    healthy = round(count * 0.3)
    truths = ["no-fault"] * healthy + [faulty[i % len(faulty)] for i in range(count - healthy)]
    rng.shuffle(truths)
    with _no_gc():
        return [generate(rng.getrandbits(48), truth, end) for truth in truths]
