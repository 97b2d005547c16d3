"""Host memory: every /proc/meminfo key, /proc/swaps, and the free(1) view derived from them.

On a unified-memory machine (GB10) this is the accelerator's memory gauge too.
"""

from typing import Any

from evidence.capture.probes import Probe, Reading, human_bytes, register, unreadable
from evidence.capture.procfs import free_view, parse_meminfo, parse_swaps


@register
class Memory(Probe):
    name = "memory"
    order = 20
    priority = 880
    timeout_s = 0.5
    samples = True
    essential = True

    def _read(self, leaf: str) -> str:
        # Raises OSError: an unreadable meminfo is a status, not a None.
        return (self.ctx.proc / leaf).read_text(errors="replace")

    def freeze(self) -> Reading:
        try:
            meminfo = parse_meminfo(self._read("meminfo"))
        except OSError as exc:
            return unreadable(exc, "/proc/meminfo")
        try:
            swaps: list[dict[str, Any]] | None = parse_swaps(self._read("swaps"))
        except OSError:
            swaps = None  # a kernel without CONFIG_SWAP has no /proc/swaps
        return Reading(
            record={"meminfo_kb": meminfo, "swaps": swaps, "free": free_view(meminfo, swaps)}
        )

    def headline(self, record: dict[str, Any]) -> str:
        free = record["free"]
        swap = (
            "no swap"
            if not free["swap_total"]
            else f"swap {human_bytes(free['swap_used'])} of {human_bytes(free['swap_total'])}"
        )
        return f"{human_bytes(free['available'])} available of {human_bytes(free['total'])}; {swap}"

    def sample(self) -> dict[str, Any]:
        return {"meminfo_kb": parse_meminfo(self._read("meminfo"))}
