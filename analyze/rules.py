"""One rule per fault of the catalog (schemas/faults.toml): a small pure function of Facts.

Each rule returns a Judgement: points for the evidence it found, the evidence for and
against in words, and the sources it needed but were not measured. Absent evidence is
never evidence: a rule reasons only from what was measured and lists the rest as
missing. Points: a supporting observation 1-2, a distinguishing one 3, a decisive one
(a line saying so, two sources disagreeing) 4-5.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from analyze import shapes
from analyze.facts import Facts

GIB = 1024**3
SQUAT_GPU_BYTES = 1 * GIB  # an idle engine holding this much GPU memory is squatting
SQUAT_RSS_BYTES = 4 * GIB
COMPILERS = (
    "cc1plus",
    "cc1",
    "cicc",
    "nvcc",
    "ptxas",
    "ninja",
    "ld",
    "ld.gold",
    "ld.lld",
    "lld",
    "clang",
    "clang++",
    "gcc",
    "g++",
    "rustc",
    "fatbinary",
    "nvlink",
)
BUILD_SHARE = 0.30  # compilers holding this share of memory are load, not background
PSI_SOME_HIGH = 10.0  # % of time some task stalled on memory (avg10)
PSI_FULL_HIGH = 5.0
RECENT_KILL_S = 3600  # an OOM kill this long before the capture can be the fault's own
ENGINE_WORDS = {
    "llama-server": ("llama-server", "llama_server"),
    "vllm": ("vllm",),
    "sglang": ("sglang",),
    "ollama": ("ollama",),
    "comfyui": ("comfyui", "main.py"),
    "a1111": ("webui", "launch.py", "stable-diffusion"),
    "llama-swap": ("llama-server", "llama-swap"),
}


@dataclass
class Judgement:
    score: int = 0
    evidence_for: list[str] = field(default_factory=list)
    evidence_against: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def add(self, points: int, why: str) -> None:
        self.score += points
        self.evidence_for.append(why)


RULES: dict[str, Callable[[Facts], Judgement]] = {}


def rule(fault: str) -> Callable[[Callable[[Facts], Judgement]], Callable[[Facts], Judgement]]:
    def register(fn: Callable[[Facts], Judgement]) -> Callable[[Facts], Judgement]:
        RULES[fault] = fn
        return fn

    return register


def _gib(value: float | None) -> str:
    return "unknown" if value is None else f"{value / GIB:.1f} GiB"


def _last(f: Facts, tag: str, width: int = 160) -> str:
    """The most recent log or kernel line carrying a tag, cut to width."""
    return f.lines[tag][-1][:width]


def _values(f: Facts, name: str) -> list[float]:
    return [v for _, v in f.series.get(name, []) if v is not None]


def _memory_series(f: Facts) -> tuple[str, str] | None:
    """The memory series to read shapes from: the accelerator's where it is known, else the
    host's (on a unified machine the host's is the accelerator's)."""
    for name, label in (("accelerator_used", "accelerator memory"), ("memory_used", "memory")):
        if f.has(name):
            return name, f"{label} ({f.origin[name]})"
    return None


@rule("context-creep")
def context_creep(f: Facts) -> Judgement:
    j = Judgement()
    cache = [n for n in ("kv_cache", "context_high_water") if f.has(n)]
    if not cache:
        j.missing.append(
            "a KV-cache metric (vllm:kv_cache_usage_perc, sglang:token_usage) or "
            "the context high-water (llamacpp:n_tokens_max)"
        )
        return j
    for name in cache:
        shape = shapes.climb(f.series[name])
        if shape.verdict:
            j.add(3, f"{name.replace('_', ' ')} rose: {shape.why}")
        elif not shape.enough:  # too few readings to judge is a gap, not a finding
            j.missing.append(f"enough readings of {name.replace('_', ' ')}: {shape.why}")
        else:
            j.evidence_against.append(f"{name.replace('_', ' ')} did not climb: {shape.why}")
    if f.has("requests_running"):
        running = shapes.climb(f.series["requests_running"])
        if running.verdict:
            j.evidence_against.append(
                f"requests running rose too ({running.why}): more callers, not longer context"
            )
        elif j.score:
            j.add(1, "requests running stayed flat: the same load, more memory")
    else:
        j.missing.append("requests running")
    memory = _memory_series(f)
    if memory and j.score and shapes.climb(f.series[memory[0]]).verdict:
        j.add(1, f"{memory[1]} climbed with it")
    if f.lines.get("kv-cache"):
        j.add(1, f"the log mentions the KV cache: {_last(f, 'kv-cache')}")
    return j


