"""evidence's own metrics in Prometheus' text format, kept where node-exporter and
`evidence serve` read them.

Each command that has something to say (check, capture, ingest, the recorder) writes
its own part, <archive>/metrics/<part>.prom, and, where a textfile directory is
configured, the same text as <dir>/evidence_<part>.prom for node-exporter's textfile
collector. A metric family belongs to exactly one part: node-exporter merges the files
and refuses a family that two of them declare differently.

Invariants: a part is replaced atomically (a temporary file in the same directory,
renamed over it; node-exporter reads only *.prom, so it never sees the temporary);
no sample carries a timestamp (node-exporter rejects them); label values and help text
are escaped as the format requires. Standard library only: the collector, the analyst
and the recorder all write here.
"""

import contextlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

METRICS = "metrics"
PREFIX = "evidence_"
SUFFIX = ".prom"


@dataclass
class Family:
    """One metric family: a name, its type (gauge or counter), its help, its samples."""

    name: str
    kind: str
    help: str
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)

    def add(self, value: float, **labels: str) -> "Family":
        self.samples.append((labels, value))
        return self

    def each(self, label: str, values: dict[str, float]) -> "Family":
        """One sample per key, the key as `label`, in key order."""
        for key, value in sorted(values.items()):
            self.add(value, **{label: key})
        return self


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def number(value: float) -> str:
    """A sample value as Prometheus writes it: integers bare, NaN and the infinities named."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def exposition(families: list[Family]) -> str:
    """The families as Prometheus' text format (version 0.0.4), without timestamps."""
    lines = []
    for family in families:
        lines.append(f"# HELP {family.name} {_escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        for labels, value in family.samples:
            inner = ",".join(f'{k}="{_escape_label(v)}"' for k, v in sorted(labels.items()))
            series = f"{family.name}{{{inner}}}" if inner else family.name
            lines.append(f"{series} {number(value)}")
    return "\n".join(lines) + "\n" if lines else ""


def _replace(path: Path, text: str, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.chmod(tmp, mode)  # the umask may have narrowed it
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def publish(root: Path, part: str, families: list[Family], textfile: str | None) -> list[str]:
    """Write one part into the archive and, when `textfile` names a directory, for
    node-exporter. Returns what could not be written, one line each: metrics are never
    worth failing the command that produced them."""
    text = exposition(families)
    problems = []
    kept = root / METRICS
    try:
        kept.mkdir(mode=0o700, exist_ok=True)
        _replace(kept / f"{part}{SUFFIX}", text, 0o600)
    except OSError as exc:
        problems.append(f"{kept}: cannot write metrics: {exc.strerror}")
    if textfile:
        # Readable by node-exporter's user: the directory's owner decides who that is.
        target = Path(textfile) / f"{PREFIX}{part}{SUFFIX}"
        try:
            _replace(target, text, 0o644)
        except OSError as exc:
            problems.append(f"{target}: cannot write the textfile: {exc.strerror}")
    return problems


def scrape(root: Path) -> str:
    """Every part kept in the archive, as one exposition (what `evidence serve` answers
    on /metrics)."""
    kept = root / METRICS
    try:
        names = sorted(p for p in kept.iterdir() if p.name.endswith(SUFFIX))
    except OSError:
        return ""
    texts = []
    for path in names:
        with contextlib.suppress(OSError):
            texts.append(path.read_text())
    return "".join(texts)
