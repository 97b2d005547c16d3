"""What the collector found on the box at the capture: the host's own thirty seconds, the
process table, the engines' answers, the checks, the trigger; and, on a box without
Prometheus, the cron baselines it took every half hour before.

Processes carry the names and command lines these programs really have (a vLLM engine
core renames itself VLLM::EngineCore, an Ollama runner is `ollama runner`), their
parents, their resident memory and, where NVML lists it, their accelerator memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from random import Random
from typing import TYPE_CHECKING

from lab.eval import engine as en
from lab.eval.exporters import engine_values
from lab.eval.profiles import GIB, MIB
from lab.eval.world import CheckAtCapture, EngineAtCapture, ProcessAtCapture, Scenario

if TYPE_CHECKING:
    from lab.eval.generate import World


@dataclass
class Ident:
    pid: int
    ppid: int
    name: str
    cmdline: list[str]
    base_rss: float = 0.0
    share: float = 1.0  # of a memory array it carries
    what: str = ""  # which array: services | desktop | culprit | fixed
    gpu: float | None = None


@dataclass
class Cast:
    """Everybody on the box who is not an engine process, with stable pids."""

    fixed: list[Ident] = field(default_factory=list)
    culprit: list[Ident] = field(default_factory=list)
    manager: Ident | None = None
    gateway: Ident | None = None
    serve: Ident | None = None  # ollama serve
    shim: int = 0


def cast(w: World) -> Cast:
    if getattr(w, "cast", None) is not None:
        return w.cast
    rng, dep = w.rng, w.dep
    c = Cast()
    nxt = iter(sorted(rng.sample(range(400, 3000), 40)))
    c.shim = next(nxt)
    macos = dep.macos

    def add(
        name: str, cmd: list[str], rss: float, what: str = "fixed", share: float = 1.0
    ) -> Ident:
        ident = Ident(next(nxt), 1, name, cmd, rss, share, what)
        c.fixed.append(ident)
        return ident

    if not macos:
        add("systemd-journal", ["/usr/lib/systemd/systemd-journald"], rng.uniform(30, 200) * MIB)
        add("dockerd", ["/usr/bin/dockerd", "-H", "fd://"], rng.uniform(60, 180) * MIB)
        add("containerd", ["/usr/bin/containerd"], rng.uniform(30, 90) * MIB)
        add("node_exporter", ["/usr/bin/node_exporter"], rng.uniform(15, 40) * MIB)
        if dep.dcgm:
            add("dcgm-exporter", ["/usr/bin/dcgm-exporter"], rng.uniform(60, 140) * MIB)
    if dep.prometheus:
        add(
            "prometheus",
            ["/bin/prometheus", "--config.file=/etc/prometheus/prometheus.yml"],
            rng.uniform(0.25, 1.2) * GIB,
        )
    if dep.workstation:
        if macos:
            add(
                "WindowServer",
                ["/System/Library/PrivateFrameworks/SkyLight.framework/Resources/WindowServer"],
                0,
                "desktop",
                0.2,
            )
            add(
                "Google Chrome",
                ["/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"],
                0,
                "desktop",
                0.5,
            )
        else:
            add("gnome-shell", ["/usr/bin/gnome-shell"], 0, "desktop", 0.18)
            add("firefox", ["/usr/lib/firefox/firefox"], 0, "desktop", 0.42)
            add(
                "Isolated Web Co",
                ["/usr/lib/firefox/firefox", "-contentproc", "-childID", "7", "tab"],
                0,
                "desktop",
                0.3,
            )
    services = [
        ("qdrant", ["/qdrant/qdrant"]),
        ("python3", ["python3", "-m", "open_webui.main"]),
        ("postgres", ["postgres", "-D", "/var/lib/postgresql/data"]),
        (
            "java",
            [
                "/usr/share/elasticsearch/jdk/bin/java",
                "-Xms4g",
                "org.elasticsearch.bootstrap.Elasticsearch",
            ],
        ),
        ("python3", ["python3", "main.py", "--listen", "0.0.0.0", "--port", "8188"]),
        ("redis-server", ["redis-server", "*:6379"]),
    ]
    rng.shuffle(services)
    if dep.machine.host_total > 96 * GIB:
        vm = (
            "qemu-system-x86",
            ["/usr/bin/qemu-system-x86_64", "-enable-kvm", "-m", "65536", "-name", "win11"],
        )
        services.insert(0, vm)
    parts = w.n_services
    shares = [rng.uniform(0.5, 1.5) for _ in range(parts)]
    whole = sum(shares)
    for (name, cmd), s in zip(services[:parts], shares, strict=False):
        add(name, cmd, 0, "services", s / whole)
    if dep.gateway == "llama-swap":
        c.gateway = c.manager = Ident(
            next(nxt),
            1,
            "llama-swap",
            [
                "/usr/local/bin/llama-swap",
                "--config",
                "/etc/llama-swap/config.yaml",
                "--listen",
                ":8080",
            ],
            rng.uniform(25, 70) * MIB,
        )
    elif dep.gateway == "litellm":
        c.gateway = Ident(
            next(nxt),
            c.shim,
            "litellm",
            [
                "/usr/local/bin/python",
                "/usr/local/bin/litellm",
                "--config",
                "/app/config.yaml",
                "--port",
                "4000",
            ],
            rng.uniform(0.35, 1.0) * GIB,
        )
    elif dep.gateway == "nginx":
        c.gateway = Ident(
            next(nxt),
            1,
            "nginx",
            ["nginx: master process /usr/sbin/nginx -g daemon off;"],
            rng.uniform(5, 20) * MIB,
        )
    if dep.engine == "ollama":
        c.serve = Ident(
            next(nxt), 1, "ollama", ["/usr/local/bin/ollama", "serve"], rng.uniform(40, 140) * MIB
        )
    p = w.plan
    if p.truth in ("host-exhaustion", "memory-pressure-stall") and p.shape != "offload":
        base = rng.randint(200000, 900000)
        if p.shape == "build":
            make = Ident(base, 1, "make", ["make", "-j16"], 8 * MIB)
            c.culprit.append(make)
            jobs = rng.randint(4, 12)
            for i in range(jobs):
                c.culprit.append(
                    Ident(
                        base + 3 + 17 * i,
                        base,
                        "cc1plus",
                        [
                            "/usr/lib/gcc/x86_64-linux-gnu/13/cc1plus",
                            "-quiet",
                            f"src/unit{i}.cpp",
                            "-O2",
                        ],
                        0,
                        1.0 / jobs,
                        "culprit",
                    )
                )
        else:
            name, cmd = {
                "notebook": (
                    "python3",
                    ["python3", "-m", "ipykernel_launcher", "-f", "kernel-5c1e.json"],
                ),
                "data-job": ("python3", ["python3", "etl/rebuild_embeddings.py", "--all"]),
                "browser": ("chrome", ["/opt/google/chrome/chrome", "--type=renderer"]),
                "container": (
                    "java",
                    [
                        "/usr/share/elasticsearch/jdk/bin/java",
                        "-Xmx31g",
                        "org.elasticsearch.bootstrap.Elasticsearch",
                    ],
                ),
            }[p.shape]
            c.culprit.append(Ident(base, 1, name, cmd, 0, 1.0, "culprit"))
    w.cast = c
    return c


def _engine_cmd(w: World, proc: en.Proc) -> tuple[str, list[str]]:
    dep = w.dep
    m = proc.model
    if proc.kind == "llama-server":
        cmd = [
            "/usr/local/bin/llama-server",
            "-m",
            f"/models/{m.gguf}",
            "--port",
            str(proc.port),
            "--parallel",
            str(dep.slots),
            "-c",
            str(proc.ctx or dep.ctx),
            "-ngl",
            "99",
        ]
        if proc.metrics:
            cmd.append("--metrics")
        if w.plan.shape == "offload" and proc is w.procs[0]:
            cmd[cmd.index("99")] = "24"
        return "llama-server", cmd
    if proc.kind == "vllm":
        return "vllm", [
            "/usr/bin/python3",
            "/usr/local/bin/vllm",
            "serve",
            m.hf,
            "--port",
            str(proc.port),
            "--gpu-memory-utilization",
            f"{dep.util:.2f}",
            "--max-model-len",
            str(dep.ctx),
            "--max-num-seqs",
            str(dep.slots),
        ]
    if proc.kind == "sglang":
        return "python3", [
            "python3",
            "-m",
            "sglang.launch_server",
            "--model-path",
            m.hf,
            "--port",
            str(proc.port),
            "--mem-fraction-static",
            f"{dep.util:.2f}",
            "--context-length",
            str(dep.ctx),
            "--max-running-requests",
            str(dep.slots),
            "--enable-metrics",
        ]
    return "ollama", [
        "/usr/local/bin/ollama",
        "runner",
        "--ollama-engine",
        "--model",
        ollama_blob(m.key),
        "--port",
        str(ollama_runner_port(m.key)),
    ]


def ollama_blob(key: str) -> str:
    """Where Ollama keeps a model's weights: a blob named by its digest."""
    return f"/usr/share/ollama/.ollama/models/blobs/sha256-{Random(key).getrandbits(256):064x}"


