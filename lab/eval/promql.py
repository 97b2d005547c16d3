"""PromQL, as far as the collector and the seed ask it, over a scenario's scraped series.

Answers range queries with Prometheus' semantics (2.x, the version Debian ships): the
instants are start, start + step, ... up to end; at each, a series' value is its latest
sample at or before the instant, at most LOOKBACK_S old, else the series has no point
there (a gap stays a gap: nothing is interpolated or zero-filled). Supported: selectors
with =, !=, =~, !~ matchers, `or`, and + - * / between vectors (one-to-one on identical
label sets without __name__) and numbers. Arithmetic drops __name__; a plain selector
keeps it. Anything else raises ValueError naming the expression, so a query the
collector adds later fails loudly instead of reading as "nothing publishes this".

Also the same history as OpenMetrics text for `promtool tsdb create-blocks-from
openmetrics`, and a fake Prometheus HTTP API serving many scenarios from one port.
"""

import bisect
import math
import operator
import re
import threading
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

from lab.eval.world import RawSeries

LOOKBACK_S = 300  # Prometheus' default --query.lookback-delta
MAX_POINTS = 11000  # Prometheus refuses a range query of more points per series
VERSION = "2.42.0"  # what the fake says it is: Debian's, the one the real sample runs

Labels = dict[str, str]
Values = list[float | None]  # one per instant of the query; None: no point there
Vector = list[tuple[Labels, Values]]

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)
      | (?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)
      | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<op>=~|!~|!=|==|>=|<=|=|[{}(),+\-*/\[\]<>^%@!])
    )""",
    re.VERBOSE,
)
_ARITHMETIC: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": lambda a, b: a / b if b else (math.nan if a == 0 or math.isnan(a) else math.inf * a),
}
_MATCH: dict[str, Callable[[str, str], bool]] = {
    "=": lambda value, want: value == want,
    "!=": lambda value, want: value != want,
    "=~": lambda value, want: re.fullmatch(want, value) is not None,
    "!~": lambda value, want: re.fullmatch(want, value) is None,
}


def _unsupported(expr: str, why: str) -> ValueError:
    return ValueError(f"unsupported PromQL {expr!r}: {why}")


def _tokens(expr: str) -> list[tuple[str, str]]:
    out, at = [], 0
    while at < len(expr.rstrip()):
        match = _TOKEN.match(expr, at)
        if not match or match.end() == at:
            raise _unsupported(expr, f"cannot read {expr[at:].strip()[:20]!r}")
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        at = match.end()
    return out


@dataclass
class _Selector:
    matchers: list[tuple[str, str, str]]  # label, op, value (__name__ included)


@dataclass
class _Binary:
    op: str
    left: Any
    right: Any


class _Parser:
    """Recursive descent over the subset: or < + - < * / < (expr) | number | selector."""

    def __init__(self, expr: str):
        self.expr, self.tokens, self.at = expr, _tokens(expr), 0

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.at] if self.at < len(self.tokens) else ("end", "")

    def take(self, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token[0] == "end" or (value is not None and token[1] != value):
            raise _unsupported(self.expr, f"expected {value or 'more'}, found {token[1]!r}")
        self.at += 1
        return token

    def parse(self) -> Any:
        node = self.union()
        if self.peek()[0] != "end":
            raise _unsupported(self.expr, f"unexpected {self.peek()[1]!r}")
        return node

    def union(self) -> Any:
        node = self.binary(0)
        while self.peek() == ("name", "or"):
            self.take()
            node = _Binary("or", node, self.binary(0))
        return node

    def binary(self, level: int) -> Any:
        ops = (("+", "-"), ("*", "/"))[level]
        node = self.binary(level + 1) if level == 0 else self.atom()
        while self.peek()[0] == "op" and self.peek()[1] in ops:
            op = self.take()[1]
            node = _Binary(op, node, self.binary(level + 1) if level == 0 else self.atom())
        return node

    def atom(self) -> Any:
        kind, value = self.peek()
        if kind == "number":
            self.take()
            return float(value)
        if value == "(":
            self.take()
            node = self.union()
            self.take(")")
            return node
        if kind == "name" or value == "{":
            return self.selector()
        raise _unsupported(self.expr, f"unexpected {value or 'end'!r}")

    def selector(self) -> _Selector:
        matchers = []
        if self.peek()[0] == "name":
            name = self.take()[1]
            if name in ("or", "and", "unless", "by", "without", "on", "ignoring", "offset"):
                raise _unsupported(self.expr, f"the keyword {name!r}")
            if self.peek()[1] == "(":
                raise _unsupported(self.expr, f"the function {name}()")
            matchers.append(("__name__", "=", name))
        if self.peek()[1] == "{":
            self.take()
            while self.peek()[1] != "}":
                label = self.take()
                op = self.take()
                text = self.take()
                if label[0] != "name" or op[1] not in _MATCH or text[0] != "string":
                    raise _unsupported(self.expr, f"a matcher {label[1]}{op[1]}{text[1]}")
                matchers.append((label[1], op[1], _unquote(text[1])))
                if self.peek()[1] == ",":
                    self.take()
            self.take("}")
        return _Selector(matchers)


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m[1], m[1]), text[1:-1])


def _signature(labels: Labels) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in labels.items() if k != "__name__"))


def _nameless(labels: Labels) -> Labels:
    return {k: v for k, v in labels.items() if k != "__name__"}


class Store:
    """One scenario's scraped series, indexed for range queries."""

    def __init__(self, series: Iterable[RawSeries]):
        self.series: list[tuple[Labels, list[int], list[float]]] = []
        self.by_name: dict[str, list[int]] = {}
        for s in series:
            points = sorted(s.points)
            labels = dict(sorted({**s.labels, "__name__": s.name}.items()))
            self.by_name.setdefault(s.name, []).append(len(self.series))
            self.series.append(
                (labels, [round(t * 1000) for t, _ in points], [v for _, v in points])
            )

    def query_range(
        self, expr: str, start: float, end: float, step: float, shift: float = 0.0
    ) -> list[dict[str, Any]]:
        """The `result` of /api/v1/query_range: [{"metric", "values": [[t, "v"], ...]}],
        sorted by labels. `shift` is added to the asked times to read the history (a
        client whose "now" is the scenario's end) and taken off the answered ones."""
        step_ms = round(step * 1000)
        if step_ms <= 0:
            raise ValueError("step must be positive")
        start_ms, end_ms = round(start * 1000), round(end * 1000)
        if end_ms < start_ms:
            raise ValueError("end is before start")
        if (end_ms - start_ms) // step_ms + 1 > MAX_POINTS:
            raise ValueError(f"more than {MAX_POINTS} points per series: a larger step")
        shift_ms = round(shift * 1000)
        instants = [t + shift_ms for t in range(start_ms, end_ms + 1, step_ms)]
        result = self._eval(_Parser(expr).parse(), instants, expr)
        if not isinstance(result, list):
            raise _unsupported(expr, "a scalar result")
        out = [
            {
                "metric": labels,
                "values": [
                    [_seconds(t - shift_ms), format_value(v)]
                    for t, v in zip(instants, values, strict=True)
                    if v is not None
                ],
            }
            for labels, values in result
            if any(v is not None for v in values)
        ]
        return sorted(out, key=lambda s: sorted(s["metric"].items()))

    def _eval(self, node: Any, instants: list[int], expr: str) -> Vector | float:
        if isinstance(node, float):
            return node
        if isinstance(node, _Selector):
            return self._select(node, instants)
        left = self._eval(node.left, instants, expr)
        right = self._eval(node.right, instants, expr)
        if node.op == "or":
            if not isinstance(left, list) or not isinstance(right, list):
                raise _unsupported(expr, "`or` needs a vector on each side")
            return _union(left, right)
        return _arithmetic(node.op, left, right, expr)

    def _select(self, selector: _Selector, instants: list[int]) -> Vector:
        name = next((v for k, op, v in selector.matchers if k == "__name__" and op == "="), None)
        pool = self.by_name.get(name, []) if name is not None else range(len(self.series))
        out = []
        for i in pool:
            labels, times, values = self.series[i]
            if all(_MATCH[op](labels.get(k, ""), v) for k, op, v in selector.matchers):
                out.append((dict(labels), _at(times, values, instants)))
        return out


