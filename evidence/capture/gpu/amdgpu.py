"""AMD GPUs through the amdgpu driver's sysfs files: VRAM, GTT and busy percent.

On an APU such as the Ryzen AI Max+, GTT is the GPU's window onto system memory and
is usually capped below the machine's total; node_exporter's drm collector reads the
same files. Values are bytes as the driver prints them.
"""

import re
from pathlib import Path
from typing import Any

from evidence.capture.gpu import unavailable
from evidence.capture.procfs import read_text

AMD_VENDOR = "0x1002"
_BYTES = (
    "mem_info_vram_total",
    "mem_info_vram_used",
    "mem_info_vis_vram_total",
    "mem_info_vis_vram_used",
    "mem_info_gtt_total",
    "mem_info_gtt_used",
)
_SAMPLED = ("mem_info_vram_used", "mem_info_gtt_used", "gpu_busy_percent")


def _read(path: Path) -> str | None:
    text = read_text(path)
    return None if text is None else text.strip()


def cards(sys_root: Path) -> list[Path]:
    """The device directories of amdgpu cards (connectors such as card0-DP-1 are skipped)."""
    drm = sys_root / "class" / "drm"
    if not drm.is_dir():
        return []
    return [
        c / "device"
        for c in sorted(drm.iterdir())
        if re.fullmatch(r"card\d+", c.name) and _read(c / "device" / "vendor") == AMD_VENDOR
    ]


def _field_name(leaf: str) -> str:
    if leaf == "gpu_busy_percent":
        return "busy_pct"
    return leaf.removeprefix("mem_info_") + "_bytes"


def read(
    device_dir: Path, leaves: tuple[str, ...] = (*_BYTES, "gpu_busy_percent")
) -> dict[str, Any]:
    record: dict[str, Any] = {"card": device_dir.parent.name}
    for leaf in leaves:
        text = _read(device_dir / leaf)
        field = _field_name(leaf)
        record[field] = int(text) if text is not None and text.isdigit() else None
        if record[field] is None:
            why = "not published by this driver" if text is None else f"unreadable value {text!r}"
            unavailable(
                record,
                field,
                "unsupported" if text is None else "error",
                f"{device_dir / leaf}: {why}",
            )
    return record


def snapshot(sys_root: Path) -> list[dict[str, Any]]:
    devices = []
    for index, device_dir in enumerate(cards(sys_root)):
        uevent = dict(
            line.split("=", 1)
            for line in (_read(device_dir / "uevent") or "").splitlines()
            if "=" in line
        )
        devices.append(
            {
                "index": index,
                "vendor": "amd",
                "name": _read(device_dir / "product_name"),
                "pci_bus_id": uevent.get("PCI_SLOT_NAME"),
                **read(device_dir),
            }
        )
    return devices


def sample(sys_root: Path) -> list[dict[str, Any]]:
    out = []
    for device_dir in cards(sys_root):
        record = read(device_dir, _SAMPLED)
        record.pop("unavailable", None)
        out.append(record)
    return out
