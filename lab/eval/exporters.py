"""What Prometheus stored: each target's samples with its real metric names and labels, at
its own offset in the scrape interval, with the gaps real days have.

A target that does not answer has `up` 0 and no other sample; when Prometheus itself was
down nothing was stored at all, `up` included. An engine that died stops being scraped
(its series end) while its `up` goes on being scraped as 0. Gaps are missing samples,
never zeros.
"""

from __future__ import annotations

import math
from operator import itemgetter
from random import Random
from typing import TYPE_CHECKING

from lab.eval import engine as en
from lab.eval.profiles import GIB, MIB, Grid
from lab.eval.traffic import poisson
from lab.eval.world import RawSeries

if TYPE_CHECKING:
    from lab.eval.generate import World

Metric = tuple[str, dict[str, str], list[float]]


def _gaps(rng: Random, grid: Grid, rate: float, lo: float, hi: float) -> list[bool]:
    """True where a scrape was missed: restarts lasting lo..hi seconds, `rate` a day."""
    bad = [False] * grid.n
    for _ in range(poisson(rng, rate)):
        at = rng.uniform(grid.t0, grid.end - 3600.0)
        for k in range(grid.after(at), min(grid.n, grid.after(at + rng.uniform(lo, hi)))):
            bad[k] = True
    for k in range(grid.n):
        if rng.random() < 0.0001:  # a scrape that timed out
            bad[k] = True
    return bad


class Writer:
    def __init__(self, w: World) -> None:
        self.w = w
        self.rng = w.rng
        self.grid = w.grid
        self.out: list[RawSeries] = []
        self.stored = [not b for b in _gaps(w.rng, w.grid, 0.4, 60.0, 300.0)]

    def target(
        self,
        job: str,
        instance: str,
        answered: list[bool],
        metrics: list[Metric],
        configured: list[bool] | None = None,
        exporter_gaps: bool = True,
        until: float | None = None,
    ) -> None:
        """One scrape target: `answered` where the scrape succeeded, `configured` where
        Prometheus had the target at all (a target added by discovery has no past)."""
        grid, rng = self.grid, self.rng
        off = rng.randrange(int(grid.dt * 1000)) / 1000.0
        # An exporter restarting misses minutes; an engine's own endpoint only a scrape
        # now and then (its restarts are the engine's, in `answered`).
        gaps = _gaps(rng, grid, 0.5 if exporter_gaps else 0.0, 60.0, 600.0)
        base, dt = grid.t0 + off, grid.dt
        ts = [base + k * dt for k in range(grid.n)]
        stored = self.stored
        last = grid.n if ts[-1] <= grid.end else grid.n - 1
        if configured is None:
            ks = [k for k in range(last) if stored[k]]
        else:
            ks = [k for k in range(last) if stored[k] and configured[k]]
        if until is not None:  # a scrape after the process died finds nobody
            answered = [a and ts[k] < until for k, a in enumerate(answered)]
        up_points = [(ts[k], 1.0 if answered[k] and not gaps[k] else 0.0) for k in ks]
        ok_ks = [k for k in ks if answered[k] and not gaps[k]]
        labels = {"job": job, "instance": instance}
        self.out.append(RawSeries("up", dict(labels), up_points))
        if len(ok_ks) < 2:
            return
        pick = itemgetter(*ok_ks)  # a day of samples: picked in C, not one by one
        when = pick(ts)
        for name, extra, values in metrics:
            points = list(zip(when, pick(values), strict=True))
            self.out.append(RawSeries(name, {**extra, **labels}, points))


