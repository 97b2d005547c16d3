"""The collector's only HTTP client: bounded in time and size, no proxies.

Invariants:
- GET only (`get`). The collector never changes a service's state; the one exception,
  the completion health check the operator configured, builds its own POST in
  capture/checks.py and sends it through `fetch`.
- The answer's status says which layer failed: `absent` (nothing listening: refused),
  `timeout` (the port accepts but the application does not answer in time: the seeds'
  "port accepts, application dead"), `error` (HTTP error, with status and body head).
- Proxy variables are ignored: the engines are on this machine, and an answer must not
  be routed, or a URL leaked, through a proxy.
- A URL's userinfo (`http://user:pw@host`) is HTTP basic auth: urllib would take it for
  part of the host name. It becomes an Authorization header, kept off redirects, and
  leaves the URL, so no answer, reason or record carries the password.
"""

from __future__ import annotations

import base64
import socket
import time
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

import orjson

BODY_HEAD = 300
if TYPE_CHECKING:
    import urllib.request


@cache
def _opener() -> urllib.request.OpenerDirector:
    # urllib.request (with http.client and email) costs ~50 ms to import: paid only by a
    # capture that has an engine or a Prometheus to ask, not by every freeze.
    import urllib.request

    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class Answer:
    url: str
    status: str  # ok | absent | timeout | error
    reason: str | None = None
    http_status: int | None = None
    elapsed_ms: float = 0.0
    body: bytes = b""
    truncated: bool = False
    headers: dict[str, str] = field(default_factory=dict)

    def text(self) -> str:
        return self.body.decode("utf-8", "backslashreplace")

    def json(self) -> Any:
        """The body as JSON; raises ValueError (orjson.JSONDecodeError) if it is not."""
        return orjson.loads(self.body)

    def record(self, keep_bytes: int) -> dict[str, Any]:
        """The answer as it goes into a bundle: status, timing and the raw body, capped."""
        return {
            "url": self.url,
            "status": self.status,
            "reason": self.reason,
            "http_status": self.http_status,
            "elapsed_ms": round(self.elapsed_ms, 1),
            "bytes": len(self.body),
            "truncated": self.truncated or len(self.body) > keep_bytes,
            "content_type": self.headers.get("content-type"),
            "body": self.body[:keep_bytes].decode("utf-8", "backslashreplace"),
        }


def refused(url: str, timeout_s: float) -> str | None:
    """A reason if nothing listens at url's host and port (a bare connect, no urllib)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout_s):
            return None
    except ConnectionRefusedError:
        return "nothing is listening (connection refused)"
    except OSError:
        return None  # let the request itself say what is wrong


def get(
    url: str,
    timeout_s: float,
    max_bytes: int = 4 * 1024 * 1024,
    headers: dict[str, str] | None = None,
) -> Answer:
    """GET url within timeout_s in all (connect, headers and body), reading at most max_bytes."""
    import urllib.request

    return fetch(
        urllib.request.Request(url, method="GET", headers=headers or {}), timeout_s, max_bytes
    )


def fetch(
    request: urllib.request.Request, timeout_s: float, max_bytes: int = 4 * 1024 * 1024
) -> Answer:
    """Send a prepared request within timeout_s in all; the answer says which layer failed."""
    import urllib.error

    _basic_auth(request)
    url = request.full_url
    start = time.monotonic()
    deadline = start + timeout_s
    try:
        with _opener().open(request, timeout=timeout_s) as response:
            body, truncated = _read(response, deadline, max_bytes)
            return Answer(
                url,
                "ok",
                http_status=response.status,
                body=body,
                truncated=truncated,
                headers={k.lower(): v for k, v in response.headers.items()},
                elapsed_ms=(time.monotonic() - start) * 1000,
            )
    except urllib.error.HTTPError as exc:
        body = exc.read(BODY_HEAD) if exc.fp else b""
        head = body.decode("utf-8", "backslashreplace").strip()
        return Answer(
            url,
            "error",
            f"HTTP {exc.code} {exc.reason}: {head}".rstrip(": "),
            http_status=exc.code,
            body=body,
            elapsed_ms=(time.monotonic() - start) * 1000,
        )
    except (urllib.error.URLError, OSError, ValueError) as exc:
        cause = getattr(exc, "reason", exc)
        elapsed = (time.monotonic() - start) * 1000
        if isinstance(cause, ConnectionRefusedError):
            return Answer(
                url, "absent", "nothing is listening (connection refused)", elapsed_ms=elapsed
            )
        if isinstance(cause, TimeoutError | socket.timeout):
            return Answer(url, "timeout", f"no answer within {timeout_s:g} s", elapsed_ms=elapsed)
        return Answer(url, "error", f"{type(cause).__name__}: {cause}", elapsed_ms=elapsed)


def _basic_auth(request: urllib.request.Request) -> None:
    """Move the URL's user and password into an Authorization header (unless one is set)."""
    from urllib.parse import unquote, urlsplit, urlunsplit

    parts = urlsplit(request.full_url)
    if parts.username is None:
        return
    request.full_url = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    if not request.has_header("Authorization"):
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        token = base64.b64encode(pair.encode()).decode()
        request.add_unredirected_header("Authorization", f"Basic {token}")


def _read(response: Any, deadline: float, max_bytes: int) -> tuple[bytes, bool]:
    """Read the body as it arrives, so a server that trickles cannot outlast the deadline.

    read1 returns what one receive brings: read(n) would wait for all n bytes, and a
    server sending a byte a second keeps every receive inside its socket timeout.
    """
    chunks: list[bytes] = []
    size = 0
    while size <= max_bytes:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the body did not arrive in time")
        _receive_within(response, left)
        chunk = response.read1(min(65536, max_bytes + 1 - size))
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)[:max_bytes], True


def _receive_within(response: Any, seconds: float) -> None:
    """Bound the next receive by the time left, not by the whole request's timeout.

    http.client gives no public handle on the socket; its SocketIO keeps it as _sock.
    """
    sock = getattr(getattr(response.fp, "raw", None), "_sock", None)
    if sock is not None:
        sock.settimeout(seconds)
