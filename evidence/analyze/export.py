"""The archive as hive-partitioned Parquet (<dir>/<table>/host=<h>/date=<d>/*.parquet): how a
fleet outgrows one analyst's disk. DuckDB reads it back from object storage, and Spark,
Trino or ClickHouse read it unchanged. The date is the bundle's (its start, UTC), so
every row of one capture lands in the same partition. Like the archive, the export is
private: directories 0700 and files 0600, whatever the umask.
"""

from pathlib import Path

import duckdb

from evidence.analyze.ddl import TABLES
from evidence.archive.layout import private_files


def export(con: duckdb.DuckDBPyConnection, target: Path) -> dict[str, int]:
    """Write every table; returns the rows written per table."""
    with private_files():
        return _export(con, target)


def _export(con: duckdb.DuckDBPyConnection, target: Path) -> dict[str, int]:
    target.mkdir(parents=True, exist_ok=True)
    counts = {}
    for table in TABLES:
        count = con.execute(f"SELECT count(*) FROM {table}").fetchone()
        counts[table] = int(count[0]) if count else 0
        if not counts[table]:
            continue
        if table == "bundles":
            select = "SELECT *, CAST(started_at AS DATE) AS date FROM bundles"
        else:
            select = (
                f"SELECT t.*, CAST(b.started_at AS DATE) AS date FROM {table} t "
                "JOIN bundles b USING (bundle_id)"
            )
        out = str(target / table).replace("'", "''")
        con.execute(
            f"COPY ({select}) TO '{out}' "
            "(FORMAT PARQUET, PARTITION_BY (host, date), OVERWRITE_OR_IGNORE)"
        )
    return counts


def read_back(con: duckdb.DuckDBPyConnection, target: Path, table: str) -> int:
    """Rows of one exported table, read the way another engine would."""
    pattern = str(target / table / "**" / "*.parquet").replace("'", "''")
    row = con.execute(
        f"SELECT count(*) FROM read_parquet('{pattern}', hive_partitioning = true)"
    ).fetchone()
    return int(row[0]) if row else 0
