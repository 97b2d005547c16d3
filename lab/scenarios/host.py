"""The host's faults, brought about with real processes on this machine: a leak that
ratchets, a build swarm, a memory-pressure stall, an OOM kill, and the machine at rest.

What is dangerous is fenced: every process that allocates sets its oom_score_adj to 1000
(if anything dies for it, it dies first), the large holds are checked against
MemAvailable before they start, and the two scenarios that push memory to its limit
(memory-pressure-stall, host-exhaustion) do it inside a memory-limited cgroup of the lab's
own, created under this process's cgroup and removed by stop(). Nothing else is moved
into it. cgroup v2 is used where its memory controller is delegated, else the v1 memory
hierarchy (hybrid hosts mount it at /sys/fs/cgroup/memory).

Each capture reads the kernel log of its own scenario only (kernel_lookback is the time
since start() began, kernel_tail 0): the ring buffer keeps host-exhaustion's OOM kill for
the rest of the boot, and the host-exhaustion rule counts kills of the last hour, so a
later scenario would otherwise carry an earlier one's kill as its evidence.
"""

import contextlib
import errno
import math
import os
import re
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from functools import cache
from pathlib import Path

from evidence.capture.runner import process_age_s
from lab.core import Lab, Scenario, register

MIB = 1024**2
GIB = 1024**3
PROC = Path("/proc")

# -- what this machine offers -------------------------------------------------------------


