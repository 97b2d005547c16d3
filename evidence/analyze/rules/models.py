"""What is loaded and who holds the card: a model manager's list, a GPU process's name,
an engine that preallocates, a box that loads one model."""

from typing import Any

import orjson

from evidence.analyze.facts import Facts
from evidence.analyze.failure import is_gateway, is_manager, is_server
from evidence.analyze.recognise import PREALLOCATES, belongs
from evidence.analyze.rules.text import GIB, gib

SQUAT_GPU_BYTES = 1 * GIB  # an idle engine holding this much GPU memory is squatting
PREALLOCATED_SHARE = 0.5  # an engine's preallocation this large is what looks alarming
MODEL_SHARE = 0.05  # a second model is at least 5% of the pool (a 0.7 GiB step on a 24 GiB
MODEL_MIN_BYTES = 1 * GIB  # card is a buffer, not a model) and at least 1 GiB


# Series only an engine's own /metrics give: where they were read, an engine was seen.
ENGINE_METRICS = ("requests_running", "tokens_generated", "context_high_water", "kv_cache")


def single_model(f: Facts) -> bool:
    """Nothing on this box loads a second model: no model manager (llama-swap, Ollama: they
    load on demand, and a log's tail holds only the latest loads) read or scraped, and at
    most one engine's server among the scrape targets and the engines read. A model is
    loaded by a server starting or a manager; without either, the engine's memory is its
    own."""
    if any(e["kind"] in ("llama-swap", "ollama") for e in f.engines) or any(
        is_manager(t) for t in f.targets
    ):
        return False
    # A target configured and never up all day (a server never started) serves nothing.
    servers = {t for t, s in f.targets.items() if is_server(t) and any(v == 1 for _, v in s)}
    engines = {e["url"] or e["name"] for e in f.engines}
    seen = servers or engines or any(f.has(n) for n in ENGINE_METRICS)
    if not seen and (any(is_gateway(t) for t in f.targets) or not f.measured("logs")):
        # No engine scraped or read, nor its metrics: behind a gateway (llama-swap scraped
        # under its own job name), or with no log read either (Ollama publishes no
        # metrics), what loads models here is unknown, not one engine.
        return False
    return len(servers) <= 1 and len(engines) <= 1


def loaded_models(f: Facts) -> dict[str, list[str]] | None:
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


def who(f: Facts, gpu_process: dict[str, Any]) -> dict[str, Any]:
    """A GPU process with the name and command line the process table has for its pid."""
    row = next((p for p in f.processes if p["pid"] == gpu_process["pid"]), None)
    return {**gpu_process, **({"name": row["name"], "cmdline": row["cmdline"]} if row else {})}


def preallocated(f: Facts) -> list[str]:
    """Discrete cards held mostly by an engine that takes a fixed share of the card at start
    (vLLM, SGLang): high and flat by design, what users ask about as a leak (vLLM #550). A
    unified pool is left out: there the same share is the host's memory too."""
    said = []
    for d in f.gpu_devices:
        total = d["memory_total_bytes"]
        if d["unified_memory"] or not total:
            continue
        for kind, setting in PREALLOCATES.items():
            holders = [
                p
                for p in f.gpu_processes
                if p["device_index"] == d["device_index"]
                and p["used_bytes"]
                and belongs(who(f, p), kind)
            ]
            held = sum(p["used_bytes"] for p in holders)
            if held >= PREALLOCATED_SHARE * total:
                pids = ", ".join(str(p["pid"]) for p in holders)
                said.append(
                    f"{kind} (pid {pids}) holds {gib(held)}, {held / total:.0%} of GPU "
                    f"{d['device_index']}: it takes that share at start for weights and its "
                    f"KV cache ({setting}), so high and flat is by design, not a leak"
                )
    return said


def list_known(f: Facts, device: dict[str, Any], listed: list[dict[str, Any]]) -> bool:
    """Whether the device's per-process list was read in full: NVML's, with every size
    given. AMD's sysfs has no list, and NVML under WSL lists processes without sizes:
    not measured, never "held by nobody"."""
    unread = device.get("unavailable") or {}
    if isinstance(unread, str):
        unread = orjson.loads(unread)
    return (
        device["vendor"] == "nvidia"
        and "processes" not in unread
        and all(p["used_bytes"] is not None for p in listed)
    )


def is_manager_process(process: dict[str, Any], kinds: set[str]) -> bool:
    """The process is a model manager's own (llama-swap, Ollama) among `kinds`."""
    name = (process["name"] or "").lower()
    return any(kind in ("llama-swap", "ollama") and kind in name for kind in kinds)


def descendants(f: Facts, roots: set[int]) -> set[int]:
    """Every process below the given pids in the process table."""
    children: dict[int, list[int]] = {}
    for p in f.processes:
        children.setdefault(p["ppid"], []).append(p["pid"])
    found, todo = set(), list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def kept_unlisted(f: Facts) -> str | None:
    """A model manager runs more processes holding a model's worth of the accelerator than
    it lists models loaded: one it swapped away from and did not unload, in words; None
    where every holder is listed or no manager was read."""
    for manager, models in (loaded_models(f) or {}).items():
        kind = next(e["kind"] for e in f.engines if e["name"] == manager)
        roots = {p["pid"] for p in f.processes if is_manager_process(p, {kind})}
        below = descendants(f, roots)
        holders = [
            p
            for p in f.gpu_processes
            if p["pid"] in below and (p["used_bytes"] or 0) >= SQUAT_GPU_BYTES
        ]
        if len(holders) > len(models):
            return (
                f"{manager} lists {len(models)} model{'s' * (len(models) != 1)} loaded while "
                f"{len(holders)} of its processes hold the accelerator"
            )
    return None
