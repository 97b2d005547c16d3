"""Ollama: the models resident in memory (size and the part in VRAM) and the version.

size - size_vram is what spilled to system RAM (a partial offload).
Format: ../shared/reference/formats.md section 2 (Ollama v0.33.0-rc2 api/types.go).
"""

from typing import Any

from evidence.capture.engines import Endpoint, Reader, json_object, register
from evidence.capture.httpget import Answer


def ps(answer: Answer) -> dict[str, Any]:
    rows = []
    for m in json_object(answer)["models"]:
        details = m.get("details") or {}
        rows.append(
            {
                "name": m["name"],
                "size": m.get("size"),
                "size_vram": m.get("size_vram"),
                "expires_at": m.get("expires_at"),
                "context_length": m.get("context_length"),
                "parameter_size": details.get("parameter_size"),
                "quantization_level": details.get("quantization_level"),
            }
        )
    sizes = [r["size"] for r in rows]
    vram = [r["size_vram"] for r in rows]
    return {
        "models": rows,
        "loaded": [r["name"] for r in rows],
        "size_total": None if None in sizes else sum(sizes),
        "size_vram_total": None if None in vram else sum(vram),
    }


def version(answer: Answer) -> dict[str, Any]:
    return {"version": json_object(answer)["version"]}


@register
class Ollama(Reader):
    kind = "ollama"
    ports = (11434,)
    endpoints = (
        Endpoint("/api/ps", ps, sampled=True),
        Endpoint("/api/version", version),
    )
