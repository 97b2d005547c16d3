"""vLLM: requests running and waiting, KV-cache usage and token counters from /metrics.

Both names of the KV gauge are asked for: kv_cache_usage_perc (0.9.2+) and
gpu_cache_usage_perc (removed in 0.12); the absent one is listed as absent.
Format: ../shared/reference/formats.md section 4 (vLLM 0.33 v1/metrics/loggers.py).
"""

from typing import Any

from evidence.capture.engines import (
    Endpoint,
    Reader,
    exposition,
    json_object,
    openai_models,
    published,
    register,
    status_only,
)
from evidence.capture.httpget import Answer

WANTED = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "vllm:num_preemptions_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:request_success_total",
    "vllm:engine_sleep_state",
    # Seen on a real vLLM 0.32 (CPU build): why requests wait, what the prefix cache saves,
    # how the cache was sized (labels: gpu_memory_utilization, num_gpu_blocks,
    # kv_cache_memory_bytes), requests refused at admission, and how many completions each
    # request asked for (n > 1 multiplies the KV cache a request holds).
    "vllm:num_requests_waiting_by_reason",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:prompt_tokens_cached_total",
    "vllm:cache_config_info",
    "vllm:admission_rejections_total",
    "vllm:request_params_n_sum",
    "vllm:request_params_n_count",
)


def version(answer: Answer) -> dict[str, Any]:
    return {"version": json_object(answer)["version"]}


@register
class Vllm(Reader):
    kind = "vllm"
    ports = (8000,)
    endpoints = (
        exposition(WANTED),
        Endpoint("/health", status_only, sampled=True),
        Endpoint("/v1/models", openai_models),
        Endpoint("/version", version),
    )

    def identifies(self, record: dict[str, Any]) -> bool:
        return published(record, "/metrics", "vllm:")
