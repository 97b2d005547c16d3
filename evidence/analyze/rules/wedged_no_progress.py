"""The rule for wedged-no-progress: "Really stuck: busy, and no progress"."""

from evidence.analyze.facts import Facts
from evidence.analyze.rules.context_length import stopped_for_the_cache
from evidence.analyze.rules.engine_log import PROGRESS, stopped_in_stats
from evidence.analyze.rules.judgement import Judgement, rule
from evidence.analyze.rules.series import readings, window

WEDGED_MIN_S = 10.0  # progress readings this far apart (two engine samples) can show nothing moved


@rule("wedged-no-progress")
def wedged_no_progress(f: Facts) -> Judgement:
    j = Judgement()
    counters = {name: words for name, words in PROGRESS if f.has(name)}
    values = {name: readings(f, name) for name in counters}
    slot_tokens = readings(f, "slot_tokens")
    if not counters and len(slot_tokens) < 2:
        stopped = stopped_in_stats(f)
        if stopped and window(f).failure:
            j.add(4, f"{stopped}: busy and nothing moved")
            if ended := stopped_for_the_cache(f):
                j.ending = True
                j.evidence_against.append(ended)
            return j
        j.missing.append(
            "an engine's progress counter (generated tokens, decode calls, or its slots' tokens)"
        )
        return j
    stamps = [
        t for name in (*counters, "slot_tokens") for t, v in f.series.get(name, []) if v is not None
    ]
    busy = [v for values in f.engine_load.values() for v in values]
    moved = {name: v[-1] - v[0] for name, v in values.items() if v[-1] != v[0]}
    if max(stamps) - min(stamps) < WEDGED_MIN_S:
        # Two readings a moment apart cannot show that nothing moved.
        j.missing.append(
            f"progress readings over at least {WEDGED_MIN_S:.0f} s (these span "
            f"{max(stamps) - min(stamps):.1f} s)"
        )
    elif "tokens_generated" not in moved and "tokens_prompt" in moved:
        j.evidence_against.append(
            f"no token generated, but {moved['tokens_prompt']:.0f} prompt tokens were "
            "processed: a long prompt being read is progress"
        )
    elif moved:
        said = ", ".join(f"{value:.0f} {counters[name]}" for name, value in moved.items())
        j.evidence_against.append(f"{said} in the window: busy but progressing")
    elif len(set(slot_tokens)) > 1:
        j.evidence_against.append(
            f"the busy slots' decoded tokens moved ({slot_tokens[0]:.0f} -> "
            f"{slot_tokens[-1]:.0f}): busy but progressing"
        )
    elif busy and min(busy) > 0:
        standing = (
            "; ".join(f"{words} {values[name][0]:.0f}" for name, words in counters.items())
            or f"slots' decoded tokens {slot_tokens[0]:.0f}"
        )
        j.add(
            4,
            f"busy through the window (queue never empty) and nothing moved ({standing}, "
            "before and after)",
        )
    return j
