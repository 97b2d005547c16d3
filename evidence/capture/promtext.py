"""The Prometheus text exposition format (what /metrics of vLLM, SGLang and llama-server
serves), parsed into (name, labels, value) samples.

Sample names are kept exactly as exposed (counters keep `_total`); HELP and TYPE lines
are skipped; label order is not relied on; `NaN` and `+Inf` are kept as strings so
they survive JSON. Format: https://prometheus.io/docs/instrumenting/exposition_formats/
"""

import re

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}

Sample = tuple[str, dict[str, str], float | str]


def parse(text: str) -> list[Sample]:
    """Every sample line; a line that does not parse is skipped, never guessed at."""
    samples = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parsed = _line(line)
        if parsed is not None:
            samples.append(parsed)
    return samples


def _line(line: str) -> Sample | None:
    match = _NAME.match(line)
    if not match:
        return None
    name, rest = match.group(0), line[match.end() :]
    labels: dict[str, str] = {}
    if rest.startswith("{"):
        close = _closing_brace(rest)
        if close < 0:
            return None
        body = rest[1:close]
        pos = 0
        while pos < len(body):
            label = _LABEL.match(body, pos)
            if not label:
                return None
            labels[label.group(1)] = re.sub(
                r"\\\\|\\\"|\\n", lambda m: _UNESCAPE[m.group(0)], label.group(2)
            )
            pos = label.end()
        rest = rest[close + 1 :]
    fields = rest.split()
    if not fields:
        return None
    return name, labels, _value(fields[0])


def _closing_brace(text: str) -> int:
    quoted = escaped = False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch == "}" and not quoted:
            return i
    return -1


def _value(text: str) -> float | str:
    try:
        value = float(text)
    except ValueError:
        return text
    if value != value or value in (float("inf"), float("-inf")):
        return text  # NaN and infinities stay as Prometheus wrote them
    return value


def select(samples: list[Sample], wanted: tuple[str, ...]) -> tuple[dict[str, list], list[str]]:
    """The wanted sample names ({name: [{labels, value}]}) and the ones that were absent."""
    found: dict[str, list] = {}
    for name, labels, value in samples:
        if name in wanted:
            found.setdefault(name, []).append({"labels": labels, "value": value})
    return found, [name for name in wanted if name not in found]
