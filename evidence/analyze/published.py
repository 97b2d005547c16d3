"""Which Prometheus metrics this machine was seen publishing, and where.

A guard rail over a metric nobody publishes is silent in exactly the way a healthy
machine is silent, so a rule may only name what a bundle saw. Two places count:

- Prometheus (`prometheus_series`, status ok): a series' `__name__`. Arithmetic and
  functions drop `__name__` (`DCGM_FI_DEV_FB_USED * 1024 * 1024 or ...`), so a nameless
  series is traced back to its query's expression: split at the top-level `or`, the
  operands whose metrics no named series of the query accounts for are the candidates.
  A bare selector keeps its name in Prometheus, so when both kinds remain, the nameless
  series came from the computed operands. The names are inferred only when exactly one
  operand remains and it cannot answer without its metrics (no `unless`, `absent`,
  `vector`); anything looser is left out and said in the notes.
- An engine's own /metrics (`samples`, source 'engine'): rows whose metric is a
  Prometheus metric name; the engine's other readings ('/queue:running') are not.

Invariants: reading only; a name is listed only when a row shows it; sources are
"prometheus" and "/metrics of <engine>", sorted with Prometheus first.
"""

import re

import duckdb

PROMETHEUS = "prometheus"
METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")

# PromQL words that look like identifiers but are not metrics.
KEYWORDS = frozenset((
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
    "offset", "bool", "atan2", "inf", "nan"
))  # fmt: skip
AGGREGATIONS = frozenset((
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk",
    "topk", "quantile", "limitk", "limit_ratio"
))  # fmt: skip
# An operand holding one of these can answer while a metric it names is missing.
_LOOSE = re.compile(r"(?<![\w:])(unless|absent|absent_over_time|vector)(?![\w:])")

_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"(?<![\w:])(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_OFFSET = re.compile(r"(?<![\w:])offset\s+-?[\w.]+|@\s*(?:start\(\)|end\(\)|[-+\d.e]+)")
_OR = re.compile(r"[()]|(?<![\w:])or(?![\w:])")
_IDENT = re.compile(r"(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?")
_BARE = re.compile(r"\(*\s*[a-zA-Z_:][a-zA-Z0-9_:]*\s*(\{\})?\s*\)*")


def _strip(expr: str) -> str:
    """The expression without strings, label matchers, ranges, grouping lists and offsets:
    what remains names metrics, functions, operators and numbers only."""
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub("{}", text)
    text = _RANGE.sub("", text)
    text = _GROUPING.sub("", text)
    return _OFFSET.sub("", text)


def metric_names(expr: str) -> list[str]:
    """The metric names a PromQL expression selects, in order of first appearance."""
    found: list[str] = []
    for match in _IDENT.finditer(_strip(expr)):
        name, call = match.group(1), match.group(2)
        if call or name.lower() in KEYWORDS or name in AGGREGATIONS or name in found:
            continue  # a function or aggregation call, an operator, or seen already
        found.append(name)
    return found


def operands(expr: str) -> list[str]:
    """The expression split at its top-level `or`, stripped as by metric_names."""
    text = _strip(expr)
    parts, depth, start = [], 0, 0
    for match in _OR.finditer(text):
        token = match.group(0)
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        elif depth == 0:
            parts.append(text[start : match.start()])
            start = match.end()
    parts.append(text[start:])
    return [p.strip() for p in parts]


def nameless_operand(expr: str, named: set[str]) -> tuple[str | None, int]:
    """The operand of `expr` behind its series without a metric name, when exactly one can
    be (None otherwise), and how many could."""
    left = [p for p in operands(expr) if not set(metric_names(p)) <= named]
    computed = [p for p in left if not _BARE.fullmatch(p)]
    left = computed or left  # Prometheus keeps __name__ on a bare selector
    return (left[0] if len(left) == 1 else None), len(left)


def _inferred(query: str, expr: str, named: set[str]) -> tuple[list[str], str | None]:
    """The metrics behind a query's nameless series, or none and why not."""
    operand, count = nameless_operand(expr, named)
    if operand is None:
        return [], (
            f"query {query!r} has series without a metric name that {count} operands of "
            f"{expr!r} could have produced: none of their metrics is counted as published"
        )
    if _LOOSE.search(operand):
        return [], (
            f"query {query!r} has series without a metric name from {operand!r}, which can "
            "answer while a metric it names is missing: none of them is counted as published"
        )
    return metric_names(operand), None


def scan(con: duckdb.DuckDBPyConnection, bundle_id: str) -> tuple[dict[str, list[str]], list[str]]:
    """published() and the notes of what could not be told (see the module docstring)."""
    seen: dict[str, set[str]] = {}
    notes: list[str] = []
    queries: dict[tuple[str, str], list[str | None]] = {}
    for query, expr, name in con.execute(
        "SELECT DISTINCT query, expr, labels['__name__'] FROM prometheus_series "
        "WHERE bundle_id = ? AND status = 'ok' AND labels IS NOT NULL ORDER BY ALL",
        [bundle_id],
    ).fetchall():
        queries.setdefault((query, expr or ""), []).append(name)
    for (query, expr), names in queries.items():
        named = {n for n in names if n}
        for n in named:
            seen.setdefault(n, set()).add(PROMETHEUS)
        if None in names:
            inferred, why = _inferred(query, expr, named)
            for n in inferred:
                seen.setdefault(n, set()).add(PROMETHEUS)
            if why:
                notes.append(why)
    for metric, engine in con.execute(
        "SELECT DISTINCT metric, labels['engine'] FROM samples "
        "WHERE bundle_id = ? AND source = 'engine' ORDER BY ALL",
        [bundle_id],
    ).fetchall():
        if METRIC_NAME.match(metric):
            seen.setdefault(metric, set()).add(f"/metrics of {engine or 'an engine'}")
    order = {PROMETHEUS: ""}  # Prometheus first, then the engines by name
    return {
        name: sorted(where, key=lambda w: order.get(w, w)) for name, where in sorted(seen.items())
    }, notes


def published(con: duckdb.DuckDBPyConnection, bundle_id: str) -> dict[str, list[str]]:
    """Every metric name this machine was seen publishing in the bundle -> where it was seen:
    "prometheus" (Prometheus has it, so a rule over it can fire) and/or "/metrics of <engine>"
    (the engine exposes it; a rule fires only once Prometheus scrapes it)."""
    return scan(con, bundle_id)[0]


def asked(con: duckdb.DuckDBPyConnection, bundle_id: str) -> set[str]:
    """Every metric the bundle asked Prometheus about, answered or not: a metric outside
    this set is unknown here, not absent."""
    exprs = con.execute(
        "SELECT DISTINCT expr FROM prometheus_series WHERE bundle_id = ? AND expr IS NOT NULL",
        [bundle_id],
    ).fetchall()
    return {name for (expr,) in exprs for name in metric_names(expr)}
