"""Parsers for the kernel's text files (pure functions from text to plain data), and the
one reader of per-process files that every probe naming a pid shares.

Values stay as the kernel printed them (kB stay kB, counters stay cumulative); rates
and unit conversions belong to the analyst. Unknown keys are kept, never rejected:
every kernel adds some. Formats: ../shared/reference/formats.md section 8.
"""

import re
from pathlib import Path

_PSI = re.compile(r"^(some|full) avg10=([\d.]+) avg60=([\d.]+) avg300=([\d.]+) total=(\d+)$")
_OCTAL = re.compile(r"\\([0-7]{3})")


def parse_meminfo(text: str) -> dict[str, int]:
    """`MemTotal:  24683656 kB` -> {"MemTotal": 24683656}; kB, except HugePages_* counts."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        fields = rest.split()
        if sep and fields and fields[0].isdigit():
            out[key.strip()] = int(fields[0])
    return out


def parse_flat_keyed(text: str) -> dict[str, int]:
    """`name value` lines (/proc/vmstat, memory.events, memory.stat) -> {name: value}."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1].lstrip("-").isdigit():
            out[fields[0]] = int(fields[1])
    return out


def parse_pressure(text: str) -> dict[str, dict[str, float | int]]:
    """PSI text -> {"some": {"avg10", "avg60", "avg300", "total_us"}, "full": {...}}.

    Kernels before 5.13 print no `full` line for cpu; the key is then simply missing.
    """
    out: dict[str, dict[str, float | int]] = {}
    for line in text.splitlines():
        match = _PSI.match(line.strip())
        if match:
            kind, a10, a60, a300, total = match.groups()
            out[kind] = {
                "avg10": float(a10),
                "avg60": float(a60),
                "avg300": float(a300),
                "total_us": int(total),
            }
    return out


def parse_swaps(text: str) -> list[dict[str, str | int]]:
    """/proc/swaps rows -> [{"filename", "type", "size_kb", "used_kb", "priority"}]."""
    rows: list[dict[str, str | int]] = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 5:
            continue
        filename = _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), " ".join(fields[:-4]))
        rows.append(
            {
                "filename": filename,
                "type": fields[-4],
                "size_kb": int(fields[-3]),
                "used_kb": int(fields[-2]),
                "priority": int(fields[-1]),
            }
        )
    return rows


def free_view(
    meminfo_kb: dict[str, int], swaps: list[dict[str, str | int]] | None = None
) -> dict[str, int | None]:
    """The columns of free(1) in bytes, as procps-ng 4 computes them (used = total - available).

    A key the kernel does not print gives None, never 0.
    """

    def kb(key: str) -> int | None:
        value = meminfo_kb.get(key)
        return None if value is None else value * 1024

    total, free, available = kb("MemTotal"), kb("MemFree"), kb("MemAvailable")
    parts = [kb("Buffers"), kb("Cached"), kb("SReclaimable")]
    buff_cache = None if None in parts else sum(p for p in parts if p is not None)
    swap_total, swap_free = kb("SwapTotal"), kb("SwapFree")
    return {
        "total": total,
        "used": None if total is None or available is None else total - available,
        "free": free,
        "shared": kb("Shmem"),
        "buff_cache": buff_cache,
        "available": available,
        "swap_total": swap_total,
        "swap_used": None if swap_total is None or swap_free is None else swap_total - swap_free,
        "swap_free": swap_free,
        "swap_devices": None if swaps is None else len(swaps),
    }


_STATES = {
    "R": "running",
    "S": "sleeping",
    "D": "disk-sleep",
    "Z": "zombie",
    "T": "stopped",
    "t": "tracing-stop",
    "X": "dead",
    "I": "idle",
    "P": "parked",
    "W": "waking",
    "K": "wakekill",
}


def parse_pid_stat(text: str) -> dict[str, str | int]:
    """/proc/<pid>/stat -> name, state, ppid, pgid, start_ticks (since boot), rss_pages.

    The name is found between the first "(" and the last ")" because it may itself
    contain spaces and parentheses.
    """
    head, _, tail = text.rpartition(")")
    fields = tail.split()
    return {
        "name": head.partition("(")[2],
        "state": _STATES.get(fields[0], fields[0]),
        "ppid": int(fields[1]),
        "pgid": int(fields[2]),
        "start_ticks": int(fields[19]),  # field 22 of proc_pid_stat(5)
        "rss_pages": int(fields[21]),  # field 24
    }


def parse_kmsg_record(record: str) -> dict[str, int | str] | None:
    """One /dev/kmsg record `pri,seq,ts_us,flags[,...];message\\n[ KEY=value...]`.

    Returns level (0 emerg .. 7 debug), facility, seq, ts_us (since boot) and the text;
    continuation lines (device dictionaries) are dropped. None if not a record.
    """
    head, sep, body = record.partition(";")
    fields = head.split(",")
    if not sep or len(fields) < 3 or not all(f.isdigit() for f in fields[:3]):
        return None
    pri = int(fields[0])
    text = body.split("\n", 1)[0]
    return {
        "level": pri & 7,
        "facility": pri >> 3,
        "seq": int(fields[1]),
        "ts_us": int(fields[2]),
        "text": text,
    }


def read_text(path: Path) -> str | None:
    """A small kernel or sysfs text file, or None when it cannot be read.

    Bytes that are not UTF-8 (a mount point named in Latin-1) are replaced, never fatal.
    """
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def read_pid(proc: Path, pid: int, leaf: str) -> str | None:
    """/proc/<pid>/<leaf> as text, or None when the process is gone or hidden from us."""
    return read_text(proc / str(pid) / leaf)


def split_cmdline(text: str | None) -> list[str]:
    """/proc/<pid>/cmdline (NUL-separated, NUL-terminated) -> argv; [] for kernel threads."""
    argv = (text or "").split("\0")
    return argv[:-1] if argv[-1:] == [""] else argv


def who(proc: Path, pid: int) -> dict[str, str | list[str] | None]:
    """A pid's name and command line, for probes that learn pids from elsewhere (GPU lists).

    Both None when the process has gone or lives in another pid namespace.
    """
    comm, cmdline = read_pid(proc, pid, "comm"), read_pid(proc, pid, "cmdline")
    return {
        "name": comm.strip() if comm else None,
        "cmdline": split_cmdline(cmdline) if cmdline is not None else None,
    }
