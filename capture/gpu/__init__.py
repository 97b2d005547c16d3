"""Readers of GPU state, one per source: NVML (nvml.py), nvidia-smi (smi.py), amdgpu
sysfs (amdgpu.py). The gpu probe chooses among them; each returns devices in the
same shape, with every field it could not read named in `unavailable` and left null.
"""

import re
from typing import Any

INTEGRATED = re.compile(r"\bGB10\b|\bOrin\b|\bThor\b|\bXavier\b")


def unavailable(device: dict[str, Any], field: str, status: str, reason: str) -> None:
    """Record why a field is null, so the analyst never reads a blank as zero."""
    device.setdefault("unavailable", {})[field] = {"status": status, "reason": reason}


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
    per_process = "processes" not in device.get("unavailable", {}) and any(
        p["used_bytes"] is not None for p in device.get("processes", [])
    )
    if memory_unknown and per_process:
        return True, "aggregate memory is not supported while per-process memory is reported"
    if INTEGRATED.search(device.get("name") or ""):
        return True, f"{device['name']} is an integrated GPU that shares the host's memory"
    if not memory_unknown:
        return False, "the device reports its own framebuffer memory"
    return None, None
