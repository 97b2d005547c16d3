"""AUTOMATIC1111 stable-diffusion-webui (API mode): torch memory and generation progress.

cuda.allocated.current is the render UI's own account of what it holds (Plate 01).
Never /sdapi/v1/unload-checkpoint: it changes state. Format:
../shared/reference/formats.md section 3.5 (modules/api/api.py).
"""

from typing import Any

from evidence.capture.engines import Endpoint, Reader, json_object, register
from evidence.capture.httpget import Answer


def memory(answer: Answer) -> dict[str, Any]:
    data = json_object(answer)
    return {"ram": data["ram"], "cuda": data["cuda"]}


def progress(answer: Answer) -> dict[str, Any]:
    data = json_object(answer)
    state = data.get("state") or {}
    return {
        "progress": data["progress"],
        "eta_relative": data.get("eta_relative"),
        "state": {
            k: state.get(k)
            for k in (
                "job",
                "job_count",
                "job_no",
                "sampling_step",
                "sampling_steps",
                "interrupted",
                "skipped",
            )
        },
    }


@register
class A1111(Reader):
    kind = "a1111"
    ports = (7860,)
    endpoints = (
        Endpoint("/sdapi/v1/memory", memory, sampled=True),
        Endpoint("/sdapi/v1/progress?skip_current_image=true", progress, sampled=True),
    )
