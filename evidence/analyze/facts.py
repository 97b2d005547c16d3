"""Facts about one bundle, derived from the archive: the only thing the rules read.

Invariants:
- A fact that was not measured is absent from `series` (or None), and its source is in
  `unmeasured` with the reason: rules never see a 0 for "unknown".
- Each logical series comes from the source that covers the most time: the Prometheus
  history in the bundle (hours, days) or the bundle's own samples (the window).
- Reading only: the archive is queried, never written.
"""

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain, pairwise
from statistics import median_high
from typing import Any

import duckdb

from evidence.analyze import statlines
from evidence.analyze.failure import locate
from evidence.analyze.load import CARVE_OUT_MAX
from evidence.analyze.window import Window

Series = list[tuple[float, float | None]]

# Logical series -> where each source keeps it. Prometheus: the query names of the
# prometheus probe, the first that has series (a newer name before an older one); engines:
# metric names, summed over engines and labels per instant.
_PROMETHEUS = {
    "accelerator_used": ("accelerator_memory_used",),
    "accelerator_total": ("accelerator_memory_total",),
    "kv_cache": ("kv_cache_usage", "kv_cache_usage_legacy"),
    "context_high_water": ("context_high_water",),
    "requests_running": ("requests_running",),
    "requests_waiting": ("requests_waiting",),
    "tokens_generated": ("tokens_generated",),
    "tokens_prompt": ("tokens_prompt",),
    "decode_calls": ("decode_calls",),
    "engine_rss": ("engine_resident_memory",),
    "preemptions": ("preemptions",),
    "available": ("host_memory_available",),
    "gateway_up": ("gateway_up",),
    "engine_up": ("engine_up",),
    "memory_total": ("host_memory_total", "host_memory_total_darwin"),
    "swap_total_history": ("host_swap_total",),
    "swap_free_history": ("host_swap_free",),
    "swap_used_history": ("host_swap_used_darwin",),
    "compressed_history": ("host_memory_compressed_darwin",),
    "pswpout_history": ("host_swap_out_pages",),
    "majfault_history": ("host_major_faults",),
    "oom_kills_history": ("host_oom_kills",),
    "psi_some_seconds": ("host_psi_memory_some_seconds",),
    "psi_full_seconds": ("host_psi_memory_full_seconds",),
}
# Levels of one engine (a cache's share, a context high-water) do not add up across
# engines: a second server starting would read as the first one's cache filling. The
# machine's level is the fullest engine's; every other series is an amount, summed.
LEVELS = ("kv_cache", "context_high_water")
# Queries whose series are each one scrape target's `up`, kept apart per target: a sum would
# hide which service went down.
_TARGET_QUERIES = ("gateway_up", "engine_up", "targets_up")
# node-exporter's drm collector: an APU's card is its carve-out and its GTT (load.py says why).
_GTT = {"accelerator_used": "accelerator_gtt_used", "accelerator_total": "accelerator_gtt_total"}
_INSTRUMENT_QUERIES = (*_PROMETHEUS["accelerator_used"], *_PROMETHEUS["available"])
# An engine's own word for "working on something": any of these above zero.
BUSY_METRICS = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "llamacpp:requests_processing",
    "llamacpp:requests_deferred",
    "/queue:running",
    "/queue:pending",
    "/slots:busy",
    "/sdapi/v1/progress:progress",
)
ENGINE_SERIES = {
    "kv_cache": (
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "sglang:token_usage",
        "llamacpp:kv_cache_usage_ratio",
    ),
    "context_high_water": ("llamacpp:n_tokens_max",),
    "requests_running": (
        "vllm:num_requests_running",
        "sglang:num_running_reqs",
        "llamacpp:requests_processing",
    ),
    "requests_waiting": (
        "vllm:num_requests_waiting",
        "sglang:num_queue_reqs",
        "llamacpp:requests_deferred",
    ),
    "preemptions": ("vllm:num_preemptions_total", "sglang:num_retracted_requests_total"),
    "tokens_generated": (
        "vllm:generation_tokens_total",
        "sglang:generation_tokens_total",
        "llamacpp:tokens_predicted_total",
    ),
    # Progress too: a long prompt being processed generates nothing for a while.
    "tokens_prompt": (
        "vllm:prompt_tokens_total",
        "sglang:prompt_tokens_total",
        "llamacpp:prompt_tokens_total",
    ),
    # llama.cpp counts a request's generated tokens when it finishes: these two move while a
    # long generation runs (formats.md 6.1, seen on a real server).
    "decode_calls": ("llamacpp:n_decode_total",),
    "slot_tokens": ("/slots:decoded",),
}


