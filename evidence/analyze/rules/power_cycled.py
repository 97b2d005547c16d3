"""The rule for power-cycled: "The box was rebooted under us"."""

from evidence.analyze.facts import Facts
from evidence.analyze.rules.judgement import Judgement, rule
from evidence.analyze.rules.pressure import PSI_FULL_HIGH
from evidence.analyze.rules.text import gib


@rule("power-cycled")
def power_cycled(f: Facts) -> Judgement:
    j = Judgement()
    before = f.previous
    if before is None:
        j.missing.append("an earlier bundle of this host")
        return j
    if before["boot_id"] == f.bundle["boot_id"]:
        j.evidence_against.append("same boot as the previous bundle")
        return j
    j.add(2, f"the boot id changed since the previous bundle ({before['bundle_id']})")
    total = before["total"] or 0
    low = before["min_available"]
    if low is not None and total and low < 0.05 * total:
        j.add(2, f"the previous bundle saw available memory at {gib(low)}")
    if (before["psi_full"] or 0) >= PSI_FULL_HIGH:
        j.add(1, f"the previous bundle saw memory stalls ({before['psi_full']:.0f}% full)")
    return j
