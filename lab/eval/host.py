"""The host's memory through the day: the kernel, daemons, a desktop with its browser,
transient jobs, the page cache, swap, and what /proc/pressure and /proc/vmstat count.

Anonymous memory is what the processes hold (on a unified machine that includes what the
accelerator allocated); whatever does not fit in RAM goes to swap while there is swap;
MemAvailable is what is left after the anonymous memory, the kernel's own and a
watermark; the page cache fills what is free and gives it back first, so MemFree moves
a lot and MemAvailable hardly at all.
"""

from dataclasses import dataclass
from random import Random

from lab.eval.profiles import GIB, MIB, Deployment, Grid

PAGE = 4096.0


@dataclass
class Background:
    kernel: list[float]
    services: list[float]  # daemons, exporters, Prometheus' head block
    desktop: list[float]  # a session and its browser
    jobs: list[float]  # transient work that gives its memory back (a compile, a notebook)
    cache_want: list[float]  # the page cache's appetite
    swap_base: list[float]  # pages swapped out long ago and never touched since
    blips: list[float]  # PSI stall seconds from model loads and backups, per interval
    wmark: float  # what MemAvailable keeps back (the low watermarks)
    floor: float  # MemAvailable when reclaim has nothing left to give
    shmem: float

    def fixed(self, k: int) -> float:
        """Everything anonymous on the host that is not an engine nor a fault's process."""
        return self.kernel[k] + self.services[k] + self.desktop[k] + self.jobs[k] + self.shmem


def _ar(rng: Random, n: int, sigma: float, keep: float = 0.95) -> list[float]:
    """Slowly wandering noise (AR(1)); its steps are sums of three uniforms, near enough to
    normal and a fraction of the cost."""
    out, x = [], 0.0
    r = rng.random
    scale = 2.0 * sigma
    for _ in range(n):
        x = keep * x + (r() + r() + r() - 1.5) * scale
        out.append(x)
    return out


