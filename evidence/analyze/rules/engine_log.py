"""What an engine's log and stats lines say of its work: requests that waited their turn,
the counters that move as it works, a stats line of nothing done."""

import re

from evidence.analyze.facts import Facts
from evidence.analyze.rules.pressure import stalled
from evidence.analyze.rules.series import median, readings, window

SLOW_ANSWER_S = 60.0  # a minute per answer is a queue for a chat engine, not generation
PROGRESS_LINES = 3  # three answered requests in the log's tail: the application works
GAVE_UP_SHARE = 0.2  # a fifth of the log's requests cancelled by their callers: they waited
GAVE_UP_LINES = 5  # ... and five at least: one impatient user is not a queue


_GO_DURATION = re.compile(r"\|\s*\d{3}\s*\|\s*((?:[\d.]+(?:h|ms|µs|us|m|s))+)\s*\|")
_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "µs": 1e-6, "us": 1e-6}


def _seconds(go: str) -> float:
    """A Go duration as Gin prints it (1m2.5s, 182.2s, 850ms) in seconds."""
    return sum(float(n) * _GO_UNITS[u] for n, u in re.findall(r"([\d.]+)(h|ms|µs|us|m|s)", go))


def _slow_answers(f: Facts) -> str | None:
    """Without a queue metric (Ollama publishes none) the access log still says how long
    each answer took: minutes per answer, while a check timed out, is requests waiting
    their turn (the seeds: the friendlier version of the fault is latency, not memory)."""
    took = [
        _seconds(m.group(1))
        for line in f.lines.get("request-done", [])
        if (m := _GO_DURATION.search(line))
    ]
    timed_out = any(c["status"] == "timeout" for c in f.checks)
    if len(took) < PROGRESS_LINES or not timed_out or median(took) < SLOW_ANSWER_S:
        return None
    if stalled(f):
        return None  # the machine stalled on memory: answers crawl for swapping, not a queue
    return (
        f"the log's last {len(took)} answers took {median(took):.0f} s each (median) while "
        "a check timed out: requests waited their turn"
    )


def waited_in_log(f: Facts) -> str | None:
    """The engine's log says requests waited their turn: answers that took minutes, or
    callers that gave up before theirs."""
    return _slow_answers(f) or _gave_up(f)


def _gave_up(f: Facts) -> str | None:
    """Without a queue metric, llama-server's log still says when callers stopped waiting:
    a share of its last requests cancelled before their answer while it kept answering
    the others, before a failure. Requests waited their turn, unless the machine stalled
    on memory (then every answer crawled)."""
    cancelled = len(f.lines.get("request-cancelled", []))
    done = f.lines.get("request-done", [])
    # Older builds log a request twice (its slot's release and its access line).
    answered = len([line for line in done if "stop processing" in line] or done)
    kept = "answering the rest"
    if not answered:
        # A tail cut before the releases were written (an engine that died with every
        # slot busy) still shows its slots taking the next task, which a hung loop never does.
        answered, kept = _slots_turned_over(f), "taking the next request into its slots"
    total = cancelled + answered
    if not window(f).failure or cancelled < GAVE_UP_LINES or cancelled < GAVE_UP_SHARE * total:
        return None
    if answered < PROGRESS_LINES or stalled(f):
        return None
    return (
        f"{cancelled} of the last {total} requests in the engine's log were cancelled by "
        f"their callers before an answer, while it kept {kept}: requests waited their turn"
    )


_SLOT_ID = re.compile(r"launch_slot_: id\s+(\d+)")


def _slots_turned_over(f: Facts) -> int:
    """How many times a slot of llama-server's log took a task after an earlier one: each
    time, the task before it had ended."""
    seen: set[str] = set()
    again = 0
    for line in f.lines.get("request-started", []):
        if m := _SLOT_ID.search(line):
            again += m.group(1) in seen
            seen.add(m.group(1))
    return again


def stopped_in_stats(f: Facts) -> str | None:
    """The engine's last stats line says it did nothing for its interval: no token read or
    generated while requests waited (or, in two lines running, while they ran: a request
    that arrived just before a line may not have had its first step)."""
    lines = f.stats
    if not lines or lines[-1].throughput != 0:
        return None
    if any(f.has(name) for name, _ in PROGRESS) or len(readings(f, "slot_tokens")) >= 2:
        return None  # a progress counter says it better than one line's interval
    last = lines[-1]
    idle_twice = len(lines) >= 2 and lines[-2].throughput == 0 and lines[-2].running
    if not (last.waiting or (last.running and idle_twice)):
        return None
    return (
        f"the engine's last stats line says {last.running} running and {last.waiting} "
        "waiting at 0.0 tokens/s read or generated since the line before"
    )


# Counters that move when an engine works: generated tokens, prompt tokens read, and
# llama.cpp's decode calls (its generated-token counter moves only as a request finishes).
PROGRESS = (
    ("tokens_generated", "tokens generated"),
    ("tokens_prompt", "prompt tokens processed"),
    ("decode_calls", "decode calls"),
)
