"""Every process, first of all: the process list is what a restart destroys.

The snapshot goes through psutil (no fork: a box under memory pressure may not manage
one). The 1 Hz watch reads only /proc/<pid>/statm for the top N by RSS, because that
runs thirty times and must stay cheap. Command lines are redacted by the writer.
"""

import os
from typing import Any

import psutil

from capture.clock import iso
from capture.probes import Context, Probe, Reading, register

PAGE = os.sysconf("SC_PAGE_SIZE")
_ATTRS = ["pid", "ppid", "name", "cmdline", "username", "status", "memory_info", "create_time"]
CGROUPS_OF_INTEREST = 5


@register
class Processes(Probe):
    name = "processes"
    order = 10
    priority = 900
    timeout_s = 2.0
    samples = True

    def __init__(self, ctx: Context):
        super().__init__(ctx)
        self._names: dict[int, str] = {}

    def freeze(self) -> Reading:
        rows = [self._row(p.info) for p in psutil.process_iter(_ATTRS, ad_value=None)]
        rows = [r for r in rows if r is not None]
        self._names = {r["pid"]: r["name"] for r in rows}
        by_rss = sorted(rows, key=lambda r: r["rss_bytes"] or 0, reverse=True)
        self.ctx.shared["cgroups_of_interest"] = list(
            dict.fromkeys(r["cgroup"] for r in by_rss[:CGROUPS_OF_INTEREST] if r["cgroup"])
        )
        return Reading(record={"count": len(rows), "processes": rows})

    def _row(self, info: dict[str, Any]) -> dict[str, Any] | None:
        pid = info["pid"]
        memory = info["memory_info"]
        try:
            pgid: int | None = os.getpgid(pid)
        except OSError:
            pgid = None
        created = info["create_time"]
        return {
            "pid": pid,
            "ppid": info["ppid"],
            "pgid": pgid,
            "name": info["name"],
            "cmdline": info["cmdline"],
            "user": info["username"],
            "state": info["status"],
            "rss_bytes": memory.rss if memory else None,
            "swap_bytes": self._swap(pid),
            "start_time": iso(created) if created else None,
            "cgroup": self._cgroup(pid),
        }

    def _read(self, pid: int, leaf: str) -> str | None:
        try:
            with open(self.ctx.proc / str(pid) / leaf, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return None

    def _swap(self, pid: int) -> int | None:
        for line in (self._read(pid, "status") or "").splitlines():
            if line.startswith("VmSwap:"):
                return int(line.split()[1]) * 1024
        return None

    def _cgroup(self, pid: int) -> str | None:
        """The cgroup v2 path (`0::/...`), where the process has one."""
        for line in (self._read(pid, "cgroup") or "").splitlines():
            if line.startswith("0::"):
                return line[3:]
        return None

    def sample(self) -> dict[str, Any]:
        sizes = []
        for entry in os.scandir(self.ctx.proc):
            if entry.name.isdigit():
                statm = self._read(int(entry.name), "statm")
                if statm:
                    sizes.append((int(statm.split()[1]) * PAGE, int(entry.name)))
        sizes.sort(reverse=True)
        top = []
        for rss, pid in sizes[: self.ctx.config.limits.top_n]:
            name = self._names.get(pid) or (self._read(pid, "comm") or "").strip() or None
            top.append({"pid": pid, "name": name, "rss_bytes": rss})
        return {"processes": len(sizes), "top": top}
