"""The rule for accelerator-oom: "An allocation on the accelerator failed"."""

import re

from evidence.analyze.facts import Facts
from evidence.analyze.rules.judgement import Judgement, rule
from evidence.analyze.rules.ran_out import CARD_OOM_TAGS
from evidence.analyze.rules.series import window
from evidence.analyze.rules.text import GIB, byte_sizes, gib, last


@rule("accelerator-oom")
def accelerator_oom(f: Facts) -> Judgement:
    j = Judgement()
    for tag in CARD_OOM_TAGS:
        if f.lines.get(tag):
            j.add(5, f"the log says so ({tag}): {last(f, tag, 200)}")
            j.ending = True
            sizes = _torch_sizes(f.lines[tag])
            if sizes:
                j.evidence_for.append(sizes)
            break
    if not j.score and f.lines.get("nv-no-memory"):
        # The driver prints it on successful starts too (a probe of what fits): alone a
        # note; beside a failure, how it ended.
        said = f"the driver said NV_ERR_NO_MEMORY: {last(f, 'nv-no-memory', 160)}"
        if window(f).failure:
            j.add(3, f"{said}, as {window(f).failure.what}")
            j.ending = True
        else:
            j.add(1, f"{said}; it is printed on starts that succeed too, and nothing failed")
    read = [p for p in ("logs", "kernel") if f.measured(p)]
    if not j.score:
        if read:
            j.evidence_against.append(f"no allocation failure in the {' and '.join(read)} read")
        if "logs" not in read:
            j.missing.append("the engines' logs ([[logs]] or an engine's unit/container)")
    return j


_TORCH_OLD = re.compile(
    r"Tried to allocate ([\d.]+ [KMG]iB) \(GPU \d+; ([\d.]+ [KMG]iB) total capacity; "
    r"([\d.]+ [KMG]iB) already allocated; ([\d.]+ [KMG]iB) free"
)
_TORCH_NEW = re.compile(
    r"Tried to allocate ([\d.]+ [KMG]iB)\. GPU \d+ has a total capacity of ([\d.]+ [KMG]iB) "
    r"of which ([\d.]+ [KMG]iB) is free\.(?: Including non-PyTorch memory, this process has "
    r"([\d.]+ [KMG]iB) memory in use)?"
)


def _torch_sizes(lines: list[str]) -> str | None:
    """What PyTorch's out-of-memory message states, in words: a small request failing on a
    full card is the card filled over time; a large one on a card with room is one request
    too big; a process holding far less than the card is sharing it."""
    for line in reversed(lines):
        if m := _TORCH_OLD.search(line):
            tried, total, held, free = (sum(byte_sizes(g)) for g in m.groups())
            mine = None
        elif m := _TORCH_NEW.search(line):
            tried, total, free = (sum(byte_sizes(g)) for g in m.groups()[:3])
            mine = sum(byte_sizes(m.group(4))) if m.group(4) else None
            held = mine
        else:
            continue
        said = f"it asked for {gib(tried)} with {gib(free)} of {gib(total)} free"
        if held is not None:
            said += f", {gib(held)} held by {'this process' if mine else 'PyTorch'}"
        others = total - free - mine if mine is not None else 0
        if others >= max(GIB, 0.1 * total):
            said += f"; {gib(others)} of the card is held by other processes"
        elif tried < 0.05 * total:
            said += ": a small request on a full card, the card filled before it"
        return said
    return None
