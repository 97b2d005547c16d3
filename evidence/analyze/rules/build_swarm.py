"""The rule for build-swarm: "A compile is load too"."""

import re

from evidence.analyze.facts import Facts
from evidence.analyze.failure import victim
from evidence.analyze.rules.judgement import Judgement, rule
from evidence.analyze.rules.ran_out import recent_kills
from evidence.analyze.rules.text import GIB, gib
from evidence.schemas import catalog

COMPILERS = tuple(catalog("engines")["build"]["compilers"])  # evidence/schemas/engines.toml
BUILD_SHARE = 0.30  # compilers holding this share of memory are load, not background
BUILD_JOB_BYTES = 2 * GIB  # one C++ or CUDA compile job at its peak (flash-attention's: more)
BUILD_JOBS_MANY = 32  # jobs whose 64 GiB outgrow most workstations, where memory is unknown


@rule("build-swarm")
def build_swarm(f: Facts) -> Judgement:
    j = Judgement()
    if not f.processes or not f.memory_total:
        j.missing.append("the process table and the machine's memory")
    else:
        compilers = [p for p in f.processes if (p["name"] or "") in COMPILERS]
        held = sum(p["rss_bytes"] or 0 for p in compilers)
        share = held / f.memory_total
        if share >= BUILD_SHARE:
            j.add(4, f"{len(compilers)} compiler processes hold {gib(held)}, {share:.0%} of memory")
        elif compilers:
            j.add(1, f"{len(compilers)} compiler processes hold {gib(held)} ({share:.0%})")
        else:
            j.evidence_against.append("no compiler was running")
    _compiler_killed(f, j)
    _build_jobs(f, j)
    return j


def _compiler_killed(f: Facts, j: Judgement) -> None:
    """A compiler killed mid-build: by the kernel's line, or by the build's own words for
    a SIGKILL (what a person pastes where no kernel line was kept)."""
    compilers = [
        text for _, text in recent_kills(f) if (named := victim(text)) and named[0] in COMPILERS
    ]
    if compilers:
        j.add(4, f"the OOM killer took a compiler: {compilers[-1][:160]}")
    elif said := f.lines.get("compiler-killed"):
        j.add(4, f"the build's log says a compiler was killed: {said[-1].strip()[:160]}")


_JOBS = re.compile(r"(?:-j(?:=|\s+|',\s*')?|--parallel[= ]|MAX_JOBS=)(\d+)")


def _build_jobs(f: Facts, j: Judgement) -> None:
    """A build that failed with many jobs at once: each C++ or CUDA compile holds a GiB or
    more (flash-attention's kernels several), so the job count against the machine's
    memory says whether the jobs could fit."""
    runs = [
        (int(m.group(1)), line)
        for line in f.lines.get("build-failed", [])
        if (m := _JOBS.search(line))
    ]
    if not runs:
        return
    jobs, line = max(runs)
    asked = jobs * BUILD_JOB_BYTES
    said = f"a build running {jobs} jobs at once failed ({line.strip()[:120]})"
    ask = f"at ~{gib(BUILD_JOB_BYTES)} a job they ask {gib(asked)}"
    if f.memory_total and asked >= f.memory_total:
        j.add(3, f"{said}: {ask} of {gib(f.memory_total)}")
    elif f.memory_total:
        j.evidence_against.append(
            f"{said}, but {gib(asked)} for its jobs fits {gib(f.memory_total)}"
        )
    elif jobs >= BUILD_JOBS_MANY:
        j.add(3, f"{said}: {ask}, more than most machines hold")
        j.missing.append("the machine's memory, to weigh the jobs against")
    else:
        j.missing.append(f"the machine's memory, to weigh {jobs} jobs against")