def _meminfo() -> dict[str, int]:
    """/proc/meminfo in bytes."""
    out = {}
    for line in (PROC / "meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return out


def _room(need: int, label: str) -> str | None:
    """Why holding `need` bytes would crowd the machine (None if it would not): what is
    asked must leave a quarter of MemAvailable, and at least 2 GiB, to everyone else."""
    available = _meminfo()["MemAvailable"]
    if need > 0.75 * available or available - need < 2 * GIB:
        return (
            f"{label} needs {need / GIB:.1f} GiB and only {available / GIB:.1f} GiB is "
            "available: not enough room to stage it without crowding the machine"
        )
    return None


def _psi(resource: str = "memory") -> dict[str, float]:
    """{'some': avg10, 'full': avg10} from /proc/pressure/<resource>."""
    out = {}
    for line in (PROC / "pressure" / resource).read_text().splitlines():
        kind, *fields = line.split()
        out[kind] = float(dict(f.split("=") for f in fields)["avg10"])
    return out


@cache
def _psi_problem() -> str | None:
    try:
        _psi()
    except FileNotFoundError:
        return "the kernel has no PSI (/proc/pressure/memory is missing)"
    except OSError as exc:
        if exc.errno == errno.EOPNOTSUPP:
            return "PSI is disabled in this kernel (boot with psi=1)"
        return f"/proc/pressure/memory: {exc.strerror}"
    return None


@cache
def _kmsg_problem() -> str | None:
    """Why the collector's kernel probe could not read the kernel log here."""
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return f"/dev/kmsg is not readable here ({exc.strerror}): the OOM kill would go unseen"
    try:
        os.read(fd, 8192)
    except BlockingIOError:
        pass  # an empty ring buffer is still a readable one
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            return None  # the record was overwritten as we read: readable all the same
        return f"/dev/kmsg cannot be read here ({exc.strerror}): the OOM kill would go unseen"
    finally:
        os.close(fd)
    return None


def _disk_backed(path: Path) -> str | None:
    """Why files under path would not be reclaimable page cache (tmpfs, ramfs), or None."""
    best, kind = "", ""
    for line in (PROC / "self" / "mountinfo").read_text().splitlines():
        pre, _, post = line.partition(" - ")
        point = pre.split()[4]
        if (str(path) + "/").startswith(point.rstrip("/") + "/") and len(point) >= len(best):
            best, kind = point, post.split()[0]
    if kind in ("tmpfs", "ramfs"):
        return f"{path} is on {kind}: its pages are not page cache the kernel can write back"
    return None


# -- a memory-limited cgroup of the lab's own ------------------------------------------------


def _cgroup_mounts() -> tuple[Path | None, tuple[Path, str] | None]:
    """(the cgroup2 mount, (the v1 memory hierarchy's mount, its root)) from mountinfo."""
    v2, v1 = None, None
    for line in (PROC / "self" / "mountinfo").read_text().splitlines():
        pre, _, post = line.partition(" - ")
        fields, after = pre.split(), post.split()
        if after[0] == "cgroup2" and v2 is None:
            v2 = Path(fields[4])
        elif after[0] == "cgroup" and "memory" in after[-1].split(",") and v1 is None:
            v1 = (Path(fields[4]), fields[3])
    return v2, v1


def _own_cgroup(v2: bool) -> str | None:
    """This process's cgroup path in the v2 (0::) or the v1 memory hierarchy."""
    for line in (PROC / "self" / "cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if (v2 and number == "0" and controllers == "") or (
            not v2 and "memory" in controllers.split(",")
        ):
            return path
    return None


def _under(mount: Path, root: str, path: str) -> Path:
    """Where a cgroup path (as /proc/self/cgroup names it) lies under a mount of `root`."""
    rel = os.path.relpath(path, root) if path.startswith(root) else path.lstrip("/")
    return mount if rel == "." else mount / rel


class Cgroup:
    """A child cgroup with a memory limit: created, joined by the lab's own processes only
    (through a shell that writes its pid and then execs), and removed."""

    def __init__(self, path: Path, version: int):
        self.path, self.version = path, version

    @staticmethod
    def parents() -> tuple[list[tuple[Path, int]], str]:
        """Where a memory-limited child could be made, best first; and why not, if nowhere."""
        v2, v1 = _cgroup_mounts()
        found, why = [], []
        if v2 is not None:
            own = _own_cgroup(v2=True)
            places = dict.fromkeys(([_under(v2, "/", own)] if own else []) + [v2])
            for place in places:
                control = place / "cgroup.subtree_control"
                if "memory" in (control.read_text().split() if control.exists() else []):
                    found.append((place, 2))
            if not found:
                why.append(
                    f"cgroup v2 at {v2} does not delegate the memory controller "
                    "(memory is not in cgroup.subtree_control of this process's cgroup "
                    "or of the root)"
                )
        if v1 is not None:
            own = _own_cgroup(v2=False)
            if own is not None:
                found.append((_under(v1[0], v1[1], own), 1))
        elif v2 is None:
            why.append("no cgroup hierarchy is mounted")
        else:
            why.append("no cgroup v1 memory hierarchy is mounted either")
        return found, "; ".join(why)

    @classmethod
    def make(cls, name: str, limit: int, high: int | None = None) -> "Cgroup":
        """A new child with memory limited to `limit` (and throttled above `high`, v2)."""
        places, why = cls.parents()
        errors = []
        for parent, version in places:
            group = cls(parent / f"{name}-{os.getpid()}-{time.monotonic_ns()}", version)
            try:
                group.path.mkdir()
            except OSError as exc:
                errors.append(f"mkdir {group.path}: {exc.strerror}")
                continue
            try:
                group.limit(limit, high)
                return group
            except OSError as exc:
                errors.append(f"{group.path}: setting the memory limit: {exc.strerror}")
                group.remove()
        raise OSError(errno.EPERM, "; ".join([why, *errors]).strip("; ") or "no cgroup")

    def limit(self, limit: int, high: int | None) -> None:
        if self.version == 2:
            if high is not None:
                (self.path / "memory.high").write_text(str(high))
            (self.path / "memory.max").write_text(str(limit))
            swap = self.path / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")
        else:
            (self.path / "memory.limit_in_bytes").write_text(str(limit))
            memsw = self.path / "memory.memsw.limit_in_bytes"
            if memsw.exists():  # memory + swap: no swap either
                memsw.write_text(str(limit))

    def argv(self, argv: list[str]) -> list[str]:
        """argv run inside this cgroup: the shell joins it, then execs (same pid)."""
        join = 'echo $$ > "$0/cgroup.procs" && exec "$@"'
        return ["/bin/sh", "-c", join, str(self.path), *argv]

    def oom_kills(self) -> int:
        if self.version == 2:
            text = (self.path / "memory.events").read_text()
        else:
            text = (self.path / "memory.oom_control").read_text()
        match = re.search(r"^oom_kill (\d+)", text, re.MULTILINE)
        return int(match[1]) if match else 0

    def remove(self) -> None:
        """rmdir, once its processes are gone (the lab has already killed and reaped them)."""
        deadline = time.monotonic() + 5
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


@cache
def _cgroup_problem() -> str | None:
    """Why no memory-limited cgroup can be made here (tried for real), or None."""
    try:
        group = Cgroup.make("evidence-lab-probe", 64 * MIB)
    except OSError as exc:
        return f"cannot create a memory-limited cgroup here: {exc.strerror or exc}"
    group.remove()
    return None


# -- the lab's programs (stdlib only, one process each) ---------------------------------------

_PRELUDE = r"""
import mmap, os, re, sys, time
with open("/proc/self/oom_score_adj", "w") as f:
    f.write("1000")  # if the kernel must kill for this, this goes first
POPULATED = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE
def rss():
    with open("/proc/self/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read())[1]) * 1024
def say(*words):
    print(*words, flush=True)
"""

# Holds argv[1] bytes, touched, until killed.
HOLD = (
    _PRELUDE
    + r"""
held = mmap.mmap(-1, int(sys.argv[1]), flags=POPULATED)
say("ready", rss())
while True:
    time.sleep(60)
"""
)

# A leak: each burst maps and touches argv[2] bytes, gives most of it back (munmap) and
# keeps a slice of argv[1] bytes for good. One burst at once; then one burst held around
# each monotonic time read from stdin (the capture's sample ticks).
#
# Kernels from 6.7 keep freed pages on per-CPU lists (auto-tuned, here up to ~750 MiB per
# CPU) that MemFree and MemAvailable do not count, and serve allocations from them first:
# a burst allocated and freed on one CPU is half invisible to /proc/meminfo. So the burst
# is mapped on one CPU, whose list the previous burst emptied, and unmapped on another,
# whose list the first burst filled: both directions then reach the counted free memory.
LEAK = (
    _PRELUDE
    + r"""
keep, burst = int(sys.argv[1]), int(sys.argv[2])
cpus = sorted(os.sched_getaffinity(0))
on_map, on_unmap = ({cpus[0]}, {cpus[1]}) if len(cpus) > 1 else (set(cpus), set(cpus))
kept = []
def once(hold_until):
    os.sched_setaffinity(0, on_map)
    began = time.monotonic()
    kept.append(mmap.mmap(-1, keep, flags=POPULATED))
    extra = mmap.mmap(-1, burst - keep, flags=POPULATED)
    took, peak = time.monotonic() - began, rss()
    time.sleep(max(0.0, hold_until - time.monotonic()))
    os.sched_setaffinity(0, on_unmap)
    extra.close()  # munmap: the pages go back to the OS now
    return took, peak
took, peak = once(time.monotonic() + 0.3)
say("ready", took, peak, rss())
for line in sys.stdin:
    tick = float(line)
    lead = min(0.9, 1.3 * took + 0.1)  # start early enough to be whole at the tick
    time.sleep(max(0.0, tick - lead - time.monotonic()))
    took, _ = once(tick + 0.35)
    say("burst", took, rss())
"""
)

# Writes argv[2] bytes in a loop over a file (argv[1]): page cache the cgroup must reclaim,
# dirty, so reclaim waits on writeback (the v1 memory controller's stall).
WRITE = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o600)
size, block = int(sys.argv[2]), b"\xa5" * (1 << 20)
while True:
    for offset in range(0, size, len(block)):
        os.pwrite(fd, block, offset)