def ollama_runner_port(key: str) -> int:
    return 30000 + (sum(map(ord, key)) * 37) % 20000


def _gpu(w: World, b: float) -> float | None:
    kind = w.mach.kind
    if kind in ("nvidia", "gb10"):
        return b
    return None


def process_table(w: World, k: int) -> list[ProcessAtCapture]:
    """The process table at scrape k (the last one: the capture)."""
    c = cast(w)
    dep, bg = w.dep, w.bg
    out: list[ProcessAtCapture] = []
    dsk = bg.desktop[k]
    services = w.filler_services
    culprit = w.culprit[k]
    for ident in c.fixed:
        if ident.what == "desktop":
            rss = dsk * ident.share
        elif ident.what == "services":
            rss = services * ident.share
        else:
            rss = ident.base_rss
        if rss > 1 * MIB:
            out.append(ProcessAtCapture(ident.pid, ident.ppid, ident.name, ident.cmdline, int(rss)))
    came = _since(w, _came(w.culprit, k))
    for ident in c.culprit:
        rss = culprit * ident.share if ident.what == "culprit" else ident.base_rss
        if culprit > 0 and rss > 0:
            out.append(
                ProcessAtCapture(
                    ident.pid,
                    ident.ppid,
                    ident.name,
                    ident.cmdline,
                    int(rss),
                    None,
                    came,
                )
            )
    for extra in (c.manager if c.manager is not c.gateway else None, c.gateway, c.serve):
        if extra is not None:
            out.append(
                ProcessAtCapture(
                    extra.pid, extra.ppid, extra.name, extra.cmdline, int(extra.base_rss)
                )
            )
    unified_mac = dep.macos
    for i, proc in enumerate(w.procs):
        if not proc.alive[k]:
            continue
        pid = proc.pid_at(k)
        up = _since(w, max((at for at, p in proc.pids if at <= k), default=0))
        name, cmd = _engine_cmd(w, proc)
        acc = proc.static + proc.dyn[k]
        rss = proc.rss + proc.rss_dyn[k]
        if i == 0 and w.plan.shape == "offload":
            rss += culprit
        if unified_mac:
            rss += acc * 0.9
        if proc.kind != "ollama-runner" and c.manager is not None and dep.managed:
            # llama-swap runs each model's `cmd` as its own child, vLLM and SGLang too.
            ppid = c.manager.pid
        elif proc.kind == "ollama-runner" and c.serve is not None:
            ppid = c.serve.pid
        else:
            ppid = 1 if dep.systemd else c.shim
        if proc.kind == "vllm":
            cuda = 0.5 * GIB if w.mach.kind in ("nvidia", "gb10") else None
            out.append(
                ProcessAtCapture(
                    pid,
                    ppid,
                    name,
                    cmd,
                    int(proc.rss * 0.3 + proc.rss_dyn[k]),
                    _as_int(_gpu(w, cuda or 0.0) if cuda else None),
                    up,
                )
            )
            out.append(
                ProcessAtCapture(
                    pid + 97,
                    pid,
                    "VLLM::EngineCor",
                    ["VLLM::EngineCore"],
                    int(proc.rss * 0.7),
                    _as_int(_gpu(w, acc)),
                    up,
                )
            )
        elif proc.kind == "sglang":
            out.append(
                ProcessAtCapture(
                    pid, ppid, name, cmd, int(proc.rss * 0.25 + proc.rss_dyn[k]), None, up
                )
            )
            out.append(
                ProcessAtCapture(
                    pid + 41,
                    pid,
                    "sglang::schedul",
                    ["sglang::scheduler_TP0"],
                    int(proc.rss * 0.65),
                    _as_int(_gpu(w, acc)),
                    up,
                )
            )
            out.append(
                ProcessAtCapture(
                    pid + 42,
                    pid,
                    "sglang::detoken",
                    ["sglang::detokenizer"],
                    int(proc.rss * 0.1),
                    None,
                    up,
                )
            )
        else:
            out.append(ProcessAtCapture(pid, ppid, name, cmd, int(rss), _as_int(_gpu(w, acc)), up))
    return out


