"""The rule for swap-not-unloaded: "A model swap that never unloaded"."""

import re
from typing import Any

from evidence.analyze import shapes
from evidence.analyze.facts import Facts
from evidence.analyze.failure import came_up, fell, is_server, rose, up_since
from evidence.analyze.recognise import belongs
from evidence.analyze.rules.context_length import model_contexts
from evidence.analyze.rules.floors import unload_staircase
from evidence.analyze.rules.judgement import Judgement, rule
from evidence.analyze.rules.memory import (
    SHARED_JUMP,
    is_card,
    memory_lines,
    memory_series,
    pool_size,
    ran_low_in_history,
    shared_pool,
)
from evidence.analyze.rules.models import (
    MODEL_MIN_BYTES,
    MODEL_SHARE,
    SQUAT_GPU_BYTES,
    descendants,
    is_manager_process,
    list_known,
    loaded_models,
    single_model,
    who,
)
from evidence.analyze.rules.processes import arrival
from evidence.analyze.rules.ran_out import card_ran_out, killed, memory_ran_out
from evidence.analyze.rules.rises import (
    LOAD_TAKES_S,
    MODEL_LOADS_S,
    card_stayed,
    engine_climbed,
    passed_between,
    rested,
    rise,
    rise_time,
)
from evidence.analyze.rules.series import (
    HOUR_S,
    at,
    by_hour,
    history,
    median,
    targets_began,
    up_through,
    window,
)
from evidence.analyze.rules.survived import freed_while_the_engines_answered
from evidence.analyze.rules.text import GIB, blob, gib
from evidence.analyze.statlines import go_time
from evidence.analyze.window import INCIDENT_S, known

ROOM_LEFT = 0.9  # a memory line under this share of its pool still had room
BIG_MODEL_SHARE = 0.10  # a step of a tenth of the pool that stays to a failure, on a box
#                         whose manager loads models on demand, is a model
ONE_LOAD_S = 900.0  # a model's weights read in at disk speed, seen over a few scrapes
LEVEL_SHARE = 0.02  # a line that moved under 2% of its pool for hours held its level
SWAP_LOOKS_H = (24, 8, 2)  # hours read for a step: a second model loaded in the last hours
KEPT_LOOK_S = 3 * 3600.0  # a model kept this long before the incident window still counts
COINCIDE_S = 1200.0  # a step within 20 min of a server coming up came with it
OVERDUE_S = 120  # a model listed this long after its unload time did not unload


def _engine_holders(f: Facts) -> list[dict[str, Any]]:
    """Processes holding accelerator memory, largest first (unknown sizes last)."""
    return sorted(f.gpu_processes, key=lambda p: -(p["used_bytes"] or 0))


