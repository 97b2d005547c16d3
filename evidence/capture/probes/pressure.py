"""Pressure stall information: what memory occupancy is costing, system-wide and per cgroup.

Occupancy is not pressure: used RAM says what is resident, PSI says how long work waited
for it. The cgroups read are those of the largest processes (named by the processes
probe), found under the cgroup2 mount wherever it is (hybrid hosts mount it away from
/sys/fs/cgroup). The collector only reads these files: writing one registers a trigger.
"""

import errno
from pathlib import Path
from typing import Any

from evidence.capture.probes import Probe, Reading, register
from evidence.capture.procfs import parse_flat_keyed, parse_pressure, read_text

RESOURCES = ("cpu", "memory", "io", "irq")
_CGROUP_INTS = (
    "memory.current",
    "memory.max",
    "memory.high",
    "memory.peak",
    "memory.swap.current",
    "memory.swap.max",
)


@register
class Pressure(Probe):
    name = "pressure"
    order = 40
    priority = 870
    timeout_s = 1.0
    samples = True

    def freeze(self) -> Reading:
        system, unavailable = self._system()
        if not system:
            reasons = set(unavailable.values())
            return Reading(
                "absent",
                "; ".join(sorted(reasons)),
                {"system": {}, "unavailable": unavailable, "cgroups": []},
            )
        cgroups = [self._cgroup(path, full=True) for path in self._cgroup_paths()]
        return Reading(record={"system": system, "unavailable": unavailable, "cgroups": cgroups})

    def headline(self, record: dict[str, Any]) -> str:
        parts = [
            f"{res} some avg10 {psi['some']['avg10']:.2f}%"
            for res, psi in record["system"].items()
            if res in ("memory", "io") and "some" in psi
        ]
        return "; ".join(parts) + f"; {len(record['cgroups'])} cgroups read"

    def sample(self) -> dict[str, Any]:
        system, _ = self._system()
        return {
            "system": system,
            "cgroups": [self._cgroup(path, full=False) for path in self._cgroup_paths()],
        }

    def _system(self) -> tuple[dict[str, Any], dict[str, str]]:
        system: dict[str, Any] = {}
        unavailable: dict[str, str] = {}
        for resource in RESOURCES:
            path = self.ctx.proc / "pressure" / resource
            try:
                system[resource] = parse_pressure(path.read_text(errors="replace"))
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    if not path.parent.exists():
                        unavailable[resource] = "kernel without PSI (no /proc/pressure)"
                    elif resource != "irq":
                        unavailable[resource] = f"{path} does not exist"
                    # /proc/pressure/irq exists only on 6.1+ with IRQ time accounting.
                elif exc.errno == errno.EOPNOTSUPP:
                    unavailable[resource] = "PSI is disabled in this kernel (boot with psi=1)"
                else:
                    unavailable[resource] = f"{path}: {exc.strerror}"
        return system, unavailable

    def _cgroup_root(self) -> Path | None:
        if "cgroup2_root" not in self.ctx.shared:
            root = None
            for line in (read_text(self.ctx.proc / "self" / "mountinfo") or "").splitlines():
                pre, _, post = line.partition(" - ")
                if post.split(" ", 1)[0] == "cgroup2" and len(pre.split()) > 4:
                    root = Path(pre.split()[4])
                    break
            self.ctx.shared["cgroup2_root"] = root
        return self.ctx.shared["cgroup2_root"]

    def _cgroup_paths(self) -> list[str]:
        return self.ctx.shared.get("cgroups_of_interest", [])

    def _cgroup(self, path: str, full: bool) -> dict[str, Any]:
        root = self._cgroup_root()
        entry: dict[str, Any] = {"path": path}
        if root is None:
            return {**entry, "status": "absent", "reason": "no cgroup2 hierarchy is mounted"}
        base = root / path.lstrip("/")
        found = False
        for leaf in _CGROUP_INTS if full else ("memory.current",):
            text = read_text(base / leaf)
            if text is not None:
                found = True
                entry[leaf.replace(".", "_")] = _bytes_or_max(text)
        pressure = read_text(base / "memory.pressure")
        if pressure is not None:
            found = True
            entry["memory_pressure"] = parse_pressure(pressure)
        if full:
            events = read_text(base / "memory.events")
            if events is not None:
                found = True
                entry["memory_events"] = parse_flat_keyed(events)
        if not found:
            why = (
                "the root cgroup has no memory.* files"
                if path == "/"
                else f"no readable memory.* files under {base}"
            )
            return {**entry, "status": "absent", "reason": why}
        return {**entry, "status": "ok"}


def _bytes_or_max(text: str) -> int | str | None:
    """A memory.* value: bytes, the literal "max" (no limit), or None if unreadable."""
    value = text.strip()
    if value == "max":
        return value
    return int(value) if value.isdigit() else None
