"""What a generated deployment is drawn from: machines, models, engines and the day's grid.

Sizes are the real ones (GGUF Q4_K_M files, the checkpoints vLLM serves, f16 KV bytes per
token from each model's layer and KV-head counts), because a fault's size only means
something relative to the machine it happened on.
"""

import math
from dataclasses import dataclass, field
from random import Random

GIB = 1 << 30
TIME_ZONES = (-8, -7, -6, -5, -4, -3, 0, 1, 1, 2, 3, 5.5, 8, 9, 10)  # hours east of UTC
MIB = 1 << 20
DAY_S = 86400.0
RHYTHMS = ("household", "office", "nightly-batch", "agents", "retry-loop")


@dataclass(frozen=True)
class Model:
    key: str  # llama-swap model id
    gguf: str
    hf: str  # what vLLM / SGLang serve
    ollama: str
    q4_gib: float  # GGUF weights
    hf_gib: float  # weights as vLLM loads them (bf16, AWQ or FP8)
    kv_kib: float  # f16 K+V per token over all layers
    active_gib: float  # Q4 weight bytes streamed per generated token (MoE: active experts)
    max_ctx: int


MODELS = (
    Model(
        "qwen3-8b", "Qwen3-8B-Q4_K_M.gguf", "Qwen/Qwen3-8B", "qwen3:8b", 4.7, 15.3, 144, 4.7, 40960
    ),
    Model(
        "qwen3-14b",
        "Qwen3-14B-Q4_K_M.gguf",
        "Qwen/Qwen3-14B-AWQ",
        "qwen3:14b",
        8.4,
        9.6,
        160,
        8.4,
        40960,
    ),
    Model(
        "qwen3-30b-a3b",
        "Qwen3-30B-A3B-Q4_K_M.gguf",
        "Qwen/Qwen3-30B-A3B-FP8",
        "qwen3:30b",
        17.3,
        29.5,
        96,
        1.9,
        131072,
    ),
    Model(
        "qwen3-32b",
        "Qwen3-32B-Q4_K_M.gguf",
        "Qwen/Qwen3-32B-AWQ",
        "qwen3:32b",
        18.4,
        18.9,
        256,
        18.4,
        40960,
    ),
    Model(
        "llama-3.1-8b",
        "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
        "meta-llama/Llama-3.1-8B-Instruct",
        "llama3.1:8b",
        4.6,
        15.0,
        128,
        4.6,
        131072,
    ),
    Model(
        "llama-3.3-70b",
        "Llama-3.3-70B-Instruct-Q4_K_M.gguf",
        "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic",
        "llama3.3:70b",
        39.6,
        67.7,
        320,
        39.6,
        131072,
    ),
    Model(
        "gpt-oss-20b",
        "gpt-oss-20b-mxfp4.gguf",
        "openai/gpt-oss-20b",
        "gpt-oss:20b",
        11.3,
        12.8,
        48,
        2.6,
        131072,
    ),
    Model(
        "gpt-oss-120b",
        "gpt-oss-120b-mxfp4-00001-of-00003.gguf",
        "openai/gpt-oss-120b",
        "gpt-oss:120b",
        59.0,
        60.8,
        72,
        4.4,
        131072,
    ),
    Model(
        "gemma-3-27b",
        "gemma-3-27b-it-Q4_K_M.gguf",
        "google/gemma-3-27b-it",
        "gemma3:27b",
        15.4,
        51.0,
        248,
        15.4,
        131072,
    ),
    Model(
        "mistral-small-24b",
        "Mistral-Small-3.2-24B-Instruct-2506-Q4_K_M.gguf",
        "mistralai/Mistral-Small-3.2-24B-Instruct-2506",
        "mistral-small3.2:24b",
        13.3,
        44.0,
        160,
        13.3,
        131072,
    ),
    Model(
        "qwen2.5-coder-7b",
        "qwen2.5-coder-7b-instruct-q4_k_m.gguf",
        "Qwen/Qwen2.5-Coder-7B-Instruct",
        "qwen2.5-coder:7b",
        4.4,
        14.2,
        56,
        4.4,
        32768,
    ),
)


