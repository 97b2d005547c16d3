"""Who and when: hostname, boot id, kernel, uptime and load. The boot id tells the
analyst whether the box was power-cycled between two bundles."""

import os
from pathlib import Path
from typing import Any

from evidence.capture.probes import Probe, Reading, register
from evidence.capture.procfs import read_text


@register
class Host(Probe):
    name = "host"
    order = 50
    priority = 850
    timeout_s = 0.5

    def _read(self, *parts: str) -> str | None:
        text = read_text(self.ctx.proc.joinpath(*parts))
        return None if text is None else text.strip()

    def freeze(self) -> Reading:
        uname = os.uname()
        uptime = self._read("uptime")
        loadavg = self._read("loadavg")
        return Reading(
            record={
                "hostname": uname.nodename,
                "boot_id": self._read("sys", "kernel", "random", "boot_id"),
                "kernel": uname.release,
                "kernel_version": uname.version,
                "machine": uname.machine,
                "os_release": _os_release(),
                "cpus": os.cpu_count(),
                "uptime_s": float(uptime.split()[0]) if uptime else None,
                "loadavg": [float(x) for x in loadavg.split()[:3]] if loadavg else None,
            }
        )

    def headline(self, record: dict[str, Any]) -> str:
        up = record["uptime_s"]
        uptime = "unknown" if up is None else f"{up / 3600:.1f} h"
        return f"{record['hostname']}, kernel {record['kernel']}, up {uptime}"


def _os_release() -> str | None:
    for line in (read_text(Path("/etc/os-release")) or "").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return None
