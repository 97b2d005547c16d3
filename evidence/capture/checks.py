"""Health checks that probe the layer that fails (the seeds' first rule of health checking).

- `http`: a GET expecting a status and, optionally, body text or a JSON field.
- `completion`: one small OpenAI-compatible chat completion with a generous token
  budget. HTTP 200 with finish reason "stop" and an empty content is a failure: the
  reasoning ate the budget and the caller got nothing (Plate 04, the silent success).
  This is the collector's one request that is not a GET, and only because the operator
  configured it.
- `command`: a forked command that must exit 0 in time: proves userspace can still fork
  (Plate 03: ping answered through an outage that ssh could not get through).
- `tcp`: a connect only, kept to show the contrast with the layers above it.

Every check is bounded by its timeout; the checks run side by side. A result holds the
check's full answer, which is what goes into the bundle's health record.
"""

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import time
from typing import Any
from urllib.parse import urlparse

import orjson

from evidence.capture.config import Check
from evidence.capture.httpget import Answer, fetch, get
from evidence.capture.sidebyside import side_by_side

KEEP_BYTES = 16 * 1024
OUTPUT_HEAD = 2000


def run_all(checks: tuple[Check, ...]) -> list[dict[str, Any]]:
    """Every check, side by side; results in the configured order."""
    if not checks:
        return []
    # The grace past the longest timeout covers a command's kill and reap.
    deadline = time.monotonic() + max(c.timeout_s for c in checks) + 2
    results = side_by_side([lambda _d, c=c: run(c) for c in checks], deadline)
    return [
        r or _result(c, "timeout", "the check did not finish", 0.0, {})
        for r, c in zip(results, checks, strict=True)
    ]


def run(check: Check) -> dict[str, Any]:
    start = time.monotonic()
    status, reason, answer = _KINDS[check.kind](check)
    return _result(check, status, reason, (time.monotonic() - start) * 1000, answer)


def _result(
    check: Check, status: str, reason: str | None, elapsed_ms: float, answer: dict[str, Any]
) -> dict[str, Any]:
    return {
        "name": check.name,
        "kind": check.kind,
        "target": check.url or check.command,
        "ok": status == "ok",
        "status": status,
        "reason": reason,
        "elapsed_ms": round(elapsed_ms, 1),
        "timeout_s": check.timeout_s,
        "answer": answer,
    }


def _failed_answer(answer: Answer) -> tuple[str, str, dict[str, Any]]:
    """A request that got no usable answer: absent, timeout, or the HTTP error."""
    return answer.status, answer.reason or answer.status, answer.record(KEEP_BYTES)


def _http(check: Check) -> tuple[str, str | None, dict[str, Any]]:
    answer = get(str(check.url), check.timeout_s)
    if answer.http_status is None:
        return _failed_answer(answer)
    record = answer.record(KEEP_BYTES)
    if answer.http_status != check.expect_status:
        return "failed", f"HTTP {answer.http_status}, expected {check.expect_status}", record
    if check.expect_text and check.expect_text not in answer.text():
        return "failed", f"the body does not contain {check.expect_text!r}", record
    if check.json_field:
        try:
            value: Any = answer.json()
            for key in check.json_field.split("."):
                value = value[int(key)] if isinstance(value, list) else value[key]
        except (ValueError, KeyError, IndexError, TypeError):
            return "failed", f"the answer has no JSON field {check.json_field!r}", record
        if check.json_value is not None and str(value) != check.json_value:
            return (
                "failed",
                f"{check.json_field} is {value!r}, expected {check.json_value!r}",
                record,
            )
    return "ok", None, record


def _completion(check: Check) -> tuple[str, str | None, dict[str, Any]]:
    body = {
        "model": check.model,
        "max_tokens": check.max_tokens,
        "stream": False,
        "messages": [{"role": "user", "content": check.prompt}],
    }
    import urllib.request

    headers = {"Content-Type": "application/json"}
    key = os.environ.get(check.api_key_env) if check.api_key_env else None
    if key:
        headers["Authorization"] = f"Bearer {key}"  # sent, never recorded
    request = urllib.request.Request(
        str(check.url), data=orjson.dumps(body), method="POST", headers=headers
    )
    answer = fetch(request, check.timeout_s)
    if answer.http_status is None or answer.http_status >= 400:
        return _failed_answer(answer)
    record = answer.record(KEEP_BYTES)
    try:
        choice = answer.json()["choices"][0]
        message = choice.get("message") or {}
        content = message.get("content") or ""
        reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
        usage = answer.json().get("usage")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return "failed", f"HTTP {answer.http_status} but not a chat completion", record
    finish = choice.get("finish_reason")
    record.update(
        finish_reason=finish,
        content_chars=len(content),
        reasoning_chars=len(reasoning),
        usage=usage,
    )
    if not content.strip():
        why = (
            f"; the reasoning field holds {len(reasoning)} characters: the reasoning ate the budget"
            if reasoning
            else ""
        )
        return (
            "failed",
            f"HTTP {answer.http_status}, finish_reason {finish!r}, but the content is empty{why}",
            record,
        )
    return "ok", None, record


def _command(check: Check) -> tuple[str, str | None, dict[str, Any]]:
    argv = shlex.split(str(check.command))
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        # ENOMEM / EAGAIN here is the finding: userspace could not fork.
        return "failed", f"could not start {argv[0]}: {exc.strerror}", {"argv": argv}
    try:
        out, err = proc.communicate(timeout=check.timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the check's own child, started just now
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=0.5)
        return "timeout", f"{argv[0]} did not finish within {check.timeout_s:g} s", {"argv": argv}
    answer = {
        "argv": argv,
        "exit_code": proc.returncode,
        "stdout": out[-OUTPUT_HEAD:].decode("utf-8", "backslashreplace"),
        "stderr": err[-OUTPUT_HEAD:].decode("utf-8", "backslashreplace"),
    }
    if proc.returncode != 0:
        return "failed", f"{argv[0]} exited {proc.returncode}", answer
    return "ok", None, answer


def _tcp(check: Check) -> tuple[str, str | None, dict[str, Any]]:
    url = urlparse(str(check.url))
    port = url.port or (443 if url.scheme == "https" else 80)
    answer = {"host": url.hostname, "port": port}
    try:
        with socket.create_connection((url.hostname, port), timeout=check.timeout_s):
            return "ok", None, answer
    except ConnectionRefusedError:
        return "absent", "nothing is listening (connection refused)", answer
    except TimeoutError:
        return "timeout", f"no connection within {check.timeout_s:g} s", answer
    except OSError as exc:
        return "error", f"{type(exc).__name__}: {exc}", answer


_KINDS = {"http": _http, "completion": _completion, "command": _command, "tcp": _tcp}