def _came(held: list[float], k: int) -> int:
    """The grid index where the run of memory held up to k began."""
    while k > 0 and held[k - 1] > 0:
        k -= 1
    return k


def _since(w: World, k: int) -> float | None:
    """When a process that came up at grid index k started: up before the day began (k 0)
    is up since the box booted."""
    return None if k == 0 else w.grid.time(k)


def _as_int(v: float | None) -> int | None:
    return None if v is None else int(v)


def fill(w: World, sc: Scenario) -> None:
    dep, grid, hs, rng, p = w.dep, w.grid, w.hs, w.rng, w.plan
    last = grid.n - 1
    total = float(dep.machine.host_total)
    avail = hs.available[last]
    swap = hs.swap_used[last]
    jitter = 30 * MIB if p.truth != "memory-pressure-stall" else 200 * MIB
    for i in range(1, 31):
        a = max(total * 0.003, avail + rng.gauss(0.0, jitter))
        sc.window.append((w.end + i, int(total - a), int(a), int(swap)))
    if not dep.macos:
        some = hs.psi_some[last] * 100.0 * rng.uniform(0.85, 1.15)
        sc.psi_some = round(min(99.0, some), 2)
        sc.psi_full = round(
            min(sc.psi_some, hs.psi_full[last] * 100.0 * rng.uniform(0.85, 1.15)), 2
        )
    sc.processes = process_table(w, last)
    card = _card(w)
    if card:
        sc.card_total, sc.card_used = int(w.acc_limit()), card[last]
    sc.engines = engines(w)
    sc.checks = list(w.checks)
    sc.trigger = w.trigger
    if not dep.prometheus:
        for i in range(24):
            t = w.end - 12 * 3600.0 + i * 1800.0 + rng.uniform(0.0, 2.0)
            k = grid.at(t)
            table = process_table(w, k)
            table = sorted(table, key=lambda q: -(q.rss_bytes + (q.gpu_bytes or 0)))[:5]
            a = hs.available[k]
            sc.baselines.append((t, int(total - a), int(a), table, card[k] if card else None))


