"""Stateful fake engines and a load generator for the lab: real processes on loopback that
answer in each engine's real format (shared/reference/formats.md, section named beside
each answer), hold real memory for their weights and caches, and change state only
because real clients sent them real requests.

Run as `python -m lab.fakes.engine --kind KIND --port PORT ...` (llama-server, vllm,
comfyui, llama-swap) and `python -m lab.fakes.load ...`. Static payload shapes come from
tests/fakes.py and the samples it reads (tests/fixtures/engines/), never copied here.

Invariants:
- Stdlib only: these run beside `evidence capture` on the same two cores.
- Memory a fake says it holds is resident: every page of every buffer is written once.
- A fake writes its ready file (pid, port) only once it listens and its weights are
  resident, atomically, so a scenario never reads half a file or a half-loaded engine.
"""

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

ROOT = Path(__file__).resolve().parent.parent.parent
if str(ROOT / "tests") not in sys.path:
    sys.path.append(str(ROOT / "tests"))
import fakes as payloads  # noqa: E402  (tests/fakes.py: the payload shapes and samples)

JSON = payloads.JSON
PAGE = 4096
MIB = 1024**2


class Held:
    """Named buffers of resident memory: the engine's weights and caches, for real."""

    def __init__(self) -> None:
        self._buffers: dict[str, list[bytearray]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _resident(nbytes: int) -> bytearray:
        buf = bytearray(nbytes)
        buf[::PAGE] = b"\x01" * len(range(0, nbytes, PAGE))  # calloc'd pages become RSS
        return buf

    def hold(self, name: str, nbytes: int) -> None:
        """One buffer of nbytes under name (replacing what it held)."""
        buf = self._resident(nbytes) if nbytes > 0 else None
        with self._lock:
            self._buffers[name] = [buf] if buf is not None else []

    def blocks(self, name: str, count: int, block_bytes: int) -> None:
        """Grow or shrink name to count blocks of block_bytes (a paged cache)."""
        with self._lock:
            current = self._buffers.setdefault(name, [])
            have = len(current)
        if count > have:
            fresh = [self._resident(block_bytes) for _ in range(count - have)]
            with self._lock:
                self._buffers[name].extend(fresh)
        elif count < have:
            with self._lock:
                del self._buffers[name][count:]

    def count(self, name: str) -> int:
        """How many blocks (or buffers) name holds."""
        with self._lock:
            return len(self._buffers.get(name, []))

    def release(self, name: str) -> None:
        with self._lock:
            self._buffers.pop(name, None)

    def total(self, prefix: str = "") -> int:
        with self._lock:
            return sum(
                len(b) for n, bufs in self._buffers.items() if n.startswith(prefix) for b in bufs
            )


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        return json.loads(self.body or b"{}")


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = JSON
    headers: dict[str, str] = field(default_factory=dict)


def as_json(value: Any, status: int = 200) -> Response:
    return Response(status, json.dumps(value).encode(), JSON)


Handler = Callable[[Request], Response]


class App:
    """Routes (method, exact path or prefix ending in '/') to handlers; one thread a request,
    so a handler that never returns (a hung device) blocks only its caller."""

    def __init__(self, fallback: Handler | None = None) -> None:
        self.routes: dict[tuple[str, str], Handler] = {}
        self.prefixes: list[tuple[str, str, Handler]] = []
        self.fallback = fallback

    def route(self, method: str, path: str) -> Callable[[Handler], Handler]:
        def add(fn: Handler) -> Handler:
            if path.endswith("/") and path != "/":
                self.prefixes.append((method, path, fn))
            else:
                self.routes[(method, path)] = fn
            return fn

        return add

    def handle(self, req: Request) -> Response:
        fn = self.routes.get((req.method, req.path))
        if fn is None:
            fn = next(
                (f for m, p, f in self.prefixes if m == req.method and req.path.startswith(p)),
                None,
            )
        if fn is None:
            if self.fallback is not None:
                return self.fallback(req)
            return Response(404, b"Not Found", "text/plain")
        return fn(req)

    def serve(self, port: int) -> ThreadingHTTPServer:
        app = self

        class Handle(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                req = Request(
                    self.command,
                    url.path,
                    parse_qs(url.query),
                    self.rfile.read(length) if length else b"",
                    {k.lower(): v for k, v in self.headers.items()},
                )
                try:
                    res = app.handle(req)
                except (ValueError, KeyError, TypeError) as exc:
                    res = as_json({"error": {"code": 400, "message": str(exc)}}, 400)
                try:
                    self.send_response(res.status)
                    self.send_header("Content-Type", res.content_type)
                    self.send_header("Content-Length", str(len(res.body)))
                    for k, v in res.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(res.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout): its loss, not the engine's

            do_GET = do_POST = do_PUT = do_DELETE = _any

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", port), Handle)
        server.daemon_threads = True
        return server


def write_ready(path: str | None, **info: Any) -> None:
    """The ready file, written whole and renamed into place."""
    if not path:
        return
    tmp = f"{path}.tmp"
    Path(tmp).write_text(json.dumps({"pid": os.getpid(), **info}))
    os.replace(tmp, path)


def words(n: int, seed: int = 0) -> list[str]:
    """n plain words: one word stands for one token throughout the lab."""
    vocab = ("the", "model", "answers", "with", "a", "short", "plain", "reply", "about", "it")
    return [vocab[(seed + i * 7) % len(vocab)] for i in range(n)]


def now_ms() -> int:
    return int(time.time() * 1000)