def _at(times: list[int], values: list[float], instants: list[int]) -> Values:
    """Each instant's latest sample within the look-back, else None."""
    out: Values = []
    lookback = LOOKBACK_S * 1000
    for t in instants:
        i = bisect.bisect_right(times, t) - 1
        out.append(values[i] if i >= 0 and times[i] >= t - lookback else None)
    return out


def _union(left: Vector, right: Vector) -> Vector:
    """`left or right`, instant by instant: all of left, and right's series at the
    instants where no left series with its label set (less __name__) has a point."""
    taken: dict[tuple, list[bool]] = {}
    for labels, values in left:
        marks = taken.setdefault(_signature(labels), [False] * len(values))
        for i, v in enumerate(values):
            marks[i] = marks[i] or v is not None
    out = list(left)
    for labels, values in right:
        marks = taken.get(_signature(labels))
        if marks is None:
            out.append((labels, values))
        else:
            out.append((labels, [None if m else v for v, m in zip(values, marks, strict=True)]))
    return out


def _arithmetic(op: str, left: Vector | float, right: Vector | float, expr: str) -> Vector | float:
    apply = _ARITHMETIC[op]
    if isinstance(left, float) and isinstance(right, float):
        return apply(left, right)
    if isinstance(right, float):
        return [
            (_nameless(lab), [None if v is None else apply(v, right) for v in vals])
            for lab, vals in left
        ]
    if isinstance(left, float):
        return [
            (_nameless(lab), [None if v is None else apply(left, v) for v in vals])
            for lab, vals in right
        ]
    # One-to-one matching, instant by instant: each side may hold one series per label set.
    n = len(left[0][1]) if left else 0
    out: dict[tuple, tuple[Labels, Values]] = {}
    for i in range(n):
        sides = []
        for side, name in ((left, "left"), (right, "right")):
            found: dict[tuple, float] = {}
            for labels, values in side:
                if values[i] is None:
                    continue
                sig = _signature(labels)
                if sig in found:
                    raise ValueError(
                        f"{expr!r}: many-to-many matching not allowed: "
                        f"duplicate series for {dict(sig)} on the {name} side"
                    )
                found[sig] = values[i]
            sides.append(found)
        for sig, a in sides[0].items():
            if sig in sides[1]:
                _labels, values = out.setdefault(sig, (dict(sig), [None] * n))
                values[i] = apply(a, sides[1][sig])
    return list(out.values())