@rule("concurrency-overload")
def concurrency_overload(f: Facts) -> Judgement:
    j = Judgement()
    if not f.has("requests_waiting"):
        j.missing.append(
            "requests waiting (llamacpp:requests_deferred, "
            "vllm:num_requests_waiting, sglang:num_queue_reqs)"
        )
    else:
        waiting = shapes.sustained(f.series["requests_waiting"], above=0, min_fraction=0.25)
        if waiting.verdict:
            j.add(3, f"requests waited for a slot: {waiting.why}")
        elif not waiting.enough:
            j.missing.append(f"enough readings of requests waiting: {waiting.why}")
        elif max(_values(f, "requests_waiting")) > 0:
            j.evidence_against.append(f"requests waited only briefly: {waiting.why}")
        else:
            j.evidence_against.append("nothing ever waited for a slot")
    running = _values(f, "requests_running")
    if running and max(running) > 1 and j.score:
        j.add(1, f"up to {max(running):.0f} requests ran at once")
    if f.lines.get("slot-unavailable"):
        j.add(2, f"the log says a slot was unavailable: {_last(f, 'slot-unavailable')}")
    return j


@rule("leak-ratchet")
def leak_ratchet(f: Facts) -> Judgement:
    j = Judgement()
    memory = _memory_series(f)
    if memory is None:
        j.missing.append("a memory series")
        return j
    series = f.series[memory[0]]
    ratchet = shapes.ratchet(series, fmt=_gib)
    if ratchet.verdict:
        j.add(3, f"{memory[1]} ratcheted: {ratchet.why}")
        if f.has("kv_cache") and not shapes.climb(f.series["kv_cache"]).verdict:
            j.add(1, "the KV cache did not climb with it: the rise is not the cache")
    else:
        floor = shapes.flat_floor(series, fmt=_gib)
        if floor.verdict:
            j.evidence_against.append(f"the floor is flat between bursts: {floor.why}")
    if f.has("kv_cache") and shapes.climb(f.series["kv_cache"]).verdict:
        j.evidence_against.append("the rise tracks the KV cache (context creep)")
    step = shapes.step(series, fmt=_gib)
    if step.verdict and (step.size or 0) > 0 and not ratchet.verdict:
        j.evidence_against.append(f"one step that stays, not a ratchet: {step.why}")
    rhythm = shapes.daily_rhythm(series, fmt=_gib)
    if rhythm.verdict:
        j.evidence_against.append(f"a daily rhythm, which is not a trend: {rhythm.why}")
    return j


def _loaded(f: Facts) -> dict[str, list[str]] | None:
    """What each model manager says is loaded; None if none was read."""
    managers = [
        e["name"]
        for e in f.engines
        if e["kind"] in ("llama-swap", "ollama") and e["status"] == "ok"
    ]
    if not managers:
        return None
    return {
        m: sorted(
            {
                x["model"]
                for x in f.models
                if x["engine"] == m and (x["state"] in (None, "ready", "loaded"))
            }
        )
        for m in managers
    }


def _who(f: Facts, gpu_process: dict[str, Any]) -> dict[str, Any]:
    """A GPU process with the name and command line the process table has for its pid."""
    row = next((p for p in f.processes if p["pid"] == gpu_process["pid"]), None)
    return {**gpu_process, **({"name": row["name"], "cmdline": row["cmdline"]} if row else {})}


