"""The text the box wrote: kernel lines (the OOM killer's sequence, NVRM allocation
failures, a container's own OOM kill), the engine's log (formats.md sections 1, 2, 4, 5, 6
and 9), and the checks and the trigger that started the capture.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from lab.eval import engine as en
from lab.eval.atcapture import cast, check, ollama_blob, ollama_runner_port, process_table
from lab.eval.profiles import GIB, MIB

if TYPE_CHECKING:
    from lab.eval.generate import World

KB = 1024


def _local(w: World, t: float, fmt: str) -> str:
    return time.strftime(fmt, time.gmtime(t + w.dep.tz * 3600.0))


def _zone(w: World) -> str:
    tz = w.dep.tz
    sign = "+" if tz >= 0 else "-"
    return f"{sign}{int(abs(tz)):02d}:{int((abs(tz) % 1) * 60):02d}"


def _kernel_release(w: World) -> tuple[str, str]:
    kind = w.mach.kind
    if kind == "gb10":
        return (
            "6.11.0-1016-nvidia #16-Ubuntu",
            "NVIDIA DGX Spark/DGX Spark, BIOS 5.36_0ACUM018 06/20/2025",
        )
    if kind == "strix":
        return (
            "6.15.9-201.fc42.x86_64 #1",
            "Framework Desktop (AMD Ryzen AI Max 300 Series)/FRANMFCP06, BIOS 03.02 07/10/2025",
        )
    return (
        "6.8.0-49-generic #49-Ubuntu",
        "ASUS System Product Name/PRO WS W790-ACE, BIOS 2201 05/17/2024",
    )


def _oom(
    w: World,
    t: float,
    victim: tuple[int, str, float, float],
    invoker: tuple[int, str],
    memcg: str | None = None,
    limit: float = 0.0,
    adj: int = 0,
) -> list[tuple[float, str]]:
    """One OOM kill as the kernel logs it: header, Mem-Info or the cgroup's usage, the task
    table, the constraint line, the kill line and the reaper."""
    rng = w.rng
    pid, comm, anon, file_rss = victim
    ipid, icomm = invoker
    release, hardware = _kernel_release(w)
    k = max(0, w.grid.at(t) - 1)
    out: list[tuple[float, str]] = []
    gfp = "0xcc0(GFP_KERNEL)" if memcg else "0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP)"
    out.append((t, f"{icomm} invoked oom-killer: gfp_mask={gfp}, order=0, oom_score_adj=0"))
    taint = "Tainted: P           OE     " if w.mach.kind in ("nvidia", "gb10") else "Not tainted"
    out.append((t, f"CPU: {rng.randrange(16)} PID: {ipid} Comm: {icomm} {taint} {release}"))
    out.append((t, f"Hardware name: {hardware}"))
    out.append((t, "Call Trace:"))
    for frame in (
        " <TASK>",
        " dump_stack_lvl+0x76/0xa0",
        " dump_header+0x47/0x1f0",
        " oom_kill_process+0x118/0x280",
        " out_of_memory+0x103/0x350",
        " </TASK>",
    ):
        out.append((t, frame))
    total_vm = int((anon + file_rss) * rng.uniform(1.3, 3.0) / KB)
    if memcg:
        lim = int(limit / KB)
        out.append((t, f"memory: usage {lim}kB, limit {lim}kB, failcnt {rng.randint(50, 5000)}"))
        out.append((t, "swap: usage 0kB, limit 0kB, failcnt 0"))
        out.append((t, f"Memory cgroup stats for {memcg}:"))
    else:
        hs = w.hs
        pages = int(hs.anon[k] / 4096)
        out.append((t, "Mem-Info:"))
        out.append(
            (t, f"active_anon:{int(pages * 0.7)} inactive_anon:{int(pages * 0.3)} isolated_anon:0")
        )
        swap_total = int(w.mach.swap_total / KB)
        free_swap = int(max(0.0, w.mach.swap_total - hs.swap_used[k]) / KB)
        out.append((t, f"Free swap  = {free_swap}kB"))
        out.append((t, f"Total swap = {swap_total}kB"))
        out.append((t, "Tasks state (memory values in pages):"))
        out.append(
            (
                t,
                "[  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents oom_score_adj"
                " name",
            )
        )
        rows = sorted(process_table(w, k), key=lambda q: -q.rss_bytes)[:7]
        if all(r.pid != pid for r in rows):
            rows.append(_Row(pid, comm, int(anon + file_rss)))
        if not adj and any(r.rss_bytes > anon + file_rss and r.pid != pid for r in rows):
            # The kernel killed it although something held more: it was marked to go first
            # (OOMScoreAdjust= in its unit, or the container's default).
            adj = 500
        for r in sorted(rows, key=lambda q: q.pid):
            rss_pages = int(r.rss_bytes / 4096)
            row_adj = adj if r.pid == pid else 0
            out.append(
                (
                    t,
                    f"[{r.pid:>7}] {1000:>5} {r.pid:>5} {int(rss_pages * 1.8):>8} {rss_pages:>8} "
                    f"{int(rss_pages * 8.5):>14} {0:>8} {row_adj:>13} {r.name}",
                )
            )
    scope = memcg or "/user.slice/user-1000.slice/session-2.scope"
    if memcg:
        cpuset = memcg.rsplit("/", 1)[-1]
        constraint = (
            f"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset={cpuset},"
            f"mems_allowed=0,oom_memcg={memcg},task_memcg={memcg},task={comm},pid={pid},uid=0"
        )
        prefix = "Memory cgroup out of memory"
    else:
        constraint = (
            "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,"
            f"global_oom,task_memcg={scope},task={comm},pid={pid},uid=1000"
        )
        prefix = "Out of memory"
    t2 = t + 0.0003 + 1e-5 * len(out)
    out.append((t2, constraint))
    out.append(
        (
            t2,
            f"{prefix}: Killed process {pid} ({comm}) total-vm:{total_vm}kB, "
            f"anon-rss:{int(anon / KB)}kB, file-rss:{int(file_rss / KB)}kB, shmem-rss:0kB, "
            f"UID:{0 if memcg else 1000} pgtables:{int(anon / KB / 500) + 120}kB "
            f"oom_score_adj:{adj}",
        )
    )
    out.append(
        (
            t + rng.uniform(0.05, 0.8),
            f"oom_reaper: reaped process {pid} ({comm}), now anon-rss:0kB, file-rss:0kB, "
            "shmem-rss:0kB",
        )
    )
    # One record after the other, in the kernel's order, a few microseconds apart.
    return [(at + 1e-5 * i, text) for i, (at, text) in enumerate(out)]


class _Row:
    def __init__(self, pid: int, name: str, rss: int) -> None:
        self.pid, self.name, self.rss_bytes = pid, name, rss


def _engine_comm(w: World) -> str:
    return {
        "llama-server": "llama-server",
        "vllm": "VLLM::EngineCor",
        "sglang": "sglang::schedul",
        "ollama": "ollama",
    }[w.dep.engine]


def _engine_victim(w: World, k: int) -> tuple[int, str, float, float]:
    a = w.procs[0]
    pid = a.pid_at(k)
    if w.dep.engine == "vllm":
        pid += 97
    elif w.dep.engine == "sglang":
        pid += 41
    anon = a.rss + a.rss_dyn[k]
    if w.plan.shape == "offload":
        anon += w.culprit[k]
    if w.mach.unified:
        anon += (a.static + a.dyn[k]) * (0.9 if w.dep.macos else 0.08)
    file_rss = a.model.q4_gib * GIB * w.rng.uniform(0.6, 1.0)  # type: ignore[attr-defined]
    return pid, _engine_comm(w), anon, file_rss


NVRM_NO_MEMORY = (
    "NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) "
    "returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359"
)


def events(w: World) -> None:
    rng, grid, p, dep = w.rng, w.grid, w.plan, w.dep
    kernel = w.kernel
    for _ in range(0 if dep.macos else rng.randint(2, 6)):  # no dmesg of this kind on macOS
        t = rng.uniform(grid.t0, grid.end)
        veth = f"veth{rng.getrandbits(28):07x}"
        kernel.extend(
            [
                (t, f"docker0: port 1({veth}) entered blocking state"),
                (t + 0.001, f"docker0: port 1({veth}) entered forwarding state"),
            ]
        )
    if w.memcg_kill is not None:
        cid = f"{rng.getrandbits(48):012x}"
        comm = rng.choice(["node", "java", "python3", "chrome", "clickhouse-serv"])
        lim = rng.choice([512, 1024, 2048, 4096]) * MIB
        path = f"/system.slice/docker-{cid}.scope"
        victim = (rng.randint(100000, 900000), comm, lim * 0.97, 8 * MIB)
        kernel.extend(_oom(w, w.memcg_kill, victim, (victim[0], comm), path, lim))
    c = cast(w)
    fail = p.failure_at
    if fail is not None:
        kf = max(0, grid.at(fail) - 0)
        if dep.macos:
            pass  # jetsam and the Metal driver log to the unified log, not to dmesg
        elif p.truth == "host-exhaustion":
            big = max(c.culprit, key=lambda i: i.share) if c.culprit else None
            cul = (big.pid, big.name) if big else (rng.randint(200000, 900000), "python3")
            when = w.kills[0] if w.kills else fail
            kb = max(0, grid.at(when) - 1)
            if p.victim == "engine":
                kernel.extend(_oom(w, when, _engine_victim(w, kb), cul))
            else:
                share = big.share if big else 1.0
                vic = (cul[0], cul[1], w.culprit[kb] * share, 12 * MIB)
                kernel.extend(_oom(w, when, vic, cul))
        elif p.ending == "oom-kill" and p.dies and not dep.macos:
            vic = _engine_victim(w, max(0, kf - 1))
            kernel.extend(_oom(w, fail, vic, (vic[0], vic[1])))
        elif p.ending == "memcg-oom":
            vic = _engine_victim(w, max(0, kf - 1))
            path = f"/system.slice/docker-{rng.getrandbits(48):012x}.scope"
            kernel.extend(
                _oom(w, fail, vic, (vic[0], vic[1]), path, getattr(w, "memcg_limit", vic[2]))
            )
        elif p.ending in ("abort", "load-fail", "oom-kill") and w.mach.kind == "gb10":
            for i in range(rng.randint(1, 3)):
                kernel.append((fail - 0.2 + 0.01 * i, NVRM_NO_MEMORY))
    _engine_log(w)
    _checks(w)


def _engine_log(w: World) -> None:
    dep = w.dep
    if dep.engine == "vllm":
        _vllm_log(w)
    elif dep.engine == "sglang":
        _sglang_log(w)
    elif dep.engine == "ollama":
        _ollama_log(w)
    else:
        _llama_log(w)
    if dep.managed:
        _swap_log(w)


def _recent(w: World, span: float = 1500.0) -> list[int]:
    end = w.plan.failure_at if w.plan.dies and w.plan.failure_at else w.grid.end
    lo = end - span
    return [j for j, r in enumerate(w.reqs) if lo <= r[0] <= end][-80:]


def _llama_log(w: World, fail_model: object | None = None) -> None:
    rng, p, dep, logs = w.rng, w.plan, w.dep, w.logs
    s = w.served
    task = rng.randint(2000, 90000)
    ctx_slot = (w.procs[0].ctx or dep.ctx) // max(1, dep.slots)
    # Builds of 2026 (b1-0c1e570, run here) log neither the prompt's length nor each HTTP
    # request at the default level: only each request's context when its slot is released.
    # Half the servers are such builds (the task number's parity: no extra draw).
    current = task % 2 == 0
    for j in _recent(w):
        a, pt, o, _ = w.reqs[j]
        task += rng.randint(1, 3)
        slot = j % max(1, dep.slots)
        st = s.start[j]
        if st != st:
            logs.append((s.gave_up[j], f"srv  cancel_tasks: cancel task, id_task = {task}"))
            continue
        logs.append((st, f"slot launch_slot_: id  {slot} | task {task} | processing task"))
        if not current:
            logs.append(
                (
                    st + 0.001,
                    f"slot update_slots: id  {slot} | task {task} | new prompt, n_ctx_slot = "
                    f"{ctx_slot}, n_keep = 0, n_prompt_tokens = {pt}",
                )
            )
        if pt > 8192 and not current:
            done = 0
            while done + 2048 < pt:
                done += 2048
                frac = done / pt
                logs.append(
                    (
                        st + (s.finish[j] - st) * frac * 0.5,
                        f"slot update_slots: id  {slot} | task {task} | prompt processing "
                        f"progress, n_past = {done}, n_tokens = 2048, progress = {frac:.6f}",
                    )
                )
        f = s.finish[j]
        if p.dies and p.failure_at is not None and f >= p.failure_at:
            continue
        if current:
            held = min(pt + o, ctx_slot - 1)
            logs.append(
                (
                    f,
                    f"slot      release: id  {slot} | task {task} | stop processing: "
                    f"n_tokens = {held}, truncated = {int(held < pt + o)}",
                )
            )
            continue
        logs.append(
            (
                f,
                f"slot      release: id  {slot} | task {task} | stop processing: "
                f"n_past = {pt + o}, truncated = {int(pt + o >= ctx_slot)}",
            )
        )
        logs.append(
            (f + 0.0005, "srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200")
        )
    fail = p.failure_at
    if fail is None:
        return
    gpu = w.mach.kind
    if p.ending == "abort" and w.procs[0].kind == "llama-server":
        if dep.macos:
            logs.append((fail, "ggml_metal_graph_compute: command buffer 0 failed with status 5"))
            logs.append(
                (
                    fail,
                    "error: Insufficient Memory "
                    "(00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)",
                )
            )
            logs.append(
                (fail + 0.01, "/app/ggml/src/ggml-metal/ggml-metal-context.m:241: fatal error")
            )
        elif gpu == "strix":
            size = int(rng.choice([256, 512, 1024]) * MIB)
            logs.append((fail, f"ggml_vulkan: Device memory allocation of size {size} failed."))
            logs.append((fail, "ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory"))
            logs.append(
                (fail + 0.01, "/app/ggml/src/ggml-vulkan/ggml-vulkan.cpp:1480: fatal error")
            )
        elif rng.random() < 0.5:
            mib = rng.uniform(200, 2400)
            logs.append(
                (
                    fail,
                    f"ggml_backend_cuda_buffer_type_alloc_buffer: allocating {mib:.2f} MiB on "
                    "device 0: cudaMalloc failed: out of memory",
                )
            )
            logs.append(
                (
                    fail,
                    "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size "
                    f"{int(mib * MIB)}",
                )
            )
            logs.append((fail, "graph_reserve: failed to allocate compute buffers"))
            logs.append((fail + 0.002, "CUDA error: out of memory"))
            logs.append(
                (
                    fail + 0.002,
                    "  current device: 0, in function ggml_backend_cuda_graph_compute at "
                    "/app/ggml/src/ggml-cuda/ggml-cuda.cu:2818",
                )
            )
            logs.append((fail + 0.002, "/app/ggml/src/ggml-cuda/ggml-cuda.cu:88: CUDA error"))
        else:
            logs.append((fail, "CUDA error: out of memory"))
            logs.append(
                (
                    fail,
                    "  current device: 0, in function alloc at "
                    "/app/ggml/src/ggml-cuda/ggml-cuda.cu:473",
                )
            )
            logs.append((fail, "  cuMemCreate(&handle, reserve_size, &prop, 0)"))
            logs.append((fail + 0.001, "/app/ggml/src/ggml-cuda/ggml-cuda.cu:88: CUDA error"))
    if p.truth == "swap-not-unloaded" and p.ending == "load-fail":
        _load_fail_log(w, fail)


def _load_fail_log(w: World, fail: float) -> None:
    """The next model's llama-server failing to allocate its weights."""
    from lab.eval.profiles import MODELS

    rng, logs = w.rng, w.logs
    taken = {q.key for q in w.procs}
    nxt = next(
        (m for m in sorted(MODELS, key=lambda m: -m.q4_gib) if m.key not in taken), MODELS[0]
    )
    free_mib = int(max(64.0, w.acc_limit() - w.fixed("acc")[w.grid.at(fail)]) / MIB)
    if w.mach.unified:
        free_mib = int(max(64.0, w.hs.available[w.grid.at(fail)]) / MIB)
    size = nxt.q4_gib * 1024 * rng.uniform(0.85, 0.98)
    gguf = f"/models/{nxt.gguf}"
    dev = "NVIDIA GB10" if w.mach.kind == "gb10" else w.mach.gpu
    for i, line in enumerate(
        [
            f"llama_model_load_from_file_impl: using device CUDA0 ({dev}) ({w.mach.pci}) - "
            f"{free_mib} MiB free",
            "llama_model_loader: loaded meta data with 35 key-value pairs and 771 tensors "
            f"from {gguf} (version GGUF V3 (latest))",
            f"ggml_backend_cuda_buffer_type_alloc_buffer: allocating {size:.2f} MiB on "
            "device 0: cudaMalloc failed: out of memory",
            f"alloc_tensor_range: failed to allocate CUDA0 buffer of size {int(size * MIB)}",
            "llama_model_load: error loading model: unable to allocate CUDA0 buffer",
            "llama_model_load_from_file_impl: failed to load model",
            f"srv    load_model: failed to load model, '{gguf}'",
            "main: exiting due to model loading error",
        ]
    ):
        logs.append((fail + 0.01 * i, line))
    w.notes.append(f"the next load ({nxt.key}) failed")


