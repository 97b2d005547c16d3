"""Bundle files -> rows of the archive's tables.

The big series (meminfo, vmstat, the process table and its top-by-RSS samples) are read
by DuckDB straight from the bundle files, many bundles per statement; the rest are
flattened here from the records validate.check already parsed, written as NDJSON once
per table and batch, and read back by DuckDB. Nothing here decides what a reading
means: that is the analyst's, after the load.
"""

import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import orjson

from evidence.analyze.tags import tags_of
from evidence.archive.clock import iso


@dataclass
class Loaded:
    """One validated bundle on its way into the archive."""

    path: Path
    manifest: dict[str, Any]
    manifest_sha256: str
    records: dict[str, list[Any]]  # parsed, except the SQL_FILES DuckDB reads itself
    files: frozenset[str]  # every record file the bundle holds
    unknown: tuple[str, ...] = ()  # files no schema of this analyst describes: kept, unread

    @property
    def bundle_id(self) -> str:
        return self.manifest["bundle_id"]

    @property
    def host(self) -> str:
        return self.manifest["host"]["hostname"]

    def record(self, name: str) -> dict[str, Any] | None:
        found = self.records.get(name)
        return found[0] if found else None


# -- series DuckDB reads from the files themselves ------------------------------------------

_JOIN = "JOIN _batch b ON b.dir = regexp_replace(j.filename, '/[^/]*$', '')"
_MEMINFO_UNIT = "CASE WHEN e.key LIKE 'HugePages\\_%' ESCAPE '\\' THEN 'pages' ELSE 'kB' END"


def _map_series(file: str, stamp: str, column: str, source: str, unit: str) -> tuple[str, str, str]:
    """A file whose records hold one {name: number} object: one sample row per name."""
    return (
        file,
        f"{{'{stamp}': 'VARCHAR', '{column}': 'MAP(VARCHAR, BIGINT)'}}",
        f"""INSERT INTO samples SELECT b.bundle_id, b.host, CAST({stamp} AS TIMESTAMPTZ),
                '{source}', e.key, NULL, e.value, {unit}, NULL
            FROM {{src}} j {_JOIN}, unnest(map_entries({column})) AS u(e)""",
    )


_SQL_SERIES: tuple[tuple[str, str, str], ...] = (
    _map_series("memory.json", "collected_at", "meminfo_kb", "meminfo", _MEMINFO_UNIT),
    _map_series("memory.samples.jsonl", "t", "meminfo_kb", "meminfo", _MEMINFO_UNIT),
    _map_series("vmstat.json", "collected_at", "counters", "vmstat", "'count'"),
    _map_series("vmstat.samples.jsonl", "t", "counters", "vmstat", "'count'"),
    (
        "processes.json",
        "{'collected_at': 'VARCHAR', 'processes': 'STRUCT(pid INTEGER, ppid INTEGER, pgid INTEGER,"
        ' name VARCHAR, cmdline VARCHAR[], "user" VARCHAR, state VARCHAR, rss_bytes BIGINT,'
        " swap_bytes BIGINT, start_time VARCHAR, cgroup VARCHAR)[]'}",
        """INSERT INTO processes SELECT b.bundle_id, b.host, CAST(collected_at AS TIMESTAMPTZ),
            p.pid, p.ppid, p.pgid, p.name, p.cmdline, p."user", p.state, p.rss_bytes,
            p.swap_bytes, CAST(p.start_time AS TIMESTAMPTZ), p.cgroup
        FROM {src} j """
        + _JOIN
        + """,
            unnest(processes) AS u(p)""",
    ),
    (
        "processes.samples.jsonl",
        "{'t': 'VARCHAR', 'top': 'STRUCT(pid INTEGER, name VARCHAR, rss_bytes BIGINT,"
        " cgroup VARCHAR)[]'}",
        """INSERT INTO samples SELECT b.bundle_id, b.host, CAST(t AS TIMESTAMPTZ), 'process',
            'rss_bytes', MAP {'pid': CAST(p.pid AS VARCHAR), 'name': p.name,
            'cgroup': p.cgroup}, p.rss_bytes, 'bytes', NULL
        FROM {src} j """
        + _JOIN
        + """,
            unnest(top) AS u(p)""",
    ),
)