@dataclass
class Facts:
    bundle: dict[str, Any]
    probes: dict[str, tuple[str, str | None]]
    series: dict[str, Series] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    unmeasured: dict[str, str] = field(default_factory=dict)
    prometheus: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    memory_total: float | None = None
    processes: list[dict[str, Any]] = field(default_factory=list)
    gpu_devices: list[dict[str, Any]] = field(default_factory=list)
    gpu_processes: list[dict[str, Any]] = field(default_factory=list)
    engines: list[dict[str, Any]] = field(default_factory=list)
    models: list[dict[str, Any]] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    lines: dict[str, list[str]] = field(default_factory=dict)  # tag -> kernel/log lines
    # The engines' periodic stats lines as readings, in the log's order (analyze/statlines).
    stats: list[statlines.Reading] = field(default_factory=list)
    prompts: list[statlines.Prompt] = field(default_factory=list)
    truncated: list[bool] = field(default_factory=list)  # each released request outgrew its slot
    loads: list[statlines.Load] = field(default_factory=list)
    previous: dict[str, Any] | None = None
    engine_load: dict[str, list[float]] = field(default_factory=dict)  # engine -> busy readings
    engine_targets_up: int | None = None  # Prometheus engine targets up at the end
    # Each scrape target's `up` history, by "job/instance", and the query that named it.
    targets: dict[str, Series] = field(default_factory=dict)
    target_query: dict[str, str] = field(default_factory=dict)
    # Requests waiting by the target ("job/instance") that published them: the queue's
    # series above is their sum.
    queues: dict[str, Series] = field(default_factory=dict)
    # Each OOM-killer kill the kernel log holds: seconds before the bundle began (None when
    # the kernel did not date it), and the line.
    oom_kills: list[tuple[float | None, str]] = field(default_factory=list)
    # The incident window: the failure (if any) and the hours before it (analyze/window.py).
    window: Window | None = None
    # Each bundle of this host in the last day, this one included, oldest first: when, the
    # memory its discrete accelerators held (the lowest reading), their total, and whether a
    # model manager answered saying nothing was loaded.
    card_bundles: list[tuple[float, float, float, bool]] = field(default_factory=list)
    # Each process of this bundle, by "pid name", and its RSS in this bundle and in the
    # host's earlier bundles of the last day: (t, rss) readings, one process instance each.
    process_history: dict[str, Series] = field(default_factory=dict)
    # Each series' source that covered less time, kept aside: (points, origin).
    shorter: dict[str, tuple[Series, str]] = field(default_factory=dict)
    # On a machine of several cards, each card's name: its lines (`card_line`) stand
    # beside the cards' sums.
    cards: list[str] = field(default_factory=list)

    def measured(self, probe: str) -> bool:
        return self.probes.get(probe, ("absent", None))[0] == "ok"

    def has(self, name: str) -> bool:
        return len([v for _, v in self.series.get(name, []) if v is not None]) >= 2


def _rows(con: duckdb.DuckDBPyConnection, query: str, params: list[Any]) -> list[dict[str, Any]]:
    cursor = con.execute(query, params)
    names = [d[0] for d in cursor.description or []]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _ts(value: datetime) -> float:
    return value.timestamp()