@rule("swap-not-unloaded")
def swap_not_unloaded(f: Facts) -> Judgement:
    j = Judgement()
    loaded = loaded_models(f)
    one_model: str | None = None  # what says the manager's one model is alone
    if loaded is None:
        j.missing.append("a model manager's loaded set (llama-swap /running, Ollama /api/ps)")
    if not f.measured("gpu") or not f.gpu_devices:
        j.missing.append("per-process accelerator memory")
    elif loaded is not None:
        count = sum(len(models) for models in loaded.values())
        kinds = {e["kind"] for e in f.engines if e["name"] in loaded}
        # Only the processes the managers run: another engine's memory is not a model they
        # forgot (that is a squatter, or simply another tenant).
        # A manager runs whatever its config says (llama-swap may start vLLM): its own
        # children count too, whatever their name.
        children = descendants(f, {p["pid"] for p in f.processes if is_manager_process(p, kinds)})
        holders = [
            p
            for p in _engine_holders(f)
            if (p["used_bytes"] or 0) >= SQUAT_GPU_BYTES
            and (p["pid"] in children or any(belongs(who(f, p), kind) for kind in kinds))
        ]
        said = "; ".join(f"{m} says {', '.join(v) or 'nothing'} loaded" for m, v in loaded.items())
        if not count:
            # Nothing listed: only llama-swap's own children speak against it (a process
            # of an engine's name elsewhere may be an orphan or another tenant), and not
            # while it starts or stops one (that memory is on its way in or out). Ollama
            # lists no model while it loads, so its runner holding memory is no contradiction.
            moving = any(m["engine"] in loaded and m["state"] for m in f.models)
            swaps = {p["pid"] for p in f.processes if is_manager_process(p, {"llama-swap"})}
            kept = descendants(f, swaps) if "llama-swap" in kinds and not moving else set()
            holders = [p for p in holders if p["pid"] in kept]
        if len(holders) > count:
            held = ", ".join(
                f"pid {p['pid']} {p['name'] or '?'} {gib(p['used_bytes'])}" for p in holders
            )
            j.add(
                5,
                f"two sources disagree: {said}, the accelerator holds memory for "
                f"{len(holders)} process{'es' if len(holders) > 1 else ''} ({held})",
            )
        elif not count and (held := _held_beside_nothing(f)):
            if unload_staircase(f):
                j.evidence_against.append(
                    f"{said}, yet {held}; but that memory grew at every unload: a leak in "
                    "the runtime, not one model kept"
                )
            else:
                j.add(3, f"two sources disagree: {said}, yet {held}")
        else:
            j.evidence_against.append(f"the model manager and the accelerator agree ({said})")
            # Alone only where the card said who holds it (NVML on a shared pool may not).
            if count == 1 and len(holders) == 1:
                one_model = "the manager lists one model and the card holds it alone"
    if loaded is not None and not f.gpu_processes:
        one_model = _one_model_in_log(f, loaded)
    overdue = _overdue(f) or _slept_holding(f) or _loaded_beside(f)
    if overdue:
        j.add(3, overdue)
    memory = memory_series(f)
    if memory and history(f, memory[0]):
        before = j.score
        _step_with_a_server(f, j, one_model)
        second = _second_engine(f) if j.score == before else None
        if second:
            j.add(3, second)
    elif memory:
        step = shapes.step(f.series[memory[0]], fmt=gib)
        if step.verdict and (step.size or 0) > 0:
            ratchet = shapes.ratchet(f.series[memory[0]], fmt=gib)
            if ratchet.verdict:
                # Bursts, each leaving the floor higher: the best single split of a
                # staircase is a step too, but no one load made it.
                j.evidence_against.append(
                    f"{memory[1]} rose in steps, one after each burst, not in one: {ratchet.why}"
                )
            else:
                j.add(2, f"{memory[1]} stepped up and stayed: {step.why}")
    return j


def _one_model_in_log(f: Facts, loaded: dict[str, list[str]]) -> str | None:
    """Where the card does not say who holds it (NVML on a shared pool lists nobody),
    Ollama's log says what it loaded: one model's weights, load after load (unloaded when
    idle, loaded again when asked), and the manager lists no other. A second model kept
    beside it would have a load line of its own."""
    weights = {load.model for load in f.loads}
    if len(weights) != 1 or len(f.loads) < 2 or sum(map(len, loaded.values())) > 1:
        return None
    return (
        f"the engine's log loads only {blob(weights.pop())} ({len(f.loads)} times) and the "
        "manager lists no other model"
    )


def _loaded_beside(f: Facts) -> str | None:
    """The engine's last load in its log was of other weights than a runner still holding
    accelerator memory at the capture, and the card ran out: the model in place was not
    unloaded for the next (Ollama keeping a runner it should have evicted)."""
    if not f.loads or not card_ran_out(f):
        return None
    wanted = f.loads[-1].model
    if any(grew and name == blob(wanted) for name, _, grew in model_contexts(f)):
        return None  # the load that failed asked for a longer context: the creep's
    for holder in _engine_holders(f):
        cmd = list(who(f, holder).get("cmdline") or [])
        at = cmd.index("--model") + 1 if "--model" in cmd else len(cmd)
        if at >= len(cmd) or cmd[at] == wanted or (holder["used_bytes"] or 0) < SQUAT_GPU_BYTES:
            continue
        return (
            f"the log's last load was {blob(wanted)} while pid {holder['pid']} still held "
            f"{gib(holder['used_bytes'])} for {blob(cmd[at])}, and the card ran out: the "
            "model in place was not unloaded for the next"
        )
    return None


def _held_beside_nothing(f: Facts) -> str | None:
    """A manager says nothing is loaded while a card that lists no processes (AMD, WSL)
    holds a model's worth. Where the list is read, the holders speak for themselves."""
    for d in f.gpu_devices:
        used, total = d["memory_used_bytes"], d["memory_total_bytes"]
        if not used or not total or d["unified_memory"]:
            continue
        listed = [p for p in f.gpu_processes if p["device_index"] == d["device_index"]]
        if list_known(f, d, listed):
            continue
        if used >= max(MODEL_MIN_BYTES, MODEL_SHARE * total):
            return f"{d['name']} holds {gib(used)} of {gib(total)}"
    return None


