"""Who calls the engine, when, and with how much: a day of requests on a daily rhythm.

Humans come in sessions (a conversation that grows turn by turn and is dropped when the
chat is closed); agents run tasks whose context grows with every tool result; a batch
runs in the small hours; a periodic client fires every N minutes. The rhythm is local
time (a random timezone per scenario), perturbed hour by hour and minute by minute, so
no two days are the same shape and none is flat.
"""

import math
from collections.abc import Callable
from random import Random

from lab.eval.profiles import DAY_S, Deployment, Grid, lognorm

# Relative arrival intensity by local hour (0-23): where the peaks of each kind of use are.
HOURLY = {
    "household": (
        0.05,
        0.03,
        0.02,
        0.02,
        0.02,
        0.03,
        0.08,
        0.18,
        0.25,
        0.2,
        0.18,
        0.2,
        0.3,
        0.25,
        0.2,
        0.22,
        0.3,
        0.5,
        0.8,
        1.0,
        0.95,
        0.85,
        0.6,
        0.25,
    ),
    "office": (
        0.01,
        0.01,
        0.01,
        0.01,
        0.01,
        0.01,
        0.02,
        0.06,
        0.35,
        0.85,
        1.0,
        0.95,
        0.45,
        0.7,
        0.95,
        0.9,
        0.8,
        0.55,
        0.2,
        0.08,
        0.05,
        0.03,
        0.02,
        0.01,
    ),
    "agents": (0.85,) * 24,
}

HUMAN = 0
AGENT = 1
BATCH = 2
PERIODIC = 3
EXTRA = 4

Request = tuple[float, int, int, int]  # arrival, prompt tokens, output tokens, source


def poisson(rng: Random, lam: float) -> int:
    if lam <= 0:
        return 0
    if lam > 30:
        return max(0, round(rng.gauss(lam, math.sqrt(lam))))
    limit, k, p = math.exp(-lam), 0, rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


def minute_curve(rng: Random, grid: Grid, dep: Deployment, table: tuple[float, ...]) -> list[float]:
    """Intensity per minute of the day: the hourly table in local time, each hour bent by
    its own factor, times a slow random walk (a day's mood) and minute noise."""
    start = grid.end - DAY_S
    shift = rng.uniform(-0.75, 0.75)
    bend = [math.exp(rng.gauss(0.0, 0.3)) for _ in range(24)]
    out = []
    walk = 0.0
    for m in range(1440):
        h = (((start + 60.0 * m) / 3600.0) + dep.tz + shift) % 24.0
        i = int(h)
        f = h - i
        j = (i + 1) % 24
        w = table[i] * bend[i] * (1 - f) + table[j] * bend[j] * f
        walk = 0.97 * walk + rng.gauss(0.0, 0.06)
        out.append(max(0.0, w * math.exp(walk)))
    return out


