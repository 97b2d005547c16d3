"""What the benchmarks share: the results table and the description of the machine.

Figures, never assertions: a row says the goal, what was measured and whether it was met.
"""

import datetime
import os
import platform
import sys
from dataclasses import dataclass

MB = 1_000_000  # decimal megabytes: the stricter reading of "60 MB" and "5 MB"


@dataclass
class Row:
    measure: str
    goal: str
    measured: str
    verdict: str = ""


def verdict(ok: bool) -> str:
    return "met" if ok else "missed"


def fmt_s(seconds: float) -> str:
    return f"{seconds:.3f} s"


def fmt_mb(size: float) -> str:
    return f"{size / MB:.2f} MB"


def render(rows: list[Row]) -> str:
    heads = ("measure", "goal", "measured", "verdict")
    widths = [max(len(h), *(len(getattr(r, h)) for r in rows)) for h in heads]
    lines = []
    for i, row in enumerate([Row(*heads), *rows]):
        cells = [row.measure, row.goal, row.measured, row.verdict]
        lines.append(
            "  ".join(
                c.rjust(w) if j == 2 else c.ljust(w)
                for j, (c, w) in enumerate(zip(cells, widths, strict=True))
            ).rstrip()
        )
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def meminfo_total_bytes() -> int:
    with open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine(title: str) -> list[str]:
    """The header lines every benchmark starts with: what ran, where, when."""
    uname = os.uname()
    return [
        title,
        f"date:    {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"machine: {uname.nodename}, {os.cpu_count()} cores ({cpu_model()}), "
        f"{meminfo_total_bytes() / 2**30:.1f} GiB memory",
        f"kernel:  {uname.sysname} {uname.release} ({uname.machine})",
        f"python:  {platform.python_version()} ({sys.executable})",
    ]
