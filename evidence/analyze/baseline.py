"""What normal looks like on one host: the memory floor, the daily rhythm, and whether the
floor moved (the seeds' three notes on a healthy week: "where the floor sits when a model
is resident and nobody is using it", "what the daily rhythm looks like", and "whether
the floor is the same on the last day as on the first": the leak question in one glance).

The floor of a day is the 5th percentile of memory in use that day, so one quiet minute
does not set it. Memory in use is MemTotal - MemAvailable, from every bundle's meminfo
samples and from the Prometheus history the bundles carry (node-exporter), whichever
the archive has.
"""

from datetime import datetime
from typing import Any

import duckdb

from evidence.analyze.shapes import FLOOR_QUANTILE

FLAT_FRACTION = 0.02  # a floor that moved less than 2% of the machine's memory is flat

_USED = """
WITH meminfo AS (
    SELECT t, used_bytes, total_bytes, 'meminfo' AS origin FROM host_memory
    WHERE host = $host AND t >= $since AND used_bytes IS NOT NULL
),
prom AS (
    SELECT a.t, tot.value - a.value AS used_bytes, tot.value AS total_bytes,
           'prometheus' AS origin
    FROM prometheus_series a
    JOIN prometheus_series tot ON tot.bundle_id = a.bundle_id AND tot.t = a.t
        AND tot.query = 'host_memory_total' AND tot.labels = a.labels
    WHERE a.host = $host AND a.query = 'host_memory_available' AND a.t >= $since
        AND a.value IS NOT NULL AND tot.value IS NOT NULL
),
used AS (SELECT DISTINCT t, used_bytes, total_bytes, origin FROM (
    SELECT * FROM meminfo UNION ALL SELECT * FROM prom))
"""


def hosts(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [
        r[0]
        for r in con.execute(
            "SELECT host FROM bundles GROUP BY host ORDER BY count(*) DESC, host"
        ).fetchall()
    ]


def baseline(con: duckdb.DuckDBPyConnection, host: str, days: int, now: datetime) -> dict[str, Any]:
    since = now.timestamp() - days * 86400
    params = {"host": host, "since": datetime.fromtimestamp(since, now.tzinfo)}
    daily = con.execute(
        _USED
        + f"""
        SELECT CAST(t AS DATE) AS day, quantile_cont(used_bytes, {FLOOR_QUANTILE}) AS floor,
               max(used_bytes) AS peak, count(*) AS points
        FROM used GROUP BY day ORDER BY day""",
        params,
    ).fetchall()
    hourly = con.execute(
        _USED
        + """
        SELECT hour(t) AS h, median(used_bytes), count(*) FROM used GROUP BY h ORDER BY h""",
        params,
    ).fetchall()
    totals = con.execute(
        _USED
        + """
        SELECT max(total_bytes), count(*), count(*) FILTER (WHERE origin = 'meminfo'),
               count(*) FILTER (WHERE origin = 'prometheus'), min(t), max(t) FROM used""",
        params,
    ).fetchone()
    total, points, from_meminfo, from_prometheus, first, last = totals or (None,) * 6
    result: dict[str, Any] = {
        "host": host,
        "days": days,
        "from": _iso(first),
        "to": _iso(last),
        "points": points or 0,
        "sources": {"meminfo": from_meminfo or 0, "prometheus": from_prometheus or 0},
        "memory_total_bytes": total,
        "daily": [
            {"date": d.isoformat(), "floor_bytes": f, "peak_bytes": p, "points": n}
            for d, f, p, n in daily
        ],
        "hourly": [{"hour": h, "median_used_bytes": m, "points": n} for h, m, n in hourly],
        "floor_bytes": None,
        "drift_bytes": None,
        "verdict": "insufficient-evidence",
    }
    if not daily:
        result["reason"] = f"no memory readings for {host} in the last {days} days"
        return result
    result["floor_bytes"] = min(d[1] for d in daily)
    if len(daily) < 2:
        result["reason"] = "one day of readings: the floor cannot drift within it"
        return result
    drift = daily[-1][1] - daily[0][1]
    result["drift_bytes"] = drift
    flat = abs(drift) <= FLAT_FRACTION * (total or 0)
    result["verdict"] = "flat" if flat else ("rising" if drift > 0 else "falling")
    return result


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()
