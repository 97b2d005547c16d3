"""The rule for false-liveness: "Reachable is not healthy"."""

from evidence.analyze.facts import Facts
from evidence.analyze.rules.checks import contrast, silent_engines
from evidence.analyze.rules.context_length import stopped_for_the_cache
from evidence.analyze.rules.engine_log import (
    PROGRESS,
    PROGRESS_LINES,
    stopped_in_stats,
    waited_in_log,
)
from evidence.analyze.rules.judgement import Judgement, rule
from evidence.analyze.rules.series import window
from evidence.analyze.window import RECENT_S, known

WORKING_S = 300.0  # progress counters that moved in the last minutes: the application works


@rule("false-liveness")
def false_liveness(f: Facts) -> Judgement:
    j = Judgement()
    passed, failed = contrast(f)
    if passed and failed:
        j.add(
            4,
            f"{passed[0]['name']} ({passed[0]['kind']}) answered while "
            f"{failed[0]['name']} ({failed[0]['kind']}) failed: {failed[0]['reason']}",
        )
    silent = silent_engines(f)
    for e in silent:
        j.add(
            3,
            f"{e['name']} accepted the connection and never answered: the port is "
            "up, the application is not",
        )
    working = _working(f)
    if j.score and working:
        # Requests kept being answered: the application was not stuck, it was behind. Where
        # its own endpoints answered at the capture too, only the deep check's wait is left.
        hung = bool(silent)
        j.score = j.score - 2 if hung else min(j.score - 2, 1)
        j.evidence_against.append(
            f"{working}: it was working, not stuck"
            + ("" if hung else ", and the engines' own endpoints answered at the capture")
        )
    if j.score and (ended := stopped_for_the_cache(f)):
        # Nothing answered because the engine stopped behind its full cache.
        j.ending = True
        j.evidence_against.append(ended)
    queue = _queued_at_capture(f)
    if j.score and queue:
        # The engine answered and was working through a queue: the deep check waited its
        # turn. That is the queue (concurrency), not a layer that stopped answering: what
        # is left is a note, which cannot tie with the queue's own evidence.
        j.score = min(j.score - 2, 1)
        j.evidence_against.append(f"the engine answered and {queue}: the timeout is the queue")
    if not f.checks and not f.engines:
        j.missing.append("health checks or engines to contrast")
    elif not j.score:
        j.evidence_against.append("every layer that was asked answered")
    return j


def _working(f: Facts) -> str | None:
    """The engine answering requests up to the failure, in words: answered requests in its
    log's tail, or its progress counters moving in the last readings before the end."""
    done = f.lines.get("request-done", [])
    if len(done) >= PROGRESS_LINES:
        return f"the engine's log shows {len(done)} requests answered (the last: {done[-1][:120]})"
    tail = f.stats[-PROGRESS_LINES:]
    if len(tail) == PROGRESS_LINES and all(r.throughput for r in tail):
        # vLLM and SGLang say what they read and generated since their line before.
        return (
            f"the engine's last {PROGRESS_LINES} stats lines say it read or generated tokens "
            f"in each ({tail[-1].throughput:.0f} tokens/s in the last)"
        )
    w = window(f)
    for name, words in PROGRESS:
        pts = [(t, v) for t, v in w.upto(f.series.get(name, [])) if v is not None and t <= w.end]
        # The last reading inside the last minutes, against the one before it (a scrape
        # every few minutes holds one reading there).
        if len(pts) < 2 or pts[-1][0] < w.end - WORKING_S:
            continue
        (t0, v0), (t1, v1) = pts[-2], pts[-1]
        if v1 > v0:
            return (
                f"{v1 - v0:.0f} {words} between readings {w.end - t0:.0f} s and "
                f"{w.end - t1:.0f} s before the end"
            )
    return None


def _queued_at_capture(f: Facts) -> str | None:
    """Requests waiting in the last readings before the capture, or answers that took
    minutes each, in words."""
    w = window(f)
    waiting = known(w.last(f.series.get("requests_waiting", []), RECENT_S / 4))
    if waiting and max(waiting) > 0:
        return f"{max(waiting):.0f} requests waited in the minutes before"
    if f.stats and f.stats[-1].waiting > 0 and not stopped_in_stats(f):
        return f"{f.stats[-1].waiting} requests waited in the engine's last stats line"
    return waited_in_log(f)
