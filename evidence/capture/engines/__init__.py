"""Readers of model servers, model managers and render engines: one module per kind,
one registry, one interface.

A reader declares its endpoints (path, parser, whether the watch re-reads it); the
base class owns the requests, the deadlines, the statuses and the raw answers, so no
kind re-implements them. Every request is a GET through capture.httpget.

Invariants:
- The first endpoint is the engine's primary one. If it is absent or times out, the
  engine's other endpoints are not asked (they would cost the same timeout again) and
  are recorded as `skipped` with that reason. Once it answered, the others are asked
  side by side, so a hung one costs only its own timeout.
- A parser receives the answer and returns readings that keep the engine's own names
  and units; a parser that raises turns the endpoint into `error` with the raw kept.
- `identifies` says whether answers look like this kind, for engines found on a port
  rather than configured.
"""

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from evidence.capture import promtext
from evidence.capture.httpget import Answer, get
from evidence.capture.redact import scrub
from evidence.capture.sidebyside import side_by_side
from evidence.schemas import engine_kinds

RAW_BYTES = 64 * 1024
# A Prometheus page is kept whole up to this: vLLM 0.32's is 52-58 KB on one small model and
# grows with each model, engine and label value; readings nobody parses live only there.
EXPOSITION_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Endpoint:
    path: str
    parse: Callable[[Answer], dict[str, Any]]
    sampled: bool = False
    keep_tail: bool = False  # a log: the end matters, not the beginning
    raw_bytes: int = RAW_BYTES  # how much of the raw answer the bundle keeps


class Reader:
    kind: ClassVar[str]
    ports: ClassVar[tuple[int, ...]] = ()
    endpoints: ClassVar[tuple[Endpoint, ...]]

    def __init__(self, name: str, url: str, timeout_s: float):
        self.name, self.url, self.timeout_s = name, url.rstrip("/"), timeout_s

    def identifies(self, record: dict[str, Any]) -> bool:
        """Whether the primary endpoint answered in this kind's format."""
        return record["endpoints"][self.endpoints[0].path]["status"] == "ok"

    def snapshot(self, deadline: float) -> dict[str, Any]:
        return self._read(self.endpoints, deadline, keep_raw=True)

    def sample(self, deadline: float) -> dict[str, Any]:
        record = self._read(tuple(e for e in self.endpoints if e.sampled), deadline, keep_raw=False)
        return {k: record[k] for k in ("name", "kind", "status", "reason", "endpoints")}

    def _read(
        self, endpoints: tuple[Endpoint, ...], deadline: float, keep_raw: bool
    ) -> dict[str, Any]:
        if not endpoints:
            return self._record({}, {"status": "skipped", "reason": None})
        first, rest = endpoints[0], endpoints[1:]
        results = {first.path: self._ask(first, deadline, keep_raw)}
        primary = results[first.path]
        if primary["status"] in ("absent", "timeout", "skipped"):
            stop = f"{first.path} was {primary['status']}: {primary['reason']}"
            results |= {e.path: {"status": "skipped", "reason": stop} for e in rest}
            return self._record(results, primary)
        # Beside each other: one endpoint that hangs (a busy engine's slow /metrics, a
        # wedged /slots) costs its own timeout, not the readings of the ones after it.
        answers = side_by_side([lambda d, e=e: self._ask(e, d, keep_raw) for e in rest], deadline)
        for endpoint, entry in zip(rest, answers, strict=True):
            results[endpoint.path] = entry or {
                "status": "timeout",
                "reason": "still answering when the probe's time ran out",
            }
        return self._record(results, primary)

    def _ask(self, endpoint: Endpoint, deadline: float, keep_raw: bool) -> dict[str, Any]:
        left = deadline - time.monotonic()
        if left <= 0.05:
            return {"status": "skipped", "reason": "the probe's time ran out before this request"}
        answer = get(self.url + endpoint.path, min(self.timeout_s, left))
        return self._entry(endpoint, answer, keep_raw)

    def _record(self, results: dict[str, Any], primary: dict[str, Any]) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "url": self.url,
            "status": primary["status"],
            "reason": primary.get("reason"),
            "endpoints": results,
        }

    @staticmethod
    def _entry(endpoint: Endpoint, answer: Answer, keep_raw: bool) -> dict[str, Any]:
        entry = (
            answer.record(endpoint.raw_bytes)
            if keep_raw
            else {
                "status": answer.status,
                "reason": answer.reason,
                "http_status": answer.http_status,
                "elapsed_ms": round(answer.elapsed_ms, 1),
            }
        )
        if keep_raw and endpoint.keep_tail:
            entry["body"] = answer.body[-endpoint.raw_bytes :].decode("utf-8", "backslashreplace")
        elif keep_raw:
            entry["body"] = _scrubbed_body(answer, endpoint.raw_bytes)
        if answer.status == "ok":
            try:
                entry["readings"] = endpoint.parse(answer)
            except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
                entry["status"] = "error"
                entry["reason"] = f"the answer could not be parsed: {type(exc).__name__}: {exc}"
                if not keep_raw:  # a sample that fails to parse still keeps its evidence
                    entry["body"] = _scrubbed_body(answer, endpoint.raw_bytes)
        return entry