def _engine_holders(f: Facts) -> list[dict[str, Any]]:
    """Processes holding accelerator memory, largest first (unknown sizes last)."""
    return sorted(f.gpu_processes, key=lambda p: -(p["used_bytes"] or 0))


@rule("swap-not-unloaded")
def swap_not_unloaded(f: Facts) -> Judgement:
    j = Judgement()
    loaded = _loaded(f)
    if loaded is None:
        j.missing.append("a model manager's loaded set (llama-swap /running, Ollama /api/ps)")
    if not f.measured("gpu") or not f.gpu_devices:
        j.missing.append("per-process accelerator memory")
    elif loaded is not None:
        count = sum(len(models) for models in loaded.values())
        kinds = {e["kind"] for e in f.engines if e["name"] in loaded}
        # Only the processes the managers run: another engine's memory is not a model they
        # forgot (that is a squatter, or simply another tenant).
        holders = [
            p
            for p in _engine_holders(f)
            if (p["used_bytes"] or 0) >= SQUAT_GPU_BYTES
            and any(_belongs(_who(f, p), kind) for kind in kinds)
        ]
        said = "; ".join(f"{m} says {', '.join(v) or 'nothing'} loaded" for m, v in loaded.items())
        if len(holders) > count:
            held = ", ".join(
                f"pid {p['pid']} {p['name'] or '?'} {_gib(p['used_bytes'])}" for p in holders
            )
            j.add(
                5,
                f"two sources disagree: {said}, the accelerator holds memory for "
                f"{len(holders)} processes ({held})",
            )
        else:
            j.evidence_against.append(f"the model manager and the accelerator agree ({said})")
    if (f.engine_targets_up or 0) > 1:
        j.add(
            2,
            f"{f.engine_targets_up} engine targets were up together at the end "
            "(Prometheus up): more than one model server resident",
        )
    memory = _memory_series(f)
    if memory:
        step = shapes.step(f.series[memory[0]], fmt=_gib)
        if step.verdict and (step.size or 0) > 0:
            j.add(2, f"{memory[1]} stepped up and stayed: {step.why}")
    return j


@rule("host-exhaustion")
def host_exhaustion(f: Facts) -> Judgement:
    j = Judgement()
    if not f.measured("kernel"):
        j.missing.append("the kernel log")
    # A kill long before the capture belongs to an earlier night: context, not this fault.
    kills = [(ago, text) for ago, text in f.oom_kills if ago is None or ago <= RECENT_KILL_S]
    if kills:
        ago, text = kills[-1]
        when = "" if ago is None else f" {max(ago, 0) / 60:.0f} min before the capture"
        if "Memory cgroup out of memory" in text:
            # A limit (a unit's MemoryMax=, a container's) was hit: the same kill, but the
            # machine itself may have had room; said, and weighed a point lower.
            j.add(3, f"the OOM killer ran{when} inside a memory limit: {text[:200]}")
            j.evidence_against.append(
                "the kill was a cgroup's limit (CONSTRAINT_MEMCG), not the whole machine "
                "running out: check the unit's MemoryMax= or the container's limit"
            )
        else:
            j.add(4, f"the OOM killer ran{when}: {text[:200]}")
    elif f.oom_kills:
        ago, text = f.oom_kills[-1]
        j.add(1, f"an OOM kill {ago / 3600:.1f} h before the capture, too early to be this "
              f"fault's: {text[:160]}")  # fmt: skip
    if f.lines.get("host-alloc-fail"):
        j.add(2, f"an allocation failed: {_last(f, 'host-alloc-fail')}")
    available = _values(f, "available")
    if available and f.memory_total:
        low = min(available)
        if low < 0.03 * f.memory_total:
            j.add(2, f"available memory fell to {_gib(low)} of {_gib(f.memory_total)}")
        elif not kills:
            j.evidence_against.append(f"available memory never fell below {_gib(low)}")
        collapse = shapes.collapse(f.series["available"])
        if collapse.verdict:
            j.add(1, f"available memory collapsed at the end: {collapse.why}")
    elif not available:
        j.missing.append("available memory")
    return j