def derive(con: duckdb.DuckDBPyConnection, bundle_id: str) -> Facts:
    (bundle,) = _rows(con, "SELECT * FROM bundles WHERE bundle_id = ?", [bundle_id])
    probes = {
        r["probe"]: (r["status"], r["reason"])
        for r in _rows(
            con, "SELECT probe, status, reason FROM probes WHERE bundle_id = ?", [bundle_id]
        )
    }
    facts = Facts(bundle=bundle, probes=probes)
    for probe, (status, reason) in probes.items():
        if status != "ok":
            facts.unmeasured[probe] = f"{status}: {reason}"
    _memory(con, facts, bundle_id)
    _prometheus(con, facts, bundle_id)
    _engine_series(con, facts, bundle_id)
    _pressure(con, facts, bundle_id)
    # Per engine, its busy readings summed at each instant: busy when any is above zero.
    for engine, values in con.execute(
        """SELECT engine, list(v ORDER BY t) FROM (
               SELECT labels['engine'] AS engine, t, sum(value) AS v FROM samples
               WHERE bundle_id = ? AND source = 'engine' AND list_contains(?, metric)
                   AND value IS NOT NULL GROUP BY engine, t)
           GROUP BY engine""",
        [bundle_id, list(BUSY_METRICS)],
    ).fetchall():
        facts.engine_load[engine] = values
    facts.processes = _rows(
        con,
        "SELECT pid, ppid, name, cmdline, rss_bytes, state, epoch(start_time) AS started "
        "FROM processes WHERE bundle_id = ?",
        [bundle_id],
    )
    facts.gpu_devices = _rows(con, "SELECT * FROM gpu_devices WHERE bundle_id = ?", [bundle_id])
    facts.gpu_processes = _rows(con, "SELECT * FROM gpu_processes WHERE bundle_id = ?", [bundle_id])
    facts.engines = _rows(
        con, "SELECT name, kind, url, status, reason FROM engines WHERE bundle_id = ?", [bundle_id]
    )
    facts.models = _rows(
        con,
        "SELECT engine, kind, model, state, size_bytes, size_vram_bytes, expires_at, "
        "source FROM engine_models WHERE bundle_id = ?",
        [bundle_id],
    )
    facts.jobs = _rows(con, "SELECT * FROM engine_jobs WHERE bundle_id = ?", [bundle_id])
    facts.checks = _rows(
        con,
        "SELECT name, kind, ok, status, reason, answer FROM health_checks WHERE bundle_id = ?",
        [bundle_id],
    )
    for table, order in (("kernel_events", "seq"), ("log_events", "source, line_no")):
        for row in _rows(
            con, f"SELECT text, tags FROM {table} WHERE bundle_id = ? ORDER BY {order}", [bundle_id]
        ):
            for tag in row["tags"]:
                facts.lines.setdefault(tag, []).append(row["text"])
    facts.stats = statlines.readings(facts.lines.get("engine-stats", []))
    facts.prompts = statlines.prompts(
        facts.lines.get("engine-stats", []), _slot_context(con, facts, bundle_id)
    )
    facts.truncated = statlines.truncations(facts.lines.get("engine-stats", []))
    facts.loads = statlines.loads(facts.lines.get("engine-stats", []))
    facts.oom_kills = [
        (None if t is None else bundle["started_at"].timestamp() - t.timestamp(), text)
        for t, text in con.execute(
            """SELECT t, text FROM kernel_events WHERE bundle_id = ?
               AND list_contains(tags, 'oom-killer') AND text LIKE '%Killed process%'
               ORDER BY t NULLS FIRST""",
            [bundle_id],
        ).fetchall()
    ]
    previous = _rows(
        con,
        """
        SELECT b.bundle_id, b.boot_id, b.started_at,
               min(m.available_bytes) AS min_available, max(m.total_bytes) AS total,
               max(s.value) FILTER (WHERE s.metric = 'memory.full.avg10') AS psi_full
        FROM bundles b LEFT JOIN host_memory m USING (bundle_id)
        LEFT JOIN samples s ON s.bundle_id = b.bundle_id AND s.source = 'psi'
        WHERE b.host = ? AND b.started_at < ? GROUP BY ALL
        ORDER BY b.started_at DESC LIMIT 1""",
        [bundle["host"], bundle["started_at"]],
    )
    facts.previous = previous[0] if previous else None
    _archive_history(con, facts, bundle)
    _name_recorder(con, facts, bundle)
    _finer_from_recorder(facts, bundle)
    failure = locate(facts)
    captured = bundle["started_at"].timestamp() + (bundle["window_s"] or 0.0)
    facts.window = Window(
        end=failure.at if failure else captured,
        failure=failure,
        cut=failure.at if failure and failure.event else None,
    )
    return facts


def _memory(con: duckdb.DuckDBPyConnection, facts: Facts, bundle_id: str) -> None:
    rows = con.execute(
        "SELECT t, used_bytes, available_bytes, total_bytes, swap_used_bytes "
        "FROM host_memory WHERE bundle_id = ? ORDER BY t",
        [bundle_id],
    ).fetchall()
    if not rows:
        facts.unmeasured.setdefault("memory", "no meminfo readings in the bundle")
        return
    facts.memory_total = max((r[3] for r in rows if r[3] is not None), default=None)
    for name, column in (("memory_used", 1), ("available", 2), ("swap_used", 4)):
        facts.series[name] = [(_ts(r[0]), r[column]) for r in rows]
        facts.origin[name] = "bundle"


