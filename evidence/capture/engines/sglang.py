"""SGLang: running and queued requests, KV token usage, retractions, and the server's
memory plan (weights, KV cache) from /get_server_info.

/metrics exists only with --enable-metrics; without it the endpoint's status says so.
Format: ../shared/reference/formats.md section 5 (SGLang 0.5.23).
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
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "sglang:token_usage",
    "sglang:num_used_tokens",
    "sglang:max_total_num_tokens",
    "sglang:num_retracted_reqs",
    "sglang:gen_throughput",
    "sglang:prompt_tokens_total",
    "sglang:generation_tokens_total",
    "sglang:kv_cache_memory_usage_gb",
    "sglang:weight_memory_usage_gb",
)


def server_info(answer: Answer) -> dict[str, Any]:
    data = json_object(answer)
    states = data.get("internal_states") or []
    return {
        key: data.get(key)
        for key in (
            "version",
            "model_path",
            "context_length",
            "mem_fraction_static",
            "max_running_requests",
            "max_total_num_tokens",
            "tp_size",
        )
    } | {"memory_usage": [s.get("memory_usage") for s in states if isinstance(s, dict)]}


@register
class Sglang(Reader):
    kind = "sglang"
    ports = (30000,)
    endpoints = (
        Endpoint("/health", status_only, sampled=True),
        exposition(WANTED),
        Endpoint("/v1/models", openai_models),
        Endpoint("/get_server_info", server_info),
    )

    def identifies(self, record: dict[str, Any]) -> bool:
        return published(record, "/metrics", "sglang:") or bool(
            record["endpoints"].get("/get_server_info", {}).get("readings")
        )