def _overdue(f: Facts) -> str | None:
    """Ollama lists a model until its runner has stopped, with the time it was to be
    unloaded: a model still listed well past it is an unload that did not happen (what
    `ollama ps` shows as 'Stopping...')."""
    captured = f.bundle["started_at"].timestamp()
    for m in f.models:
        when = go_time(m.get("expires_at"))
        if when is not None and captured - when > OVERDUE_S:
            size = f" ({gib(m['size_bytes'])})" if m["size_bytes"] else ""
            return (
                f"{m['engine']} still lists {m['model']}{size} "
                f"{(captured - when) / 60:.0f} min after it was to be unloaded"
            )
    return None


def _slept_holding(f: Facts) -> str | None:
    """An engine that says it put its model away while the memory stayed. vLLM's sleep mode
    says what it freed and what is still in use: a sleep that freed less than stayed did
    not put the model away (sleep without its allocator is a no-op). llama-server says only
    that it is sleeping (--sleep-idle-seconds): its process still holding a model's worth
    of the card after its last such line is the same unload that did not happen."""
    for line in reversed(f.lines.get("engine-sleep", [])):
        m = re.search(r"Sleep mode freed ([\d.]+) GiB memory, ([\d.]+) GiB memory is still", line)
        if m:
            freed, kept = (float(g) * GIB for g in m.groups())
            if kept >= MODEL_MIN_BYTES and freed < kept:
                return (
                    f"the engine went to sleep and freed {gib(freed)}, with {gib(kept)} "
                    f"still in use: {line[:160]}"
                )
            return None
        if "exiting sleeping state" in line:
            return None  # awake again: its memory is its model's
        if "entering sleeping state" in line:
            held = [
                p
                for p in _engine_holders(f)
                if (p["used_bytes"] or 0) >= MODEL_MIN_BYTES and belongs(who(f, p), "llama-server")
            ]
            if held:
                return (
                    f"the engine said it is sleeping ({line[:120]}) while pid {held[0]['pid']} "
                    f"still holds {gib(held[0]['used_bytes'])} of the accelerator"
                )
            return None
    return None