def _swap_log(w: World) -> None:
    logs, dep, grid = w.logs, w.dep, w.grid
    for proc in w.procs:
        if proc.kind not in ("llama-server", "vllm"):
            continue
        for k in en.starts(proc.alive):
            if k == 0:
                continue
            t = grid.time(k)
            logs.append(
                (
                    t,
                    f"[INFO] <{proc.key}> Health check passed on http://127.0.0.1:{proc.port}/health",
                )
            )
        for k in range(1, grid.n):
            unloaded = proc.alive[k - 1] and not proc.alive[k] and dep.keep_alive > 0
            if unloaded and (w.plan.failure_at is None or grid.time(k) < w.plan.failure_at - 60):
                logs.append(
                    (
                        grid.time(k) - 1.0,
                        f"[INFO] <{proc.key}> Unloading model, TTL of {int(dep.keep_alive)}s "
                        "reached",
                    )
                )


def _vllm_log(w: World) -> None:
    rng, p, dep, grid, g, logs = w.rng, w.plan, w.dep, w.grid, w.g, w.logs
    a = w.procs[0]
    api = a.pid_at(grid.n - 1)
    core = api + 97
    end = p.failure_at if p.dies and p.failure_at else grid.end
    cap = max(1.0, w.cap if w.cap != float("inf") else 1e9)
    t = end - 1200.0
    hit = rng.uniform(5, 60)
    while t < end:
        k = grid.at(t)
        r, q = g.running[k], g.waiting[k]
        pr, gn = g.d_prompt[k] / grid.dt, g.d_gen[k] / grid.dt
        if r or q or pr or gn:
            ts = _local(w, t, "%m-%d %H:%M:%S")
            logs.append(
                (
                    t,
                    f"(APIServer pid={api}) INFO {ts} [loggers.py:127] Engine 000: Avg prompt "
                    f"throughput: {pr:.1f} tokens/s, Avg generation throughput: {gn:.1f} tokens/s, "
                    f"Running: {int(r)} reqs, Waiting: {int(q)} reqs, GPU KV cache usage: "
                    f"{min(100.0, 100 * g.kv_tokens[k] / cap):.1f}%, Prefix cache hit rate: "
                    f"{hit:.1f}%",
                )
            )
        t += 10.0
    fail = p.failure_at
    if fail is None:
        return
    ts = _local(w, fail, "%m-%d %H:%M:%S")
    core_p, api_p = f"(EngineCore_DP0 pid={core})", f"(APIServer pid={api})"
    if p.ending == "torch-oom":
        total = (w.mach.acc_total if not w.mach.unified else w.mach.host_total) / GIB
        tried = rng.uniform(0.5, 4.0)
        msg = (
            f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried:.2f} GiB. GPU 0 "
            f"has a total capacity of {total:.2f} GiB of which {rng.uniform(20, 900):.2f} MiB is "
            f"free. Including non-PyTorch memory, this process has {dep.util * total:.2f} GiB "
            f"memory in use. Of the allocated memory {dep.util * total * 0.93:.2f} GiB is "
            f"allocated by PyTorch, and {rng.uniform(50, 700):.2f} MiB is reserved by PyTorch but "
            "unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
            "documentation for Memory Management  "
            "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
        )
        for i, line in enumerate(
            [
                f"{core_p} ERROR {ts} [core.py:710] EngineCore encountered a fatal error.",
                f"{core_p} ERROR {ts} [core.py:710] Traceback (most recent call last):",
                f"(EngineCore_DP0 pid={core}) ERROR {ts} [core.py:710] {msg}",
                f"{api_p} ERROR {ts} [async_llm.py:480] AsyncLLM output_handler failed.",
                f"{api_p} ERROR {ts} [async_llm.py:480] vllm.v1.engine.exceptions.EngineDeadError: "
                "EngineCore encountered an issue. See stack trace (above) for the root cause.",
                f"{api_p} INFO {ts} [launcher.py:101] Shutting down FastAPI HTTP server.",
            ]
        ):
            logs.append((fail + 0.01 * i, line))
    elif p.dies:
        logs.append(
            (
                fail + 0.5,
                f"(APIServer pid={api}) ERROR {ts} [core_client.py:564] Engine core proc "
                "EngineCore_DP0 died unexpectedly, shutting down client.",
            )
        )