def series(w: World) -> list[RawSeries]:
    wr = Writer(w)
    dep, grid, rng = w.dep, w.grid, w.rng
    n = grid.n
    everywhere = [True] * n
    host = dep.machine.hostname
    node_inst = rng.choice(["localhost:9100", f"{host}:9100", "127.0.0.1:9100"])
    node, apu = _node(w), []
    if dep.machine.kind == "strix":
        desk = rng.uniform(0.2, 0.8) * GIB
        pool = dep.machine.acc_total
        used = [float(int(min(desk + sum(p.acc(k) for p in w.procs), pool))) for k in range(n)]
        if rng.random() < 0.5:
            # node-exporter's drm collector (drm_linux.go, label `card`): the carve-out
            # holds the desktop's buffers, the engine's go to GTT.
            card, carve = {"card": "card1"}, float(dep.machine.carve)
            vram = min(carve * 0.7, desk)
            node += [
                ("node_drm_memory_vram_size_bytes", card, [carve] * n),
                ("node_drm_memory_vram_used_bytes", card, [float(int(vram))] * n),
                ("node_drm_memory_gtt_size_bytes", card, [float(pool)] * n),
                ("node_drm_memory_gtt_used_bytes", card, [v - int(vram) for v in used]),
            ]
        else:
            labels = {"device": "card1", "pool": "gtt"}
            apu = [
                ("local_llm_accelerator_memory_used_bytes", labels, used),
                ("local_llm_accelerator_memory_total_bytes", labels, [float(pool)] * n),
            ]
    wr.target("node", node_inst, everywhere, node)
    if dep.machine.kind == "nvidia" and dep.dcgm:
        acc = w.fixed("acc")
        total_mib = dep.machine.acc_total / MIB - w.overhead / MIB
        used = [float(min(total_mib, round(v / MIB))) for v in acc]
        free = [float(max(0, round(total_mib - u))) for u in used]
        labels = {
            "gpu": "0",
            "UUID": dep.machine.uuid,
            "device": "nvidia0",
            "modelName": dep.machine.gpu,
            "Hostname": host,
            "pci_bus_id": dep.machine.pci,
        }
        wr.target(
            "dcgm",
            "localhost:9400",
            everywhere,
            [("DCGM_FI_DEV_FB_USED", labels, used), ("DCGM_FI_DEV_FB_FREE", labels, free)],
        )
    if apu:
        wr.target("local-llm", "localhost:9835", everywhere, apu)
    for i, proc in enumerate(w.procs):
        if proc.job is None:
            continue
        # An engine stalled on page faults misses its scrapes now and then.
        psi, r = w.hs.psi_some, rng.random
        answered = [
            a and proc.metrics and (psi[k] < 0.3 or r() > (psi[k] - 0.3) * 1.5)
            for k, a in enumerate(proc.alive)
        ]
        configured = None
        if i > 0 and rng.random() < 0.5:  # added by file discovery when llama-swap started it
            first = next((k for k, a in enumerate(proc.alive) if a), n)
            configured = [k >= first for k in range(n)]
        metrics = _engine_metrics(w, proc) if proc.metrics else []
        until = w.died_at(proc)
        wr.target(proc.job, f"127.0.0.1:{proc.port}", answered, metrics, configured, False, until)
    if dep.gateway:
        port = {"llama-swap": 8080, "litellm": 4000, "nginx": 9113}[dep.gateway]
        wr.target("gateway", f"127.0.0.1:{port}", everywhere, [])
    if dep.never_started:
        job, port = rng.choice(
            [
                (j, p)
                for j, p in (("vllm", 8001), ("sglang", 30000), ("llama-server", 8081))
                if j != dep.engine
            ]
        )
        wr.target(job, f"127.0.0.1:{port}", [False] * n, [], exporter_gaps=False)
    if dep.prometheus:
        wr.target("prometheus", "localhost:9090", everywhere, [], exporter_gaps=False)
    return wr.out