@dataclass(frozen=True)
class Machine:
    kind: str  # gb10 | nvidia | strix | mac
    gpu: str
    host_total: int  # MemTotal
    acc_total: int  # the accelerator's pool: FB total, the GTT limit, or the host (unified)
    unified: bool
    bw_gbs: float  # memory bandwidth: what decode speed follows
    tflops: float  # dense half-precision compute: what prefill speed follows
    swap_total: int
    hostname: str
    uuid: str
    pci: str
    carve: int = 0  # an APU's VRAM carve-out: the rest of its GPU memory is GTT


@dataclass
class Deployment:
    machine: Machine
    rhythm: str
    tz: float  # hours east of UTC
    weekend: bool
    engine: str  # llama-server | vllm | sglang | ollama
    model: Model
    other_model: Model  # what a swap or a second client asks for
    slots: int  # --parallel, max_num_seqs, OLLAMA_NUM_PARALLEL
    ctx: int  # -c / --max-model-len / num_ctx (total over slots for llama-server)
    util: float  # gpu_memory_utilization / mem_fraction_static
    port: int
    gateway: str | None  # llama-swap | litellm | nginx | None
    managed: bool  # the engine's servers started by llama-swap
    metrics: bool  # the engine publishes /metrics
    scraped: bool  # Prometheus has a job for the engine
    old_vllm: bool  # publishes vllm:gpu_cache_usage_perc instead of kv_cache_usage_perc
    keep_alive: float  # Ollama keep_alive / llama-swap ttl in seconds; 0: never unloads
    systemd: bool  # the engine runs as a systemd unit (else in docker)
    workstation: bool  # somebody's desktop session runs on this box
    scrape_s: float
    prometheus: bool
    dcgm: bool
    psi: bool
    macos: bool
    never_started: bool  # a second engine job configured and never started
    decode_tps: float  # one sequence alone
    prefill_tps: float
    kv_bytes: float  # per token
    static: int = 0  # engine bytes while loaded (weights, KV, buffers); set by the fitter
    other_gpu: int = 0  # other processes' accelerator memory (desktop, an embedder)
    services: int = 0  # other host processes' anon memory (a docker stack, a database)
    names: dict[str, str] = field(default_factory=dict)


def lognorm(rng: Random, median: float, sigma: float) -> float:
    return median * math.exp(rng.gauss(0.0, sigma))


def _hostname(rng: Random, kind: str) -> str:
    stem = {
        "gb10": ("spark", "gx10", "dgx-spark", "promaxgb10"),
        "nvidia": ("rig", "ws", "aurora", "tower", "lab-gpu", "atlas"),
        "strix": ("strix", "halo", "framework-desktop", "evo-x2"),
        "mac": ("studio", "mbp", "mini"),
    }[kind]
    return f"{rng.choice(stem)}-{rng.randrange(16**4):04x}"