def _seconds(ms: int) -> int | float:
    return ms // 1000 if ms % 1000 == 0 else ms / 1000


def format_value(v: float) -> str:
    """A sample value as Prometheus writes it (Go's FormatFloat(v, 'f', -1, 64))."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    text = repr(float(v))
    if "e" in text:
        text = format(Decimal(text), "f")
    return text[:-2] if text.endswith(".0") else text


def query_range(
    series: Iterable[RawSeries], expr: str, start: float, end: float, step: float
) -> list[dict[str, Any]]:
    """One range query over series (a Store per call: keep one for many queries)."""
    return Store(series).query_range(expr, start, end, step)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def openmetrics(series: Iterable[RawSeries], shift: float = 0.0) -> str:
    """The series as OpenMetrics text for promtool, every sample moved by shift seconds.

    Every family is declared a gauge: promtool takes a gauge under any name, where a
    counter would have to be declared without its _total, and the type does not change
    what a query answers."""
    families: dict[str, list[tuple[str, list[tuple[float, float]]]]] = {}
    for s in series:
        labels = ",".join(
            f'{k}="{_escape(v)}"' for k, v in sorted(s.labels.items()) if k != "__name__"
        )
        families.setdefault(s.name, []).append(
            (f"{s.name}{{{labels}}}" if labels else s.name, sorted(s.points))
        )
    lines = []
    for name, members in families.items():
        lines.append(f"# TYPE {name} gauge")
        for key, points in sorted(members):
            lines.extend(
                f"{key} {format_value(v)} {_seconds(round((t + shift) * 1000))}" for t, v in points
            )
    return "\n".join([*lines, "# EOF"]) + "\n"


def _time(text: str) -> float:
    """A Prometheus API time: unix seconds, or RFC 3339."""
    try:
        return float(text)
    except ValueError:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def _duration(text: str) -> float:
    """A Prometheus API step: seconds as a number, or a duration such as 5m or 1h30m."""
    try:
        return float(text)
    except ValueError:
        parts = re.findall(r"(\d+)(ms|s|m|h|d|w|y)", text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise ValueError(f"cannot parse {text!r} to a valid duration") from None
        return sum(int(n) * _UNITS[u] for n, u in parts)


class FakePrometheus:
    """A Prometheus HTTP API on a loopback ephemeral port, one scenario per path prefix:
    `<url>/s/<key>/api/v1/query_range` answers from that scenario's series, with its
    shift, so that one server answers every scenario and a client asking about its own
    "now" reads the scenario's end. Threaded; stop it with close() (or `with`)."""

    def __init__(self) -> None:
        self._stores: dict[str, tuple[Store, float]] = {}
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the http.server name)
                owner._answer(self, urllib.parse.urlsplit(self.path).query)

            def do_POST(self) -> None:  # noqa: N802
                size = int(self.headers.get("Content-Length") or 0)
                owner._answer(self, self.rfile.read(size).decode())

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass  # a request log would bury the report

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def add(self, key: str, series: Iterable[RawSeries] | Store, shift: float = 0.0) -> str:
        """Serve series under key, with the times asked moved by shift; returns its URL."""
        store = series if isinstance(series, Store) else Store(series)
        with self._lock:
            self._stores[key] = (store, shift)
        return f"{self.url}/s/{urllib.parse.quote(key, safe='')}"

    def remove(self, key: str) -> None:
        with self._lock:
            self._stores.pop(key, None)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "FakePrometheus":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _answer(self, request: BaseHTTPRequestHandler, form: str) -> None:
        path = urllib.parse.urlsplit(request.path).path
        match = re.fullmatch(r"/s/([^/]+)(/.*)", path)
        with self._lock:
            found = self._stores.get(urllib.parse.unquote(match[1])) if match else None
        if found is None:
            return _send(request, 404, b"404 page not found\n", "text/plain; charset=utf-8")
        store, shift = found
        route = match[2]
        if route == "/api/v1/status/buildinfo":
            data = {"version": VERSION, "revision": "fake", "branch": "HEAD", "goVersion": "go"}
            return _send(request, 200, orjson.dumps({"status": "success", "data": data}))
        if route == "/-/ready":
            return _send(request, 200, b"Prometheus Server is Ready.\n", "text/plain")
        if route != "/api/v1/query_range":
            return _send(request, 404, b"404 page not found\n", "text/plain; charset=utf-8")
        params = dict(urllib.parse.parse_qsl(form))
        try:
            result = store.query_range(
                params["query"],
                _time(params["start"]),
                _time(params["end"]),
                _duration(params["step"]),
                shift,
            )
        except (KeyError, ValueError) as exc:
            error = f"missing parameter {exc}" if isinstance(exc, KeyError) else str(exc)
            body = {"status": "error", "errorType": "bad_data", "error": error}
            return _send(request, 400, orjson.dumps(body))
        body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        return _send(request, 200, orjson.dumps(body))


def _send(
    request: BaseHTTPRequestHandler, status: int, body: bytes, kind: str = "application/json"
) -> None:
    request.send_response(status)
    request.send_header("Content-Type", kind)
    request.send_header("Content-Length", str(len(body)))
    request.end_headers()
    request.wfile.write(body)
