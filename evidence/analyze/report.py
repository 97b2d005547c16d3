"""What the HTML report shows, as data: the verdict, the comparison with the most similar
incident, and the series of each graph, over the capture window (the bundle's own
samples) and over the Prometheus look-back, with the trigger moment.

A graph whose source was not read carries the reason instead of points, so the page
says "not measured: ..." where a flat line at 0 would lie.
"""

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import duckdb

from evidence.analyze.classify import classify
from evidence.analyze.compare import compare, summary
from evidence.analyze.facts import ENGINE_SERIES, recorded_from
from evidence.analyze.incident import profile

Points = list[tuple[float, float | None]]
TOP_PROCESSES = 5


def _series(rows: list[tuple[Any, ...]]) -> dict[str, Points]:
    """(label, t, value) rows as one series per label, in time order."""
    out: dict[str, Points] = defaultdict(list)
    for label, t, value in rows:
        out[label].append((t.timestamp(), value))
    return dict(out)


def _chart(
    title: str, unit: str, lines: dict[str, Points], absent: Callable[[], str]
) -> dict[str, Any]:
    """A graph's data; with no known reading, the reason instead (asked only then)."""
    known = {k: v for k, v in lines.items() if any(p[1] is not None for p in v)}
    return {
        "title": title,
        "unit": unit,
        "lines": [{"label": k, "points": v} for k, v in known.items()],
        "reason": None if known else absent(),
    }


def _probe_reason(con: duckdb.DuckDBPyConnection, bundle_id: str, probe: str | None) -> str:
    if probe is None:
        return "no engine published a KV-cache metric"
    row = con.execute(
        "SELECT status, reason FROM probes WHERE bundle_id = ? AND probe = ?", [bundle_id, probe]
    ).fetchone()
    if row is None:
        return f"the {probe} probe did not run"
    status, reason = row
    return f"{status}: {reason}" if status != "ok" else f"the {probe} probe had no readings"


def window_charts(con: duckdb.DuckDBPyConnection, bundle_id: str) -> list[dict[str, Any]]:
    q = [bundle_id]
    memory = con.execute(
        """SELECT 'in use', t, used_bytes FROM host_memory WHERE bundle_id = ?
           UNION ALL SELECT 'available', t, available_bytes FROM host_memory WHERE bundle_id = ?
           UNION ALL SELECT 'swap in use', t, swap_used_bytes FROM host_memory
                     WHERE bundle_id = ? ORDER BY 2""",
        q * 3,
    ).fetchall()
    # The freeze's reading of each GPU process, then the window's samples of it.
    gpu = con.execute(
        """WITH names AS (SELECT DISTINCT pid, name FROM gpu_processes WHERE bundle_id = $b)
           SELECT coalesce(name, 'pid') || ' (pid ' || pid || ')' AS label, t, used_bytes
           FROM gpu_processes WHERE bundle_id = $b
           UNION ALL
           SELECT coalesce(n.name, 'pid') || ' (pid ' || s.labels['pid'] || ')', s.t, s.value
           FROM samples s LEFT JOIN names n ON CAST(n.pid AS VARCHAR) = s.labels['pid']
           WHERE s.bundle_id = $b AND s.source = 'gpu_process' ORDER BY t""",
        {"b": bundle_id},
    ).fetchall()
    psi = con.execute(
        """SELECT replace(metric, '.avg10', ''), t, value FROM samples WHERE bundle_id = ?
           AND source = 'psi' AND metric IN ('memory.some.avg10', 'memory.full.avg10',
           'cpu.some.avg10', 'io.some.avg10') ORDER BY t""",
        q,
    ).fetchall()
    top = con.execute(
        """WITH s AS (SELECT labels['name'] || ' (pid ' || labels['pid'] || ')' AS label, t,
                             value FROM samples
                      WHERE bundle_id = $b AND source = 'process' AND metric = 'rss_bytes'
                      UNION ALL
                      SELECT name || ' (pid ' || pid || ')', t, rss_bytes FROM processes
                      WHERE bundle_id = $b),
                big AS (SELECT label FROM s GROUP BY label ORDER BY max(value) DESC, label
                        LIMIT $n)
           SELECT label, t, value FROM s WHERE label IN (SELECT label FROM big) ORDER BY t""",
        {"b": bundle_id, "n": TOP_PROCESSES},
    ).fetchall()
    engine = _engine_rows(con, bundle_id)
    plan = (
        ("Host memory, capture window", "bytes", _series(memory), "memory"),
        ("GPU memory per process, capture window", "bytes", _series(gpu), "gpu"),
        ("Largest processes (resident), capture window", "bytes", _series(top), "processes"),
        ("Pressure stall (PSI avg10), capture window", "percent", _series(psi), "pressure"),
        ("Requests running and waiting, capture window", "count", engine["requests"], "engines"),
        ("KV cache in use, capture window", "ratio", engine["kv_cache"], None),
    )
    return [
        _chart(title, unit, lines, lambda p=probe: _probe_reason(con, bundle_id, p))
        for title, unit, lines, probe in plan
    ]