# The recorder's history (<source>.history.jsonl) holds the same lines as the window's
# samples, from the hour before: the same rows, earlier.
_SQL_SERIES += tuple(
    (name.replace(".samples.", ".history."), columns, statement)
    for name, columns, statement in _SQL_SERIES
    if ".samples." in name
)

# Files DuckDB reads itself: their parsed records need not be kept once validated.
SQL_FILES = frozenset(name for name, _, _ in _SQL_SERIES)


def _lines(b: "Loaded", source: str) -> list[Any]:
    """A source's sample lines, the recorder's history of it first."""
    return b.records.get(f"{source}.history.jsonl", []) + b.records.get(
        f"{source}.samples.jsonl", []
    )


def load(con: duckdb.DuckDBPyConnection, batch: list[Loaded], ingested_at: str) -> None:
    """Insert every row of the batch; the caller owns the transaction."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for bundle in batch:
        for table, row in _rows(bundle, ingested_at):
            rows.setdefault(table, []).append(row)
    with tempfile.TemporaryDirectory(prefix="evidence-ingest-") as tmp:
        dirs = {b.bundle_id: _readable(b.path.resolve(), Path(tmp), i) for i, b in enumerate(batch)}
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _batch (dir VARCHAR, bundle_id VARCHAR, host VARCHAR)"
        )
        con.executemany(
            "INSERT INTO _batch VALUES (?, ?, ?)",
            [[dirs[b.bundle_id], b.bundle_id, b.host] for b in batch],
        )
        for name, columns, statement in _SQL_SERIES:
            files = [f"{dirs[b.bundle_id]}/{name}" for b in batch if name in b.files]
            if files:
                source = (
                    f"read_json({files!r}, columns={columns}, filename=true, "
                    "format='newline_delimited')"
                )
                con.execute(statement.replace("{src}", source))
        for table, table_rows in rows.items():
            path = Path(tmp) / f"{table}.jsonl"
            # JSON columns (an answer, the unavailable fields) go in as objects: read_json
            # with type JSON keeps them as JSON text, not a string holding JSON.
            path.write_bytes(b"\n".join(orjson.dumps(r) for r in table_rows) + b"\n")
            columns = {name: kind for name, kind, *_ in con.execute(f"DESCRIBE {table}").fetchall()}
            con.execute(
                f"INSERT INTO {table} BY NAME SELECT * FROM read_json(?, columns={columns!r}, "
                "format='newline_delimited')",
                [str(path)],
            )


# DuckDB's reader takes a path as a glob pattern, and text as UTF-8: a bundle whose folder
# name holds a pattern character, a control character or bytes that are not UTF-8 (copied
# from another machine) is read through a plain-named link instead.
_PLAIN = re.compile(r"[A-Za-z0-9_./+@:,=-]+")


def _readable(path: Path, tmp: Path, n: int) -> str:
    text = os.fsencode(path).decode("utf-8", "surrogateescape")
    if _PLAIN.fullmatch(text):
        return text
    link = tmp / f"bundle-{n}"
    link.symlink_to(path, target_is_directory=True)
    return str(link)


def path_text(path: Path) -> str:
    """A path as text that any JSON writer and DuckDB take: bytes that are not UTF-8 are
    written as \\xNN escapes (the name stays recognisable; it is never used to open)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


# -- rows flattened here ----------------------------------------------------------------------