def _step_with_a_server(f: Facts, j: Judgement, one_model: str | None) -> None:
    """A step up the size of a model that stays to the failure, at the moment a second
    server came up: the seeds' decisive coincidence, sized against the machine. Where the
    manager's one model is known to be alone (`one_model` says how), the step was that
    model loading."""
    w = window(f)
    if w.failure and any(sign.source == "kill" for sign in w.failure.signs):
        # The kernel killed the engine: what it lists at the capture is after its restart,
        # not the set it held when the memory ran out.
        one_model = None
    came_up = _servers_started(f)
    reloaded_at: list[float] = []  # when the card's step was its one model loaded again
    for name, label in memory_lines(f):
        pool = pool_size(f, name) or 0
        series = w.upto(f.series[name])
        model = max(MODEL_SHARE * pool, MODEL_MIN_BYTES)
        # Both levels must last a tenth of what is read: a long look for an old step, a
        # short one for a model loaded minutes before the failure. A long look that finds
        # only a ripple on a flat day does not hide the model-sized step a short one finds.
        steps = [
            found
            for hours in SWAP_LOOKS_H
            if (
                found := shapes.step([p for p in series if p[0] >= w.end - hours * HOUR_S], fmt=gib)
            ).verdict
            and (found.size or 0) > 0
        ]
        if not steps:
            continue
        step = next((s for s in steps if (s.size or 0) >= model), steps[0])
        # A long look splits the line anywhere in the wobbles before the jump: the same
        # step (to the same level) found by a shorter look is timed by its sharpest split.
        step = min(
            (
                s
                for s in steps
                if (s.size or 0) >= min(model, step.size or 0)
                and abs((s.after or 0) - (step.after or 0)) <= LEVEL_SHARE * pool
            ),
            key=lambda s: rise_time(series, s),
        )
        size = step.size or 0
        if size < model:
            j.evidence_against.append(
                f"the {label} step is {gib(size)}, too small for a second model on "
                f"{gib(pool)}: {step.why}"
            )
            continue
        began, reached = rise(series, step)
        took = reached - began
        if card_stayed(f, name, (began - HOUR_S, began), (reached, reached + HOUR_S)):
            j.evidence_against.append(
                f"the {label} stepped up {gib(size)} while the accelerator's line stayed "
                "where it was: the engine's own memory, not a model loaded to be served"
            )
            continue
        if took > LOAD_TAKES_S and passed_between(series, step, began, reached):
            # A model loads within the hour; a level reached over hours is a climb (a leak, a
            # growing cache) that a split into two levels only approximates. Hours with no
            # reading between the levels are a level held (a smaller model) and then a jump.
            j.evidence_against.append(
                f"the {label} rose {gib(size)} over {took / HOUR_S:.1f} h: a climb, not a "
                "model loaded at once"
            )
            continue
        # A server that came up while no other went down: a model added, not one swapped
        # for another (a hand-over replaces the memory, it does not step it up). Its own
        # fall minutes later is its death, of the memory it could not get.
        fell_at = {key: down for key, s in f.targets.items() if (down := fell(s)) is not None}
        # A model loads and its cache fills over a ramp: a server that came up anywhere on
        # it, or within COINCIDE_S of it, came with the step.
        with_server = [
            (t, target)
            for t, target in came_up
            if began - COINCIDE_S <= t <= reached + COINCIDE_S
            and not any(
                abs(t - down) <= COINCIDE_S for other, down in fell_at.items() if other != target
            )
        ]
        # No target for it, but the engine's log says a model it had not loaded before came
        # up with the step; a card that stood at that level before loads it again (the
        # host's earlier levels may be anything else's).
        if not with_server and not one_model:
            loaded = _loaded_then(f, began, reached)
            again = name == "accelerator_used" and _stood_there(series, began, step.after, model)
            with_server = [] if again else loaded
            if unlogged := _no_load_logged(f, began, reached):
                j.evidence_against.append(f"the {label} stepped up {gib(size)}, but {unlogged}")
                continue
        holders = [p for p in f.gpu_processes if (p["used_bytes"] or 0) >= SQUAT_GPU_BYTES]
        # Only the card's line is the engines' alone: the host's earlier levels may be
        # anything else's (a build, a browser).
        if (
            not with_server
            and name == "accelerator_used"
            and (stood := _stood_there(series, began, step.after, model))
        ):
            j.evidence_against.append(
                f"the {label} stepped up {gib(size)} to where it stood for an hour earlier "
                f"({gib(stood[1])} {at(f, stood[0])}): the model loaded on demand again, "
                "not a second one"
            )
            reloaded_at.append(began)
            continue
        if name == "memory_used" and any(abs(began - t) <= COINCIDE_S for t in reloaded_at):
            # On a shared pool the host's line holds the card's; elsewhere a load reads its
            # weights through the host too: the same load, seen twice.
            j.evidence_against.append(
                f"the {label} stepped up {gib(size)} as the accelerator's did: the same model "
                "loaded on demand again"
            )
            continue
        if (
            is_card(name)
            and (held := known([(t, v) for t, v in series if reached - HOUR_S / 4 <= t < reached]))
            and max(held) < model
        ):
            # A model kept beside another needs one resident before: from a card that held
            # none in the quarter hour before it reached its new level, the step is the
            # first model, loaded when asked for.
            j.evidence_against.append(
                f"the {label} stepped up {gib(size)} from {gib(max(held))}, a card holding "
                f"no model: the first one loaded, none kept beside it: {step.why}"
            )
            continue
        if not with_server and name == "memory_used" and (came := arrival(f)):
            # The host's line holds every process: one that arrived and holds the step is
            # what stepped it, not a model.
            j.evidence_against.append(f"the {label} step of {gib(size)} is no model: {came}")
            continue
        freed = (
            not with_server
            and not is_card(name)
            and freed_while_the_engines_answered(
                f, name, step.before or 0.0, step.after or 0.0, "the step"
            )
        )
        if freed:
            # The engines lived through the kill that gave the step back: no model of theirs.
            j.evidence_against.append(f"the {label} stepped up {gib(size)}, but {freed}")
            continue
        climbed = not with_server and engine_climbed(f, name, label, model)
        if climbed:
            # A split into two levels fits a climb too: quarter after quarter without a
            # pause up to the engine running out is no model loaded at once.
            j.evidence_against.append(f"the {label} step of {gib(size)} is no load: {climbed}")
            continue
        if not with_server and rested([p for p in series if began <= p[0] <= reached], step):
            j.evidence_against.append(
                f"the {label} rose {gib(size)} resting half-way for half an hour or more, with "
                "nothing loaded beside it: a ratchet's clicks, not a model loaded at once"
            )
            continue
        if not with_server and single_model(f):
            j.evidence_against.append(
                f"the {label} stepped up {gib(size)}, but nothing here loads a second model "
                "(no model manager, one engine's server): the engine's own memory"
            )
            continue
        alone = len(holders) < 2 and (f.engine_targets_up or 0) < 2
        if with_server and alone and (one_model or not w.failure):
            t, target = with_server[0]
            j.add(1, f"{label} stepped up {gib(size)} as {target} came up: a model loaded")
        elif (
            with_server
            and not w.failure
            and f.bundle["trigger_kind"] == "cron"
            and (step.after or 0) < ROOM_LEFT * pool
        ):
            # A routine snapshot, nothing failed and the line kept room: two models side by
            # side by design, a note until memory runs short (a person looking is told).
            t, target = with_server[0]
            j.add(
                1,
                f"{label} stepped up {gib(size)} as {target} came up and stayed, at "
                f"{gib(step.after or 0)} of {gib(pool)}: a second model, with room to spare",
            )
        elif with_server and (beside := _host_ran_out_beside(f, name, series, step, pool)):
            t, target = with_server[0]
            j.add(1, f"{label} stepped up {gib(size)} as {target} came up, but {beside}")
        elif with_server:
            t, target = with_server[0]
            j.add(
                3,
                f"{label} stepped up {gib(size)} {at(f, step.t_change or t)} as {target} "
                f"came up, and stayed: {step.why}",
            )
            if len(holders) >= 2:
                held = ", ".join(
                    f"pid {p['pid']} {who(f, p).get('name') or '?'} {gib(p['used_bytes'])}"
                    for p in holders
                )
                j.add(2, f"the accelerator holds memory for {len(holders)} models: {held}")
        elif w.failure and (step.t_change or 0) < w.start - KEPT_LOOK_S:
            # Loaded many hours before the failure and served since: not what this
            # failure came from.
            j.add(1, f"{label} stepped up {gib(size)} {at(f, step.t_change or 0)}: {step.why}")
        elif reloaded := [(n, said) for n, said, grew in model_contexts(f) if grew]:
            # Ollama starts a new runner for a longer context too: the same model, bigger.
            j.evidence_against.append(
                f"the {label} step of {gib(size)} is {reloaded[0][0]} reloaded with a longer "
                f"context ({reloaded[0][1]}), not a second model"
            )
        elif w.failure and (step.t_change or 0) < w.start:
            # Hours before the incident window: the model that stayed is what this failure
            # came from only if memory then ran out (a kill, a failed allocation, the
            # machine's available memory all but gone, or a line that held a model before
            # the step left all but full by it: the next load found no room), and the step is
            # a model's size, loaded in minutes (a leak's hour of climbing reads as a step
            # this far back). A card filled from empty holds one model, none kept beside it.
            filled = (step.before or 0) >= model and (step.after or 0) >= ROOM_LEFT * pool
            ran_out = memory_ran_out(f) or ran_low_in_history(f) or filled
            big = size >= BIG_MODEL_SHARE * pool and took <= MODEL_LOADS_S and ran_out
            j.add(
                3 if big else 1,
                f"{label} stepped up {gib(size)} {at(f, step.t_change or 0)}"
                + (f" ({size / pool:.0%} of {gib(pool)}) and stayed until {w.failure.what}"
                   if big else "") + f": {step.why}",
            )  # fmt: skip
        elif w.failure and w.failure.timed_out and one_model:
            # The manager lists one model and the card holds it alone: nothing was kept
            # beside it, the step is that model loaded when it was asked for. Only where the
            # engine lived through the failure (an answer too late) is the list at the
            # capture the one of the hours before: a kill and a restart leave another.
            big = ", the size of a model," if size >= BIG_MODEL_SHARE * pool else ""
            j.evidence_against.append(
                f"the {label} stepped up {gib(size)}{big} but {one_model}: that model loaded "
                "on demand"
            )
        elif w.failure and size >= BIG_MODEL_SHARE * pool and loaded_models(f) is not None:
            # A model kept is what failed where the next one found no room. An answer that
            # came too late with nothing running out is the load's or a stall's, whatever
            # loaded before it.
            late = w.failure.timed_out and not memory_ran_out(f)
            j.add(
                1 if late else 3,
                f"{label} stepped up {gib(size)} ({size / pool:.0%} of {gib(pool)}, the size of "
                f"a model) and stayed until {w.failure.what}"
                + (", an answer too late with nothing running out" if late else "")
                + f": {step.why}",
            )
        elif loaded_models(f) is not None:
            j.add(2, f"{label} stepped up {gib(size)} and stayed: {step.why}")
        elif (
            w.failure
            and not (w.failure.timed_out and not memory_ran_out(f))
            and (
                (name == "accelerator_used" and took <= ONE_LOAD_S)
                or _one_load_on_the_host(f, name, series, steps, model)
            )
            and size >= BIG_MODEL_SHARE * pool
            and (
                memory_ran_out(f) or _no_room_for_another(f, name, series, step, began, pool, model)
            )
        ):
            # Nothing read says what loads models here, but a model's size on the card (the
            # engines' line alone), loaded in minutes inside the incident window and kept
            # until the memory ran out (or left no room for the next), is one. So is one
            # clean jump of the host's line, where no card line is read. An answer too
            # late with nothing running out is the load's or a stall's, as above.
            j.add(
                3,
                f"{label} stepped up {gib(size)} ({size / pool:.0%} of {gib(pool)}, the size of "
                f"a model) in {took / 60:.0f} min to {gib(step.after or 0)} and stayed until "
                f"{w.failure.what}: {step.why}",
            )
        else:
            # No manager loads models here and no server came up: a shape, not a model.
            j.add(1, f"{label} stepped up {gib(size)} and stayed: {step.why}")
        return