def _sglang_log(w: World) -> None:
    rng, p, grid, g, logs = w.rng, w.plan, w.grid, w.g, w.logs
    end = p.failure_at if p.dies and p.failure_at else grid.end
    cap = max(1.0, w.cap if w.cap != float("inf") else 1e9)
    t = end - 1200.0
    while t < end:
        k = grid.at(t)
        r, q = g.running[k], g.waiting[k]
        if r or q:
            ts = _local(w, t, "%Y-%m-%d %H:%M:%S")
            tok = int(min(cap, g.kv_tokens[k]))
            logs.append(
                (
                    t,
                    f"[{ts}] Decode batch. #running-req: {int(r)}, #token: {tok}, token usage: "
                    f"{tok / cap:.2f}, cuda graph: True, gen throughput (token/s): "
                    f"{g.d_gen[k] / grid.dt:.2f}, #queue-req: {int(q)}, ",
                )
            )
            if g.d_preempt[k]:
                logs.append(
                    (
                        t + 0.5,
                        f"[{ts}] KV cache pool is full. Retract requests. #retracted_reqs: "
                        f"{int(g.d_preempt[k])}, #new_token_ratio: 0.7000 -> 1.0000",
                    )
                )
        t += rng.uniform(20.0, 45.0)
    fail = p.failure_at
    if fail is not None and p.ending == "torch-oom":
        ts = _local(w, fail, "%Y-%m-%d %H:%M:%S")
        logs.append(
            (fail, f"[{ts}] Scheduler hit an exception: Traceback (most recent call last):")
        )
        logs.append(
            (
                fail,
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                f"{rng.uniform(0.5, 3):.2f} GiB.",
            )
        )
        logs.append(
            (
                fail + 0.2,
                f"[{ts}] Received sigquit from a child process. It usually means the child failed.",
            )
        )


