"""The health checks' answers: a shallow layer answering while a deeper one failed, engines
that never answered, a 200 with nothing in it."""

from typing import Any

import orjson

from evidence.analyze.facts import Facts


def contrast(f: Facts) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Checks of the shallow layer that passed, and of the deep layer that failed."""
    passed = [c for c in f.checks if c["ok"] and c["kind"] in ("tcp", "http")]
    # A completion that came back 200 with nothing in it was answered: that is a result
    # without content (silent-empty-result), not a layer that failed to answer.
    failed = [
        c
        for c in f.checks
        if not c["ok"] and c["kind"] in ("completion", "command", "http") and not empty_200(c)
    ]
    return passed, failed


def silent_engines(f: Facts) -> list[dict[str, Any]]:
    """The engines that accepted the connection and never answered at the capture."""
    return [e for e in f.engines if e["status"] == "timeout"]


def answer_of(check: dict[str, Any]) -> dict[str, Any]:
    return orjson.loads(check["answer"]) if check["answer"] else {}


def empty_200(check: dict[str, Any]) -> bool:
    answer = answer_of(check)
    return answer.get("http_status") == 200 and answer.get("content_chars") == 0
