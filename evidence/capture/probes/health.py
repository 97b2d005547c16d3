"""The health checks that started this capture, with their full answers: the first thing an
operator reads is why the capture happened."""

from typing import Any

from evidence.capture.probes import Probe, Reading, register


@register
class Health(Probe):
    name = "health"
    order = 1
    priority = 950
    timeout_s = 0.5
    essential = True  # the checks' answers are in memory: reading them costs nothing

    def freeze(self) -> Reading:
        if self.ctx.health is None:
            return Reading("skipped", "this capture was not started by `evidence check`")
        return Reading(record={"checks": self.ctx.health})

    def headline(self, record: dict[str, Any]) -> str:
        failed = [c for c in record["checks"] if not c["ok"]]
        return "; ".join(f"{c['name']} ({c['kind']}): {c['reason']}" for c in failed) or "all ok"
