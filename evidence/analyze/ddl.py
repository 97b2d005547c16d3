"""The archive's schema: every table and view, in one place, versioned.

Invariants:
- MIGRATIONS only grows. A released migration is never edited: a change is a new entry,
  applied in order inside one transaction, and recorded in schema_migrations.
- Series are long: one row per (bundle, time, source, metric, labels). A reading that
  was taken but is unknown is a row with value NULL and a status; never a 0.
- Every row names its bundle and host, so any table can be cut by host and date.
"""

import duckdb

MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (
        1,
        "the first archive",
        [
            """CREATE TABLE bundles (
            bundle_id VARCHAR PRIMARY KEY, host VARCHAR NOT NULL, boot_id VARCHAR,
            kernel VARCHAR, uptime_s DOUBLE, trigger_kind VARCHAR, trigger_name VARCHAR,
            trigger_detail VARCHAR, fired_at TIMESTAMPTZ, started_at TIMESTAMPTZ NOT NULL,
            finished_at TIMESTAMPTZ, window_s DOUBLE, complete BOOLEAN NOT NULL,
            partial_reason VARCHAR, recovered_at TIMESTAMPTZ, collector_version VARCHAR,
            path VARCHAR NOT NULL, manifest_sha256 VARCHAR NOT NULL,
            ingested_at TIMESTAMPTZ NOT NULL)""",
            """CREATE TABLE probes (
            bundle_id VARCHAR NOT NULL, host VARCHAR NOT NULL, probe VARCHAR NOT NULL,
            status VARCHAR NOT NULL, reason VARCHAR, duration_ms DOUBLE, samples INTEGER,
            gaps INTEGER, errors INTEGER)""",
            """CREATE TABLE samples (
            bundle_id VARCHAR NOT NULL, host VARCHAR NOT NULL, t TIMESTAMPTZ NOT NULL,
            source VARCHAR NOT NULL, metric VARCHAR NOT NULL, labels MAP(VARCHAR, VARCHAR),
            value DOUBLE, unit VARCHAR, status VARCHAR)""",
            """CREATE TABLE processes (
            bundle_id VARCHAR NOT NULL, host VARCHAR NOT NULL, t TIMESTAMPTZ NOT NULL,
            pid INTEGER NOT NULL, ppid INTEGER, pgid INTEGER, name VARCHAR, cmdline VARCHAR[],
            "user" VARCHAR, state VARCHAR, rss_bytes BIGINT, swap_bytes BIGINT,
            start_time TIMESTAMPTZ, cgroup VARCHAR)""",
            """CREATE TABLE gpu_devices (
            bundle_id VARCHAR NOT NULL, host VARCHAR NOT NULL, t TIMESTAMPTZ NOT NULL,
            vendor VARCHAR NOT NULL, device_index INTEGER, name VARCHAR, uuid VARCHAR,
            memory_total_bytes BIGINT, memory_used_bytes BIGINT, unified_memory BOOLEAN,
            unified_memory_basis VARCHAR, utilization_gpu_pct DOUBLE, power_w DOUBLE,
            sm_clock_mhz DOUBLE, unavailable JSON)""",
            """CREATE TABLE gpu_processes (
            bundle_id VARCHAR NOT NULL, host VARCHAR NOT NULL, t TIMESTAMPTZ NOT NULL,
            device_index INTEGER, pid INTEGER NOT NULL, type VARCHAR, used_bytes BIGINT,
            name VARCHAR, cmdline VARCHAR[])""",
            """CREATE TABLE engines (
            bundle_id VARCHAR NOT NULL, host VARCHAR NOT NULL, name VARCHAR NOT NULL,
            kind VARCHAR NOT NULL, url VARCHAR, status VARCHAR NOT NULL, reason VARCHAR)""",
            """CREATE TABLE engine_models (
            bundle_id VARCHAR NOT NULL, host VARCHAR NOT NULL, t TIMESTAMPTZ NOT NULL,
            engine VARCHAR NOT NULL, kind VARCHAR NOT NULL, model VARCHAR NOT NULL,
            state VARCHAR, size_bytes BIGINT, size_vram_bytes BIGINT, source VARCHAR)""",
            """CREATE TABLE engine_jobs (
            bundle_id VARCHAR NOT NULL, host VARCHAR NOT NULL, engine VARCHAR NOT NULL,
            job_id VARCHAR NOT NULL, status VARCHAR, completed BOOLEAN,
            started_at TIMESTAMPTZ, ended_at TIMESTAMPTZ, outputs JSON,
            exception_type VARCHAR, exception_message VARCHAR)""",
            """CREATE TABLE log_events (
            bundle_id VARCHAR NOT NULL, host VARCHAR NOT NULL, source VARCHAR NOT NULL,
            line_no INTEGER NOT NULL, text VARCHAR, tags VARCHAR[] NOT NULL)""",
            """CREATE TABLE kernel_events (
            bundle_id VARCHAR NOT NULL, host VARCHAR NOT NULL, boot_id VARCHAR,
            seq BIGINT NOT NULL, t TIMESTAMPTZ, uptime_s DOUBLE, level INTEGER, text VARCHAR,
            tags VARCHAR[] NOT NULL)""",
            """CREATE TABLE prometheus_series (
            bundle_id VARCHAR NOT NULL, host VARCHAR NOT NULL, query VARCHAR NOT NULL,
            expr VARCHAR, status VARCHAR NOT NULL, labels MAP(VARCHAR, VARCHAR),
            t TIMESTAMPTZ, value DOUBLE, raw VARCHAR)""",
            """CREATE TABLE health_checks (
            bundle_id VARCHAR NOT NULL, host VARCHAR NOT NULL, name VARCHAR NOT NULL,
            kind VARCHAR, ok BOOLEAN, status VARCHAR, reason VARCHAR, elapsed_ms DOUBLE,
            answer JSON)""",
            # What an operator asks first: memory used over time, per host, from every source.
            """CREATE VIEW host_memory AS
            SELECT bundle_id, host, t,
                   max(value) FILTER (WHERE metric = 'MemTotal') * 1024 AS total_bytes,
                   max(value) FILTER (WHERE metric = 'MemAvailable') * 1024 AS available_bytes,
                   (max(value) FILTER (WHERE metric = 'MemTotal')
                    - max(value) FILTER (WHERE metric = 'MemAvailable')) * 1024 AS used_bytes,
                   (max(value) FILTER (WHERE metric = 'SwapTotal')
                    - max(value) FILTER (WHERE metric = 'SwapFree')) * 1024 AS swap_used_bytes
            FROM samples WHERE source = 'meminfo'
            GROUP BY bundle_id, host, t""",
        ],
    ),
    (
        2,
        "the engine's version, for the changelog's recording sheet",
        ["ALTER TABLE engines ADD COLUMN version VARCHAR"],
    ),
    (
        3,
        "when a manager means to unload a model (Ollama's expires_at), as it wrote it",
        ["ALTER TABLE engine_models ADD COLUMN expires_at VARCHAR"],
    ),
    (
        4,
        "files a newer collector wrote that no schema here describes: kept in the bundle",
        [
            """CREATE TABLE unknown_files (
            bundle_id VARCHAR NOT NULL, host VARCHAR NOT NULL, name VARCHAR NOT NULL,
            bytes BIGINT)"""
        ],
    ),
]

LATEST = MIGRATIONS[-1][0]


def migrate(con: duckdb.DuckDBPyConnection) -> int:
    """Bring the archive to the latest version; returns the version it was at."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
        "description VARCHAR, applied_at TIMESTAMPTZ DEFAULT now())"
    )
    found = con.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
    current = int(found[0]) if found else 0
    for version, description, statements in MIGRATIONS:
        if version <= current:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            for statement in statements:
                con.execute(statement)
            con.execute(
                "INSERT INTO schema_migrations (version, description) VALUES (?, ?)",
                [version, description],
            )
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
    return current


TABLES = (
    "bundles",
    "probes",
    "samples",
    "processes",
    "gpu_devices",
    "gpu_processes",
    "engines",
    "engine_models",
    "engine_jobs",
    "log_events",
    "kernel_events",
    "prometheus_series",
    "health_checks",
    "unknown_files",
)
