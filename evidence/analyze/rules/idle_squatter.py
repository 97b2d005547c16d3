"""The rule for idle-squatter: "An idle engine holding memory"."""

from evidence.analyze.facts import Facts
from evidence.analyze.failure import FAILURE_TRIGGERS, came_up, is_service
from evidence.analyze.recognise import belongs
from evidence.analyze.rules.judgement import Judgement, rule
from evidence.analyze.rules.memory import card_full
from evidence.analyze.rules.models import SQUAT_GPU_BYTES, kept_unlisted, loaded_models, who
from evidence.analyze.rules.pressure import PSI_SOME_HIGH
from evidence.analyze.rules.series import readings, targets_began, window
from evidence.analyze.rules.text import GIB, gib

SQUAT_RSS_BYTES = 4 * GIB
TIGHT_SHARE = 0.05  # under this share available, an idle holder keeps others out (a
#                     GB10 holding its one model runs at 10% available, and is fine)


@rule("idle-squatter")
def idle_squatter(f: Facts) -> Judgement:
    j = Judgement()
    if not f.engine_load:
        _idle_without_a_queue(f, j)
        if not j.score:
            j.missing.append("an engine's queue (its own running / pending counts)")
        return j
    kinds = {e["name"]: e["kind"] for e in f.engines}
    rss = {p["pid"]: p["rss_bytes"] for p in f.processes}
    # The engine whose own check failed is not keeping another out: it could not work.
    failed = {c["name"] for c in f.checks if not c["ok"]}
    if f.bundle["trigger_kind"] in FAILURE_TRIGGERS and f.bundle["trigger_name"]:
        failed.add(f.bundle["trigger_name"])
    found = Judgement()
    for engine, load in f.engine_load.items():
        if max(load, default=0) > 0:
            j.evidence_against.append(f"{engine} was working (its queue was not empty)")
            continue
        kind = kinds.get(engine, "")
        # A check named for the engine's software is its own where it is the only one of
        # its kind (llama-swap names its server by the model it serves).
        mine = kind in failed and list(kinds.values()).count(kind) == 1
        if engine in failed or mine:
            j.evidence_against.append(
                f"{engine} is idle, but it is the service that failed to answer: a victim of "
                "what held the memory, not a squatter"
            )
            continue
        need = _contention(f, kind)
        if need is None:
            # A resident model nobody is using is the state a box spends most of its life
            # in: squatting needs someone kept out.
            found.evidence_against.append(
                f"{engine} is idle with its model resident, and nothing else wanted the memory "
                "(no other tenant on the accelerator, no stall, nothing failed)"
            )
            continue
        gpu = [
            p
            for p in f.gpu_processes
            if belongs(who(f, p), kind) and (p["used_bytes"] or 0) >= SQUAT_GPU_BYTES
        ]
        if gpu:
            p = gpu[0]
            found.add(
                4,
                f"{engine} is idle (nothing running, nothing queued) while pid {p['pid']} "
                f"holds {gib(p['used_bytes'])} of accelerator memory, and {need}",
            )
            continue
        host = [
            p
            for p in f.processes
            if belongs(p, kind) and (rss.get(p["pid"]) or 0) >= SQUAT_RSS_BYTES
        ]
        if host:
            found.add(
                2,
                f"{engine} is idle while pid {host[0]['pid']} holds "
                f"{gib(host[0]['rss_bytes'])} resident, and {need}",
            )
    # One squatter is the finding; more idle engines are listed, not added up.
    j.evidence_against += found.evidence_against
    if found.evidence_for:
        best = max(found.points, default=0)
        j.score = best
        j.evidence_for = found.evidence_for
        start, began = window(f).start, targets_began(f)
        fresh = [
            target
            for target, series in f.targets.items()
            if is_service(target) and any(t >= start for t in came_up(series, began))
        ]
        if fresh:
            j.score -= 2
            j.evidence_against.append(
                f"{fresh[0]} came up in the hours before the failure: the idle model is one "
                "that was not unloaded for it (a swap), more than an idle one"
            )
        elif kept := kept_unlisted(f):
            j.score -= 2
            j.evidence_against.append(
                f"{kept}: an idle model there is one it did not unload (a swap), more than "
                "one kept on purpose"
            )
    return j


def _idle_without_a_queue(f: Facts, j: Judgement) -> None:
    """Ollama publishes no queue: a manager with a model loaded and the accelerator at 0 %
    through every reading of the window is idle. Squatting still needs someone kept out,
    and a card with almost nothing free keeps out the next load, whoever it is."""
    loaded = {m: models for m, models in (loaded_models(f) or {}).items() if models}
    busy = [d["utilization_gpu_pct"] for d in f.gpu_devices]
    if not loaded or not busy or None in busy or max(busy) > 0:
        return
    engine, models = next(iter(loaded.items()))
    kind = next(e["kind"] for e in f.engines if e["name"] == engine)
    need = _contention(f, kind) or card_full(f)
    idle = (
        f"{engine} holds {', '.join(models)} loaded with the accelerator at 0 % through "
        f"{len(busy)} reading{'s' * (len(busy) > 1)}"
    )
    if need:
        j.add(3, f"{idle}, and {need}")
    else:
        j.evidence_against.append(f"{idle}, and nothing else wanted the memory")


def _contention(f: Facts, kind: str) -> str | None:
    """Who or what needed the memory an idle engine holds, in words; None if nothing did."""
    others = [p for p in f.gpu_processes if not belongs(who(f, p), kind)]
    if others:
        p = who(f, others[0])
        return f"another tenant shares the accelerator (pid {p['pid']} {p.get('name') or '?'})"
    available = readings(f, "available")
    # Little available keeps out only what tried to get in: with nothing failed and nothing
    # stalled it is the box as it runs (an engine that reserves its share of a shared pool
    # at start, as vLLM does).
    if (
        window(f).failure
        and available
        and f.memory_total
        and available[-1] < TIGHT_SHARE * f.memory_total
    ):
        return f"only {gib(available[-1])} of {gib(f.memory_total)} was available"
    some = readings(f, "psi_some")
    if some and max(some) >= PSI_SOME_HIGH:
        return f"tasks stalled on memory {max(some):.0f}% of the time"
    return None
