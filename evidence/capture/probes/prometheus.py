"""Prometheus history: how a thirty-second bundle reads memory backwards from the failure.

Range queries over the look-back (24 h by default, a step giving about 720 points: two
minutes over a day, so the hour before a failure holds thirty readings) for the seed's
diagnose-oom questions (gateway and engine up, accelerator memory, KV-cache usage, context
high-water, requests running and waiting, host MemAvailable), the node-exporter memory,
swap, PSI and OOM series, what an incident needs beyond the seed (every target's up, the
token counter, older names), and the config's own queries.

A query with no series is `absent` (nothing publishes it here: itself evidence about the
instruments); Prometheus not answering is the probe's status, never a per-query
absence. Values are kept as Prometheus writes them (strings, so NaN survives) and
counters stay raw: rates belong to the analyst. Deferred: history does not change in
thirty seconds, so it is read beside the watch. Format: formats.md section 7.1.
"""

import math
import time
import urllib.parse
from typing import Any

from evidence.archive.clock import iso
from evidence.capture.httpget import get, refused
from evidence.capture.probes import Probe, Reading, register

DEFAULT_URL = "http://127.0.0.1:9090"
POINTS = 720
QUERY_TIMEOUT_S = 3.0
MAX_BYTES = 8 * 1024 * 1024

# An engine's job, whatever the operator called it ("vllm", "vllm-qwen3", "llama_cpp",
# "LlamaServer"): not llama-swap or Ollama, which are model managers, not one engine.
ENGINE_JOBS = "(?i).*(llama[._-]?(server|cpp)|vllm|sglang).*"
SEED_QUERIES = (
    ("gateway_up", 'up{job="gateway"}'),
    ("engine_up", f'up{{job=~"{ENGINE_JOBS}"}}'),
    # DCGM (MiB), a local exporter, node-exporter's drm collector (AMD), then
    # utkuozdemir/nvidia_gpu_exporter (nvidia-smi's, in bytes): the GeForce household's own.
    (
        "accelerator_memory_used",
        "DCGM_FI_DEV_FB_USED * 1024 * 1024 or local_llm_accelerator_memory_used_bytes"
        " or node_drm_memory_vram_used_bytes or nvidia_smi_memory_used_bytes",
    ),
    (
        "accelerator_memory_total",
        "(DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) * 1024 * 1024"
        " or local_llm_accelerator_memory_total_bytes"
        " or node_drm_memory_vram_size_bytes or node_drm_memory_vram_total_bytes"
        " or nvidia_smi_memory_total_bytes",
    ),
    ("kv_cache_usage", "vllm:kv_cache_usage_perc or sglang:token_usage"),
    ("context_high_water", "llamacpp:n_tokens_max"),
    (
        "requests_running",
        "llamacpp:requests_processing or vllm:num_requests_running or sglang:num_running_reqs",
    ),
    (
        "requests_waiting",
        "llamacpp:requests_deferred or vllm:num_requests_waiting or sglang:num_queue_reqs",
    ),
    ("host_memory_available", "node_memory_MemAvailable_bytes"),
)
NODE_QUERIES = (
    ("host_memory_total", "node_memory_MemTotal_bytes"),
    ("host_swap_total", "node_memory_SwapTotal_bytes"),
    ("host_swap_free", "node_memory_SwapFree_bytes"),
    ("host_swap_out_pages", "node_vmstat_pswpout"),
    ("host_major_faults", "node_vmstat_pgmajfault"),
    ("host_oom_kills", "node_vmstat_oom_kill"),
    ("host_psi_memory_some_seconds", "node_pressure_memory_waiting_seconds_total"),
    ("host_psi_memory_full_seconds", "node_pressure_memory_stalled_seconds_total"),
)


