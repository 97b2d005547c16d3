"""The engine as a queue: slots, a KV budget, clients that give up, and what its gauges and
counters read at each scrape.

One FIFO queue in front of `slots` sequences (llama-server --parallel, vLLM max_num_seqs,
OLLAMA_NUM_PARALLEL); a request starts when a slot is free and, on engines with a paged
KV cache, when its tokens fit what is left of the cache (admitting it anyway when they
do not is a preemption, as vLLM does). Decode slows as more sequences share a step. A
client that waits longer than its timeout leaves the queue. Gauges are read at the scrape
instants from the requests' arrival, start and finish times; counters accumulate and
reset whenever the process starts again.
"""

import heapq
import math
import operator
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from lab.eval.profiles import Deployment, Grid
from lab.eval.traffic import AGENT, BATCH, EXTRA, PERIODIC, Request

INF = float("inf")
CLIENT_TIMEOUT = {0: 300.0, AGENT: 600.0, BATCH: 1800.0, PERIODIC: 60.0, EXTRA: 180.0}


@dataclass
class Served:
    """Each request's fate: start and finish (nan when it never started), and when it
    left the queue unserved."""

    start: list[float]
    finish: list[float]
    gave_up: list[float]
    preempted: list[bool]


def simulate(
    reqs: list[Request],
    dep: Deployment,
    slots: int,
    cap: float,
    slow: list[float],
    grid: Grid,
    cold: set[int],
    load_s: float,
) -> Served:
    """Run the day's requests through the engine. `cold` are the indices of requests that
    found the model unloaded (they carry its load time); `slow` a per-scrape slowdown."""
    n = len(reqs)
    start = [math.nan] * n
    finish = [math.nan] * n
    gave_up = [math.nan] * n
    preempted = [False] * n
    heap: list[tuple[float, float]] = []
    queue: deque[int] = deque()
    used = 0.0
    prefill, decode = dep.prefill_tps, dep.decode_tps
    t0, dt, last = grid.t0, grid.dt, grid.n - 1
    timeouts = CLIENT_TIMEOUT

    def admit(t: float) -> None:
        nonlocal used
        while queue:
            j = queue[0]
            _, p, o, _src = reqs[j]
            need = p + 0.5 * o
            # Admitted when its prompt's blocks fit; its decode may then outgrow the cache.
            if heap and (len(heap) >= slots or used + p > cap):
                return
            queue.popleft()
            k = int((t - t0) // dt)
            f = slow[k if 0 <= k <= last else last]
            svc = (p / prefill + o * (1.0 + 0.08 * len(heap)) / decode) * f
            if used + p + o > cap:
                preempted[j] = True
                svc *= 1.35  # its blocks are taken back and its prefill recomputed
            if j in cold:
                svc += load_s
            used += need
            start[j] = t
            finish[j] = t + svc
            heapq.heappush(heap, (t + svc, need))

    def advance(until: float) -> None:
        nonlocal used
        while True:
            nf = heap[0][0] if heap else INF
            if queue:
                a, _, _, src = reqs[queue[0]]
                na = a + timeouts[src]
            else:
                na = INF
            t = nf if nf <= na else na
            if t > until or t == INF:
                return
            if nf <= na:
                _, need = heapq.heappop(heap)
                used = max(0.0, used - need)
            else:
                gave_up[queue.popleft()] = t
            admit(t)

    for j, r in enumerate(reqs):
        advance(r[0])
        queue.append(j)
        admit(r[0])
    advance(INF)
    return Served(start, finish, gave_up, preempted)


@dataclass
class Gauges:
    """The instantaneous gauges at each scrape, and what each counter gained in the scrape
    interval ending there (counters are summed per process, see `counter`)."""

    running: list[float]
    waiting: list[float]
    kv_tokens: list[float]
    d_prompt: list[float]
    d_gen: list[float]
    d_stop: list[float]
    d_length: list[float]
    d_abort: list[float]
    d_preempt: list[float]
    high_water: list[float]  # longest sequence finished in the interval


def gauges(grid: Grid, reqs: list[Request], s: Served, max_out: int) -> Gauges:
    n = grid.n
    t0, dt = grid.t0, grid.dt
    z = [0.0] * (n + 1)
    d_run, d_wait, d_kv = z[:], z[:], z[:]
    c_prompt, c_gen, c_stop, c_len, c_abort, c_pre, hw = z[:], z[:], z[:], z[:], z[:], z[:], z[:]

    def b(x: float) -> int:
        k = math.ceil((x - t0) / dt)
        return 0 if k < 0 else (n if k > n else k)

    for j, (a, p, o, _src) in enumerate(reqs):
        st = s.start[j]
        d_wait[b(a)] += 1
        if st == st:  # started (nan never equals itself)
            sb, fb = b(st), b(s.finish[j])
            d_wait[sb] -= 1
            d_run[sb] += 1
            d_run[fb] -= 1
            tok = p + 0.5 * o
            d_kv[sb] += tok
            d_kv[fb] -= tok
            c_prompt[sb] += p
            c_gen[fb] += o
            if o >= max_out:
                c_len[fb] += 1
            else:
                c_stop[fb] += 1
            if s.preempted[j]:
                c_pre[sb] += 1
            if p + o > hw[fb]:
                hw[fb] = p + o
        else:
            gb = b(s.gave_up[j])
            d_wait[gb] -= 1
            c_abort[gb] += 1
    running, waiting, kv = [], [], []
    r = w = q = 0.0
    for k in range(n):
        r += d_run[k]
        w += d_wait[k]
        q += d_kv[k]
        running.append(r if r > 0 else 0.0)
        waiting.append(w if w > 0 else 0.0)
        kv.append(q if q > 0 else 0.0)
    return Gauges(
        running,
        waiting,
        kv,
        c_prompt[:n],
        c_gen[:n],
        c_stop[:n],
        c_len[:n],
        c_abort[:n],
        c_pre[:n],
        hw[:n],
    )


def _since_start(
    values: list[float],
    alive: list[bool],
    serving: list[bool],
    fold: Callable[[float, float], float],
) -> list[float]:
    """A reading one process keeps from its start: 0 at each (re)start of the process, then
    each value folded in while it serves."""
    out = []
    c = 0.0
    was = False
    for v, a, sv in zip(values, alive, serving, strict=True):
        if a and not was:
            c = 0.0
        if a and sv:
            c = fold(c, v)
        was = a
        out.append(c)
    return out


def counter(delta: list[float], alive: list[bool], serving: list[bool]) -> list[float]:
    """A counter of one process: what it served, from 0 at each start of the process."""
    return _since_start(delta, alive, serving, operator.add)


def high_water(hw: list[float], alive: list[bool], serving: list[bool]) -> list[float]:
    """llama.cpp's n_tokens_max: the longest sequence this process has seen."""
    return _since_start(hw, alive, serving, max)


def loaded_spans(
    reqs: list[Request], keep_alive: float, start: float, end: float, resident_at_start: bool
) -> list[tuple[float, float]]:
    """When a model with an idle timeout is resident: from a request that finds it unloaded
    until keep_alive after the last one (a request's own time counted as a minute)."""
    spans: list[list[float]] = []
    if resident_at_start:
        spans.append([start, start + keep_alive])
    for a, _, _, _ in reqs:
        busy_until = a + 60.0 + keep_alive
        if spans and a <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], busy_until)
        else:
            spans.append([a, busy_until])
    return [(a, min(b, end + 1.0)) for a, b in spans]