"""

# Holds argv[1] bytes (above the cgroup's memory.high, v2) and keeps charging 8 MiB more,
# so each return to user space is throttled: the kernel's own memory stall.
THROTTLED = (
    _PRELUDE
    + r"""
held = mmap.mmap(-1, int(sys.argv[1]), flags=POPULATED)
while True:
    mmap.mmap(-1, 8 << 20, flags=POPULATED).close()
"""
)

# Allocates 32 MiB at a time, touched, until the kernel stops it.
GROW = (
    _PRELUDE
    + r"""
chunks = []
while True:
    chunks.append(mmap.mmap(-1, 32 << 20, flags=POPULATED))
"""
)

# An ordinary service at rest: a little work every half second, nothing kept.
IDLE_WORK = r"""
import hashlib, time
while True:
    data = bytes(range(256)) * 4096
    hashlib.sha256(data).hexdigest()
    sorted(str(i) for i in range(2000))
    time.sleep(0.5)
"""


def _read_line(proc: subprocess.Popen, what: str, timeout: float) -> list[str]:
    """The next line a lab process prints, split; raises if it dies or stays silent."""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise RuntimeError(f"{what}: no word within {timeout:.0f} s")
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"{what}: exited {proc.wait()} before it was ready")
    return line.split()


def _named(lab: Lab, name: str) -> str:
    """A Python interpreter whose process is called `name` (/proc/PID/comm is the name
    the kernel was asked to execute): a symlink in the lab's scratch folder."""
    link = lab.workdir / "bin" / name
    link.parent.mkdir(exist_ok=True)
    if not link.exists():
        link.symlink_to(os.path.realpath(sys.executable))
    return str(link)