def _node(w: World) -> list[Metric]:
    dep, hs, grid = w.dep, w.hs, w.grid
    n = grid.n
    total = float(dep.machine.host_total)
    swap_total = float(dep.machine.swap_total)
    if dep.macos:
        wired = []
        active = []
        compressed = []
        for k in range(n):
            engines = sum(p.acc(k) for p in w.procs)
            wired.append(float(int(w.bg.kernel[k] + engines * 0.92)))
            over = max(0.0, hs.anon[k] - (total - w.bg.wmark - w.bg.floor))
            compressed.append(float(int(0.4 * GIB + over * 0.6 + w.bg.jobs[k] * 0.1)))
            active.append(float(int(max(0.0, hs.anon[k] - wired[-1] - compressed[-1]) * 0.7)))
        return [
            ("node_memory_total_bytes", {}, [total] * n),
            ("node_memory_free_bytes", {}, [float(int(v)) for v in hs.free]),
            ("node_memory_active_bytes", {}, active),
            ("node_memory_inactive_bytes", {}, [float(int(v)) for v in hs.cached]),
            ("node_memory_wired_bytes", {}, wired),
            ("node_memory_compressed_bytes", {}, compressed),
            ("node_memory_swap_used_bytes", {}, [float(int(v)) for v in hs.swap_used]),
            # vm.swapusage: the swap files allocated so far, a GiB each, one spare.
            (
                "node_memory_swap_total_bytes",
                {},
                [float((math.ceil(v / GIB) + 1) * GIB) for v in hs.swap_used],
            ),
        ]
    out: list[Metric] = [
        ("node_memory_MemTotal_bytes", {}, [total] * n),
        (
            "node_memory_MemAvailable_bytes",
            {},
            [float(int(v) // 1024 * 1024) for v in hs.available],
        ),
        ("node_memory_MemFree_bytes", {}, [float(int(v) // 1024 * 1024) for v in hs.free]),
        ("node_memory_Cached_bytes", {}, [float(int(v) // 1024 * 1024) for v in hs.cached]),
        ("node_memory_SwapTotal_bytes", {}, [swap_total] * n),
        (
            "node_memory_SwapFree_bytes",
            {},
            [float(int(max(0.0, swap_total - v)) // 1024 * 1024) for v in hs.swap_used],
        ),
        ("node_vmstat_pswpin", {}, hs.pswpin),
        ("node_vmstat_pswpout", {}, hs.pswpout),
        ("node_vmstat_pgmajfault", {}, hs.pgmajfault),
        ("node_vmstat_oom_kill", {}, hs.oom_kill),
    ]
    if dep.psi:
        out.append(("node_pressure_memory_waiting_seconds_total", {}, hs.some_total))
        out.append(("node_pressure_memory_stalled_seconds_total", {}, hs.full_total))
    return out


def engine_values(w: World, proc: en.Proc) -> dict[str, list[float]]:
    """The engine's own numbers for one process: the traffic's gauges while it served,
    idle while it merely lived, its counters from its own start."""
    g, grid = w.g, w.grid
    n = grid.n
    sv, al = proc.serving, proc.alive
    if sv == al:  # it served whenever it was up: the traffic's gauges are its own
        running, waiting, kv = g.running, g.waiting, g.kv_tokens
    else:
        running = [g.running[k] if sv[k] else 0.0 for k in range(n)]
        waiting = [g.waiting[k] if sv[k] else 0.0 for k in range(n)]
        kv = [g.kv_tokens[k] if sv[k] else 0.0 for k in range(n)]
    gen = en.counter(g.d_gen, al, sv)
    stop = en.counter(g.d_stop, al, sv)
    return {
        "running": running,
        "waiting": waiting,
        "kv": kv,
        "prompt": en.counter(g.d_prompt, al, sv),
        "gen": gen,
        "stop": stop,
        "length": en.counter(g.d_length, al, sv),
        "abort": en.counter(g.d_abort, al, sv),
        "preempt": en.counter(g.d_preempt, al, sv),
        "preempt_now": [g.d_preempt[k] if sv[k] else 0.0 for k in range(n)],
        "decode": [round(a * 0.93 + b) for a, b in zip(gen, stop, strict=True)],
        "ntmax": en.high_water(g.high_water, al, sv),
        "gen_rate": [g.d_gen[k] / grid.dt if sv[k] else 0.0 for k in range(n)],
    }


def _engine_metrics(w: World, proc: en.Proc) -> list[Metric]:
    v = engine_values(w, proc)
    dep = w.dep
    kind = proc.kind
    if kind == "llama-server":
        return [
            ("llamacpp:prompt_tokens_total", {}, v["prompt"]),
            ("llamacpp:tokens_predicted_total", {}, v["gen"]),
            ("llamacpp:n_decode_total", {}, [float(x) for x in v["decode"]]),
            ("llamacpp:n_tokens_max", {}, v["ntmax"]),
            ("llamacpp:requests_processing", {}, v["running"]),
            ("llamacpp:requests_deferred", {}, v["waiting"]),
        ]
    cap = max(1.0, w.cap if w.cap != float("inf") else 1e9)
    usage = [round(min(1.0, x / cap), 4) for x in v["kv"]]
    model = proc.model.hf  # type: ignore[attr-defined]
    if kind == "vllm":
        lab = {"engine": "0", "model_name": model}
        kv_name = "vllm:gpu_cache_usage_perc" if dep.old_vllm else "vllm:kv_cache_usage_perc"
        api = [proc.rss * 0.3 + proc.rss_dyn[k] for k in range(w.grid.n)]
        return [
            ("vllm:num_requests_running", lab, v["running"]),
            ("vllm:num_requests_waiting", lab, v["waiting"]),
            (kv_name, lab, usage),
            ("vllm:prompt_tokens_total", lab, v["prompt"]),
            ("vllm:generation_tokens_total", lab, v["gen"]),
            ("vllm:num_preemptions_total", lab, v["preempt"]),
            ("vllm:request_success_total", {**lab, "finished_reason": "stop"}, v["stop"]),
            ("vllm:request_success_total", {**lab, "finished_reason": "length"}, v["length"]),
            ("vllm:request_success_total", {**lab, "finished_reason": "abort"}, v["abort"]),
            ("process_resident_memory_bytes", {}, [float(int(x)) for x in api]),
        ]
    gl = {
        "engine_type": "unified",
        "model_name": model,
        "moe_ep_rank": "0",
        "pp_rank": "0",
        "tp_rank": "0",
    }
    cl = {"engine_type": "unified", "model_name": model}
    return [
        ("sglang:num_running_reqs", gl, v["running"]),
        ("sglang:num_queue_reqs", gl, v["waiting"]),
        ("sglang:token_usage", gl, usage),
        ("sglang:num_used_tokens", gl, [float(int(min(x, cap))) for x in v["kv"]]),
        ("sglang:max_total_num_tokens", gl, [float(int(cap))] * w.grid.n),
        ("sglang:gen_throughput", gl, [round(x, 2) for x in v["gen_rate"]]),
        ("sglang:num_retracted_reqs", gl, v["preempt_now"]),
        ("sglang:prompt_tokens_total", cl, v["prompt"]),
        ("sglang:generation_tokens_total", cl, v["gen"]),
    ]
