"""What failed, and when: the moment a diagnosis reads backwards from.

The seeds' second step ("establish when, from the record") before any shape is read. Every
source that can say a service failed is asked, and each sign keeps its time and its words:

- the trigger itself, when it is a failure (a health check, an alert, a unit, a hook);
- a scrape target of a service whose `up` went from 1 to 0 and stayed there (a target that
  was never up is a service nobody started, not an outage; an exporter going down is an
  instrument gap, not the service);
- a health check of the bundle that failed;
- an engine that did not answer at the capture;
- the OOM killer killing an engine process (a kill of anything else inside its own memory
  limit is context, weighed by the host-exhaustion rule).

Invariants:
- A sign is dated by its own evidence: a target's fall at the first reading of its final
  run of zeros, a kill at the kernel's time, a check or a trigger at the capture.
- A fall or a kill is an event with its time; a failed trigger, check or engine is a state
  found at the capture. The failure is dated by the latest event and the events in the
  CLUSTER_S before it (what went down first in that outage), so that the hours before it
  are read, not its aftermath; an older fall is a separate outage. With no event, or when
  a failure trigger comes over STALE_S after the last event, the trigger dates it.
- Pure: reads Facts, writes nothing.
"""

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evidence.analyze.facts import Facts

FAILURE_TRIGGERS = ("healthcheck", "alert", "systemd", "hook", "recorder")
# Scrape jobs that are instruments, not services: their going down is a gap in what we
# can see, never the outage itself.
INSTRUMENT_JOBS = re.compile(
    r"node|dcgm|prometheus|alertmanager|exporter|cadvisor|blackbox|grafana|pushgateway|"
    r"amdgpu|rocm|nvidia|gpu|smi|process",
    re.I,
)
ENGINE_PROCESS = re.compile(
    r"llama|vllm|sglang|ollama|comfy|webui|text-generation|koboldcpp|tabby|lmdeploy|exllama",
    re.I,
)
# Gateways by name: a model manager or router, or the reverse proxy in front of the engines.
GATEWAY_JOBS = re.compile(
    r"gateway|swap|litellm|proxy|router|nginx|caddy|traefik|haproxy|envoy|openresty", re.I
)
# Model managers, which load models on demand, by a target's job or instance: Ollama's
# default port names it where only a blackbox probe watches it.
MANAGER_TARGETS = re.compile(r"ollama|llama-swap|:11434\b", re.I)
# Words of a failure that is slowness, not a crash: a check or an alert that gave up waiting.
TIMED_OUT = re.compile(r"time[d ]?out|no answer within|deadline|queu|latency|slow", re.I)
CLUSTER_S = 1800  # signs of one outage follow each other within minutes (an alert's `for`)
STALE_S = 3600  # a fall this long before a failure trigger is an outage of its own
RECENT_KILL_S = 3600  # an OOM kill older than this belongs to an earlier night
FIRST_SEEN_S = 300  # a target first scraped this long after the others was started since
_VICTIM = re.compile(
    r"Killed process (\d+) \(([^)]*)\)(?:.*?anon-rss:(\d+)kB)?(?:.*?file-rss:(\d+)kB)?"
)


@dataclass(frozen=True)
class Sign:
    at: float  # unix seconds
    source: str  # trigger | target | check | engine | kill
    what: str  # plain words, for the verdict and the report


@dataclass(frozen=True)
class Failure:
    dated_by: Sign  # the sign that dates the failure
    signs: tuple[Sign, ...]  # every sign, earliest first

    @property
    def at(self) -> float:
        return self.dated_by.at

    @property
    def what(self) -> str:
        return self.dated_by.what

    @property
    def event(self) -> bool:
        """Dated by an event (a fall, a kill) rather than by a state found at the capture."""
        return self.dated_by.source in ("target", "kill")

    @property
    def timed_out(self) -> bool:
        """Some sign says an answer did not come in time (the service was slow, whether or
        not it also went down)."""
        return any(late(s.what) for s in self.signs)

    def said(self) -> str:
        """One line for an operator: what failed, and when."""
        when = datetime.fromtimestamp(self.at, UTC).strftime("%Y-%m-%d %H:%M UTC")
        others = len(self.signs) - 1
        more = f" (and {others} more sign{'s' * (others > 1)})" if others > 0 else ""
        return f"{self.what} at {when}{more}"


def late(what: str) -> bool:
    """A sign's words say an answer did not come in time."""
    return TIMED_OUT.search(what) is not None


def is_gateway(target: str) -> bool:
    """A scrape target of a gateway or model manager in front of the engines."""
    return bool(GATEWAY_JOBS.search(target.split("/", 1)[0]))


def is_manager(target: str) -> bool:
    """A scrape target (job/instance) of a model manager, or a probe of one."""
    return bool(MANAGER_TARGETS.search(target))


def is_service(target: str) -> bool:
    """A scrape target of a service (gateway, engine, manager), not an instrument."""
    return not INSTRUMENT_JOBS.search(target.split("/", 1)[0])


def is_server(target: str) -> bool:
    """A scrape target of an engine's server: a service, not a gateway in front of them."""
    return is_service(target) and not is_gateway(target)


def _final_run(known: list[tuple[float, float]], value: float) -> int:
    """Where the run of `value` that ends the readings begins (len(known) if none does)."""
    i = len(known)
    while i > 0 and known[i - 1][1] == value:
        i -= 1
    return i


def fell(series: list[tuple[float, float | None]]) -> float | None:
    """When a target that had been up went down for good: the first reading of its final
    run of zeros. None when it ends up, never was up, or nothing is known."""
    known = [(t, v) for t, v in series if v is not None]
    if not known or known[-1][1] != 0 or not any(v == 1 for _, v in known):
        return None
    return known[_final_run(known, 0)][0]