class HostScenario(Scenario):
    """A scenario whose capture reads the kernel log of its own time only, and that says
    when something else on the machine disturbed what it staged (`disturbed`): the
    collector reads the whole machine, so another tenant's OOM kill or allocation inside
    the window is evidence too, and not this scenario's."""

    disturbed: str | None = None
    OWN_KILLS = 0  # OOM kills the scenario itself causes

    def start(self, lab: Lab) -> None:
        self.disturbed = None
        self.kills_before = _oom_kills()
        began = time.monotonic()
        self.bring_about(lab)
        own = math.ceil(time.monotonic() - began) + 2  # + the capture's start and freeze
        lab.write_config(self.config + f'[capture]\nkernel_lookback = "{own}s"\nkernel_tail = 0\n')

    def bring_about(self, lab: Lab) -> None:
        raise NotImplementedError

    def stop(self, lab: Lab) -> None:
        others = _oom_kills() - getattr(self, "kills_before", _oom_kills()) - self.OWN_KILLS
        if others > 0:
            self.disturbed = (
                f"the kernel OOM-killed {others} process(es) of someone else's during the "
                "scenario (/proc/vmstat oom_kill): the kernel log is not the scenario's alone"
            )


def _oom_kills() -> int:
    """The kernel's count of OOM kills since boot (/proc/vmstat oom_kill, 4.13+)."""
    match = re.search(r"^oom_kill (\d+)$", (PROC / "vmstat").read_text(), re.MULTILINE)
    return int(match[1]) if match else 0


# -- the scenarios --------------------------------------------------------------------------