def _no_room_for_another(
    f: Facts,
    name: str,
    series: shapes.Series,
    step: shapes.Step,
    began: float,
    pool: float,
    model: float,
) -> bool:
    """The line after the step kept less room than ROOM_LEFT leaves, or less than the
    model the step loaded (the next of its size did not fit) at a level it had not held
    for an hour earlier: a machine that lived there before with nothing failing had room.
    A card that is the host's memory (GTT, unified) has none left where the host ran low,
    whatever its own reckoning."""
    after, size = step.after or 0.0, step.size or 0.0
    if after >= ROOM_LEFT * pool:
        return True
    if is_card(name) and shared_pool(f, name) and ran_low_in_history(f):
        return True
    return pool - after < size and not _stood_there(series, began, after, model)


def _host_ran_out_beside(
    f: Facts, name: str, series: shapes.Series, step: shapes.Step, pool: float
) -> str | None:
    """Why a card's step did not run out what failed: the host ran out (a kill, or its
    available memory all but gone) while the card kept room to the end and said nothing
    of an allocation failing, and the card is a pool of its own (under OWN_POOL of the
    host's memory, not unified, and the host's line did not take the step with it). None
    where the card may be the cause."""
    w = window(f)
    if not is_card(name) or not w.failure or card_ran_out(f) or not history(f, "memory_used"):
        return None
    if shared_pool(f, name):
        return None
    if not (killed(f) or ran_low_in_history(f)):
        return None
    held = known(w.incident(series))
    if not held or max(held) >= ROOM_LEFT * pool:
        return None
    began, reached = rise(series, step)
    host = f.series["memory_used"]
    before = known([(t, v) for t, v in host if began - HOUR_S / 6 <= t <= began])
    after = known([(t, v) for t, v in host if reached <= t <= reached + HOUR_S / 6])
    if not before or not after or median(after) - median(before) >= SHARED_JUMP * (step.size or 0):
        return None
    return (
        f"the card kept room to the end ({gib(max(held))} of {gib(pool)}) while the host ran "
        "out, and the host's line did not take the step: a card of its own, not the pool "
        "that ran out"
    )


