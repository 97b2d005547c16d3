"""Every process, first of all: the process list is what a restart destroys.

Read straight from /proc (no fork of ps: a box under memory pressure may not manage
one). The snapshot reads stat, status, cmdline and cgroup of each pid; the 1 Hz watch
reads only statm, because it runs thirty times and must stay cheap (and the cgroup of
a largest process it has not seen before: the unit or container it runs in). A process that
exits between listing and reading is simply not listed. Command lines are redacted
by the writer.
"""

import os
import pwd
import time
from typing import Any

from evidence.archive.clock import iso
from evidence.capture.probes import Context, Probe, Reading, human_bytes, register
from evidence.capture.procfs import parse_pid_stat, read_pid, split_cmdline

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")
CGROUPS_OF_INTEREST = 5
_MARGIN_S = 0.1


@register
class Processes(Probe):
    name = "processes"
    order = 10
    priority = 900
    timeout_s = 2.0
    samples = True
    essential = True

    def __init__(self, ctx: Context):
        super().__init__(ctx)
        self._names: dict[int, str] = {}
        self._users: dict[int, str] = {}
        self._cgroups: dict[int, str | None] = {}

    def freeze(self) -> Reading:
        boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
        # Reading a cmdline takes the target's mmap lock and can stall on a thrashing
        # process: stop before the runner would abandon us, and keep what was read.
        stop_at = (self.deadline or time.monotonic() + self.timeout_s) - _MARGIN_S
        pids = self._pids()
        rows = []
        for pid in pids:
            if time.monotonic() > stop_at:
                break
            row = self._row(pid, boot)
            if row is not None:
                rows.append(row)
        unread = len(pids) - len(rows) if time.monotonic() > stop_at else 0
        self._names = {r["pid"]: r["name"] for r in rows}
        self._cgroups = {r["pid"]: r["cgroup"] for r in rows}
        by_rss = sorted(rows, key=lambda r: r["rss_bytes"], reverse=True)
        self.ctx.shared["cgroups_of_interest"] = list(
            dict.fromkeys(r["cgroup"] for r in by_rss[:CGROUPS_OF_INTEREST] if r["cgroup"])
        )
        record = {"count": len(rows), "unread": unread, "processes": rows}
        if unread:
            return Reading("timeout", f"time ran out with {unread} processes unread", record)
        return Reading(record=record)

    def headline(self, record: dict[str, Any]) -> str:
        others = [r for r in record["processes"] if r["pid"] != os.getpid()]
        largest = max(others, key=lambda r: r["rss_bytes"], default=None)
        if largest is None:
            return "no processes"
        return (
            f"{record['count']} processes; largest {largest['name']} (pid {largest['pid']}) "
            f"{human_bytes(largest['rss_bytes'])}"
        )

    def sample(self) -> dict[str, Any]:
        sizes = []
        for pid in self._pids():
            statm = self._read(pid, "statm")
            if statm:
                sizes.append((int(statm.split()[1]) * PAGE, pid))
        sizes.sort(reverse=True)
        top = []
        for rss, pid in sizes[: self.ctx.config.limits.top_n]:
            name = self._names.get(pid) or (self._read(pid, "comm") or "").strip() or None
            if pid not in self._cgroups:
                self._cgroups[pid] = self._cgroup(pid)
            top.append({"pid": pid, "name": name, "rss_bytes": rss, "cgroup": self._cgroups[pid]})
        return {"processes": len(sizes), "top": top}

    def _pids(self) -> list[int]:
        return [int(e.name) for e in os.scandir(self.ctx.proc) if e.name.isdigit()]

    def _read(self, pid: int, leaf: str) -> str | None:
        return read_pid(self.ctx.proc, pid, leaf)

    def _row(self, pid: int, boot: float) -> dict[str, Any] | None:
        stat_text = self._read(pid, "stat")
        if stat_text is None:
            return None  # gone since the listing
        try:
            stat = parse_pid_stat(stat_text)
        except (ValueError, IndexError):
            return None  # a zombie reaped mid-read leaves an empty stat
        status = dict(
            line.split(":", 1)
            for line in (self._read(pid, "status") or "").splitlines()
            if ":" in line
        )
        uid = int(status["Uid"].split()[0]) if "Uid" in status else None
        swap = status.get("VmSwap")
        return {
            "pid": pid,
            "ppid": stat["ppid"],
            "pgid": stat["pgid"],
            "name": stat["name"],
            "cmdline": split_cmdline(self._read(pid, "cmdline")),
            "user": None if uid is None else self._user(uid),
            "state": stat["state"],
            "rss_bytes": stat["rss_pages"] * PAGE,
            # Kernel threads have no VmSwap line: unknown, not zero.
            "swap_bytes": int(swap.split()[0]) * 1024 if swap else None,
            "start_time": iso(boot + stat["start_ticks"] / TICK),
            "cgroup": self._cgroup(pid),
        }

    def _user(self, uid: int) -> str:
        if uid not in self._users:
            try:
                self._users[uid] = pwd.getpwuid(uid).pw_name
            except KeyError:
                self._users[uid] = str(uid)  # a uid with no passwd entry (containers)
        return self._users[uid]

    def _cgroup(self, pid: int) -> str | None:
        """The cgroup v2 path (`0::/...`), where the process has one."""
        for line in (self._read(pid, "cgroup") or "").splitlines():
            if line.startswith("0::"):
                return line[3:]
        return None
