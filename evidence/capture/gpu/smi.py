"""NVIDIA GPUs through nvidia-smi, where pynvml cannot be imported but the tool exists.

Bounded in time; one snapshot, no 1 Hz sampling (each run of nvidia-smi costs about a
tenth of a second of CPU). `[N/A]`, `[Not Supported]` and the other bracketed tokens
are kept as unknown with the token as the reason, never as 0. Formats:
../shared/reference/formats.md section 10.4 and samples/nvidia-smi-gb10.txt.
"""

import subprocess
from pathlib import Path
from typing import Any

from evidence.capture.gpu import GpuUnavailable, fill_unread, unavailable, unified_verdict
from evidence.capture.procfs import who

MIB = 1024 * 1024
# (query field, record field, conversion) in the order nvidia-smi is asked for them.
GPU_FIELDS = (
    ("index", "index", int),
    ("name", "name", str),
    ("uuid", "uuid", str),
    ("pci.bus_id", "pci_bus_id", str),
    ("driver_version", "driver_version", str),
    ("memory.total", "memory_total_bytes", lambda v: int(float(v) * MIB)),
    ("memory.used", "memory_used_bytes", lambda v: int(float(v) * MIB)),
    ("memory.free", "memory_free_bytes", lambda v: int(float(v) * MIB)),
    ("utilization.gpu", "utilization_gpu_pct", int),
    ("utilization.memory", "utilization_memory_pct", int),
    ("clocks.sm", "sm_clock_mhz", int),
    ("clocks.max.sm", "sm_clock_max_mhz", int),
    ("power.draw", "power_w", float),
    ("temperature.gpu", "temperature_c", int),
)
_UNSUPPORTED = {"[N/A]", "N/A", "[Not Supported]", "Not Supported"}


def _run(args: list[str], timeout_s: float) -> list[list[str]]:
    try:
        done = subprocess.run(
            ["nvidia-smi", *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise GpuUnavailable(
            "timeout", f"nvidia-smi gave no answer within {timeout_s:g} s"
        ) from None
    except OSError as exc:
        raise GpuUnavailable("error", f"nvidia-smi: {exc.strerror}") from None
    if done.returncode != 0:
        head = (done.stdout + done.stderr).strip().splitlines()[:1]
        raise GpuUnavailable("error", f"nvidia-smi exited {done.returncode}: {' '.join(head)}")
    return [
        [cell.strip() for cell in line.split(",")]
        for line in done.stdout.splitlines()
        if line.strip()
    ]


def _value(device: dict[str, Any], field: str, token: str, convert: Any) -> Any:
    if token in _UNSUPPORTED:
        unavailable(device, field, "unsupported", f"nvidia-smi printed {token}")
        return None
    if token.startswith("["):  # [Unknown Error], [Insufficient Permissions], [GPU requires reset]
        unavailable(
            device,
            field,
            "denied" if "Permission" in token else "error",
            f"nvidia-smi printed {token}",
        )
        return None
    try:
        return convert(token)
    except ValueError:
        unavailable(device, field, "error", f"nvidia-smi printed {token!r}")
        return None


def snapshot(proc: Path, timeout_s: float) -> dict[str, Any]:
    """The devices and their compute processes; raises GpuUnavailable."""
    query = ",".join(q for q, _, _ in GPU_FIELDS)
    rows = _run([f"--query-gpu={query}", "--format=csv,noheader,nounits"], timeout_s)
    devices = []
    system: dict[str, Any] = {"driver_version": None}
    for cells in rows:
        device: dict[str, Any] = {"vendor": "nvidia", "unavailable": {}}
        devices.append(device)
        if len(cells) != len(GPU_FIELDS):
            # e.g. "Unable to determine the device handle for GPU...: Unknown Error": a GPU
            # that fell off the bus, said in nvidia-smi's words. Kept, not parsed.
            device["index"] = None
            fill_unread(device, "error", f"nvidia-smi printed: {', '.join(cells)}")
            continue
        for (_, field, convert), token in zip(GPU_FIELDS, cells, strict=True):
            value = _value(device, field, token, convert)
            if field == "driver_version":
                system["driver_version"] = system["driver_version"] or value
                device["unavailable"].pop(field, None)
            else:
                device[field] = value
        device["memory_api"] = "nvidia-smi"
        device["memory_reserved_bytes"] = None
        device["processes"] = []
        device["unified_memory"] = device["unified_memory_basis"] = None  # decided below
        fill_unread(device, "unsupported", "not among nvidia-smi's query fields")
    by_uuid = {d["uuid"]: d for d in devices if d["uuid"]}
    try:
        apps = _run(
            ["--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits"],
            timeout_s,
        )
    except GpuUnavailable as exc:
        for device in devices:
            device["processes"] = None  # unknown, not an empty card
            unavailable(device, "processes", exc.status, exc.reason)
        apps = []
    for uuid, pid, used in (row for row in apps if len(row) == 3):
        device = by_uuid.get(uuid)
        if device is None or not pid.isdigit():
            continue
        used_bytes = _value(device, "process_memory", used, lambda v: int(float(v) * MIB))
        device["processes"].append(
            {"pid": int(pid), "type": "compute", "used_bytes": used_bytes, **who(proc, int(pid))}
        )
    for device in devices:
        if device["index"] is not None:
            device["unified_memory"], device["unified_memory_basis"] = unified_verdict(device)
    unread = {"status": "unsupported", "reason": "nvidia-smi's query fields do not include it"}
    return {
        **system,
        "cuda_driver_version": None,
        "nvml_version": None,
        "devices": devices,
        "unavailable": {"cuda_driver_version": unread, "nvml_version": unread},
    }