def background(rng: Random, grid: Grid, dep: Deployment, quiet_from: float) -> Background:
    """The host without the engines and without any fault. Transient jobs stay out of the
    hour before `quiet_from` (a fault's onset), where they would be mistaken for it."""
    n, total = grid.n, float(dep.machine.host_total)
    kbase = rng.uniform(0.8, 2.2) * GIB + total * rng.uniform(0.005, 0.015)
    kn = _ar(rng, n, 8 * MIB)
    kernel = [kbase + v for v in kn]
    sbase = rng.uniform(0.5, 2.5) * GIB
    sn = _ar(rng, n, 20 * MIB, 0.9)
    head = rng.uniform(0.1, 0.6) * GIB if dep.prometheus else 0.0
    services = []
    for k in range(n):
        t = grid.time(k)
        tooth = (t % 7200.0) / 7200.0  # Prometheus cuts its head block every two hours
        services.append(sbase + head * tooth + sn[k])
    desktop = [0.0] * n
    if dep.workstation:
        shell = rng.uniform(0.6, 1.6) * GIB
        browser = rng.uniform(1.5, 8.0) * GIB
        closes = rng.random() < 0.5
        dn = _ar(rng, n, 40 * MIB, 0.97)
        wake, sleep = rng.uniform(6.5, 9.5), rng.uniform(22.0, 25.5)
        for k in range(n):
            h = grid.local_hour(grid.time(k), dep.tz)
            hh = h if h >= wake else h + 24.0
            awake = wake <= hh < sleep
            frac = (hh - wake) / max(1.0, sleep - wake)
            b = browser * (0.35 + 0.65 * frac) if awake else (0.0 if closes else browser * 0.3)
            desktop[k] = max(0.0, shell + b + dn[k])
    jobs = [0.0] * n
    if rng.random() < (0.55 if dep.workstation else 0.2):
        for _ in range(rng.randint(1, 3)):
            length = rng.uniform(10, 90) * 60.0
            at = rng.uniform(grid.t0, grid.end - length - 1800.0)
            if quiet_from - 3600.0 < at + length and at < grid.end:
                continue
            size = rng.uniform(1.5, 10.0) * GIB * min(1.0, total / (64 * GIB))
            k0, k1 = grid.after(at), grid.after(at + length)
            rise = max(1, (k1 - k0) // 4)
            for k in range(k0, min(k1, n)):
                x = min(1.0, (k - k0 + 1) / rise, (k1 - k) / rise)
                jobs[k] += size * x * rng.uniform(0.9, 1.0)
    cw = total * rng.uniform(0.15, 0.5)
    cn = _ar(rng, n, 60 * MIB, 0.995)
    backup = rng.random() < 0.4
    bk = rng.uniform(2.0, 5.0)
    cache_want = []
    blips = [0.0] * n
    for k in range(n):
        h = grid.local_hour(grid.time(k), dep.tz)
        extra = 0.25 * total if backup and bk <= h < bk + 1.0 else 0.0
        if extra and rng.random() < 0.2:
            blips[k] += rng.uniform(0.05, 0.6)
        cache_want.append(max(0.05 * total, cw + cn[k] + extra))
    swap = float(dep.machine.swap_total)
    sb = swap * rng.uniform(0.0, 0.12)
    drift = swap * rng.uniform(0.0, 0.03)
    swap_base = [sb + drift * k / n for k in range(n)]
    return Background(
        kernel,
        services,
        desktop,
        jobs,
        cache_want,
        swap_base,
        blips,
        wmark=total * rng.uniform(0.004, 0.01),
        floor=total * rng.uniform(0.008, 0.018),
        shmem=rng.uniform(0.2, 1.0) * GIB,
    )


@dataclass
class HostState:
    available: list[float]
    free: list[float]
    cached: list[float]
    swap_used: list[float]
    psi_some: list[float]  # share of each interval some task stalled
    psi_full: list[float]
    some_total: list[float]  # node_pressure_memory_waiting_seconds_total
    full_total: list[float]  # node_pressure_memory_stalled_seconds_total
    pswpin: list[float]
    pswpout: list[float]
    pgmajfault: list[float]
    oom_kill: list[float]
    anon: list[float]


def settle(
    rng: Random,
    grid: Grid,
    dep: Deployment,
    bg: Background,
    extra: list[float],
    stall: list[tuple[float, float]],
    kills: list[float],
) -> HostState:
    """The host's gauges and counters given everything anonymous (`extra`: engines and
    other processes), a fault's stall (some, full shares) and the OOM kills' times."""
    n, dt = grid.n, grid.dt
    total = float(dep.machine.host_total)
    swap_total = float(dep.machine.swap_total)
    wmark, floor, shmem = bg.wmark, bg.floor, bg.shmem
    c_some = rng.uniform(20.0, 400.0)  # PSI seconds accumulated since boot
    c_full = c_some * rng.uniform(0.3, 0.6)
    pin = rng.uniform(1e3, 5e5)
    pout = pin * rng.uniform(1.0, 2.0)
    maj = rng.uniform(1e4, 2e6)
    ooms = float(rng.choice([0, 0, 0, 0, 1, 2]))
    kills = sorted(kills)
    ki = 0
    base_some = rng.uniform(0.00005, 0.0015)
    r = rng.random
    room = total - wmark - floor
    cols: list[list[float]] = [[] for _ in range(13)]
    (
        a_avail,
        a_free,
        a_cached,
        a_swap,
        a_some,
        a_full,
        a_stot,
        a_ftot,
        a_pin,
        a_pout,
        a_maj,
        a_oom,
        a_anon,
    ) = cols
    prev_swap = bg.swap_base[0]
    held = 0.0  # swapped out by this day's pressure
    fade = 0.5 ** (dt / 5400.0)
    noise = _ar(rng, n, 15 * MIB, 0.8)
    kernel, services, desktop, jobs = bg.kernel, bg.services, bg.desktop, bg.jobs
    t0 = grid.t0
    for k in range(n):
        t = t0 + k * dt
        anon = kernel[k] + services[k] + desktop[k] + jobs[k] + extra[k] + shmem
        # Swapped pages stay out until touched or their owner exits (a kill frees them).
        while ki < len(kills) and kills[ki] <= t:
            ooms += 1
            ki += 1
            held *= 0.4  # the victim's share of swap is freed with it
        held *= fade
        swap_used = bg.swap_base[k]
        if anon > room:
            held = max(held, anon - room)
            avail = floor * (0.7 + 0.5 * r())
        else:
            avail = max(total * 0.003, total - anon - wmark + noise[k])
        swap_used = min(swap_total, swap_used + held)
        cache = max(0.0, min(bg.cache_want[k], avail - floor * 0.5))
        free = max(total * 0.002, avail - cache * 0.92)
        frac = avail / total
        some = base_some + bg.blips[k] / dt
        if frac < 0.12:
            some += 0.03 * ((0.12 - frac) / 0.12) ** 2
        if frac < 0.04:
            some += 0.25 * ((0.04 - frac) / 0.04) ** 1.5
        st_some, st_full = stall[k]
        some = min(0.95, (some + st_some) * (0.8 + 0.4 * r()))
        full = min(some, some * (0.25 + 0.25 * r()) + st_full * 0.5)
        c_some += some * dt
        c_full += full * dt
        if swap_used > prev_swap:
            pout += (swap_used - prev_swap) / PAGE * (1.0 + 0.4 * r())
        if swap_total > 0 and frac < 0.2:
            pout += 40.0 * r() * dt / 60.0
        churn = st_some * 4.0e3 * dt + (2.0e2 * dt * some if frac < 0.1 else 0.0)
        if swap_total > 0:
            pin += churn * (0.7 + 0.6 * r())
        maj += 3.0 * r() * dt / 60.0 + churn * 1.5 + bg.blips[k] * 2e3
        prev_swap = swap_used
        a_avail.append(avail)
        a_free.append(free)
        a_cached.append(cache)
        a_swap.append(swap_used)
        a_some.append(some)
        a_full.append(full)
        a_stot.append(c_some)
        a_ftot.append(c_full)
        a_pin.append(float(int(pin)))
        a_pout.append(float(int(pout)))
        a_maj.append(float(int(maj)))
        a_oom.append(ooms)
        a_anon.append(anon)
    return HostState(*cols)