def _one_load_on_the_host(
    f: Facts, name: str, series: shapes.Series, steps: list[shapes.Step], model: float
) -> bool:
    """The host's line, where no card line is read (a unified pool read by node-exporter
    alone, or the card unread), jumped a model's size within a few scrapes (as the
    shortest look that sees the jump times it) from a level it had held through the hours
    a fault takes (within LEVEL_SHARE of the pool): weights read in at disk speed. Other
    processes grow there too, but over cells, jobs and batches: steps among steps, or a
    climb."""
    pool = pool_size(f, name)
    if name != "memory_used" or history(f, "accelerator_used") or not pool:
        return False
    for step in reversed(steps):
        if (step.size or 0) < model:
            continue
        began, reached = rise(series, step)
        before = known([(t, v) for t, v in series if began - INCIDENT_S <= t < began])
        return (
            reached - began <= ONE_LOAD_S
            and len(before) >= 6
            and max(before) - min(before) <= LEVEL_SHARE * pool
        )
    return False


def _loaded_then(f: Facts, began: float, reached: float) -> list[tuple[float, str]]:
    """Models the engine's log says it loaded (Ollama starting a runner) in the incident
    window, on a step's ramp or within COINCIDE_S of it, each the first load of its weights
    in the log: a model loaded again is one it unloaded when idle, not a second, and one
    reloaded with ever longer contexts is the same model growing (the creep's). A log's
    first lines hours back hold whatever was loaded then, new or not."""
    first: dict[str, float | None] = {}
    for load in f.loads:
        first.setdefault(load.model, load.at)
    grown = {name for name, _, grew in model_contexts(f) if grew}
    start = window(f).start
    return [
        (t, f"the engine's runner for {blob(model)}")
        for model, t in first.items()
        if t is not None
        and max(start, began - COINCIDE_S) <= t <= reached + COINCIDE_S
        and blob(model) not in grown
    ]


