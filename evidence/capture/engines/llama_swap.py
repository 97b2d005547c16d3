"""llama-swap, the model manager: which models it believes are loaded, and its log.

/running is the model manager's side of the seeds' decisive disagreement (it says one
model is loaded, the GPU holds memory for two). Never /unload or /upstream/...: the
first changes state, the second can start a model.
Format: ../shared/reference/formats.md section 1 (llama-swap v94 to v250+).
"""

from typing import Any

from evidence.capture.engines import Endpoint, Reader, json_object, register
from evidence.capture.httpget import Answer


def running(answer: Answer) -> dict[str, Any]:
    models = json_object(answer)["running"]
    if not isinstance(models, list):
        raise TypeError("`running` is not a list")
    rows = [
        {
            "model": m["model"],
            "state": m.get("state"),
            "ttl": m.get("ttl"),
            "proxy": m.get("proxy"),
            "cmd": m.get("cmd"),
            "name": m.get("name"),
        }
        for m in models
    ]
    return {"models": rows, "loaded": [r["model"] for r in rows if r["state"] == "ready"]}


def logs(answer: Answer) -> dict[str, Any]:
    lines = answer.text().splitlines()
    return {"lines": len(lines)}


@register
class LlamaSwap(Reader):
    kind = "llama-swap"
    ports = (8080,)
    endpoints = (
        Endpoint("/running", running, sampled=True),
        Endpoint("/health", lambda a: {"body": a.text()[:100]}),
        Endpoint("/logs", logs, keep_tail=True),
    )