def is_engine(name: str) -> bool:
    """A process name of a model server (llama-server, VLLM::EngineCore, ollama...)."""
    return bool(ENGINE_PROCESS.search(name))


def victim(text: str) -> tuple[str, int | None] | None:
    """The name and resident bytes (anonymous and file-backed: a model's mapped weights
    are file pages) of the process an OOM kill line names."""
    m = _VICTIM.search(text)
    if not m:
        return None
    sizes = [int(g) * 1024 for g in m.group(3, 4) if g]
    return m.group(2), sum(sizes) if sizes else None


def history_began(targets: dict[str, list[tuple[float, float | None]]], default: float) -> float:
    """When the targets' history begins: the earliest reading of any of them."""
    return min((t for series in targets.values() for t, _ in series), default=default)


def came_up(series: list[tuple[float, float | None]], began: float) -> list[float]:
    """Every time a target came up during the look-back: each 0 -> 1, and its first reading
    when that was up and came after the history began (a target first scraped mid-day
    was started then)."""
    known = [(t, v) for t, v in series if v is not None]
    times = [t for (_, a), (t, b) in zip(known, known[1:], strict=False) if a == 0 and b == 1]
    if known and known[0][1] == 1 and known[0][0] - began > FIRST_SEEN_S:
        times.insert(0, known[0][0])
    return times


def on_demand(series: list[tuple[float, float | None]], began: float) -> bool:
    """A target that came and went: started during the look-back, or fallen twice or more."""
    known = [v for _, v in series if v is not None]
    falls = sum(a == 1 and b == 0 for a, b in zip(known, known[1:], strict=False))
    return bool(came_up(series, began)) or falls >= 2


def up_since(series: list[tuple[float, float | None]]) -> float | None:
    """When a target that is up at the end came up: the first reading of its final run of
    ones (the first reading of all when it was up throughout). None when it ends down."""
    known = [(t, v) for t, v in series if v is not None]
    if not known or known[-1][1] != 1:
        return None
    return known[_final_run(known, 1)][0]


def rose(series: list[tuple[float, float | None]]) -> float | None:
    """When a target that is up at the end came up after being down; None when it was up
    throughout or ends down."""
    since = up_since(series)
    first = next((t for t, v in series if v is not None), None)
    return since if since is not None and since != first else None


def engine_kill(text: str) -> str | None:
    """The victim's name when an OOM kill line names a model-serving process."""
    named = victim(text)
    return named[0] if named and is_engine(named[0]) else None


def locate(f: "Facts") -> Failure | None:
    """The failure the bundle shows, or None when nothing failed."""
    b = f.bundle
    captured = b["started_at"].timestamp()
    signs: list[Sign] = []
    trigger = None
    if b["trigger_kind"] in FAILURE_TRIGGERS:
        fired = b["fired_at"].timestamp() if b.get("fired_at") else captured
        name = b["trigger_name"] or b["trigger_kind"]
        detail = f" ({b['trigger_detail']})" if b.get("trigger_detail") else ""
        trigger = Sign(fired, "trigger", f"the {b['trigger_kind']} trigger {name}{detail}")
        signs.append(trigger)
    began = history_began(f.targets, captured)
    risen = {
        target: came_up(series, began) for target, series in f.targets.items() if is_service(target)
    }
    served = any(
        f.target_query.get(target) == "gateway_up" or is_gateway(target)
        for target, series in f.targets.items()
        if [v for _, v in series if v is not None][-1:] == [1]
    )
    for target, series in f.targets.items():
        down = fell(series)
        # A model manager hands over: one model's server stops as another's starts. That
        # is a swap, not an outage. Behind a gateway still up, a server that has come and
        # gone all day is loaded on demand and unloaded when idle (a ttl).
        handed = down is not None and any(
            abs(t - down) <= CLUSTER_S
            for other, times in risen.items()
            if other != target
            for t in times
        )
        lifecycle = served and on_demand(series, began)
        # ... unless a failure trigger fired minutes after: an alert or a check that went
        # off for it says this fall was the outage.
        confirmed = trigger is not None and down is not None and 0 <= trigger.at - down <= CLUSTER_S
        if down is not None and is_service(target) and not handed and (not lifecycle or confirmed):
            signs.append(Sign(down, "target", f"{target} went down (Prometheus up 1 -> 0)"))
    for c in f.checks:
        if not c["ok"]:
            why = f": {c['reason']}" if c["reason"] else ""
            signs.append(Sign(captured, "check", f"the {c['kind']} check {c['name']} failed{why}"))
    for e in f.engines:
        if e["status"] in ("error", "timeout"):
            why = f": {e['reason']}" if e["reason"] else ""
            signs.append(Sign(captured, "engine", f"{e['name']} ({e['kind']}) did not answer{why}"))
    for ago, text in f.oom_kills:
        victim = engine_kill(text)
        if victim and ago is not None and ago <= RECENT_KILL_S:
            signs.append(Sign(captured - ago, "kill", f"the OOM killer killed {victim}"))
    if not signs:
        return None
    signs.sort(key=lambda s: s.at)
    events = [s for s in signs if s.source in ("target", "kill")]
    if not events or (trigger and trigger.at - events[-1].at > STALE_S):
        first = trigger or signs[0]
    else:
        first = events[-1]
        for e in reversed(events[:-1]):
            if first.at - e.at > CLUSTER_S:
                break
            first = e
    return Failure(dated_by=first, signs=tuple(signs))
