"""llama.cpp's llama-server: health, slots (who is busy, each slot's context), props
(slot count and context size), and /metrics where it was started with --metrics.

There is no KV-usage metric since May 2025 (PR #13660): the context high-water mark
(llamacpp:n_tokens_max) and /slots are the evidence; the old names are still asked
for, for older builds, and listed absent otherwise.
Format: ../shared/reference/formats.md section 6.
"""

from typing import Any

from evidence.capture.engines import (
    Endpoint,
    Reader,
    exposition,
    json_object,
    openai_models,
    register,
)
from evidence.capture.httpget import Answer

WANTED = (
    "llamacpp:requests_processing",
    "llamacpp:requests_deferred",
    "llamacpp:n_tokens_max",
    "llamacpp:prompt_tokens_total",
    "llamacpp:tokens_predicted_total",
    "llamacpp:n_decode_total",
    "llamacpp:n_busy_slots_per_decode",
    "llamacpp:kv_cache_usage_ratio",
    "llamacpp:kv_cache_tokens",
)


def health(answer: Answer) -> dict[str, Any]:
    return {"status": json_object(answer).get("status")}


def slots(answer: Answer) -> dict[str, Any]:
    data = answer.json()
    if not isinstance(data, list):
        raise TypeError("/slots is not a list")
    rows = []
    for slot in data:
        following = slot.get("next_token") or {}
        if isinstance(following, list):
            # Real builds send a list of one object (formats.md 6.2, checked on b1-0c1e570);
            # the README documents an object, as older fakes served.
            following = following[0] if following else {}
        rows.append(
            {
                "id": slot.get("id"),
                "id_task": slot.get("id_task"),
                "n_ctx": slot.get("n_ctx"),
                "is_processing": slot.get("is_processing"),
                "n_decoded": following.get("n_decoded"),
                "n_remain": following.get("n_remain"),
            }
        )
    return {
        "slots": rows,
        "busy": sum(bool(r["is_processing"]) for r in rows),
        # Tokens the busy slots have produced so far: it moves while a long generation runs,
        # when llamacpp:tokens_predicted_total (counted at each request's end) does not.
        "decoded": sum(
            r["n_decoded"] for r in rows if r["is_processing"] and isinstance(r["n_decoded"], int)
        ),
    }


def props(answer: Answer) -> dict[str, Any]:
    data = json_object(answer)
    settings = data.get("default_generation_settings") or {}
    return {
        "total_slots": data.get("total_slots"),
        "n_ctx": settings.get("n_ctx"),
        "model_path": data.get("model_path"),
        "build_info": data.get("build_info"),
        "is_sleeping": data.get("is_sleeping"),
    }


@register
class LlamaServer(Reader):
    kind = "llama-server"
    ports = (8080, 9931)
    endpoints = (
        Endpoint("/health", health, sampled=True),
        Endpoint("/slots", slots, sampled=True),
        exposition(WANTED),
        Endpoint("/props", props),
        Endpoint("/v1/models", openai_models),
    )

    def identifies(self, record: dict[str, Any]) -> bool:
        props_seen = record["endpoints"].get("/props", {}).get("readings") or {}
        return (
            props_seen.get("total_slots") is not None
            or record["endpoints"]["/health"].get("readings", {}).get("status") == "ok"
        )
