"""Model servers, model managers and render engines, read right after the processes: what
each one believes is loaded, queued and running, in its own words.

Configured engines ([[engines]]) are read as given. With none configured, the usual
local ports are tried (a refused connection costs nothing) and whatever answers is
identified by its answers; a listener that answers like no known engine is recorded
as unrecognised, not guessed at. Engines are read side by side, so a black-hole
engine costs its own timeout and not everybody's. Sampled every 5 s in the watch.
"""

import socket
import time
from typing import Any

from evidence.capture.config import Engine
from evidence.capture.engines import Reader, readers
from evidence.capture.probes import Context, Probe, Reading, register
from evidence.capture.sidebyside import side_by_side

DISCOVERY_CONNECT_S = 0.2
DISCOVERY_HOST = "127.0.0.1"
_MARGIN_S = 0.15
# The order a shared port is tried in: llama-swap fronts llama-server on 8080.
_PREFERENCE = ("llama-swap", "llama-server", "ollama", "comfyui", "a1111", "vllm", "sglang")


def _listening(port: int) -> bool:
    try:
        with socket.create_connection((DISCOVERY_HOST, port), timeout=DISCOVERY_CONNECT_S):
            return True
    except OSError:
        return False


@register
class Engines(Probe):
    name = "engines"
    order = 15
    priority = 850
    timeout_s = 2.0
    samples = True
    sample_interval_s = 5.0
    sample_timeout_s = 3.0

    def __init__(self, ctx: Context):
        super().__init__(ctx)
        self.readers: list[Reader] = []

    def freeze(self) -> Reading:
        deadline = (self.deadline or time.monotonic() + self.timeout_s) - _MARGIN_S
        kinds = readers()
        configured = self.ctx.config.engines
        discovery: list[dict[str, Any]] = []
        if configured:
            self.readers = [self._reader(kinds, e) for e in configured]
            records = side_by_side([r.snapshot for r in self.readers], deadline)
        else:
            records, discovery = self._discover(kinds, deadline)
        engines = [self._or_timeout(r, rec) for r, rec in zip(self.readers, records, strict=True)]
        # Re-read in the watch whatever answered, even with an error: it may recover or fail.
        self.readers = [
            r
            for r, rec in zip(self.readers, engines, strict=True)
            if rec["status"] in ("ok", "error")
        ]
        record = {
            "source": "config" if configured else "discovery",
            "engines": engines,
            "discovery": discovery,
        }
        if not engines:
            ports = sorted({p for cls in kinds.values() for p in cls.ports})
            return Reading(
                "absent",
                "no [[engines]] configured and no engine answering on "
                f"{DISCOVERY_HOST} ports {', '.join(map(str, ports))}",
                record,
            )
        if any(e["status"] == "ok" for e in engines):
            return Reading("ok", None, record)
        return Reading(engines[0]["status"], "no engine answered as expected", record)

    @staticmethod
    def _reader(kinds: dict[str, type[Reader]], engine: Engine) -> Reader:
        return kinds[engine.kind](engine.name, engine.url, engine.timeout_s)

    @staticmethod
    def _or_timeout(reader: Reader, record: dict[str, Any] | None) -> dict[str, Any]:
        if record is not None:
            return record
        return {
            "name": reader.name,
            "kind": reader.kind,
            "url": reader.url,
            "status": "timeout",
            "reason": "the engine was still answering when the probe's time ran out",
            "endpoints": {},
        }

    def _discover(
        self, kinds: dict[str, type[Reader]], deadline: float
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Try the usual ports; read whatever listens as each kind that uses the port, and
        keep the first kind whose answers it gives."""
        by_port: dict[int, list[type[Reader]]] = {}
        for kind in _PREFERENCE:
            for port in kinds[kind].ports:
                by_port.setdefault(port, []).append(kinds[kind])
        ports = sorted(by_port)
        open_ports = [
            p
            for p, up in zip(
                ports,
                side_by_side([lambda _d, p=p: _listening(p) for p in ports], deadline),
                strict=True,
            )
            if up
        ]

        def identify(port: int) -> Any:
            def job(job_deadline: float) -> tuple[Reader, dict[str, Any]] | None:
                for cls in by_port[port]:
                    reader = cls(cls.kind, f"http://{DISCOVERY_HOST}:{port}", 1.0)
                    record = reader.snapshot(job_deadline)
                    if reader.identifies(record):
                        return reader, record
                return None

            return job

        found = side_by_side([identify(p) for p in open_ports], deadline)
        discovery = []
        records = []
        for port, hit in zip(open_ports, found, strict=True):
            if hit is None:
                discovery.append(
                    {
                        "port": port,
                        "kind": None,
                        "note": "listening, but answers like none of "
                        + ", ".join(c.kind for c in by_port[port]),
                    }
                )
                continue
            reader, record = hit
            self.readers.append(reader)
            records.append(record)
            discovery.append({"port": port, "kind": reader.kind, "note": None})
        return records, discovery

    def sample(self) -> dict[str, Any] | None:
        if not self.readers:
            return None
        deadline = time.monotonic() + self.sample_timeout_s - 2 * _MARGIN_S
        records = side_by_side([r.sample for r in self.readers], deadline)
        return {
            "engines": [
                self._or_timeout(r, rec) for r, rec in zip(self.readers, records, strict=True)
            ]
        }

    def headline(self, record: dict[str, Any]) -> str:
        parts = []
        for e in record["engines"]:
            loaded = next(
                (
                    ep["readings"].get("loaded")
                    for ep in e["endpoints"].values()
                    if isinstance(ep.get("readings"), dict) and "loaded" in ep["readings"]
                ),
                None,
            )
            note = f", loaded: {', '.join(loaded) or 'none'}" if loaded is not None else ""
            parts.append(f"{e['name']} ({e['kind']}) {e['status']}{note}")
        return "; ".join(parts) or "no engines"