def _prometheus(con: duckdb.DuckDBPyConnection, facts: Facts, bundle_id: str) -> None:
    rows = con.execute(
        """SELECT query, status, any_value(raw) FILTER (WHERE t IS NULL)
                          FROM prometheus_series WHERE bundle_id = ? GROUP BY query, status""",
        [bundle_id],
    ).fetchall()
    facts.prometheus = {q: (status, reason) for q, status, reason in rows}
    for name, queries in _PROMETHEUS.items():
        answered = [q for q in queries if facts.prometheus.get(q, (None,))[0] == "ok"]
        if not answered:
            status, reason = facts.prometheus.get(queries[0], (None, None))
            if status is not None:
                facts.unmeasured.setdefault(f"prometheus:{queries[0]}", f"{status}: {reason}")
            continue
        query = answered[0]
        combine = "max" if name in LEVELS else "sum"
        points = con.execute(
            f"""SELECT t, {combine}(value) FROM prometheus_series
                WHERE bundle_id = ? AND query = ? AND t IS NOT NULL
                GROUP BY t ORDER BY t""",
            [bundle_id, query],
        ).fetchall()
        if name in _GTT:
            points = _with_gtt(con, bundle_id, _GTT[name], points)
        _prefer(facts, name, [(_ts(t), v) for t, v in points], "prometheus")
    _each_card(con, facts, bundle_id)
    # Engine targets that were up at the end, one per series: a target configured but
    # never up is not a second engine.
    ends = con.execute(
        """SELECT arg_max(value, t) FROM prometheus_series
           WHERE bundle_id = ? AND query = 'engine_up' AND t IS NOT NULL GROUP BY labels""",
        [bundle_id],
    ).fetchall()
    facts.engine_targets_up = sum(1 for (v,) in ends if v == 1) if ends else None
    # A job that answered the machine's own memory queries is an instrument, whatever its
    # name (a local exporter of AMD's GTT pool): its going down or coming back is a gap in
    # what was seen, never a service's outage or start.
    instruments = {
        job
        for (job,) in con.execute(
            """SELECT DISTINCT labels['job'] FROM prometheus_series
               WHERE bundle_id = ? AND list_contains(?, query)""",
            [bundle_id, list(_INSTRUMENT_QUERIES)],
        ).fetchall()
    }
    for query, job, instance, points in con.execute(
        """SELECT query, labels['job'], labels['instance'], list((t, value) ORDER BY t)
           FROM prometheus_series WHERE bundle_id = ? AND list_contains(?, query)
               AND t IS NOT NULL
           GROUP BY ALL""",
        [bundle_id, list(_TARGET_QUERIES)],
    ).fetchall():
        if job in instruments:
            continue
        key = f"{job or '?'}/{instance or '?'}"
        # The seed's own queries name the role (gateway, engine); `up` only repeats them.
        if key not in facts.targets or query != "targets_up":
            facts.targets[key] = [(_ts(t), v) for t, v in points]
            facts.target_query[key] = query
    for job, instance, points in con.execute(
        """SELECT job, instance, list((t, v) ORDER BY t) FROM (
               SELECT labels['job'] AS job, labels['instance'] AS instance, t, sum(value) AS v
               FROM prometheus_series WHERE bundle_id = ? AND query = 'requests_waiting'
                   AND t IS NOT NULL GROUP BY ALL)
           GROUP BY ALL""",
        [bundle_id],
    ).fetchall():
        facts.queues[f"{job or '?'}/{instance or '?'}"] = [(_ts(t), v) for t, v in points]
    _darwin_available(con, facts, bundle_id)
    if facts.has("available") and facts.origin.get("available") == "prometheus":
        # Prometheus saw the machine the history is of: its total, not this bundle's, if known.
        totals = [v for _, v in facts.series.get("memory_total", []) if v]
        total = totals[-1] if totals else facts.memory_total
        facts.memory_total = total
        if total:
            facts.series["memory_used"] = [
                (t, None if v is None else total - v) for t, v in facts.series["available"]
            ]
            facts.origin["memory_used"] = "prometheus"
            _memory_with_swap(facts)


