"""One module per fault of the catalog (schemas/faults.toml), each with its rule: a small pure
function of Facts.

Each rule returns a Judgement: points for the evidence it found, the evidence for and
against in words, and the sources it needed but were not measured. Absent evidence is
never evidence: a rule reasons only from what was measured and lists the rest as
missing. Points: a supporting observation 1-2, a distinguishing one 3, a decisive one
(a line saying so, two sources disagreeing) 4-5.
"""

# Each rule module enters its rule in RULES as it is imported: this order is the registry's.
# isort: off
from evidence.analyze.rules import context_creep  # noqa: F401
from evidence.analyze.rules import concurrency_overload  # noqa: F401
from evidence.analyze.rules import leak_ratchet  # noqa: F401
from evidence.analyze.rules import swap_not_unloaded  # noqa: F401
from evidence.analyze.rules import host_exhaustion  # noqa: F401
from evidence.analyze.rules import accelerator_oom  # noqa: F401
from evidence.analyze.rules import memory_pressure_stall  # noqa: F401
from evidence.analyze.rules import idle_squatter  # noqa: F401
from evidence.analyze.rules import orphaned_gpu_holder  # noqa: F401
from evidence.analyze.rules import build_swarm  # noqa: F401
from evidence.analyze.rules import admission_overcommit  # noqa: F401
from evidence.analyze.rules import false_liveness  # noqa: F401
from evidence.analyze.rules import silent_empty_result  # noqa: F401
from evidence.analyze.rules import orphaned_result  # noqa: F401
from evidence.analyze.rules import wedged_no_progress  # noqa: F401
from evidence.analyze.rules import power_cycled  # noqa: F401

# isort: on
from evidence.analyze.rules.build_swarm import COMPILERS
from evidence.analyze.rules.judgement import RULES, Judgement
from evidence.analyze.rules.models import preallocated
from evidence.analyze.rules.processes import DESKTOP_APPS

__all__ = ["COMPILERS", "DESKTOP_APPS", "RULES", "Judgement", "preallocated"]
