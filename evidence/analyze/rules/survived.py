"""Whose memory a kill freed: the engines' or another process's, read from what the engines
did through it and what the line gave back after it."""

from evidence.analyze.facts import Facts
from evidence.analyze.failure import engine_kill, late
from evidence.analyze.rules.ran_out import counted_kill_at, kills_in_history, recent_kills
from evidence.analyze.rules.rises import HELD_S
from evidence.analyze.rules.series import window
from evidence.analyze.rules.text import gib
from evidence.analyze.window import known

OUTLIVED_SHARE = 0.25  # a quarter of a rise still held once its supposed holder died


def freed_while_the_engines_answered(
    f: Facts, name: str, floor: float, risen: float, what: str
) -> str | None:
    """The kernel's counter says it killed, and the line `name` gave most of `what` (a
    rise, a step: from `floor` to `risen`) back in the minutes after, while every sign of
    the failure says an answer came too late: no target fell, no error came back, no kill
    line names an engine. An engine killed for what it held stops answering (refused, or
    an error from its manager); one that only answered late lived through the kill, and
    what the kill freed was another process's."""
    w = window(f)
    killed_at = counted_kill_at(f) if kills_in_history(f) else None
    if not w.failure or killed_at is None:
        return None
    if not all(late(sign.what) for sign in w.failure.signs):
        return None
    if any(engine_kill(text) for _, text in recent_kills(f)):
        return None
    # What the kill freed shows from the reading the counter rose at, which a failure
    # dated by a check at the capture may come minutes after.
    after = known([(t, v) for t, v in f.series[name] if killed_at <= t <= killed_at + HELD_S])
    if not after or min(after) - floor > OUTLIVED_SHARE * (risen - floor):
        return None
    return (
        f"the kill gave back {gib(risen - min(after))} of {what} while the engines only "
        f"answered late ({w.failure.what}): they lived through it, and what it freed was "
        "another process's (host-exhaustion)"
    )