def _memory_with_swap(facts: Facts) -> None:
    """Swap in use (Linux's is read as total less free), and memory used and swap used
    together, where Prometheus read both: on a machine at its ceiling all day a process
    that grows pushes pages into swap, and only the sum rises."""
    total = dict(facts.series.get("swap_total_history", []))
    free = facts.series.get("swap_free_history", [])
    swap = {t: total[t] - v for t, v in free if v is not None and total.get(t) is not None}
    if swap:
        facts.series["swap_in_use"] = sorted(swap.items())
        facts.series["memory_with_swap"] = [
            (t, v + swap[t]) for t, v in facts.series["memory_used"] if v is not None and t in swap
        ]
        for name in ("swap_in_use", "memory_with_swap"):
            facts.origin[name] = "prometheus"


ARCHIVE_LOOKBACK = "1 day"  # the archive read as a history: as far back as Prometheus
# The host's earlier bundles within the look-back; parameters: host, start, start.
_EARLIER = (
    "SELECT bundle_id FROM bundles WHERE host = ? AND started_at < ? "
    f"AND started_at >= CAST(? AS TIMESTAMPTZ) - INTERVAL '{ARCHIVE_LOOKBACK}'"
)


def _archive_history(con: duckdb.DuckDBPyConnection, facts: Facts, bundle: dict[str, Any]) -> None:
    """Without Prometheus the host's earlier bundles (the ten-minute baselines, earlier
    incidents) are a coarse history: their memory readings go before this bundle's, and
    each process of this bundle is followed through them (same pid, same start time)."""
    args = [bundle["host"], bundle["started_at"], bundle["started_at"]]
    if facts.origin.get("memory_used") == "bundle":
        # A bundle's thirty seconds are one reading at the archive's pace: each bundle,
        # this one too, is read as its first moment holding its worst (the least available),
        # so that a shape reads one pace, not half-hours as gaps between seconds.
        rows = con.execute(
            f"""SELECT min(t), arg_min(used_bytes, coalesce(available_bytes, 'infinity'::DOUBLE)),
                       min(available_bytes)
                FROM host_memory WHERE bundle_id IN ({_EARLIER}) OR bundle_id = ?
                GROUP BY bundle_id ORDER BY 1""",
            [*args, bundle["bundle_id"]],
        ).fetchall()
        if len(rows) >= 3:
            for name, column in (("memory_used", 1), ("available", 2)):
                facts.series[name] = [(_ts(r[0]), r[column]) for r in rows]
                facts.origin[name] = f"archive ({len(rows) - 1} earlier readings) and bundle"
    facts.card_bundles = [
        (_ts(t), used, total, bool(empty))
        for t, used, total, empty in con.execute(
            f"""WITH cards AS (
                    SELECT bundle_id, sum(used) AS used, sum(total) AS total FROM (
                        SELECT bundle_id, device_index, min(memory_used_bytes) AS used,
                               max(memory_total_bytes) AS total
                        FROM gpu_devices WHERE NOT coalesce(unified_memory, false)
                        GROUP BY ALL)
                    GROUP BY bundle_id),
                managers AS (
                    SELECT bundle_id, count(*) AS n FROM engines
                    WHERE status = 'ok' AND kind IN ('ollama', 'llama-swap') GROUP BY bundle_id),
                models AS (
                    SELECT bundle_id, count(*) AS n FROM engine_models
                    WHERE kind IN ('ollama', 'llama-swap') GROUP BY bundle_id)
                SELECT b.started_at, c.used, c.total,
                       coalesce(mg.n, 0) > 0 AND coalesce(md.n, 0) = 0
                FROM bundles b JOIN cards c USING (bundle_id)
                LEFT JOIN managers mg USING (bundle_id) LEFT JOIN models md USING (bundle_id)
                WHERE b.bundle_id IN ({_EARLIER}) OR b.bundle_id = ?
                ORDER BY b.started_at""",
            [*args, bundle["bundle_id"]],
        ).fetchall()
        if used is not None and total
    ]
    if not facts.has("accelerator_used") and len(facts.card_bundles) >= 3:
        # No card line in Prometheus: the card's readings bundle by bundle are its history.
        readings = len(facts.card_bundles) - 1
        for name, column in (("accelerator_used", 1), ("accelerator_total", 2)):
            facts.series[name] = [(c[0], c[column]) for c in facts.card_bundles]
            facts.origin[name] = f"archive ({readings} earlier readings) and bundle"
    for pid, name, points in con.execute(
        f"""SELECT p.pid, p.name, list((p.t, p.rss_bytes) ORDER BY p.t)
            FROM processes p JOIN (
                SELECT pid, name, start_time FROM processes WHERE bundle_id = ?
                GROUP BY ALL) now USING (pid, name)
            WHERE (p.bundle_id IN ({_EARLIER}) OR p.bundle_id = ?)
                AND p.start_time IS NOT DISTINCT FROM now.start_time
            GROUP BY ALL""",
        [bundle["bundle_id"], *args, bundle["bundle_id"]],
    ).fetchall():
        facts.process_history[f"{pid} {name}"] = [(_ts(t), v) for t, v in points]
    for key, points in con.execute(
        """SELECT labels['pid'] || ' ' || labels['name'], list((t, value) ORDER BY t)
           FROM samples WHERE bundle_id = ? AND source = 'process' AND metric = 'rss_bytes'
           GROUP BY ALL""",
        [bundle["bundle_id"]],
    ).fetchall():
        if key in facts.process_history:
            facts.process_history[key] = sorted(
                facts.process_history[key] + [(_ts(t), v) for t, v in points]
            )