@rule("accelerator-oom")
def accelerator_oom(f: Facts) -> Judgement:
    j = Judgement()
    for tag in ("cuda-oom", "hip-oom", "metal-oom", "vulkan-oom", "nv-no-memory"):
        if f.lines.get(tag):
            j.add(5, f"the log says so ({tag}): {_last(f, tag, 200)}")
            break
    read = [p for p in ("logs", "kernel") if f.measured(p)]
    if not j.score:
        if read:
            j.evidence_against.append(f"no allocation failure in the {' and '.join(read)} read")
        if "logs" not in read:
            j.missing.append("the engines' logs ([[logs]] or an engine's unit/container)")
    return j


@rule("memory-pressure-stall")
def memory_pressure_stall(f: Facts) -> Judgement:
    j = Judgement()
    some = _values(f, "psi_some")
    if not some:
        j.missing.append("PSI memory pressure")
        return j
    if max(some) >= PSI_SOME_HIGH:
        j.add(2, f"tasks stalled on memory {max(some):.0f}% of the time (PSI some avg10)")
        sustained = shapes.sustained(f.series["psi_some"], above=PSI_SOME_HIGH, min_fraction=0.5)
        if sustained.verdict:
            j.add(1, f"the stall lasted: {sustained.why}")
    full = _values(f, "psi_full")
    if full and max(full) >= PSI_FULL_HIGH:
        j.add(1, f"all tasks stalled together {max(full):.0f}% of the time (PSI full avg10)")
    swap = _values(f, "swap_used")
    out = _values(f, "pswpout")
    if out and out[-1] > out[0]:
        j.add(1, f"swapping out during the window ({out[-1] - out[0]:.0f} pages)")
    refaults = _values(f, "refaults")
    if refaults and refaults[-1] > refaults[0] and j.score:
        j.add(1, "pages were faulted back in (refaults): the working set does not fit")
    if not j.score:
        j.evidence_against.append(
            f"PSI memory stayed low (max {max(some):.1f}% some)"
            + ("" if not swap else f"; swap {_gib(max(swap))} used")
        )
    return j


def _belongs(process: dict[str, Any], kind: str) -> bool:
    text = " ".join([process.get("name") or "", *(process.get("cmdline") or [])]).lower()
    return any(word in text for word in ENGINE_WORDS.get(kind, ()))


@rule("idle-squatter")
def idle_squatter(f: Facts) -> Judgement:
    j = Judgement()
    if not f.engine_load:
        j.missing.append("an engine's queue (its own running / pending counts)")
        return j
    kinds = {e["name"]: e["kind"] for e in f.engines}
    rss = {p["pid"]: p["rss_bytes"] for p in f.processes}
    for engine, load in f.engine_load.items():
        if max(load, default=0) > 0:
            j.evidence_against.append(f"{engine} was working (its queue was not empty)")
            continue
        kind = kinds.get(engine, "")
        gpu = [
            p
            for p in f.gpu_processes
            if _belongs(_who(f, p), kind) and (p["used_bytes"] or 0) >= SQUAT_GPU_BYTES
        ]
        if gpu:
            p = gpu[0]
            j.add(
                4,
                f"{engine} is idle (nothing running, nothing queued) while pid {p['pid']} "
                f"holds {_gib(p['used_bytes'])} of accelerator memory",
            )
            continue
        host = [
            p
            for p in f.processes
            if _belongs(p, kind) and (rss.get(p["pid"]) or 0) >= SQUAT_RSS_BYTES
        ]
        if host:
            j.add(
                2,
                f"{engine} is idle while pid {host[0]['pid']} holds "
                f"{_gib(host[0]['rss_bytes'])} resident",
            )
    return j


