"""The rule for orphaned-gpu-holder: "A crashed engine's leftover holding memory"."""

from typing import Any

from evidence.analyze.facts import Facts
from evidence.analyze.recognise import ENGINE_WORDS, belongs
from evidence.analyze.rules.judgement import Judgement, rule
from evidence.analyze.rules.memory import card_full
from evidence.analyze.rules.models import SQUAT_GPU_BYTES, list_known, who
from evidence.analyze.rules.ran_out import card_ran_out
from evidence.analyze.rules.text import GIB, gib


@rule("orphaned-gpu-holder")
def orphaned_gpu_holder(f: Facts) -> Judgement:
    j = Judgement()
    if not f.gpu_devices:
        j.missing.append("per-process accelerator memory")
        return j
    table = {p["pid"]: p for p in f.processes}
    for p in f.gpu_processes:
        used = p["used_bytes"]
        if used is not None and used < SQUAT_GPU_BYTES:
            continue
        kinds = [k for k in ENGINE_WORDS if belongs(who(f, p), k)]
        if not kinds:
            continue
        why = _orphaned(f, p, table, kinds)
        if why:
            held = "an amount NVML did not say" if used is None else gib(used)
            j.add(4, f"pid {p['pid']} ({p['name']}) holds {held} of accelerator memory, {why}")
    for d in f.gpu_devices:
        listed = [p for p in f.gpu_processes if p["device_index"] == d["device_index"]]
        used = d["memory_used_bytes"]
        if used is None or d["unified_memory"] or not list_known(f, d, listed):
            continue
        rest = used - sum(p["used_bytes"] for p in listed)
        if rest > 2 * GIB:
            said = f"{gib(rest)} of GPU {d['device_index']}'s memory is held by no listed process"
            if card_ran_out(f) or card_full(f):
                j.add(2, said)
            else:
                # The driver's own reservations go unlisted too; with the card roomy, what
                # it holds kept nothing out.
                j.add(1, f"{said}; the card had room")
    return j


def _orphaned(
    f: Facts, holder: dict[str, Any], table: dict[int, dict[str, Any]], kinds: list[str]
) -> str | None:
    """Why a GPU holder of an engine is left behind, or None. Re-parented to init, with no
    engine of its kind answering; or its parent gone from the table or not of its engine
    (the shell or supervisor that launched it) while nothing listens on its engine's port:
    a hung engine still accepts, an orphan's server is gone."""
    mine = [e for e in f.engines if e["kind"] in kinds]
    if any(e["status"] == "ok" for e in mine):
        return None
    row = table.get(holder["pid"])
    ppid = row["ppid"] if row else None
    if ppid == 1:
        return "re-parented to init, and no engine of its kind answers"
    parent = table.get(ppid) if ppid is not None else None
    gone = [e for e in mine if e["status"] != "timeout"]
    if row is None or not gone:
        return None
    if parent is None:
        return f"its parent (pid {ppid}) is gone, and nothing listens on its engine's port"
    if not any(belongs(parent, k) for k in kinds):
        return (
            f"its parent is {parent['name']} (pid {ppid}), not its engine, and nothing "
            "listens on its engine's port"
        )
    return None