def machine(rng: Random, truth: str) -> Machine:
    """A box, as people run local models on: a GB10, a discrete card, a Strix Halo, a Mac."""
    weights = {"gb10": 30, "nvidia": 45, "strix": 15, "mac": 5}
    if truth in ("memory-pressure-stall", "host-exhaustion"):
        weights["mac"] = 2  # no kernel OOM lines nor PSI there: keep the host faults mostly Linux
    kind = rng.choices(list(weights), list(weights.values()))[0]
    b = [rng.getrandbits(n) for n in (32, 16, 16, 16, 48)]
    uuid = f"GPU-{b[0]:08x}-{b[1]:04x}-{b[2]:04x}-{b[3]:04x}-{b[4]:012x}"
    swap_choices = [0, 2, 4, 8, 8, 16, 32]
    swap = rng.choice(swap_choices) * GIB
    if truth == "memory-pressure-stall":
        swap = rng.choice([8, 16, 16, 32]) * GIB
    if kind == "gb10":
        total = int((119.7 + rng.uniform(-0.3, 0.3)) * GIB)
        return Machine(
            kind,
            "NVIDIA GB10",
            total,
            total,
            True,
            273.0,
            100.0,
            swap,
            _hostname(rng, kind),
            uuid,
            "0000000F:01:00.0",
        )
    if kind == "strix":
        carve = rng.choice([0.5, 0.5, 2.0])
        total = int((128 - carve - 3.2 + rng.uniform(-0.2, 0.2)) * GIB)
        gtt = int(rng.choice([96.0, 108.0, 112.0, 120.0]) * GIB)
        return Machine(
            kind,
            "AMD Radeon 8060S",
            total,
            min(gtt, total),
            True,
            256.0,
            30.0,
            swap,
            _hostname(rng, kind),
            uuid,
            "0000:c5:00.0",
            int(carve * GIB),
        )
    if kind == "mac":
        size = rng.choice([64, 128, 128, 192])
        total = size * GIB
        bw, tf = {64: (273.0, 17.0), 128: (546.0, 34.0), 192: (800.0, 27.0)}[size]
        # macOS swaps to files it adds on the boot disk as it needs them: what the day may
        # fill is drawn as elsewhere, the files appear only as it does.
        return Machine(
            kind, "Apple M-series", total, total, True, bw, tf, swap, _hostname(rng, kind), uuid, ""
        )
    card = rng.choices(
        [
            ("NVIDIA GeForce RTX 4090", 24564, 1008.0, 165.0),
            ("NVIDIA GeForce RTX 3090", 24576, 936.0, 71.0),
            ("NVIDIA RTX 6000 Ada Generation", 49140, 960.0, 180.0),
            ("NVIDIA RTX A6000", 49140, 768.0, 77.0),
            ("NVIDIA A100 80GB PCIe", 81920, 1935.0, 312.0),
            ("NVIDIA H100 PCIe", 81559, 2039.0, 378.0),
        ],
        [22, 12, 8, 6, 4, 3],
    )[0]
    host = rng.choice([64, 64, 96, 128, 128, 192, 256]) * GIB
    if card[1] > 60000:
        host = max(host, 128 * GIB)
    bus = rng.choice(["01", "02", "41", "81", "c1"])
    host_total = int(host * rng.uniform(0.965, 0.985))  # MemTotal is less than the DIMMs
    return Machine(
        "nvidia",
        card[0],
        host_total,
        card[1] * MIB,
        False,
        card[2],
        card[3],
        swap,
        _hostname(rng, kind),
        uuid,
        f"00000000:{bus}:00.0",
    )


def _fits(m: Model, engine: str, mach: Machine) -> bool:
    weights = (m.hf_gib if engine in ("vllm", "sglang") else m.q4_gib) * GIB
    room = mach.acc_total if not mach.unified else mach.host_total * 0.8
    return weights < room * 0.72