class Traffic:
    """The day's requests, built source by source; `offset` (a fault's context creep) adds
    tokens to the history every conversation carries at a given time."""

    def __init__(self, rng: Random, grid: Grid, dep: Deployment, ctx_slot: int) -> None:
        self.rng = rng
        self.grid = grid
        self.dep = dep
        self.start = grid.end - DAY_S
        self.ctx_slot = ctx_slot
        self.requests: list[Request] = []
        self.system = int(lognorm(rng, 900, 0.6))
        self.max_out = rng.choice([1024, 2048, 4096, 8192])
        self.offset: Callable[[float], float] = lambda t: 0.0
        self.doc_share = rng.uniform(0.03, 0.1)
        # Chats people actually keep going: the UI trims, or they start a new one.
        self.keep = lognorm(rng, 7000, 0.4)
        # Agent frameworks compact their history before the window is full.
        self.agent_keep = ctx_slot * rng.uniform(0.4, 0.7)

    def _fit(
        self, t: float, history: float, prompt: float, out: float, keep: float | None = None
    ) -> tuple[int, int]:
        """A prompt the client would send: its history trimmed to what fits in a slot (the
        UIs drop old turns), plus whatever a creeping context adds."""
        out = min(out, self.max_out)
        room = self.ctx_slot - out
        extra = self.offset(t)
        if extra > 0:
            total = min(self.system + history + prompt + extra, room * 0.985)
        else:
            kept = min(history, keep or self.keep, max(0.0, room * 0.8 - self.system - prompt))
            total = self.system + kept + prompt
            total = min(total, room * 0.9)
        return max(16, int(total)), max(1, int(out))

    def humans(self, peak_per_hour: float, table: tuple[float, ...], mean_turns: float) -> None:
        rng = self.rng
        curve = minute_curve(rng, self.grid, self.dep, table)
        scale = peak_per_hour / 60.0
        gap_median = rng.uniform(50, 150)
        out_median = rng.uniform(200, 500)
        for m, w in enumerate(curve):
            for _ in range(poisson(rng, w * scale)):
                t = self.start + 60.0 * m + 60.0 * rng.random()
                history = 0.0
                turns = 1 + int(rng.expovariate(1.0 / mean_turns))
                for _ in range(turns):
                    if rng.random() < self.doc_share:
                        user = lognorm(rng, 1800, 0.7)
                    else:
                        user = lognorm(rng, 70, 1.0)
                    out = lognorm(rng, out_median, 0.7)
                    p, o = self._fit(t, history, user, out)
                    self.requests.append((t, p, o, HUMAN))
                    history += user + o
                    t += lognorm(rng, gap_median, 0.8) + o / max(self.dep.decode_tps, 1.0)
                    if t >= self.grid.end:
                        break

    def agents(self, tasks_per_hour: float, bursty: bool) -> None:
        rng = self.rng
        curve = minute_curve(rng, self.grid, self.dep, HOURLY["agents"])
        if bursty:  # runs kicked off together: a CI pipeline, a human starting several agents
            for _ in range(rng.randint(3, 9)):
                at = rng.randrange(1440)
                for m in range(at, min(1440, at + rng.randint(5, 30))):
                    curve[m] *= rng.uniform(2.0, 4.0)
        scale = tasks_per_hour / 60.0
        tools = lognorm(rng, 3000, 0.5)
        for m, w in enumerate(curve):
            for _ in range(poisson(rng, w * scale)):
                t = self.start + 60.0 * m + 60.0 * rng.random()
                history = tools
                for _ in range(rng.randint(4, 30)):
                    out = lognorm(rng, 180, 0.8)
                    p, o = self._fit(t, history, lognorm(rng, 400, 1.1), out, self.agent_keep)
                    self.requests.append((t, p, o, AGENT))
                    history += lognorm(rng, 500, 1.0) + o
                    t += lognorm(rng, 6, 0.7) + o / max(self.dep.decode_tps, 1.0)
                    if t >= self.grid.end:
                        break

    def batch(self, per_minute: float) -> tuple[float, float]:
        """A batch between about 01:00 and 04:00 local time; returns its (start, stop)."""
        rng = self.rng
        local_start = rng.uniform(0.75, 1.5)
        length = rng.uniform(1.8, 3.4) * 3600.0
        day0 = math.floor((self.start / 3600.0 + self.dep.tz) / 24.0) * 24.0
        begin = (day0 + local_start - self.dep.tz) * 3600.0
        # The latest batch to begin: tonight's, running at the end, if it has begun. One
        # cut short by the capture is still tonight's load (a creep needs its callers).
        if begin < self.start:
            begin += DAY_S
        stop = min(begin + length, self.grid.end)
        t = begin
        while t < stop:
            t += rng.expovariate(per_minute / 60.0)
            p, o = self._fit(t, 0.0, lognorm(rng, 1800, 0.6), lognorm(rng, 380, 0.5))
            self.requests.append((t, p, o, BATCH))
        return begin, stop

    def periodic(self, every_s: float, burst: int) -> None:
        rng = self.rng
        prompt = lognorm(rng, 700, 0.5)
        t = self.start + rng.uniform(0, every_s)
        while t < self.grid.end:
            for i in range(burst):
                p, o = self._fit(t, 0.0, prompt * rng.uniform(0.95, 1.05), lognorm(rng, 120, 0.4))
                self.requests.append((t + 0.3 * i, p, o, PERIODIC))
            t += every_s * rng.uniform(0.995, 1.005)

    def burst(self, quiet_after: float | None) -> None:
        """Somebody runs an evaluation script or a bulk job for a few minutes: more than
        the engine takes, a queue that drains when it stops. Not in the hour before
        `quiet_after` (a fault's onset), where it would be the fault's."""
        rng, dep = self.rng, self.dep
        latest = min(self.grid.end, quiet_after or self.grid.end) - 3600.0 - 900.0
        if latest <= self.start + 600:
            return
        at = rng.uniform(self.start + 600, latest)
        length = rng.uniform(3, 12) * 60.0
        pt, o = int(lognorm(rng, 900, 0.4)), int(lognorm(rng, 250, 0.4))
        rate = capacity_per_s(dep, pt, o) * rng.uniform(1.2, 2.0)
        t = at
        while t < at + length:
            t += rng.expovariate(rate)
            q, r = self._fit(t, 0.0, pt * rng.uniform(0.8, 1.2), o * rng.uniform(0.8, 1.2))
            self.requests.append((t, q, r, BATCH))

    def thin(self, keep: float) -> None:
        """Keep each request with probability `keep`: the rhythm's shape, a lower height."""
        if keep < 1.0:
            r = self.rng.random
            self.requests = [q for q in self.requests if r() < keep]