@rule("orphaned-gpu-holder")
def orphaned_gpu_holder(f: Facts) -> Judgement:
    j = Judgement()
    if not f.gpu_devices:
        j.missing.append("per-process accelerator memory")
        return j
    parents = {p["pid"]: p["ppid"] for p in f.processes}
    answering = {e["kind"] for e in f.engines if e["status"] == "ok"}
    for p in f.gpu_processes:
        if parents.get(p["pid"]) == 1 and (p["used_bytes"] or 0) >= SQUAT_GPU_BYTES:
            kinds = [k for k in ENGINE_WORDS if _belongs(_who(f, p), k)]
            if kinds and not set(kinds) & answering:
                j.add(
                    4,
                    f"pid {p['pid']} ({p['name']}) holds {_gib(p['used_bytes'])} of "
                    "accelerator memory, re-parented to init, and no engine of its kind "
                    "answers",
                )
    for d in f.gpu_devices:
        listed = sum(
            p["used_bytes"] or 0 for p in f.gpu_processes if p["device_index"] == d["device_index"]
        )
        used = d["memory_used_bytes"]
        if used is not None and not d["unified_memory"] and used - listed > 2 * GIB:
            j.add(
                2,
                f"{_gib(used - listed)} of GPU {d['device_index']}'s memory is held by "
                "no listed process",
            )
    return j


@rule("build-swarm")
def build_swarm(f: Facts) -> Judgement:
    j = Judgement()
    if not f.processes or not f.memory_total:
        j.missing.append("the process table and the machine's memory")
        return j
    compilers = [p for p in f.processes if (p["name"] or "") in COMPILERS]
    held = sum(p["rss_bytes"] or 0 for p in compilers)
    share = held / f.memory_total
    if share >= BUILD_SHARE:
        j.add(4, f"{len(compilers)} compiler processes hold {_gib(held)}, {share:.0%} of memory")
    elif compilers:
        j.add(1, f"{len(compilers)} compiler processes hold {_gib(held)} ({share:.0%})")
    else:
        j.evidence_against.append("no compiler was running")
    return j


@rule("admission-overcommit")
def admission_overcommit(f: Facts) -> Judgement:
    j = Judgement()
    starting = [m for m in f.models if m["state"] in ("starting", "loading")]
    available = _values(f, "available")
    if not f.models:
        j.missing.append("what a model manager was loading")
        return j
    if not available:
        j.missing.append("available memory at the load")
        return j
    for m in starting:
        size = m["size_bytes"] or max(
            (x["size_bytes"] or 0 for x in f.models if x["model"] == m["model"]), default=0
        )
        if not size:
            j.missing.append(f"the size of {m['model']} in memory")
        elif min(available) < size:
            j.add(
                4,
                f"{m['engine']} was loading {m['model']} ({_gib(size)}) while only "
                f"{_gib(min(available))} was available",
            )
        else:
            j.evidence_against.append(
                f"{_gib(min(available))} was available for {m['model']} ({_gib(size)})"
            )
    return j


@rule("false-liveness")
def false_liveness(f: Facts) -> Judgement:
    j = Judgement()
    passed = [c for c in f.checks if c["ok"] and c["kind"] in ("tcp", "http")]
    # A completion that came back 200 with nothing in it was answered: that is a result
    # without content (silent-empty-result), not a layer that failed to answer.
    failed = [
        c
        for c in f.checks
        if not c["ok"] and c["kind"] in ("completion", "command", "http") and not _empty_200(c)
    ]
    if passed and failed:
        j.add(
            4,
            f"{passed[0]['name']} ({passed[0]['kind']}) answered while "
            f"{failed[0]['name']} ({failed[0]['kind']}) failed: {failed[0]['reason']}",
        )
    for e in f.engines:
        if e["status"] == "timeout":
            j.add(
                3,
                f"{e['name']} accepted the connection and never answered: the port is "
                "up, the application is not",
            )
    if not f.checks and not f.engines:
        j.missing.append("health checks or engines to contrast")
    elif not j.score:
        j.evidence_against.append("every layer that was asked answered")
    return j


