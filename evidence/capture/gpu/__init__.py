"""Readers of GPU state, one per source: NVML (nvml.py), nvidia-smi (smi.py), amdgpu
sysfs (amdgpu.py). The gpu probe chooses among them; each returns devices in the
same shape, with every field it could not read named in `unavailable` and left null.
"""

import re
from typing import Any

INTEGRATED = re.compile(r"\bGB10\b|\bOrin\b|\bThor\b|\bXavier\b")
# Every field of an NVIDIA device record, so a device read half way keeps its shape.
DEVICE_FIELDS = (
    "name",
    "uuid",
    "pci_bus_id",
    "memory_total_bytes",
    "memory_used_bytes",
    "memory_free_bytes",
    "memory_reserved_bytes",
    "memory_api",
    "utilization_gpu_pct",
    "utilization_memory_pct",
    "sm_clock_mhz",
    "sm_clock_max_mhz",
    "power_w",
    "temperature_c",
    "clock_event_reasons",
    "processes",
    "unified_memory",
    "unified_memory_basis",
)


class GpuUnavailable(Exception):
    """A GPU source cannot be used on this machine: (status, reason)."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def unavailable(device: dict[str, Any], field: str, status: str, reason: str) -> None:
    """Record why a field is null, so the analyst never reads a blank as zero."""
    device.setdefault("unavailable", {})[field] = {"status": status, "reason": reason}


def fill_unread(device: dict[str, Any], status: str, reason: str) -> None:
    """Every field of a device not read yet becomes null, with why."""
    for field in DEVICE_FIELDS:
        if field not in device:
            device[field] = None
            unavailable(device, field, status, reason)


def unified_verdict(
    device: dict[str, Any], addressing_ats: bool | None = None
) -> tuple[bool | None, str | None]:
    """Is this GPU's memory one pool with the host's? (verdict, the evidence for it).

    On a unified machine (DGX Spark / GB10, Jetson) MemAvailable is the memory gauge and
    a blank aggregate gauge must not be read as an empty card.
    """
    if addressing_ats:
        return True, "NVML addressing mode is ATS: CPU and GPU share one address space"
    memory_unknown = device.get("memory_total_bytes") is None
    per_process = any(p["used_bytes"] is not None for p in device.get("processes") or [])
    if memory_unknown and per_process:
        return True, "aggregate memory is not supported while per-process memory is reported"
    if INTEGRATED.search(device.get("name") or ""):
        return True, f"{device['name']} is an integrated GPU that shares the host's memory"
    if not memory_unknown:
        return False, "the device reports its own framebuffer memory"
    return None, None
