"""When the recorder captures by itself: four conditions, each fired once on its way in.

A condition fires when it becomes true and not again until it has been false: a box that
stays under pressure makes one capture, not one a second (the capture's rate limit bounds
what is left).
"""

from typing import Any

from evidence.capture.config import RecorderSettings


class Triggers:
    def __init__(self, settings: RecorderSettings):
        self.settings = settings
        self._low = False
        self._oom_kills: int | None = None
        self._pressed_since: float | None = None
        self._pressed_fired = False
        self._answered: dict[str, bool] = {}

    def memory(self, t: float, sample: dict[str, Any]) -> str | None:
        """Available memory under its share of the total."""
        kb = sample.get("meminfo_kb") or {}
        total, available = kb.get("MemTotal"), kb.get("MemAvailable")
        if not total or available is None:
            return None
        low = available < self.settings.available_share * total
        fired = low and not self._low
        self._low = low
        return "low-memory" if fired else None

    def vmstat(self, t: float, sample: dict[str, Any]) -> str | None:
        """The kernel's OOM-kill counter moved."""
        kills = (sample.get("counters") or {}).get("oom_kill")
        if kills is None:
            return None
        moved = self._oom_kills is not None and kills > self._oom_kills
        self._oom_kills = kills
        return "oom-kill" if moved else None

    def pressure(self, t: float, sample: dict[str, Any]) -> str | None:
        """Memory PSI (some, avg10) above its threshold for psi_for_s."""
        some = ((sample.get("system") or {}).get("memory") or {}).get("some") or {}
        avg10 = some.get("avg10")
        if avg10 is None or avg10 < self.settings.psi_pct:
            self._pressed_since, self._pressed_fired = None, False
            return None
        if self._pressed_since is None:
            self._pressed_since = t
        if self._pressed_fired or t - self._pressed_since < self.settings.psi_for_s:
            return None
        self._pressed_fired = True
        return "memory-pressure"

    def engines(self, t: float, sample: dict[str, Any]) -> str | None:
        """An engine that answered no longer does (a restart nobody's unit saw)."""
        fired = None
        for engine in sample.get("engines") or []:
            name, ok = engine.get("name"), engine.get("status") == "ok"
            if self._answered.get(name) and not ok and fired is None:
                fired = f"engine-down-{name}"
            self._answered[name] = ok
        return fired