def _engine_rows(con: duckdb.DuckDBPyConnection, bundle_id: str) -> dict[str, dict[str, Points]]:
    wanted = {
        m: k for k in ("requests_running", "requests_waiting", "kv_cache") for m in ENGINE_SERIES[k]
    }
    rows = con.execute(
        """SELECT labels['engine'], metric, t, max(value) FROM samples
           WHERE bundle_id = ? AND source = 'engine' AND list_contains(?, metric)
           GROUP BY ALL ORDER BY t""",
        [bundle_id, list(wanted)],
    ).fetchall()
    out: dict[str, dict[str, Points]] = {
        "requests": defaultdict(list),
        "kv_cache": defaultdict(list),
    }
    for engine, metric, t, value in rows:
        group = "kv_cache" if wanted[metric] == "kv_cache" else "requests"
        word = wanted[metric].replace("requests_", "")
        label = f"{engine} {word}" if group == "requests" else f"{engine} ({metric})"
        out[group][label].append((t.timestamp(), value))
    return {k: dict(v) for k, v in out.items()}


# (title, unit, {label: query name}) of the look-back graphs, from the prometheus probe.
LOOKBACK = (
    (
        "Memory, Prometheus look-back",
        "bytes",
        {
            "host available": "host_memory_available",
            "accelerator in use": "accelerator_memory_used",
            "accelerator total": "accelerator_memory_total",
        },
    ),
    (
        "Requests running and waiting, Prometheus look-back",
        "count",
        {"running": "requests_running", "waiting": "requests_waiting"},
    ),
    ("KV cache in use, Prometheus look-back", "ratio", {"kv cache": "kv_cache_usage"}),
    ("Context high-water, Prometheus look-back", "count", {"tokens": "context_high_water"}),
)


def lookback_charts(con: duckdb.DuckDBPyConnection, bundle_id: str) -> list[dict[str, Any]]:
    status = dict(
        con.execute(
            "SELECT DISTINCT query, status || coalesce(': ' || raw, '') FROM prometheus_series "
            "WHERE bundle_id = ? AND t IS NULL",
            [bundle_id],
        ).fetchall()
    )
    charts = []
    for title, unit, queries in LOOKBACK:
        rows = con.execute(
            """SELECT query, t, sum(value) FROM prometheus_series
               WHERE bundle_id = ? AND list_contains(?, query) AND t IS NOT NULL
               GROUP BY query, t ORDER BY t""",
            [bundle_id, list(queries.values())],
        ).fetchall()
        by_query = _series(rows)
        lines = {label: by_query[q] for label, q in queries.items() if q in by_query}
        why = "; ".join(f"{q}: {status[q]}" for q in queries.values() if q in status)
        charts.append(
            _chart(
                title, unit, lines, lambda w=why: w or _probe_reason(con, bundle_id, "prometheus")
            )
        )
    return charts


def report(con: duckdb.DuckDBPyConnection, bundle_id: str) -> dict[str, Any]:
    (started, fired) = con.execute(
        "SELECT started_at, fired_at FROM bundles WHERE bundle_id = ?", [bundle_id]
    ).fetchone()
    comparison = compare(con, bundle_id, "auto")
    return {
        "bundle_id": bundle_id,
        "trigger_at": (fired or started).timestamp(),
        # Where the recorder's history (samples from before the capture began) ends.
        "recorded_until": started.timestamp() if recorded_from(con, bundle_id) else None,
        "result": classify(con, bundle_id),
        "comparison": comparison,
        "window": window_charts(con, bundle_id),
        "lookback": lookback_charts(con, bundle_id),
    }


def index(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Every incident of the archive, newest first, with how often its fingerprint was
    seen before it."""
    rows = con.execute(
        "SELECT bundle_id FROM bundles WHERE trigger_kind NOT IN ('cron') ORDER BY started_at"
    ).fetchall()
    seen: dict[str, int] = defaultdict(int)
    out = []
    for (bundle_id,) in rows:
        incident = profile(con, bundle_id)
        out.append(
            {
                **summary(incident),
                "seen_before": seen[incident.fingerprint] if incident.fault else None,
            }
        )
        seen[incident.fingerprint] += 1
    return out[::-1]
