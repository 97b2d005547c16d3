"""The incident window: the hours leading to the failure, and the machine's own before.

A verdict answers "what changed before the failure", not "what is true of the whole
look-back". The window ends at the failure (or at the capture when nothing failed) and
reaches INCIDENT_S back; the reference is everything earlier in the history: the same
machine on the same day, with its own rhythm. A queue that lasted the hour before the
failure is sustained for this incident, whatever share of the day it is.

Invariants:
- After a failure dated by an event (a target's fall, a kill), readings from that moment
  on are the aftermath (a dead engine releases its memory) and are cut, unless the cut
  would leave too little to read: then the aftermath is all there is, and is kept.
- A series with no history (the bundle's own thirty seconds) is all incident window and
  has no reference: rules then judge it as it is, as before there was a window.
- Pure: no clock, no I/O.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from evidence.analyze.failure import Failure

Series = Sequence[tuple[float, float | None]]

INCIDENT_S = 3 * 3600.0  # faults develop in the hours before the failure, not the day
RECENT_S = 3600.0  # "through the incident": the last hour before the failure
HISTORY_MIN_S = 2 * INCIDENT_S  # a reference needs at least as long again before the window
MIN_KEPT = 6  # the cut never leaves fewer readings than a shape needs


@dataclass(frozen=True)
class Window:
    end: float  # the failure, or the end of the capture when nothing failed
    failure: Failure | None
    cut: float | None  # readings at or after this are the failure's aftermath

    @property
    def start(self) -> float:
        return self.end - INCIDENT_S

    def upto(self, series: Series) -> list[tuple[float, float | None]]:
        """The series without the failure's aftermath."""
        if self.cut is None:
            return list(series)
        kept = [(t, v) for t, v in series if t < self.cut]
        return kept if sum(v is not None for _, v in kept) >= MIN_KEPT else list(series)

    def last(self, series: Series, seconds: float) -> list[tuple[float, float | None]]:
        """The readings of the `seconds` before the end (aftermath cut)."""
        return [(t, v) for t, v in self.upto(series) if t >= self.end - seconds]

    def incident(self, series: Series) -> list[tuple[float, float | None]]:
        return self.last(series, INCIDENT_S)

    def reference(self, series: Series) -> list[tuple[float, float | None]]:
        """The machine's own earlier behaviour: the history before the incident window."""
        return [(t, v) for t, v in series if t < self.start]

    def has_history(self, series: Series) -> bool:
        known = [t for t, v in series if v is not None]
        return bool(known) and self.end - known[0] >= HISTORY_MIN_S


def known(series: Series) -> list[float]:
    return [v for _, v in series if v is not None]


def share_above(series: Series, above: float) -> float | None:
    """Time-weighted share of the readings above `above` (None when nothing is known):
    each reading stands for the interval to the next, gaps over 3 steps count for none."""
    pts = [(t, v) for t, v in series if v is not None]
    if len(pts) < 2:
        return None
    steps = sorted(b[0] - a[0] for a, b in zip(pts, pts[1:], strict=False))
    limit = 3 * steps[len(steps) // 2]
    held = total = 0.0
    for (t, v), (t2, _) in zip(pts, pts[1:], strict=False):
        span = t2 - t
        if span > limit:
            continue
        total += span
        held += span if v > above else 0.0
    return held / total if total else None
