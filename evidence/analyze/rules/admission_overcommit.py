"""The rule for admission-overcommit: "A load without a budget"."""

import re

from evidence.analyze.facts import Facts
from evidence.analyze.failure import engine_kill
from evidence.analyze.rules.judgement import Judgement, rule
from evidence.analyze.rules.memory import LOW_AVAILABLE
from evidence.analyze.rules.series import readings
from evidence.analyze.rules.text import byte_sizes, gib


@rule("admission-overcommit")
def admission_overcommit(f: Facts) -> Judgement:
    j = Judgement()
    estimate = _estimate(f)
    if estimate:
        j.add(*estimate)
    starting = [m for m in f.models if m["state"] in ("starting", "loading")]
    available = readings(f, "available")
    if not f.models:
        j.missing.append("what a model manager was loading")
        return j
    if not available:
        j.missing.append("available memory at the load")
        return j
    for m in starting:
        size = m["size_bytes"] or max(
            (x["size_bytes"] or 0 for x in f.models if x["model"] == m["model"]), default=0
        )
        if not size:
            j.missing.append(f"the size of {m['model']} in memory")
        elif min(available) < size:
            j.add(
                4,
                f"{m['engine']} was loading {m['model']} ({gib(size)}) while only "
                f"{gib(min(available))} was available",
            )
        else:
            j.evidence_against.append(
                f"{gib(min(available))} was available for {m['model']} ({gib(size)})"
            )
    return j


def _estimate(f: Facts) -> tuple[int, str] | None:
    """Ollama says, before a load, what the model needs in all (memory.required.full) and
    what each GPU has free (memory.available): what does not fit on the GPUs must come
    from host memory. Ollama never reports a model as loading; this line is the load."""
    lines = f.lines.get("load-estimate", [])
    if not lines:
        return None
    line = lines[-1]
    need = re.search(r'memory\.required\.full="([^"]+)"', line)
    have = re.search(r'memory\.available="\[([^\]]*)\]"', line)
    if not need or not have:
        return None
    needed, gpus = sum(byte_sizes(need.group(1))), sum(byte_sizes(have.group(1)))
    spill = needed - gpus
    if spill <= 0:
        return None
    said = (
        f"Ollama's load needed {gib(needed)} with {gib(gpus)} free on the GPUs: {gib(spill)} "
        "had to come from host memory"
    )
    available = readings(f, "available")
    if available and min(available) < spill:
        return 4, f"{said}, which had {gib(min(available))} available"
    if f.memory_total and f.memory_total < spill:
        return 4, f"{said}, more than the machine's {gib(f.memory_total)}"
    if available:
        return None  # it fitted in host memory: a partial offload, Ollama's normal way
    killed = (
        f.lines.get("unit-oom")
        or f.lines.get("runner-killed")
        or any(engine_kill(t) for _, t in f.oom_kills)
    )
    own = _ollama_host_free(f)
    if own is not None:
        total, free = own
        if free - spill < LOW_AVAILABLE * total:
            return (4 if killed else 3), (
                f"{said}, which by Ollama's own reading had {gib(free)} free of "
                f"{gib(total)}: {gib(max(free - spill, 0))} left for everything else"
                + (", and the runner was killed" if killed else "")
            )
        return None
    if killed:
        return 3, f"{said} (not measured), and the OOM killer took the engine"
    return 2, f"{said} (host memory at the load not measured)"


def _ollama_host_free(f: Facts) -> tuple[float, float] | None:
    """Host memory as Ollama read it planning its last load: (total, free with free swap)."""
    lines = f.lines.get("load-host-memory", [])
    if not lines:
        return None
    said = dict(re.findall(r'(total|free|free_swap)="([^"]+)"', lines[-1]))
    if "total" not in said or "free" not in said:
        return None
    free = sum(byte_sizes(said["free"])) + sum(byte_sizes(said.get("free_swap", "")))
    return sum(byte_sizes(said["total"])), free
