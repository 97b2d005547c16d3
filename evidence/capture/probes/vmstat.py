"""/proc/vmstat: swap, reclaim, refault, major-fault and oom_kill counters, kept raw."""

from typing import Any

from evidence.capture.probes import Probe, Reading, register, unreadable
from evidence.capture.procfs import parse_flat_keyed


@register
class Vmstat(Probe):
    name = "vmstat"
    order = 30
    priority = 700
    timeout_s = 0.5
    samples = True

    def _counters(self) -> dict[str, int]:
        return parse_flat_keyed((self.ctx.proc / "vmstat").read_text(errors="replace"))

    def freeze(self) -> Reading:
        try:
            return Reading(record={"counters": self._counters()})
        except OSError as exc:
            return unreadable(exc, "/proc/vmstat")

    def headline(self, record: dict[str, Any]) -> str:
        counters = record["counters"]
        wanted = ("oom_kill", "pswpout", "pgmajfault")
        return ", ".join(f"{k} {counters[k]}" for k in wanted if k in counters) + " since boot"

    def sample(self) -> dict[str, Any]:
        return {"counters": self._counters()}