def service_s(dep: Deployment, p: int, o: int) -> float:
    return p / dep.prefill_tps + o / dep.decode_tps


def day(
    rng: Random,
    grid: Grid,
    dep: Deployment,
    ctx_slot: int,
    offset: Callable[[float], float] | None = None,
    quiet_after: float | None = None,
) -> tuple[Traffic, tuple[float, float] | None]:
    """The day's requests for the deployment's rhythm (with a creeping context if `offset`).
    Returns the traffic and the batch window if there is one."""
    tr = Traffic(rng, grid, dep, ctx_slot)
    if offset is not None:
        tr.offset = offset
    batch = None
    office = HOURLY["office"]
    if dep.weekend:  # a weekend office: a few people from home
        office = tuple(0.15 * v + 0.02 for v in office)
    if dep.rhythm == "household":
        tr.humans(rng.uniform(3, 12), HOURLY["household"], rng.uniform(3, 7))
    elif dep.rhythm == "office":
        tr.humans(rng.uniform(10, 36), office, rng.uniform(3, 6))
    elif dep.rhythm == "agents":
        tr.agents(rng.uniform(3, 10), rng.random() < 0.7)
        if rng.random() < 0.5:
            tr.humans(rng.uniform(1, 4), HOURLY["household"], 3)
    elif dep.rhythm == "nightly-batch":
        tr.humans(rng.uniform(2, 8), rng.choice([HOURLY["household"], office]), 4)
        cap = 60.0 * _slots_eff(dep) / max(service_s(dep, 2200, 420), 0.5)
        batch = tr.batch(max(1.0, min(40.0, cap * rng.uniform(0.7, 1.1))))
    else:  # retry-loop: a periodic client and light human use
        tr.periodic(rng.choice([60, 120, 300, 300, 600, 900]), rng.randint(1, 4))
        tr.humans(rng.uniform(1, 6), HOURLY["household"], 4)
    tr.requests.sort()
    limit_utilisation(tr, dep, 0.97 if dep.rhythm == "nightly-batch" else rng.uniform(0.35, 0.8))
    if rng.random() < 0.3:
        tr.burst(quiet_after)
        tr.requests.sort()
    return tr, batch


def _slots_eff(dep: Deployment) -> float:
    """Sequences' worth of throughput: batched decode gains little past a dozen."""
    n = dep.slots
    return n / (1 + 0.08 * (n - 1))


def limit_utilisation(tr: Traffic, dep: Deployment, cap: float) -> None:
    """A healthy deployment is sized for its peak: thin the day if its busiest 15 minutes
    would need more than `cap` of the engine."""
    busy: dict[int, float] = {}
    for a, p, o, _ in tr.requests:
        k = int(a // 900)
        busy[k] = busy.get(k, 0.0) + service_s(dep, p, o)
    if not busy:
        return
    peak = max(busy.values()) / (900.0 * _slots_eff(dep))
    if peak > cap:
        tr.thin(cap / peak)


def capacity_per_s(dep: Deployment, p: int, o: int) -> float:
    """Requests per second the engine finishes with every slot busy on requests of this size
    (decode shares the step among the slots, prefill does not)."""
    n = dep.slots
    svc = p / dep.prefill_tps + o * (1 + 0.08 * (n - 1)) / dep.decode_tps
    return n / max(svc, 0.05)