def _ollama_load(w: World, proc: en.Proc, t: float, ctx: int) -> None:
    """Ollama's line for a load: the runner's command, with the context it was given."""
    dep = w.dep
    iso = _local(w, t, "%Y-%m-%dT%H:%M:%S") + f".{w.rng.randrange(1000):03d}{_zone(w)}"
    cmd = (
        f"/usr/local/bin/ollama runner --model {ollama_blob(proc.key)} --ctx-size "
        f"{ctx * dep.slots} --batch-size 512 --n-gpu-layers 999 --threads 8 --parallel "
        f"{dep.slots} --port {ollama_runner_port(proc.key)}"
    )
    w.logs.append(
        (t, f'time={iso} level=INFO source=server.go:410 msg="starting llama server" cmd="{cmd}"')
    )


def _ollama_context(w: World, proc: en.Proc, k: int) -> int:
    """num_ctx a runner was loaded with at scrape k: doubled at each reload a longer
    context asked for (generate.World._ollama_reloads)."""
    steps = w.ollama_steps if proc is w.procs[0] else []
    return w.dep.ctx * 2 ** sum(1 for s in steps if s <= k)


def _ollama_log(w: World) -> None:
    rng, p, grid, logs = w.rng, w.plan, w.grid, w.logs
    zone = _zone(w)
    s = w.served
    for k in w.ollama_steps:
        _ollama_load(w, w.procs[0], grid.time(k), _ollama_context(w, w.procs[0], k))
    for proc in w.procs:
        for k in en.starts(proc.alive):
            if k == 0:
                continue
            _ollama_load(w, proc, grid.time(k), _ollama_context(w, proc, k))
            t = grid.time(k) + rng.uniform(2, 12)
            iso = _local(w, t, "%Y-%m-%dT%H:%M:%S") + f".{rng.randrange(1000):03d}{zone}"
            logs.append(
                (
                    t,
                    f'time={iso} level=INFO source=server.go:1292 msg="llama runner started in '
                    f'{rng.uniform(2, 15):.2f} seconds"',
                )
            )
    for j in _recent(w, 3600.0):
        st = s.start[j]
        if st != st:
            continue
        f = s.finish[j]
        dur = f - w.reqs[j][0]
        when = _local(w, f, "%Y/%m/%d - %H:%M:%S")
        logs.append(
            (f, f'[GIN] {when} | 200 | {dur:>10.6f}s |       127.0.0.1 | POST     "/api/chat"')
        )
    fail = p.failure_at
    if fail is not None and p.ending in ("load-fail", "abort", "oom-kill"):
        if p.ending == "load-fail":
            a = w.procs[0]
            ctx = _ollama_context(w, a, grid.n)
            # The reload that fails asks for twice the context again (World.final_step).
            asked = ctx * 2 if p.truth == "context-creep" else ctx
            _ollama_load(w, a, fail - rng.uniform(2, 10), asked)
        iso = _local(w, fail, "%Y-%m-%dT%H:%M:%S") + f".{rng.randrange(1000):03d}{zone}"
        # Each backend's own words (ollama/ollama#9957 and #11713 for ROCm).
        err = {
            "nvidia": "cudaMalloc failed: out of memory",
            "gb10": "cudaMalloc failed: out of memory",
            "strix": "ROCm error: out of memory",
            "mac": "Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)",
        }[w.mach.kind]
        if p.ending == "oom-kill":
            err = "signal: killed"
        logs.append(
            (
                fail,
                f'time={iso} level=ERROR source=sched.go:476 msg="error loading llama server" '
                f'error="llama runner process has terminated: {err}"',
            )
        )
        when = _local(w, fail, "%Y/%m/%d - %H:%M:%S")
        logs.append(
            (
                fail + 0.01,
                f"[GIN] {when} | 500 | {rng.uniform(2, 20):>10.6f}s |       127.0.0.1 | "
                'POST     "/api/chat"',
            )
        )