@register
class LeakRatchet(HostScenario):
    """A process that leaks a slice of every burst: the memory floor steps up after each
    burst and never comes back. Bursts are placed between the collector's 1 Hz memory
    samples (one sample inside each) at 4, 9 and 14 s into a 20 s window, so every burst
    is complete with floor in view on both sides (shapes.ratchet needs three, each with
    >= 3 floor readings between, and an idle stretch of >= 5 readings to show the floor
    does not drift between bursts). On a machine slow to populate a burst the ticks and the
    window widen with it (bring_about)."""

    name = "leak-ratchet"
    expect = ("leak-ratchet",)
    window_s = 20.0
    KEEP = 400 * MIB  # leaked per burst: the floor's step
    BURST = 1536 * MIB  # mapped and touched per burst
    TICKS = (4, 9, 14)  # seconds into the window: samples fall at whole seconds
    FOREIGN = 512 * MIB  # more than this moving outside the leak disturbs the picture

    def unavailable(self) -> str | None:
        return _room((len(self.TICKS) + 1) * self.KEEP + self.BURST, self.name)

    def bring_about(self, lab: Lab) -> None:
        self.leak = lab.python(
            LEAK, str(self.KEEP), str(self.BURST), stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        _, took, peak, rss = _read_line(self.leak, "the leak's first burst", 30)
        if int(peak) < 0.9 * self.BURST or int(rss) > 1.1 * self.KEEP + 64 * MIB:
            raise RuntimeError(
                f"the first burst did not behave: peak RSS {int(peak) / MIB:.0f} MiB, "
                f"after it {int(rss) / MIB:.0f} MiB (expected {self.BURST / MIB:.0f} "
                f"and {self.KEEP / MIB:.0f}): memory was not returned to the OS"
            )
        lab.notes.append(f"leak: first burst populated in {float(took):.2f} s")
        # Where populating a burst takes over a second (a guest whose host backs its pages
        # lazily: 1.5 GiB took 1.6 s on the developers' machine), a burst spans two or three
        # samples: spread the bursts so that three floor readings still lie between them.
        slow = max(0, math.ceil(float(took) - 0.5))
        gap = 5 + 2 * slow
        self.TICKS = tuple(4 + slow + gap * k for k in range(len(self.TICKS)))
        self.window_s = float(self.TICKS[-1] + 6 + slow)

    def during(self, lab: Lab) -> None:
        mono0 = _capture_began(lab)
        ticks = "".join(f"{mono0 + k}\n" for k in self.TICKS)
        self.leak.stdin.write(ticks.encode())
        self.leak.stdin.flush()
        # The collector sees the whole machine: watch what the rest of it does meanwhile.
        foreign: dict[int, list[int]] = {}
        status = PROC / str(self.leak.pid) / "status"
        while (now := time.monotonic()) < mono0 + self.window_s:
            info = _meminfo()
            with contextlib.suppress(OSError, TypeError):
                rss = int(re.search(r"VmRSS:\s+(\d+) kB", status.read_text())[1]) * 1024
                used = info["MemTotal"] - info["MemAvailable"]
                foreign.setdefault(int(now - mono0), []).append(used - rss)
            time.sleep(0.1)
        levels = [sorted(v)[len(v) // 2] for v in foreign.values()]
        moved = max(levels) - min(levels) if levels else 0
        if moved > self.FOREIGN:
            self.disturbed = (
                f"memory outside the leak moved {moved / MIB:.0f} MiB during the window "
                "(another process on this machine): the series is not the leak's alone"
            )


def _wait_for_rest(below: float, timeout: float) -> float | None:
    """Wait until PSI memory some avg10 is under `below` (or timeout); the last reading
    (None on a kernel without PSI: nothing to wait for)."""
    if _psi_problem():
        return None
    deadline = time.monotonic() + timeout
    while (some := _psi()["some"]) >= below and time.monotonic() < deadline:
        time.sleep(0.5)
    return some


def _capture_began(lab: Lab, timeout: float = 15.0) -> float:
    """The monotonic instant the capture's window counts its seconds from, once the window
    has started (it creates its hidden bundle directory then). `evidence capture` counts
    from its own process's start, its start-up being part of the window, and samples at
    whole seconds from there: the directory appears a start-up later (0.3 s to over a
    second, by machine), so only the process's start tick gives the samples' phase."""
    deadline = time.monotonic() + timeout
    root = lab.archive / "bundles"
    while time.monotonic() < deadline:
        with contextlib.suppress(FileNotFoundError):
            if any(p.name.startswith(".") for host in root.iterdir() for p in host.iterdir()):
                return time.monotonic() - process_age_s(lab.capture_pid)
        time.sleep(0.002)
    raise RuntimeError(f"the capture did not start its bundle within {timeout:.0f} s")


@register
class BuildSwarm(HostScenario):
    """Four processes named like a CUDA build's compilers (cc1plus, cicc, ptxas, cc1plus),
    each holding a ninth of the machine's memory, touched: 36% between them."""

    name = "build-swarm"
    expect = ("build-swarm",)
    window_s = 6.0
    NAMES = ("cc1plus", "cicc", "ptxas", "cc1plus")
    SHARE = 0.36  # of MemTotal, over the rule's 30%

    def _each(self) -> int:
        return int(_meminfo()["MemTotal"] * self.SHARE / len(self.NAMES))

    def unavailable(self) -> str | None:
        return _room(self._each() * len(self.NAMES), self.name)

    def bring_about(self, lab: Lab) -> None:
        each = self._each()
        procs = [
            lab.spawn([_named(lab, n), "-c", HOLD, str(each)], stdout=subprocess.PIPE)
            for n in self.NAMES
        ]
        for name, proc in zip(self.NAMES, procs, strict=True):
            _, rss = _read_line(proc, f"{name} holding {each / GIB:.1f} GiB", 60)
            if int(rss) < 0.95 * each:
                raise RuntimeError(f"{name} holds only {int(rss) / GIB:.1f} GiB")


@register
class MemoryPressureStall(HostScenario):
    """Real memory stalls, fenced in a cgroup. cgroup v2: a process holding more than the
    cgroup's memory.high (below memory.max, no swap) and charging more all the time, so the
    kernel throttles it at every return to user space. cgroup v1 (no memory.high): a writer
    whose dirty page cache fills its cgroup, so reclaim waits on writeback. Either way
    PSI memory some/full rise system-wide while every process is alive; start() returns
    once some avg10 is past 20%, so the stall covers the window."""

    name = "memory-pressure-stall"
    expect = ("memory-pressure-stall",)
    window_s = 20.0
    LIMIT = 128 * MIB  # v1: the cgroup's memory limit; v2: memory.high
    FILE = 512 * MIB  # v1: the file the writer cycles over (bounded disk use)
    HOLD = 192 * MIB  # v2: held above memory.high
    READY_PSI = 20.0
    REST_PSI = 3.0  # what stop() waits for, so the next scenario starts without this stall

    def unavailable(self) -> str | None:
        why = _psi_problem() or _cgroup_problem()
        if why or self._throttles():
            return why
        scratch = Path(tempfile.gettempdir())
        if shutil.disk_usage(scratch).free < 4 * self.FILE:
            return f"{scratch} has less than {4 * self.FILE / GIB:.0f} GiB free for the writer"
        return _disk_backed(scratch)

    @staticmethod
    def _throttles() -> bool:
        """cgroup v2 (memory.high) rather than v1 (a limit, and writeback to wait on)."""
        places, _ = Cgroup.parents()
        return bool(places) and places[0][1] == 2

    def bring_about(self, lab: Lab) -> None:
        if self._throttles():
            self.group = Cgroup.make("evidence-lab-stall", 2 * self.HOLD, high=self.LIMIT)
            lab.spawn(self.group.argv([sys.executable, "-c", THROTTLED, str(self.HOLD)]))
        else:
            self.group = Cgroup.make("evidence-lab-stall", self.LIMIT)
            target = lab.workdir / "written"
            lab.spawn(self.group.argv([sys.executable, "-c", WRITE, str(target), str(self.FILE)]))
        deadline = time.monotonic() + 60
        while (some := _psi()["some"]) < self.READY_PSI:
            if time.monotonic() > deadline:
                raise RuntimeError(f"PSI memory some avg10 reached only {some:.1f}% in 60 s")
            time.sleep(0.5)
        lab.notes.append(f"stall: PSI some avg10 {some:.1f}% at the start")

    def stop(self, lab: Lab) -> None:
        super().stop(lab)
        group, self.group = getattr(self, "group", None), None
        if group is not None:
            group.remove()
        (lab.workdir / "written").unlink(missing_ok=True)  # a --keep folder keeps no 512 MiB
        # PSI's avg10 takes ~20 s to forget a stall: the next capture (another scenario's)
        # would read this one's stall as its own evidence.
        _wait_for_rest(self.REST_PSI, 45)


@register
class HostExhaustion(HostScenario):
    """An allocation the kernel's OOM killer ends, inside a cgroup limited to 256 MiB (and
    no swap), so nothing outside it is touched: the kernel log gets the real lines
    ("Memory cgroup out of memory: Killed process ...") that the kernel probe reads."""

    name = "host-exhaustion"
    expect = ("host-exhaustion",)
    window_s = 6.0
    LIMIT = 256 * MIB
    OWN_KILLS = 1

    def unavailable(self) -> str | None:
        return _kmsg_problem() or _cgroup_problem()

    def bring_about(self, lab: Lab) -> None:
        self.group = Cgroup.make("evidence-lab-oom", self.LIMIT)
        victim = lab.spawn(self.group.argv([_named(lab, "model-loader"), "-c", GROW]))
        try:
            code = victim.wait(60)
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError("the allocation inside the cgroup was not stopped in 60 s") from exc
        kills = self.group.oom_kills()
        if code != -9 or kills < 1:
            raise RuntimeError(f"the allocation ended with {code}, {kills} OOM kills counted")

    def stop(self, lab: Lab) -> None:
        super().stop(lab)
        group, self.group = getattr(self, "group", None), None
        if group is not None:
            group.remove()


@register
class Healthy(HostScenario):
    """The machine at rest, with an ordinary process doing a little work twice a second.
    Where the core sources (memory, pressure, processes) can all be read, the honest answer
    is a claim about the machine: no-fault. On a kernel without PSI the pressure source is
    missing, and the honest answer is about the instruments: insufficient-evidence."""

    name = "healthy"
    window_s = 15.0
    REST_PSI = 1.0

    @property
    def expect(self) -> tuple[str, ...]:  # type: ignore[override]
        return ("insufficient-evidence",) if _psi_problem() else ("no-fault",)

    def bring_about(self, lab: Lab) -> None:
        # At rest means no stall left over from whatever ran before (PSI avg10 remembers
        # ~20 s); a machine that never rests is measured as it is.
        _wait_for_rest(self.REST_PSI, 30)
        lab.python(IDLE_WORK)
        time.sleep(1)
