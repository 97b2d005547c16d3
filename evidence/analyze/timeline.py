"""A host's events in order: captures and their triggers, boots, OOM kills, models loaded and
unloaded, failed health checks. What happened before the failure, read in one list.

Boots are boot-id changes between a host's bundles (the boot time is the bundle's start
less its uptime); OOM kills come once each however many bundles kept the kernel line;
model changes are differences between what consecutive bundles saw loaded.
"""

from datetime import datetime
from typing import Any

import duckdb

_EVENTS = """
WITH b AS (
    SELECT * FROM bundles WHERE host = $host AND started_at >= $since
),
captures AS (
    SELECT started_at AS t, 'capture' AS kind,
           trigger_kind || coalesce(':' || trigger_name, '')
           || CASE WHEN complete THEN '' ELSE ' (partial)' END AS detail, bundle_id FROM b
),
ordered AS (
    SELECT *, lag(boot_id) OVER (ORDER BY started_at) AS previous_boot FROM bundles
    WHERE host = $host
),
boots AS (
    SELECT started_at - to_microseconds(CAST(coalesce(uptime_s, 0) * 1e6 AS BIGINT)) AS t,
           'boot' AS kind, 'boot id ' || boot_id AS detail, bundle_id
    FROM ordered WHERE previous_boot IS NOT NULL AND boot_id IS DISTINCT FROM previous_boot
        AND started_at >= $since
),
ooms AS (
    SELECT min(t) AS t, 'oom-kill' AS kind, any_value(text) AS detail,
           min(bundle_id) AS bundle_id
    FROM kernel_events WHERE host = $host AND list_contains(tags, 'oom-killer')
        AND text LIKE '%Killed process%' AND t >= $since
    GROUP BY boot_id, seq
),
seen AS (
    SELECT b.bundle_id, b.started_at, m.engine, list(DISTINCT m.model) AS models
    FROM bundles b JOIN engine_models m USING (bundle_id)
    WHERE b.host = $host AND coalesce(m.state, 'loaded') IN ('ready', 'loaded', 'starting')
    GROUP BY ALL
),
changes AS (
    SELECT *, lag(models) OVER (PARTITION BY engine ORDER BY started_at) AS before FROM seen
),
loads AS (
    SELECT started_at AS t, 'model-loaded' AS kind, engine || ': ' || x AS detail, bundle_id
    FROM changes, unnest(list_filter(models, lambda m: NOT list_contains(coalesce(before, []), m)))
        AS u(x)
    WHERE before IS NOT NULL AND started_at >= $since
    UNION ALL
    SELECT started_at, 'model-unloaded', engine || ': ' || x, bundle_id
    FROM changes, unnest(list_filter(before, lambda m: NOT list_contains(models, m))) AS u(x)
    WHERE started_at >= $since
),
failed_checks AS (
    SELECT b.started_at AS t, 'check-failed' AS kind,
           h.name || ' (' || h.kind || '): ' || coalesce(h.reason, h.status) AS detail,
           h.bundle_id
    FROM health_checks h JOIN b USING (bundle_id) WHERE NOT h.ok
)
SELECT t, kind, detail, bundle_id FROM (
    SELECT * FROM captures UNION ALL SELECT * FROM boots UNION ALL SELECT * FROM ooms
    UNION ALL SELECT * FROM loads UNION ALL SELECT * FROM failed_checks)
WHERE t <= $until
ORDER BY t, kind
"""


def timeline(
    con: duckdb.DuckDBPyConnection, host: str, since: datetime, until: datetime
) -> list[dict[str, Any]]:
    rows = con.execute(_EVENTS, {"host": host, "since": since, "until": until}).fetchall()
    return [
        {"t": t.isoformat(), "kind": kind, "detail": detail, "bundle_id": bundle_id}
        for t, kind, detail, bundle_id in rows
    ]