def check_latency(reqs: list[Request], s: Served, at: float) -> float:
    """How long a small completion sent at `at` would have waited: until the last request
    queued before it started (FIFO), nothing if the queue was empty."""
    lo, hi = 0, len(reqs)
    while lo < hi:
        mid = (lo + hi) // 2
        if reqs[mid][0] <= at:
            lo = mid + 1
        else:
            hi = mid
    for j in range(lo - 1, max(-1, lo - 400), -1):
        st = s.start[j]
        if st == st:
            return max(0.0, st - at)
    return 0.0


@dataclass
class Proc:
    """One engine process (or the line of processes that serve one model one after the
    other): when it was alive, when it got the traffic, what it held."""

    key: str  # the model it serves, as its manager names it
    kind: str  # llama-server | vllm | sglang | ollama-runner
    model: object
    port: int
    job: str | None  # Prometheus job scraping it, None when nothing does
    metrics: bool
    alive: list[bool]
    serving: list[bool]
    static: float  # accelerator-side bytes while alive (all of them on a unified machine)
    dyn: list[float]  # growth on top, accelerator side
    rss: float  # host resident bytes while alive
    rss_dyn: list[float]
    pids: list[tuple[int, int]] = field(default_factory=list)  # (grid index, pid) per start
    ctx: int = 0
    cmdline: list[str] = field(default_factory=list)

    def acc(self, k: int) -> float:
        return self.static + self.dyn[k] if self.alive[k] else 0.0

    def host(self, k: int) -> float:
        return self.rss + self.rss_dyn[k] if self.alive[k] else 0.0

    def pid_at(self, k: int) -> int:
        pid = self.pids[0][1] if self.pids else 0
        for at, p in self.pids:
            if at <= k:
                pid = p
        return pid


def starts(alive: list[bool]) -> list[int]:
    """Grid indices where a process came up."""
    return [k for k, a in enumerate(alive) if a and (k == 0 or not alive[k - 1])]