def _no_load_logged(f: Facts, began: float, reached: float) -> str | None:
    """Ollama logs every runner it starts: where its log reaches back past a step and
    starts none on it or within COINCIDE_S, no model loaded with the step. In words; None
    where the log does not reach back that far or a load came with it."""
    times = [load.at for load in f.loads if load.at is not None]
    if not times or min(times) > began - COINCIDE_S:
        return None
    if any(began - COINCIDE_S <= t <= reached + COINCIDE_S for t in times):
        return None
    return (
        f"the engine's log, which shows its loads from {at(f, min(times))}, started no "
        f"model {at(f, began)}: no model loaded with it"
    )


def _stood_there(
    series: shapes.Series, began: float, level: float | None, model: float
) -> tuple[float, float] | None:
    """When, before a step began, the line held the step's new level for an hour (an
    hourly median within half a model of it, or above): a manager that loads its model on
    demand and unloads it when idle steps to the same level every time. A second model
    kept takes the line higher than a day of single loads did."""
    if level is None:
        return None
    hours = by_hour([(t, v) for t, v in series if t < began - HOUR_S])
    top = max(((k, median(vs)) for k, vs in hours.items()), key=lambda kv: kv[1], default=None)
    if top is None or top[1] < level - model / 2:
        return None
    return top


def _second_engine(f: Facts) -> str | None:
    """An engine's server that came up in the hours before the failure beside another that
    stayed up through it, and then the memory ran out: two models on one pool. A full pool
    may let the second one add little to the line; the coincidence is the evidence. A
    hand-over (one down as the other comes up) is a swap that worked."""
    w = window(f)
    if not w.failure or not memory_ran_out(f):
        return None
    fell_at = [t for t in (fell(series) for series in f.targets.values()) if t is not None]
    engines = {t: s for t, s in f.targets.items() if is_server(t)}
    began = targets_began(f)
    for target, series in engines.items():
        came = [t for t in came_up(series, began) if w.start <= t <= w.end]
        if not came or any(abs(came[-1] - down) <= COINCIDE_S for down in fell_at):
            continue
        beside = [
            other
            for other, s in engines.items()
            if other != target and up_through(s, came[-1] - COINCIDE_S, w.failure.at - 60)
        ]
        if beside:
            return (
                f"{target} came up {at(f, came[-1])} beside {beside[0]}, which stayed up, and "
                f"then {w.failure.what}: a second model loaded without the first unloaded"
            )
    return None


def _servers_started(f: Facts) -> list[tuple[float, str]]:
    """Model servers' targets that came up during the look-back (0 -> 1, or first seen up
    after the history began) and were still up at its end or at the failure: the server
    that came up with its model is often the one that dies of the memory it could not
    get. A gateway coming back (a restart, a missed scrape) loads no model of its own: the
    servers it starts are targets of their own."""
    first_seen = targets_began(f)
    w = window(f)
    started = []
    for target, series in f.targets.items():
        upto = w.upto(series)
        since = up_since(upto)
        if not is_server(target) or since is None:
            continue
        if rose(upto) is not None or since - first_seen > HOUR_S:
            started.append((since, target))
    return started