def recorded_from(con: duckdb.DuckDBPyConnection, bundle_id: str) -> float | None:
    """When the resident recorder's readings in the bundle begin; None if it holds none
    (the bundle's own samples begin when the capture does)."""
    (first, started) = con.execute(
        """SELECT epoch(min(s.t)), epoch(any_value(b.started_at)) FROM samples s
           JOIN bundles b USING (bundle_id) WHERE bundle_id = ?""",
        [bundle_id],
    ).fetchone()
    return first if first is not None and first < started else None


def _name_recorder(con: duckdb.DuckDBPyConnection, facts: Facts, bundle: dict[str, Any]) -> None:
    """The readings the resident recorder kept from before the capture are named as its in
    every series they are part of: "points from recorder (3600 readings) and bundle"."""
    if not facts.measured("recorder"):
        return
    first = recorded_from(con, bundle["bundle_id"])
    started = bundle["started_at"].timestamp()
    if first is None:
        return
    for name, points in facts.series.items():
        if name in facts.origin:
            facts.origin[name] = _recorded(facts.origin[name], points, first, started)
    for name, (points, origin) in facts.shorter.items():
        facts.shorter[name] = (points, _recorded(origin, points, first, started))


def _recorded(origin: str, points: Series, first: float, started: float) -> str:
    """The origin of a series, naming the recorder where its readings are part of it."""
    if not origin.endswith(("bundle", "engines")):
        return origin
    kept = sum(1 for t, v in points if first <= t < started and v is not None)
    if not kept:
        return origin
    head, _, own = origin.rpartition(" and ")
    recorded = f"recorder ({kept} readings) and {own or origin}"
    return f"{head} and {recorded}" if head else recorded


RECORDER_SPLICE_MIN_S = 600.0  # the recorder's readings must reach this far back to stand in
# Series where the lowest reading is the one that matters (a scrape may miss it).
LOW_IS_TROUBLE = ("available",)