def _rows(b: Loaded, ingested_at: str) -> Iterator[tuple[str, dict[str, Any]]]:
    m = b.manifest
    key = {"bundle_id": b.bundle_id, "host": b.host}
    trigger = m["trigger"]
    yield (
        "bundles",
        {
            **key,
            "boot_id": m["host"]["boot_id"],
            "kernel": m["host"]["kernel"],
            "uptime_s": m["host"]["uptime_s"],
            "trigger_kind": trigger["kind"],
            "trigger_name": trigger["name"],
            "trigger_detail": trigger["detail"],
            "fired_at": trigger["fired_at"],
            "started_at": m["started_at"],
            "finished_at": m["finished_at"],
            "window_s": m["window_s"],
            "complete": m["complete"],
            "partial_reason": m["partial_reason"],
            "recovered_at": m.get("recovered_at"),
            "collector_version": m["collector"]["version"],
            "path": path_text(b.path.resolve()),
            "manifest_sha256": b.manifest_sha256,
            "ingested_at": ingested_at,
        },
    )
    for probe, entry in m["probes"].items():
        sampling = entry.get("sampling") or {}
        yield (
            "probes",
            {
                **key,
                "probe": probe,
                "status": entry["status"],
                "reason": entry["reason"],
                "duration_ms": entry["duration_ms"],
                "samples": sampling.get("samples"),
                "gaps": sampling.get("gaps"),
                "errors": sampling.get("errors"),
            },
        )
    yield from _pressure(b, key)
    yield from _gpu(b, key)
    yield from _engines(b, key)
    yield from _kernel(b, key)
    yield from _logs(b, key)
    yield from _prometheus(b, key)
    sizes = {entry["name"]: entry["bytes"] for entry in b.manifest["files"]}
    for name in b.unknown:
        yield "unknown_files", {**key, "name": name, "bytes": sizes[name]}
    for check in (b.record("health.json") or {}).get("checks", []):
        yield (
            "health_checks",
            {
                **key,
                **{k: check[k] for k in ("name", "kind", "ok", "status", "reason", "elapsed_ms")},
                "answer": check["answer"],
            },
        )


def _sample(
    key: dict[str, Any],
    t: str,
    source: str,
    metric: str,
    value: Any,
    labels: dict[str, str] | None = None,
    unit: str | None = None,
    status: str | None = None,
) -> tuple[str, dict[str, Any]]:
    return "samples", {
        **key,
        "t": t,
        "source": source,
        "metric": metric,
        "labels": labels,
        "value": value,
        "unit": unit,
        "status": status if value is None else None,
    }


def _psi(
    key: dict[str, Any], t: str, psi: dict[str, Any], source: str, labels: dict[str, str]
) -> Iterator[tuple[str, dict[str, Any]]]:
    for resource, kinds in psi.items():
        for kind, values in kinds.items():
            for field, value in values.items():
                unit = "us" if field == "total_us" else "%"
                yield _sample(key, t, source, f"{resource}.{kind}.{field}", value, labels, unit)