def _scrubbed_body(answer: Answer, keep_bytes: int) -> str:
    """The raw body, capped, unless its JSON holds a secret by key ({"auth": ...} in /props):
    text patterns cannot see that a value is secret, so such a body is kept as its JSON
    with those values redacted, re-serialised. The writer text-scrubs either."""
    raw = answer.body[:keep_bytes].decode("utf-8", "backslashreplace")
    try:
        data = answer.json()
    except ValueError:
        return raw
    clean = scrub(data)
    if clean == data:
        return raw
    return orjson.dumps(clean).decode()[:keep_bytes]


REGISTRY: dict[str, type[Reader]] = {}


def register(cls: type[Reader]) -> type[Reader]:
    REGISTRY[cls.kind] = cls
    return cls


def readers() -> dict[str, type[Reader]]:
    for entry in engine_kinds().values():  # evidence/schemas/engines.toml
        importlib.import_module(f"evidence.capture.engines.{entry['module']}")
    return REGISTRY


def json_object(answer: Answer) -> dict[str, Any]:
    """The body as a JSON object; anything else is a parse error."""
    data = answer.json()
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object, got {type(data).__name__}")
    return data


def openai_models(answer: Answer) -> dict[str, Any]:
    """GET /v1/models (OpenAI list): the served model ids and, where given, max_model_len."""
    data = json_object(answer)["data"]
    return {"models": [{"id": m["id"], "max_model_len": m.get("max_model_len")} for m in data]}


def status_only(answer: Answer) -> dict[str, Any]:
    """A health endpoint whose status code is the whole answer (vLLM, SGLang: 200 empty)."""
    return {"http_status": answer.http_status, "body": answer.text()[:200]}


def exposition(wanted: tuple[str, ...]) -> Endpoint:
    """An engine's /metrics, sampled through the window and kept whole in the snapshot."""
    return Endpoint("/metrics", metrics(wanted), sampled=True, raw_bytes=EXPOSITION_BYTES)


def metrics(wanted: tuple[str, ...]) -> Callable[[Answer], dict[str, Any]]:
    """A /metrics parser keeping the wanted samples under the engine's own names, and
    naming the wanted ones this engine did not publish."""

    def parse(answer: Answer) -> dict[str, Any]:
        samples = promtext.parse(answer.text())
        if not samples:
            raise ValueError("no samples in the Prometheus exposition")
        found, absent = promtext.select(samples, wanted)
        return {"metrics": found, "absent": absent, "samples_total": len(samples)}

    return parse


def published(record: dict[str, Any], path: str, prefix: str) -> bool:
    """Whether an endpoint's parsed metrics include any sample named prefix*."""
    readings = record["endpoints"].get(path, {}).get("readings") or {}
    return any(name.startswith(prefix) for name in readings.get("metrics", {}))
