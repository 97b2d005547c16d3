"""ComfyUI: its queue, its recent job history with the outputs it wrote, and its memory.

The history is the engine's own record of whether a job finished and what it wrote:
the seeds' answer to a watcher that died while the work succeeded (Plate 10). The
queue says whether it is busy; system_stats says what the torch allocator holds.
Never POST /free: it changes state. Formats: ../shared/reference/formats.md section 3
(ComfyUI v0.3.64 server.py, execution.py).
"""

from typing import Any

from evidence.capture.engines import Endpoint, Reader, json_object, register
from evidence.capture.httpget import Answer

HISTORY_ITEMS = 20


def queue(answer: Answer) -> dict[str, Any]:
    data = json_object(answer)
    running, pending = data["queue_running"], data["queue_pending"]
    return {
        "running": len(running),
        "pending": len(pending),
        "running_ids": [item[1] for item in running if len(item) > 1],
    }


def _timestamps(messages: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for event, data in (m for m in messages if isinstance(m, list) and len(m) == 2):
        if isinstance(data, dict) and "timestamp" in data:
            out[event] = data["timestamp"]  # epoch milliseconds
        if event == "execution_error" and isinstance(data, dict):
            out["exception_type"] = data.get("exception_type")
            out["exception_message"] = str(data.get("exception_message", ""))[:500]
            out["node_type"] = data.get("node_type")
    return out


def history(answer: Answer) -> dict[str, Any]:
    jobs = []
    for prompt_id, entry in json_object(answer).items():
        status = entry.get("status") or {}
        outputs = []
        for node_id, ui in (entry.get("outputs") or {}).items():
            for kind, items in ui.items():
                for item in items if isinstance(items, list) else []:
                    if isinstance(item, dict) and "filename" in item:
                        outputs.append(
                            {
                                "node": node_id,
                                "kind": kind,
                                "filename": item["filename"],
                                "subfolder": item.get("subfolder"),
                                "type": item.get("type"),
                            }
                        )
        jobs.append(
            {
                "prompt_id": prompt_id,
                "status": status.get("status_str"),
                "completed": status.get("completed"),
                "outputs": outputs,
                **_timestamps(status.get("messages") or []),
            }
        )
    return {"jobs": jobs}


def system_stats(answer: Answer) -> dict[str, Any]:
    data = json_object(answer)
    system = data["system"]
    devices = [
        {
            k: d.get(k)
            for k in (
                "name",
                "type",
                "index",
                "vram_total",
                "vram_free",
                "torch_vram_total",
                "torch_vram_free",
            )
        }
        for d in data.get("devices", [])
    ]
    return {
        "ram_total": system.get("ram_total"),
        "ram_free": system.get("ram_free"),
        "comfyui_version": system.get("comfyui_version"),
        "pytorch_version": system.get("pytorch_version"),
        "argv": system.get("argv"),
        "devices": devices,
    }


@register
class ComfyUI(Reader):
    kind = "comfyui"
    ports = (8188,)
    endpoints = (
        Endpoint("/queue", queue, sampled=True),
        Endpoint(f"/history?max_items={HISTORY_ITEMS}", history, sampled=True),
        Endpoint("/system_stats", system_stats, sampled=True),
    )
