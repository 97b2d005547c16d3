"""The rule for silent-empty-result: "Success with nothing in it"."""

from evidence.analyze.facts import Facts
from evidence.analyze.rules.checks import answer_of, empty_200
from evidence.analyze.rules.judgement import Judgement, rule


@rule("silent-empty-result")
def silent_empty_result(f: Facts) -> Judgement:
    j = Judgement()
    completions = [c for c in f.checks if c["kind"] == "completion"]
    if not completions:
        j.missing.append("a completion check (evidence check, kind = completion)")
    for c in completions:
        answer = answer_of(c)
        if empty_200(c):
            j.add(
                4,
                f"{c['name']}: HTTP 200, finish_reason {answer.get('finish_reason')!r}, "
                "empty content",
            )
            if answer.get("reasoning_chars"):
                j.add(
                    1,
                    f"the reasoning field held {answer['reasoning_chars']} characters: "
                    "it ate the budget",
                )
        elif c["ok"]:
            j.evidence_against.append(f"{c['name']} answered with content")
    return j