def _answer(check: dict[str, Any]) -> dict[str, Any]:
    return orjson.loads(check["answer"]) if check["answer"] else {}


def _empty_200(check: dict[str, Any]) -> bool:
    answer = _answer(check)
    return answer.get("http_status") == 200 and answer.get("content_chars") == 0


@rule("silent-empty-result")
def silent_empty_result(f: Facts) -> Judgement:
    j = Judgement()
    completions = [c for c in f.checks if c["kind"] == "completion"]
    if not completions:
        j.missing.append("a completion check (evidence check, kind = completion)")
    for c in completions:
        answer = _answer(c)
        if _empty_200(c):
            j.add(
                4,
                f"{c['name']}: HTTP 200, finish_reason {answer.get('finish_reason')!r}, "
                "empty content",
            )
            if answer.get("reasoning_chars"):
                j.add(
                    1,
                    f"the reasoning field held {answer['reasoning_chars']} characters: "
                    "it ate the budget",
                )
        elif c["ok"]:
            j.evidence_against.append(f"{c['name']} answered with content")
    return j


@rule("orphaned-result")
def orphaned_result(f: Facts) -> Judgement:
    j = Judgement()
    if not f.jobs:
        j.missing.append("an engine's job history (ComfyUI /history)")
        return j
    done = [x for x in f.jobs if x["completed"] and x["outputs"] not in (None, "[]", [])]
    started = f.bundle["started_at"]
    recent = [
        x for x in done if x["ended_at"] and 0 <= (started - x["ended_at"]).total_seconds() <= 3600
    ]
    watcher_gave_up = f.bundle["trigger_kind"] in ("healthcheck", "alert", "systemd")
    if recent and watcher_gave_up:
        j.add(
            3,
            f"the engine's history says job {recent[-1]['job_id']} completed with outputs "
            f"while the capture was triggered as a failure "
            f"({f.bundle['trigger_kind']}:{f.bundle['trigger_name']})",
        )
    elif recent:
        j.add(1, f"job {recent[-1]['job_id']} completed with outputs shortly before")
    failed = [x for x in f.jobs if x["status"] == "error"]
    if failed and not recent:
        j.evidence_against.append(f"the history shows job {failed[-1]['job_id']} failed")
    return j


@rule("wedged-no-progress")
def wedged_no_progress(f: Facts) -> Judgement:
    j = Judgement()
    if not f.has("tokens_generated"):
        j.missing.append("an engine's progress counter (generated tokens)")
        return j
    tokens = _values(f, "tokens_generated")
    busy = [v for values in f.engine_load.values() for v in values]
    if tokens[-1] == tokens[0] and busy and min(busy) > 0:
        j.add(
            4,
            f"busy through the window (queue never empty) and no token generated "
            f"({tokens[0]:.0f} before and after)",
        )
    elif tokens[-1] > tokens[0]:
        j.evidence_against.append(
            f"{tokens[-1] - tokens[0]:.0f} tokens were generated in "
            "the window: busy but progressing"
        )
    return j


@rule("power-cycled")
def power_cycled(f: Facts) -> Judgement:
    j = Judgement()
    before = f.previous
    if before is None:
        j.missing.append("an earlier bundle of this host")
        return j
    if before["boot_id"] == f.bundle["boot_id"]:
        j.evidence_against.append("same boot as the previous bundle")
        return j
    j.add(2, f"the boot id changed since the previous bundle ({before['bundle_id']})")
    total = before["total"] or 0
    low = before["min_available"]
    if low is not None and total and low < 0.05 * total:
        j.add(2, f"the previous bundle saw available memory at {_gib(low)}")
    if (before["psi_full"] or 0) >= PSI_FULL_HIGH:
        j.add(1, f"the previous bundle saw memory stalls ({before['psi_full']:.0f}% full)")
    return j