# What the seed does not ask and an incident needs: every target's `up` (which service went
# down and when, whatever its job is called), the token counters (progress, and prompt
# against output: the conversations' length), preemptions
# (the KV cache out of room), the cache metrics of vLLM before its rename and of llama.cpp
# before PR #13660, and macOS node-exporter's memory (it has no MemAvailable) and swap
# (meminfo_darwin.go's names).
HISTORY_QUERIES = (
    ("targets_up", "up"),
    (
        "tokens_generated",
        "vllm:generation_tokens_total or sglang:generation_tokens_total"
        " or llamacpp:tokens_predicted_total",
    ),
    # Prompt tokens against generated ones: how long the conversations are, whatever the
    # load. llama.cpp counts prompt tokens served from its cache apart since b1-0c1e570.
    (
        "tokens_prompt",
        "(llamacpp:prompt_tokens_total + llamacpp:prompt_tokens_cached_total)"
        " or llamacpp:prompt_tokens_total or vllm:prompt_tokens_total"
        " or sglang:prompt_tokens_total",
    ),
    ("decode_calls", "llamacpp:n_decode_total"),
    # The engine's own process memory, where its Python prometheus_client publishes it (vLLM's
    # API server, SGLang): a leak read on the engine's line alone, not the host's of every
    # process. llama-server (C++) publishes none.
    ("engine_resident_memory", f'process_resident_memory_bytes{{job=~"{ENGINE_JOBS}"}}'),
    # llama-server's own cache gauge until PR #13660 (May 2025): older builds still run.
    ("kv_cache_usage_legacy", "vllm:gpu_cache_usage_perc or llamacpp:kv_cache_usage_ratio"),
    ("preemptions", "vllm:num_preemptions_total or sglang:num_retracted_requests_total"),
    # An APU's GPU memory beyond its VRAM carve-out (node-exporter's drm collector): the
    # analyst adds it to the card where the carve-out is small.
    ("accelerator_gtt_used", "node_drm_memory_gtt_used_bytes"),
    ("accelerator_gtt_total", "node_drm_memory_gtt_size_bytes"),
    ("host_memory_free_darwin", "node_memory_free_bytes"),
    ("host_memory_inactive_darwin", "node_memory_inactive_bytes"),
    ("host_memory_total_darwin", "node_memory_total_bytes"),
    # macOS has no PSI: its pressure is the compressor's pages, then swap (files it adds as
    # it needs them, so their total grows with the use: the use is what fills).
    ("host_memory_compressed_darwin", "node_memory_compressed_bytes"),
    ("host_swap_used_darwin", "node_memory_swap_used_bytes"),
)
QUERIES = SEED_QUERIES + NODE_QUERIES + HISTORY_QUERIES


def step_for(lookback_s: int) -> int:
    """A step giving about POINTS points, never finer than 15 s (a usual scrape interval)."""
    return max(15, math.ceil(lookback_s / POINTS))


@register
class Prometheus(Probe):
    name = "prometheus"
    order = 90
    priority = 600
    timeout_s = 20.0
    deferred = True

    def freeze(self) -> Reading:
        config = self.ctx.config
        url = (config.prometheus_url or DEFAULT_URL).rstrip("/")
        deadline = self.deadline or time.monotonic() + self.timeout_s
        where = "" if config.prometheus_url else " (no [prometheus] configured; tried the default)"
        nobody = refused(url, min(QUERY_TIMEOUT_S, self._left(deadline)))
        if nobody:  # said without loading an HTTP client: most boxes have no Prometheus
            return Reading("absent", f"Prometheus at {url}{where}: {nobody}")
        build = get(f"{url}/api/v1/status/buildinfo", min(QUERY_TIMEOUT_S, self._left(deadline)))
        if build.status != "ok":
            return Reading(build.status, f"Prometheus at {url}{where}: {build.reason}")
        try:
            version = build.json()["data"]["version"]
        except (ValueError, KeyError, TypeError):
            version = None
        end = time.time()
        lookback = config.prometheus_lookback_s
        step = step_for(lookback)
        queries = [*QUERIES, *config.prometheus_queries]
        results = [
            self._query(url, name, expr, end - lookback, end, step, deadline)
            for name, expr in queries
        ]
        return Reading(
            record={
                "url": url,
                "version": version,
                "start": iso(end - lookback),
                "end": iso(end),
                "step_s": step,
                "queries": results,
            }
        )

    @staticmethod
    def _left(deadline: float) -> float:
        return max(0.0, deadline - time.monotonic())

    def _query(
        self, url: str, name: str, expr: str, start: float, end: float, step: int, deadline: float
    ) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": name, "expr": expr, "series": []}
        left = self._left(deadline)
        if left < 0.05:
            return {**entry, "status": "skipped", "reason": "the probe's time ran out"}
        params = urllib.parse.urlencode(
            {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": str(step)}
        )
        answer = get(f"{url}/api/v1/query_range?{params}", min(QUERY_TIMEOUT_S, left), MAX_BYTES)
        if answer.status != "ok" and answer.http_status is None:
            return {**entry, "status": answer.status, "reason": answer.reason}
        if answer.truncated:
            return {**entry, "status": "error", "reason": f"answer larger than {MAX_BYTES} bytes"}
        try:
            envelope = answer.json()
        except ValueError:
            return {**entry, "status": "error", "reason": answer.reason or "not a JSON answer"}
        if envelope.get("status") != "success":
            return {
                **entry,
                "status": "error",
                "reason": f"{envelope.get('errorType')}: {envelope.get('error')}",
            }
        series = [
            {"metric": s.get("metric", {}), "values": s.get("values", [])}
            for s in envelope["data"]["result"]
        ]
        if not series:
            return {**entry, "status": "absent", "reason": "no series: nothing publishes this here"}
        return {
            **entry,
            "series": series,
            "status": "ok",
            "reason": None,
            "warnings": envelope.get("warnings", []),
        }

    def headline(self, record: dict[str, Any]) -> str:
        found = [q["name"] for q in record["queries"] if q["status"] == "ok"]
        absent = sum(q["status"] == "absent" for q in record["queries"])
        return (
            f"{record['url']}: {len(found)} of {len(record['queries'])} queries with series "
            f"({absent} absent) over {record['start']} .. {record['end']}"
        )