def _finer_from_recorder(facts: Facts, bundle: dict[str, Any]) -> None:
    """Where Prometheus holds the longer history and the recorder the finer one, the
    recorder's readings take Prometheus's place over the stretch they cover: a scrape gap
    there (Prometheus starved on the same box) is filled, and the last minutes run up to
    the capture. They are thinned to Prometheus's step, each step keeping its worst
    reading (the lowest available, the highest of the rest), so that the series keeps one
    pace and a shape reads it as before."""
    started = bundle["started_at"].timestamp()
    for name, (points, origin) in list(facts.shorter.items()):
        if facts.origin.get(name) != "prometheus" or "recorder" not in origin:
            continue
        known = sorted((t, v) for t, v in points if v is not None)
        if not known or known[0][0] > started - RECORDER_SPLICE_MIN_S:
            continue
        scraped = facts.series[name]
        step = median_high(b[0] - a[0] for a, b in pairwise(scraped)) if len(scraped) > 1 else 0.0
        if step <= 0 or step <= (known[-1][0] - known[0][0]) / len(known):
            continue  # Prometheus is as fine as the recorder here: nothing to gain
        worst = min if name in LOW_IS_TROUBLE else max
        buckets: dict[int, list[tuple[float, float]]] = {}
        for t, v in known:
            buckets.setdefault(int((t - known[0][0]) // step), []).append((t, v))
        thinned = [worst(b, key=lambda p: p[1]) for _, b in sorted(buckets.items())]
        before = [p for p in scraped if p[0] < known[0][0]]
        facts.series[name] = before + thinned
        facts.origin[name] = f"prometheus ({len(before)} points) and {origin}, at its step"
    if facts.origin.get("available", "").startswith("prometheus (") and facts.memory_total:
        facts.series["memory_used"] = [
            (t, None if v is None else facts.memory_total - v) for t, v in facts.series["available"]
        ]
        facts.origin["memory_used"] = facts.origin["available"]


def _darwin_available(con: duckdb.DuckDBPyConnection, facts: Facts, bundle_id: str) -> None:
    """macOS node-exporter has no MemAvailable: free plus inactive pages is what the system
    can hand out without paging (what Activity Monitor calls available, near enough)."""
    if facts.origin.get("available") == "prometheus":
        return
    points = con.execute(
        """SELECT t, sum(value) FROM prometheus_series WHERE bundle_id = ? AND t IS NOT NULL
               AND query IN ('host_memory_free_darwin', 'host_memory_inactive_darwin')
           GROUP BY t HAVING count(DISTINCT query) = 2 ORDER BY t""",
        [bundle_id],
    ).fetchall()
    _prefer(facts, "available", [(_ts(t), v) for t, v in points], "prometheus")


def _slot_context(con: duckdb.DuckDBPyConnection, facts: Facts, bundle_id: str) -> int | None:
    """How many tokens a llama-server slot holds, where its log's start line is older than
    the log kept: /props says it per slot; else the command line, whose context is split
    over its slots (-c 8192 -np 2: 4096 each), this bundle's or, where the server died
    before the capture, the latest of the host's earlier bundles. Unknown when none says."""
    row = con.execute(
        "SELECT value FROM samples WHERE bundle_id = ? AND source = 'engine' "
        "AND metric = '/props:n_ctx' AND value > 0 ORDER BY t DESC LIMIT 1",
        [bundle_id],
    ).fetchone()
    if row:
        return int(row[0])
    for p in chain(facts.processes, _earlier_servers(con, facts.bundle)):
        args = list(p["cmdline"] or [])
        if "llama-server" not in " ".join([p["name"] or "", *args[:1]]):
            continue
        context, slots = _flag(args, ("-c", "--ctx-size")), _flag(args, ("-np", "--parallel"))
        if context and slots:
            return context // slots
    return None


def _earlier_servers(
    con: duckdb.DuckDBPyConnection, bundle: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    """llama-server's processes in the host's earlier bundles, latest first; read only when
    this bundle's own processes did not say (the query runs at the first one asked for)."""
    yield from _rows(
        con,
        f"""SELECT p.name, p.cmdline FROM processes p JOIN bundles b USING (bundle_id)
            WHERE b.bundle_id IN ({_EARLIER})
                AND (p.name LIKE '%llama-server%' OR p.cmdline[1] LIKE '%llama-server%')
            ORDER BY b.started_at DESC""",
        [bundle["host"], bundle["started_at"], bundle["started_at"]],
    )


def _flag(args: list[str], names: tuple[str, ...]) -> int | None:
    for i, arg in enumerate(args):
        value = args[i + 1] if arg in names and i + 1 < len(args) else None
        for name in names:
            if arg.startswith(name + "="):
                value = arg.split("=", 1)[1]
        if value and value.isdigit():
            return int(value)
    return None


def _engine_series(con: duckdb.DuckDBPyConnection, facts: Facts, bundle_id: str) -> None:
    for name, metrics in ENGINE_SERIES.items():
        # One reading per engine and instant (the freeze and a sample may share one), then
        # summed over engines (the machine's load, not a double count), or the fullest
        # engine's level.
        combine = "max" if name in LEVELS else "sum"
        points = con.execute(
            f"""SELECT t, {combine}(v) FROM (
                   SELECT t, labels['engine'] AS engine, max(value) AS v FROM samples
                   WHERE bundle_id = ? AND source = 'engine' AND list_contains(?, metric)
                   GROUP BY t, engine)
               GROUP BY t ORDER BY t""",
            [bundle_id, list(metrics)],
        ).fetchall()
        _prefer(facts, name, [(_ts(t), v) for t, v in points], "engines")


def _pressure(con: duckdb.DuckDBPyConnection, facts: Facts, bundle_id: str) -> None:
    for name, source, metric in (
        ("psi_some", "psi", "memory.some.avg10"),
        ("psi_full", "psi", "memory.full.avg10"),
        ("pswpout", "vmstat", "pswpout"),
        ("refaults", "vmstat", "workingset_refault_anon"),
        # Reclaim beyond swap: a box without swap has no anonymous refaults at all, and
        # still thrashes its page cache, compacts and migrates under pressure.
        ("refaults_file", "vmstat", "workingset_refault_file"),
        ("compact_stalls", "vmstat", "compact_stall"),
        ("migrations", "vmstat", "pgmigrate_success"),
    ):
        points = con.execute(
            "SELECT t, value FROM samples WHERE bundle_id = ? AND source = ? "
            "AND metric = ? ORDER BY t",
            [bundle_id, source, metric],
        ).fetchall()
        if points:
            facts.series[name] = [(_ts(t), v) for t, v in points]
            facts.origin[name] = "bundle"


def _each_card(con: duckdb.DuckDBPyConnection, facts: Facts, bundle_id: str) -> None:
    """Each card's own lines where Prometheus holds several: a leak on one of two cards
    climbs half as steeply in their sum, and ends with its own card full, not the sum."""
    lines: dict[str, dict[tuple[tuple[str, str], ...], Series]] = {"used": {}, "total": {}}
    for query, labels, points in con.execute(
        """SELECT query, labels, list((t, value) ORDER BY t) FROM prometheus_series
           WHERE bundle_id = ? AND query IN ('accelerator_memory_used', 'accelerator_memory_total')
               AND t IS NOT NULL
           GROUP BY query, labels""",
        [bundle_id],
    ).fetchall():
        card = tuple(sorted((k, v) for k, v in labels.items() if k != "__name__"))
        lines[query.rsplit("_", 1)[1]][card] = [(_ts(t), v) for t, v in points]
    if len(lines["used"]) < 2:
        return
    for card, used in lines["used"].items():
        named = dict(card)
        name = named.get("gpu") or named.get("card") or named.get("device") or str(len(facts.cards))
        if card not in lines["total"] or name in facts.cards:
            continue
        facts.cards.append(name)
        for kind, points in (("used", used), ("total", lines["total"][card])):
            facts.series[card_line(kind, name)] = points
            facts.origin[card_line(kind, name)] = "prometheus"


def card_line(kind: str, card: str = "") -> str:
    """The series of the cards' memory `kind` ("used", "total"): their sum, or one card's."""
    return f"accelerator_{kind} {card}".rstrip()


def _with_gtt(
    con: duckdb.DuckDBPyConnection, bundle_id: str, query: str, points: list[tuple[Any, Any]]
) -> list[tuple[Any, Any]]:
    """The card line with the GTT of every card whose VRAM is a small carve-out, instant by
    instant; an instant the GTT series misses is a gap, not a card with no GTT."""
    rows = con.execute(
        """WITH apu AS (
               SELECT DISTINCT labels['instance'] AS instance, labels['card'] AS card
               FROM prometheus_series
               WHERE bundle_id = ? AND query = 'accelerator_memory_total'
                   AND labels['__name__'] LIKE 'node_drm_memory_vram_%' AND value < ?)
           SELECT s.t, sum(s.value), count(*) FROM prometheus_series s JOIN apu
               ON s.labels['instance'] = apu.instance AND s.labels['card'] = apu.card
           WHERE s.bundle_id = ? AND s.query = ? AND s.t IS NOT NULL
           GROUP BY s.t""",
        [bundle_id, CARVE_OUT_MAX, bundle_id, query],
    ).fetchall()
    if not rows:
        return points
    cards = max(n for _, _, n in rows)
    gtt = {t: v for t, v, n in rows if n == cards}
    return [(t, v + gtt[t] if v is not None and t in gtt else None) for t, v in points]


def _prefer(facts: Facts, name: str, points: Series, origin: str) -> None:
    """Keep the source that covers more time; a series with one point covers none."""
    known = [t for t, v in points if v is not None]
    if len(known) < 2:
        return
    current = [t for t, v in facts.series.get(name, []) if v is not None]
    if current and (current[-1] - current[0]) >= (known[-1] - known[0]):
        facts.shorter[name] = (points, origin)
        return
    if current:
        facts.shorter[name] = (facts.series[name], facts.origin.get(name, ""))
    facts.series[name] = points
    facts.origin[name] = origin
