"""Sizes and lines in words, as the rules write them, and sizes read back out of a line."""

import re

from evidence.analyze.facts import Facts

GIB = 1024**3


def gib(value: float | None) -> str:
    return "unknown" if value is None else f"{value / GIB:.1f} GiB"


def last(f: Facts, tag: str, width: int = 160) -> str:
    """The most recent log or kernel line carrying a tag, cut to width."""
    return f.lines[tag][-1][:width]


def blob(path: str) -> str:
    """A model's weights by their file's name, as short as the report can carry."""
    return path.rsplit("/", 1)[-1][:19]


_UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}


def byte_sizes(text: str) -> list[float]:
    return [float(n) * _UNITS.get(u, 1) for n, u in re.findall(r"([\d.]+) ?([KMGT]i?B|B)", text)]