def _card(w: World) -> list[int] | None:
    """The discrete card's memory in use at each scrape, as NVML reads it (what DCGM
    exports too): None on a shared pool or without an NVIDIA card."""
    if w.mach.kind != "nvidia":
        return None
    top = w.acc_limit()
    return [int(min(top, v)) for v in w.fixed("acc")]


def engines(w: World) -> list[EngineAtCapture]:
    dep, grid, p = w.dep, w.grid, w.plan
    last = grid.n - 1
    out: list[EngineAtCapture] = []
    a = w.procs[0]
    if dep.engine == "ollama":
        loaded = [q.model.ollama for q in w.procs if q.alive[last]]  # type: ignore[attr-defined]
        if p.truth == "swap-not-unloaded":
            loaded = loaded[-1:]  # the runner it lost track of is not in /api/ps
        if p.truth == "context-creep" and p.ending == "load-fail":
            loaded = []
        out.append(
            EngineAtCapture("ollama", "ollama", f"http://127.0.0.1:{dep.port}", True, loaded=loaded)
        )
        return out
    url = f"http://127.0.0.1:{a.port}"
    main = _engine_answer(w, a, url)
    if main is not None:
        out.append(main)
    if len(w.procs) > 1:
        b = w.procs[1]
        second = _engine_answer(w, b, f"http://127.0.0.1:{b.port}")
        if second is not None:
            out.append(second)
    if dep.gateway == "llama-swap":
        loaded = [q.key for q in w.procs if q.alive[last]]
        if p.truth == "swap-not-unloaded":
            loaded = [q.key for q in w.procs[1:] if q.alive[last]]
        out.append(
            EngineAtCapture(
                "llama-swap", "llama-swap", "http://127.0.0.1:8080", True, loaded=loaded
            )
        )
    if not out:
        out.append(EngineAtCapture(dep.engine, dep.engine, url, True))
    return out


