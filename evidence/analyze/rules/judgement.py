"""A rule's judgement of one fault, the points it weighs, and the registry every rule enters."""

from collections.abc import Callable
from dataclasses import dataclass, field

from evidence.analyze.facts import Facts

NOTE_IS_EVIDENCE = 3  # points of a distinguishing observation (classify.MIN_SCORE)


@dataclass
class Judgement:
    score: int = 0
    evidence_for: list[str] = field(default_factory=list)
    evidence_against: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    # The evidence is how a failure ended (an allocation failed, the engine that grew was
    # killed), which confirms a cause rather than being one (classify.py weighs it).
    ending: bool = False
    points: list[int] = field(default_factory=list)  # what each evidence_for line added

    def add(self, points: int, why: str) -> None:
        self.score += points
        self.points.append(points)
        self.evidence_for.append(why)


RULES: dict[str, Callable[[Facts], Judgement]] = {}


def rule(fault: str) -> Callable[[Callable[[Facts], Judgement]], Callable[[Facts], Judgement]]:
    def register(fn: Callable[[Facts], Judgement]) -> Callable[[Facts], Judgement]:
        RULES[fault] = fn
        return fn

    return register