def _checks(w: World) -> None:
    """The checks the collector ran at the capture and the trigger that started it."""
    rng, p, dep = w.rng, w.plan, w.dep
    gw = dep.gateway
    engine_name = dep.engine
    checks = []
    kind = "completion" if p.ending in ("timeout", "busy") or rng.random() < 0.5 else "http"
    gname = "gateway" if gw else engine_name
    dead = p.dies
    timeout = f"no answer within {int(w.check_timeout)} s"
    if p.truth == "no-fault":
        checks.append(check(gname, kind, "ok"))
        if gw and w.procs[0].alive[-1]:  # unloaded by its manager's ttl: nothing to check
            checks.append(check(engine_name, "http", "ok"))
        w.checks = checks
        w.trigger = ("cron", "baseline", None) if rng.random() < 0.6 else ("manual", None, None)
        return
    if dead or p.ending == "load-fail":
        reason = "HTTP 502" if gw else "connection refused"
        if dep.engine == "ollama":
            reason = "HTTP 500"
        checks.append(check(gname, kind, "error", reason))
        if gw and dead and dep.engine != "ollama":
            checks.append(check(engine_name, "http", "error", "connection refused"))
    else:  # alive and not answering in time
        checks.append(check(gname, "completion", "timeout", timeout))
        stalled = p.truth in ("memory-pressure-stall", "host-exhaustion")
        if gw:
            checks.append(
                check(
                    engine_name,
                    "http",
                    "timeout" if stalled else "ok",
                    timeout if stalled else None,
                )
            )
    w.checks = checks
    first = checks[0]
    unit = {"llama-server": "llama-server", "vllm": "vllm", "sglang": "sglang", "ollama": "ollama"}[
        dep.engine
    ]
    options: list[tuple[str, str | None, str | None]] = [("healthcheck", first.name, first.reason)]
    if dead and dep.systemd and not dep.managed:
        detail = {
            "oom-kill": "result=oom-kill exit=killed/KILL",
            "abort": "result=core-dump exit=dumped/ABRT",
            "torch-oom": "result=exit-code exit=exited/1",
        }.get(p.ending)
        if p.truth == "host-exhaustion":
            detail = "result=oom-kill exit=killed/KILL"
        if detail and dep.engine != "ollama":
            options.append(("systemd", f"{unit}.service", detail))
    if dep.prometheus and dead and dep.scraped:
        options.append(("alert", "EngineDown", None))
    if (
        dep.prometheus
        and p.truth == "concurrency-overload"
        and not dead
        and dep.scraped
        and dep.metrics
    ):
        options.append(("alert", "RequestsQueueing", None))
    if dep.prometheus and gw and rng.random() < 0.15 and (dead or p.ending == "load-fail"):
        options.append(("alert", "GatewayDown", None))
    w.trigger = rng.choice(options)