def _engine_answer(w: World, proc: en.Proc, url: str) -> EngineAtCapture | None:
    dep, p = w.dep, w.plan
    last = w.grid.n - 1
    name = proc.key if dep.managed else dep.engine if proc is w.procs[0] else proc.key
    if not proc.alive[last]:
        died = (
            proc is w.procs[0]
            and p.dies
            or (
                p.truth == "swap-not-unloaded"
                and p.ending in ("abort", "oom-kill")
                and proc is not w.procs[0]
            )
        )
        if not died and dep.managed:
            return None  # unloaded by its manager's ttl: not a failure, nobody to ask
        if not died:
            return None
        return EngineAtCapture(name, proc.kind, url, False, reason="connection refused")
    metrics: dict[str, float] = {}
    if proc.metrics:
        v = engine_values(w, proc)
        if proc.kind == "llama-server":
            keys = {
                "llamacpp:requests_processing": "running",
                "llamacpp:requests_deferred": "waiting",
                "llamacpp:n_tokens_max": "ntmax",
                "llamacpp:tokens_predicted_total": "gen",
                "llamacpp:prompt_tokens_total": "prompt",
            }
            metrics = {m: float(v[key][last]) for m, key in keys.items()}
        else:
            cap = max(1.0, w.cap if w.cap != float("inf") else 1e9)
            usage = round(min(1.0, v["kv"][last] / cap), 4)
            if proc.kind == "vllm":
                kv_name = (
                    "vllm:gpu_cache_usage_perc" if dep.old_vllm else "vllm:kv_cache_usage_perc"
                )
                metrics = {
                    "vllm:num_requests_running": v["running"][last],
                    "vllm:num_requests_waiting": v["waiting"][last],
                    kv_name: usage,
                    "vllm:generation_tokens_total": v["gen"][last],
                    "vllm:num_preemptions_total": v["preempt"][last],
                }
            else:
                metrics = {
                    "sglang:num_running_reqs": v["running"][last],
                    "sglang:num_queue_reqs": v["waiting"][last],
                    "sglang:token_usage": usage,
                    "sglang:generation_tokens_total": v["gen"][last],
                }
    loaded = [proc.model.hf] if proc.kind in ("vllm", "sglang") else []  # type: ignore[attr-defined]
    return EngineAtCapture(name, proc.kind, url, True, metrics=metrics, loaded=loaded)


def check(name: str, kind: str, status: str, reason: str | None = None) -> CheckAtCapture:
    return CheckAtCapture(name, kind, status == "ok", status, reason)
