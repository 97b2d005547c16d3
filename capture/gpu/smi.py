"""NVIDIA GPUs through nvidia-smi, where pynvml cannot be imported but the tool exists.

Bounded in time; one snapshot, no 1 Hz sampling (each run of nvidia-smi costs about a
tenth of a second of CPU). `[N/A]`, `[Not Supported]` and the other bracketed tokens
are kept as unknown with the token as the reason, never as 0. Formats:
../shared/reference/formats.md section 10.4 and samples/nvidia-smi-gb10.txt.
"""

import subprocess
from pathlib import Path
from typing import Any

from capture.gpu import unavailable, unified_verdict
from capture.procfs import who

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


class SmiFailed(Exception):
    """nvidia-smi could not be run or gave no usable answer: (status, reason)."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


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
        raise SmiFailed("timeout", f"nvidia-smi gave no answer within {timeout_s:g} s") from None
    except OSError as exc:
        raise SmiFailed("error", f"nvidia-smi: {exc.strerror}") from None
    if done.returncode != 0:
        head = (done.stdout + done.stderr).strip().splitlines()[:1]
        raise SmiFailed("error", f"nvidia-smi exited {done.returncode}: {' '.join(head)}")
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
    """The devices and their compute processes; raises SmiFailed."""
    query = ",".join(q for q, _, _ in GPU_FIELDS)
    rows = _run([f"--query-gpu={query}", "--format=csv,noheader,nounits"], timeout_s)
    devices = []
    for cells in rows:
        device: dict[str, Any] = {"vendor": "nvidia", "unavailable": {}}
        for (_, field, convert), token in zip(GPU_FIELDS, cells, strict=False):
            device[field] = _value(device, field, token, convert)
        device["memory_api"] = "nvidia-smi"
        device["memory_reserved_bytes"] = None
        device["processes"] = []
        devices.append(device)
    driver = devices[0].pop("driver_version") if devices else None
    for device in devices[1:]:
        device.pop("driver_version")
    by_uuid = {d["uuid"]: d for d in devices}
    try:
        apps = _run(
            ["--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits"],
            timeout_s,
        )
    except SmiFailed as exc:
        for device in devices:
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
        device["unified_memory"], device["unified_memory_basis"] = unified_verdict(device)
    return {
        "driver_version": driver,
        "cuda_driver_version": None,
        "nvml_version": None,
        "devices": devices,
    }