def _pressure(b: Loaded, key: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    frozen = b.record("pressure.json")
    lines = ([{"t": frozen["collected_at"], **frozen}] if frozen else []) + _lines(b, "pressure")
    for line in lines:
        yield from _psi(key, line["t"], line["system"], "psi", {})
        for group in line["cgroups"]:
            labels = {"path": group["path"]}
            if "memory_pressure" in group:
                yield from _psi(
                    key, line["t"], {"memory": group["memory_pressure"]}, "cgroup", labels
                )
            if "memory_current" in group:
                yield _sample(
                    key,
                    line["t"],
                    "cgroup",
                    "memory.current",
                    group["memory_current"],
                    labels,
                    "bytes",
                    "unreadable",
                )


# An APU with a small VRAM carve-out (Strix Halo at its default 512 MiB) keeps the engine's
# buffers in GTT, system memory the GPU maps, so its card is the carve-out and GTT together.
# A discrete card's GTT is a spill window the driver sizes at half the host's RAM: there
# VRAM alone is the card. No discrete card an engine runs on has under 4 GiB.
CARVE_OUT_MAX = 4 * 1024**3
_GPU_GAUGES = (
    ("utilization_gpu_pct", "%"),
    ("utilization_memory_pct", "%"),
    ("sm_clock_mhz", "MHz"),
    ("power_w", "W"),
    ("memory_used_bytes", "bytes"),
)


def _gpu(b: Loaded, key: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    record = b.record("gpu.json")
    if record is None:
        return
    t = record["collected_at"]
    for vendor in ("nvidia", "amd"):
        for d in record[vendor]["devices"]:
            used = d.get("memory_used_bytes", d.get("vram_used_bytes"))
            total = d.get("memory_total_bytes", d.get("vram_total_bytes"))
            gtt = d.get("gtt_used_bytes"), d.get("gtt_total_bytes")
            if vendor == "amd" and total is not None and total < CARVE_OUT_MAX and None not in gtt:
                used, total = (used or 0) + gtt[0], total + gtt[1]
            yield (
                "gpu_devices",
                {
                    **key,
                    "t": t,
                    "vendor": vendor,
                    "device_index": d.get("index"),
                    "name": d.get("name"),
                    "uuid": d.get("uuid"),
                    "memory_total_bytes": total,
                    "memory_used_bytes": used,
                    "unified_memory": d.get("unified_memory"),
                    "unified_memory_basis": d.get("unified_memory_basis"),
                    "utilization_gpu_pct": d.get("utilization_gpu_pct", d.get("busy_pct")),
                    "power_w": d.get("power_w"),
                    "sm_clock_mhz": d.get("sm_clock_mhz"),
                    "unavailable": d.get("unavailable", {}),
                },
            )
            for p in d.get("processes") or []:
                yield (
                    "gpu_processes",
                    {
                        **key,
                        "t": t,
                        "device_index": d.get("index"),
                        **{k: p.get(k) for k in ("pid", "type", "used_bytes", "name", "cmdline")},
                    },
                )
    for line in _lines(b, "gpu"):
        for d in (line.get("nvidia") or {}).get("devices", []):
            labels = {"vendor": "nvidia", "index": str(d["index"])}
            for gauge, unit in _GPU_GAUGES:
                if gauge in d:
                    yield _sample(key, line["t"], "gpu", gauge, d[gauge], labels, unit, "unknown")
            for p in d.get("processes") or []:
                yield _sample(
                    key,
                    line["t"],
                    "gpu_process",
                    "used_bytes",
                    p["used_bytes"],
                    {**labels, "pid": str(p["pid"]), "type": p["type"]},
                    "bytes",
                    "not available",
                )
        for d in line.get("amd", []):
            labels = {"vendor": "amd", "card": d["card"]}
            for gauge in ("vram_used_bytes", "gtt_used_bytes", "busy_pct"):
                if gauge in d:
                    unit = "%" if gauge == "busy_pct" else "bytes"
                    yield _sample(key, line["t"], "gpu", gauge, d[gauge], labels, unit, "unknown")


def _models(engine: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """What a model manager or server says is loaded, from whichever endpoint says it."""
    for path, endpoint in engine["endpoints"].items():
        readings = endpoint.get("readings") or {}
        for m in readings.get("models", []):
            name = m.get("model") or m.get("name") or m.get("id")
            if name:
                yield {
                    "model": name,
                    "state": m.get("state", "loaded" if "size" in m else None),
                    "size_bytes": m.get("size"),
                    "size_vram_bytes": m.get("size_vram"),
                    "expires_at": m.get("expires_at"),
                    "source": path,
                }


# Where each engine states its version: Ollama /api/version and vLLM /version say
# "version", SGLang's server info "version", llama-server /props "build_info", ComfyUI's
# system stats "comfyui_version".
_VERSION_KEYS = ("version", "build_info", "comfyui_version")


def _version(engine: dict[str, Any]) -> str | None:
    for endpoint in engine["endpoints"].values():
        readings = endpoint.get("readings") or {}
        for key in _VERSION_KEYS:
            if isinstance(readings.get(key), str) and readings[key]:
                return readings[key]
    return None


def _engines(b: Loaded, key: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    record = b.record("engines.json")
    if record is None:
        return
    t = record["collected_at"]
    for e in record["engines"]:
        yield (
            "engines",
            {
                **key,
                **{k: e[k] for k in ("name", "kind", "url", "status", "reason")},
                "version": _version(e),
            },
        )
        for model in _models(e):
            yield "engine_models", {**key, "t": t, "engine": e["name"], "kind": e["kind"], **model}
        for path, endpoint in e["endpoints"].items():
            for job in (endpoint.get("readings") or {}).get("jobs", []):
                yield (
                    "engine_jobs",
                    {
                        **key,
                        "engine": e["name"],
                        "job_id": job["prompt_id"],
                        "status": job.get("status"),
                        "completed": job.get("completed"),
                        "started_at": _ms(job.get("execution_start")),
                        "ended_at": _ms(
                            job.get("execution_success")
                            or job.get("execution_error")
                            or job.get("execution_interrupted")
                        ),
                        "outputs": job.get("outputs", []),
                        "exception_type": job.get("exception_type"),
                        "exception_message": job.get("exception_message"),
                    },
                )
            yield from _engine_metrics(key, t, e, path, endpoint)
    for line in _lines(b, "engines"):
        for e in line["engines"]:
            for path, endpoint in e["endpoints"].items():
                yield from _engine_metrics(key, line["t"], e, path, endpoint)


def _engine_metrics(
    key: dict[str, Any], t: str, engine: dict[str, Any], path: str, endpoint: dict[str, Any]
) -> Iterator[tuple[str, dict[str, Any]]]:
    readings = endpoint.get("readings") or {}
    labels = {"engine": engine["name"], "kind": engine.get("kind", "")}
    for name, value in readings.items():
        # An engine's own plain numbers (queue running / pending, slots busy, progress) in
        # its own words: "<endpoint>:<reading>", e.g. "/queue:pending".
        if (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and (
                name != "samples_total"  # a count of /metrics lines, not a reading of the engine
            )
        ):
            yield _sample(key, t, "engine", f"{path.split('?')[0]}:{name}", value, labels)
    for metric, series in readings.get("metrics", {}).items():
        for s in series:
            value = s["value"] if isinstance(s["value"], int | float) else None
            yield _sample(
                key, t, "engine", metric, value, {**s["labels"], **labels}, None, str(s["value"])
            )


def _ms(epoch_ms: Any) -> str | None:
    return iso(epoch_ms / 1000) if isinstance(epoch_ms, int | float) else None


def _kernel(b: Loaded, key: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    record = b.record("kernel.json")
    for line in (record or {}).get("lines", []):
        tags = tags_of(line["text"])
        if tags:
            yield (
                "kernel_events",
                {
                    **key,
                    "boot_id": b.manifest["host"]["boot_id"],
                    "seq": line["seq"],
                    "t": line["time"],
                    "uptime_s": line["uptime_s"],
                    "level": line["level"],
                    "text": line["text"],
                    "tags": tags,
                },
            )


def _logs(b: Loaded, key: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    record = b.record("logs.json")
    for source in (record or {}).get("sources", []):
        for number, text in enumerate(source.get("lines", []), start=1):
            tags = tags_of(text)
            if tags:
                yield (
                    "log_events",
                    {
                        **key,
                        "source": source["name"],
                        "line_no": number,
                        "text": text,
                        "tags": tags,
                    },
                )


def _prometheus(b: Loaded, key: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    record = b.record("prometheus.json")
    for query in (record or {}).get("queries", []):
        base = {**key, "query": query["name"], "expr": query["expr"], "status": query["status"]}
        if not query["series"]:
            # absent / error: one row that says so, so "nothing publishes this" is queryable
            yield (
                "prometheus_series",
                {**base, "labels": None, "t": None, "value": None, "raw": query["reason"]},
            )
        for series in query["series"]:
            for stamp, raw in series["values"]:
                try:
                    value: float | None = float(raw)
                except ValueError:
                    value = None
                if value is not None and value != value:
                    value = None  # NaN: unknown, kept in raw
                yield (
                    "prometheus_series",
                    {
                        **base,
                        "labels": series["metric"],
                        "t": iso(stamp),
                        "value": value,
                        "raw": raw,
                    },
                )