def deployment(rng: Random, truth: str, mach: Machine) -> Deployment:
    """An engine, a model and the way it is used, fitted to the machine."""
    if mach.kind in ("strix", "mac"):
        engines = {"llama-server": 60, "ollama": 40}
    else:
        engines = {"llama-server": 38, "vllm": 27, "sglang": 8, "ollama": 27}
    engine = rng.choices(list(engines), list(engines.values()))[0]
    candidates = [m for m in MODELS if _fits(m, engine, mach)]
    # People fill what they bought: bias towards the larger models that fit.
    sizes = [(m.hf_gib if engine in ("vllm", "sglang") else m.q4_gib) for m in candidates]
    model = rng.choices(candidates, [1.0 + s for s in sizes])[0]
    others = [m for m in candidates if m is not model] or [model]
    other = rng.choice(others)
    rhythm = rng.choices(RHYTHMS, [30, 25, 15, 15, 15])[0]
    if engine in ("vllm", "sglang"):
        slots = rng.choice([16, 32, 64, 128, 256])
        util = rng.choice([0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.9])
        ctx = min(model.max_ctx, rng.choice([8192, 16384, 32768, 32768, 65536]))
    elif engine == "ollama":
        slots = rng.choice([1, 1, 2, 4, 4])
        util = 0.0
        ctx = rng.choice([2048, 4096, 4096, 8192, 16384, 32768])
    else:
        slots = rng.choice([1, 2, 2, 4, 4, 4, 8])
        util = 0.0
        per_slot = rng.choice([4096, 8192, 8192, 16384, 32768])
        ctx = min(model.max_ctx, per_slot * slots)
    scale = model.hf_gib / model.q4_gib if engine in ("vllm", "sglang") else 1.0
    decode = 0.62 * mach.bw_gbs / (model.active_gib * scale * 1.073741824)
    decode = min(decode, 220.0)
    # Prefill is compute-bound: two flops per active parameter (Q4 is ~0.6 bytes each).
    params = model.active_gib * GIB / 0.6 * (scale if scale > 1.5 else 1.0)
    prefill = rng.uniform(0.25, 0.5) * mach.tflops * 1e12 / (2 * params)
    prefill = max(decode * 8, min(prefill, 20000.0))
    kv_bytes = model.kv_kib * 1024 * (0.53 if rng.random() < 0.3 else 1.0)  # q8_0 cache
    gateway = rng.choices(["llama-swap", "litellm", "nginx", None], [30, 25, 15, 30])[0]
    if engine in ("vllm", "sglang") and gateway == "llama-swap":
        gateway = rng.choice(["litellm", "llama-swap"])
    if truth == "swap-not-unloaded" and engine != "ollama":
        gateway = "llama-swap"  # a manager that starts a second model on demand
    managed = gateway == "llama-swap" and engine != "ollama"
    metrics = engine != "ollama" and (engine != "llama-server" or rng.random() < 0.85)
    scraped = engine != "ollama" and (metrics or rng.random() < 0.35)
    keep_alive = 0.0
    if engine == "ollama":
        keep_alive = rng.choice([300.0, 300.0, 300.0, 600.0, 1800.0, 3600.0])
    elif managed and rng.random() < 0.35 and truth not in ("leak-ratchet", "context-creep"):
        keep_alive = rng.choice([600.0, 1800.0, 3600.0])
    macos = mach.kind == "mac"
    # Not 15 s: a day of it is 5760 samples a series, more than the harness wants.
    scrape = rng.choice([30.0, 60.0])
    dep = Deployment(
        machine=mach,
        rhythm=rhythm,
        tz=rng.choice(TIME_ZONES),
        weekend=rng.random() < 2 / 7,
        engine=engine,
        model=model,
        other_model=other,
        slots=slots,
        ctx=ctx,
        util=util,
        port={"llama-server": 8080, "vllm": 8000, "sglang": 30000, "ollama": 11434}[engine],
        gateway=gateway,
        managed=managed,
        metrics=metrics,
        scraped=scraped,
        old_vllm=engine == "vllm" and rng.random() < 0.2,
        keep_alive=keep_alive,
        systemd=rng.random() < (0.7 if engine in ("llama-server", "ollama") else 0.35),
        workstation=mach.kind in ("mac", "strix") or rng.random() < 0.45,
        scrape_s=scrape,
        prometheus=rng.random() >= 0.1,
        dcgm=mach.kind == "nvidia" and rng.random() < 0.85,
        psi=not macos and rng.random() < 0.93,
        macos=macos,
        never_started=rng.random() < 0.25,
        decode_tps=decode,
        prefill_tps=prefill,
        kv_bytes=kv_bytes,
    )
    if managed:
        dep.port = 5800 + rng.randrange(1, 9)
    return dep


def weights_bytes(dep: Deployment, model: Model | None = None) -> int:
    m = model or dep.model
    return int((m.hf_gib if dep.engine in ("vllm", "sglang") else m.q4_gib) * GIB)


def static_bytes(dep: Deployment, rng: Random) -> int:
    """The engine's footprint once loaded, before any fault: what each engine allocates at start."""
    w = weights_bytes(dep)
    if dep.engine in ("vllm", "sglang"):
        return int(dep.util * dep.machine.acc_total)
    kv = dep.ctx * dep.kv_bytes * (dep.slots if dep.engine == "ollama" else 1)
    compute = rng.uniform(0.3, 1.4) * GIB
    return int(w + kv + compute)


@dataclass
class Grid:
    """The scrape grid of the day: t[k] = t0 + k * dt, the last one at or before `end`."""

    end: float
    dt: float
    t0: float
    n: int

    @classmethod
    def make(cls, end: float, dt: float) -> "Grid":
        t0 = math.ceil((end - DAY_S) / dt) * dt
        n = int((end - t0) // dt) + 1
        return cls(end, dt, t0, n)

    def at(self, t: float) -> int:
        """The grid index of the last scrape at or before t, clamped to the day."""
        return min(self.n - 1, max(0, int((t - self.t0) // self.dt)))

    def after(self, t: float) -> int:
        """The first grid index at or after t (n if none)."""
        return min(self.n, max(0, math.ceil((t - self.t0) / self.dt)))

    def time(self, k: int) -> float:
        return self.t0 + k * self.dt

    def local_hour(self, t: float, tz: float) -> float:
        return ((t / 3600.0) + tz) % 24.0
