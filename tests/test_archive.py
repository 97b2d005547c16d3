"""The archive: real and synthetic bundles into DuckDB, quarantine, baseline, timeline,
sql and Parquet export."""

import fcntl
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import orjson
import pytest
from click.testing import CliRunner
from conftest import EVIDENCE, bundle_errors, bundles, run_evidence
from freezegun import freeze_time
from synth import GIB, Host, write_bundle

from evidence.analyze.export import read_back
from evidence.analyze.ingest import QUARANTINE
from evidence.archive.lock import INGEST_LOCK as LOCK
from evidence.cli import main

NOW = datetime(2026, 11, 10, 12, 0, tzinfo=UTC)


def tree_digest(root: Path) -> str:
    """Every file's path, mode and bytes under root: proof that nothing was touched."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        h.update(str(path.relative_to(root)).encode())
        h.update(oct(path.lstat().st_mode).encode())
        if path.is_file() and not path.is_symlink():
            h.update(path.read_bytes())
    return h.hexdigest()


def sql(archive: Path, query: str) -> list:
    con = duckdb.connect(str(archive / "evidence.duckdb"), read_only=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def real_archive(tmp_path_factory):
    """Two real captures of this machine."""
    archive = tmp_path_factory.mktemp("real")
    for window in ("1", "0"):
        result = run_evidence("capture", "--archive", str(archive), "--window", window, "-q")
        assert result.returncode == 0, result.stderr
    return archive


def test_real_bundles_ingest_and_reingest_changes_nothing(real_archive):
    before = tree_digest(real_archive / "bundles")
    first = run_evidence("ingest", "--archive", str(real_archive), "--json")
    assert first.returncode == 0, first.stderr
    assert orjson.loads(first.stdout)["ingested"] == 2
    counts = {
        t: sql(real_archive, f"select count(*) from {t}")[0][0]
        for t in ("bundles", "probes", "samples", "processes")
    }
    assert counts["bundles"] == 2 and counts["processes"] > 20
    assert sql(real_archive, "select count(distinct probe) from probes")[0][0] >= 10
    used = sql(real_archive, "select min(used_bytes), max(total_bytes) from host_memory")[0]
    assert 0 < used[0] < used[1]
    again = run_evidence("ingest", "--archive", str(real_archive))
    assert again.returncode == 0
    assert again.stdout.strip() == "ingested 0 bundle(s), 2 already present, 0 quarantined"
    assert counts == {t: sql(real_archive, f"select count(*) from {t}")[0][0] for t in counts}
    assert tree_digest(real_archive / "bundles") == before  # never modified


def _break(bundle: Path, how: str) -> None:
    manifest_path = bundle / "manifest.json"
    manifest = orjson.loads(manifest_path.read_bytes())

    def rewrite(name: str, data: bytes) -> None:
        (bundle / name).write_bytes(data)
        for entry in manifest["files"]:
            if entry["name"] == name:
                entry["bytes"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
        manifest_path.write_bytes(orjson.dumps(manifest))

    if how == "truncated-manifest":
        manifest_path.write_bytes(manifest_path.read_bytes()[:200])
    elif how == "missing-manifest":
        manifest_path.unlink()
    elif how == "future-version":
        manifest["schema_version"] = 2
        manifest_path.write_bytes(orjson.dumps(manifest))
    elif how == "checksum":
        data = bytearray((bundle / "vmstat.json").read_bytes())
        data[-5] ^= 1
        (bundle / "vmstat.json").write_bytes(bytes(data))
    elif how == "truncated-record":
        rewrite("memory.json", (bundle / "memory.json").read_bytes()[:100])
    elif how == "wrong-shape":
        record = orjson.loads((bundle / "host.json").read_bytes())
        del record["boot_id"]
        rewrite("host.json", orjson.dumps(record))
    elif how == "escapes":
        manifest["files"][0]["name"] = "../../../etc/passwd"
        manifest_path.write_bytes(orjson.dumps(manifest))
    elif how == "symlink":
        (bundle / "kernel.json").unlink()
        (bundle / "kernel.json").symlink_to("/etc/hostname")


BROKEN = {
    "truncated-manifest": "manifest.json is not valid JSON",
    "missing-manifest": "manifest.json is missing",
    "future-version": "unknown schema_version 2",
    "checksum": "vmstat.json: checksum or size differs",
    "truncated-record": "memory.json is not valid JSON (truncated?)",
    "wrong-shape": "host.json does not match its schema",
    "escapes": "files[0].name must match pattern",  # the manifest schema refuses ".."
    "symlink": "kernel.json is a symlink",
}


def test_every_kind_of_broken_bundle_is_quarantined_and_the_rest_ingest(tmp_path):
    rng = random.Random(7)
    host = Host("lab", booted_at=NOW.timestamp() - 86400)
    made = [
        write_bundle(tmp_path, host, NOW.timestamp() + i * 60, rng, start=NOW.timestamp())
        for i in range(len(BROKEN) + 2)
    ]
    for bundle in made:
        assert bundle_errors(bundle) == []
    broken = dict(zip(BROKEN, made, strict=False))
    for how, bundle in broken.items():
        _break(bundle, how)
    # a partial bundle (its collector died) ingests, marked partial
    partial = made[-1]
    manifest = orjson.loads((partial / "manifest.json").read_bytes())
    manifest.update(complete=False, partial_reason="the collector stopped before sealing")
    (partial / "manifest.json").write_bytes(orjson.dumps(manifest))
    before = tree_digest(tmp_path / "bundles")

    result = run_evidence("ingest", "--archive", str(tmp_path), "--json")
    assert result.returncode == 8  # some were quarantined: a script notices
    summary = orjson.loads(result.stdout)
    assert summary["ingested"] == 2 and summary["partial"] == 1
    reasons = {Path(q["path"]).name: q["reason"] for q in summary["quarantined"]}
    for how, bundle in broken.items():
        assert BROKEN[how] in reasons[bundle.name], (how, reasons[bundle.name])
    listed = [orjson.loads(x) for x in (tmp_path / QUARANTINE).read_bytes().splitlines()]
    assert {Path(e["path"]).name for e in listed} == {b.name for b in broken.values()}
    assert tree_digest(tmp_path / "bundles") == before  # quarantined, never moved or deleted
    assert sql(tmp_path, "select count(*) from bundles where not complete")[0][0] == 1
    # a second run says the same and does not list them twice
    run_evidence("ingest", "--archive", str(tmp_path))
    assert len((tmp_path / QUARANTINE).read_bytes().splitlines()) == len(BROKEN)


def test_a_newer_collectors_file_is_kept_and_listed_not_grounds_to_quarantine(tmp_path):
    """An older analyst meets a file it has no schema for: the rest of the bundle goes in,
    the file is listed in unknown_files and left where it is."""
    bundle = write_bundle(
        tmp_path,
        Host("lab", booted_at=NOW.timestamp() - 86400),
        NOW.timestamp(),
        random.Random(3),
        start=NOW.timestamp(),
    )
    data = b'{"t": "2026-11-29T03:12:45.123Z", "ring": "v2"}\n'
    (bundle / "recorder.samples.jsonl").write_bytes(data)
    manifest = orjson.loads((bundle / "manifest.json").read_bytes())
    manifest["files"].append(
        {
            "name": "recorder.samples.jsonl",
            "probe": "recorder",
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
    )
    (bundle / "manifest.json").write_bytes(orjson.dumps(manifest))
    result = run_evidence("ingest", "--archive", str(tmp_path), "--json")
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["ingested"] == 1
    assert sql(tmp_path, "select name, bytes from unknown_files") == [
        ("recorder.samples.jsonl", len(data))
    ]
    assert sql(tmp_path, "select count(*) from processes")[0][0] > 0
    assert (bundle / "recorder.samples.jsonl").read_bytes() == data
    # the same file with bytes that differ from the manifest is still a broken bundle
    (bundle / "recorder.samples.jsonl").write_bytes(data + b"x")
    again = run_evidence("ingest", "--archive", str(tmp_path / "other"), str(bundle), "--json")
    assert again.returncode == 8 and "checksum or size differs" in again.stdout


def test_a_second_ingest_waits_then_says_so(tmp_path):
    tmp_path.joinpath(LOCK).touch()
    fd = os.open(tmp_path / LOCK, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        result = run_evidence("ingest", "--archive", str(tmp_path), "--wait", "0.5")
    finally:
        os.close(fd)
    assert result.returncode == 3
    assert "another ingest is writing" in result.stderr and result.stderr.count("\n") == 1


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """A week of two hosts: spark-1 leaks (its floor rises 2 GiB a day), box-2 is healthy
    with a daily rhythm. spark-1 reboots once, OOM-kills once, and swaps models."""
    archive = tmp_path_factory.mktemp("fleet")
    rng = random.Random(11)
    start = (NOW - timedelta(days=7)).timestamp()
    spark = Host("spark-1", floor_bytes=30 * GIB, leak_per_day=2 * GIB, booted_at=start - 3600)
    box = Host("box-2", floor_bytes=20 * GIB, booted_at=start - 3600)
    oom = (
        "Out of memory: Killed process 4321 (llama-server) total-vm:66093824kB, "
        "anon-rss:31245380kB, file-rss:4096kB, shmem-rss:0kB, UID:1000 pgtables:65288kB "
        "oom_score_adj:0"
    )
    for step in range(7 * 24):  # hourly baseline snapshots
        ts = start + step * 3600 + 30
        for host in (spark, box):
            kwargs = {}
            if host is spark:
                kwargs["models"] = ["qwen3-30b"] if step < 100 else ["qwen3-30b", "coder-32b"]
                if step in (120, 121):  # the kill, seen by two bundles in a row
                    kwargs["kernel_lines"] = [oom]
            write_bundle(archive, host, ts, rng, start=start, **kwargs)
        if step == 125:  # the gateway's completion check failed: a bundle with its answer
            write_bundle(
                archive,
                spark,
                ts + 900,
                rng,
                start=start,
                window=5,
                trigger=("healthcheck", "gateway"),
                failed_check="gateway",
            )
        if step == 130:
            spark.boot_id, spark.booted_at = "rebooted-" + spark.boot_id[9:], ts + 600
    result = run_evidence("ingest", "--archive", str(archive))
    assert result.returncode == 0, result.stderr
    return archive


def _cli(*args: str) -> dict:
    with freeze_time(NOW):
        result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return orjson.loads(result.output)


def test_baseline_tells_the_leak_from_the_healthy_rhythm(fleet):
    leak = _cli("baseline", "--archive", str(fleet), "--host", "spark-1", "--json")
    assert leak["verdict"] == "rising" and len(leak["daily"]) >= 7
    assert 10 * GIB < leak["drift_bytes"] < 16 * GIB  # about 2 GiB a day for a week
    healthy = _cli("baseline", "--archive", str(fleet), "--host", "box-2", "--json")
    assert healthy["verdict"] == "flat"
    assert abs(healthy["drift_bytes"]) < 2 * GIB
    hourly = {h["hour"]: h["median_used_bytes"] for h in healthy["hourly"]}
    assert hourly[12] - hourly[0] > 4 * GIB  # busy afternoons, quiet nights: a rhythm
    assert 19 * GIB < healthy["floor_bytes"] < 21 * GIB
    short = _cli("baseline", "--archive", str(fleet), "--host", "box-2", "--days", "2", "--json")
    assert short["from"] >= (NOW - timedelta(days=2)).isoformat()[:10]


def test_timeline_orders_boots_kills_models_and_checks(fleet):
    events = _cli("timeline", "--archive", str(fleet), "--host", "spark-1", "--json")["events"]
    kinds = [e["kind"] for e in events]
    assert kinds.count("boot") == 1 and kinds.count("oom-kill") == 1  # one kill, two bundles
    assert kinds.count("model-loaded") == 1
    loaded = next(e for e in events if e["kind"] == "model-loaded")
    assert loaded["detail"] == "swap: coder-32b"
    failed = next(e for e in events if e["kind"] == "check-failed")
    assert "gateway" in failed["detail"]
    times = [e["t"] for e in events]
    assert times == sorted(times)
    assert kinds.index("oom-kill") < kinds.index("boot")
    recent = _cli(
        "timeline", "--archive", str(fleet), "--host", "spark-1", "--since", "1d", "--json"
    )["events"]
    assert 0 < len(recent) < len(events)
    # The same cut by absolute times: the day before the last day, and nothing after it.
    kill = next(e for e in events if e["kind"] == "oom-kill")["t"]
    at = datetime.fromisoformat(kill)
    window = _cli(
        "timeline",
        "--archive",
        str(fleet),
        "--host",
        "spark-1",
        "--json",
        "--since",
        (at - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "--until",
        (at + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    assert "oom-kill" in [e["kind"] for e in window["events"]]
    assert all(
        abs(datetime.fromisoformat(e["t"]) - at) <= timedelta(minutes=1) for e in window["events"]
    )
    wrong = run_evidence("timeline", "--archive", str(fleet), "--since", "last tuesday")
    assert wrong.returncode == 2 and "'2026-11-30 03:00'" in wrong.stderr


def test_export_reads_back_with_the_same_row_counts(fleet, tmp_path):
    result = run_evidence(
        "export", "--archive", str(fleet), "--parquet", str(tmp_path / "pq"), "--json"
    )
    assert result.returncode == 0, result.stderr
    counts = orjson.loads(result.stdout)
    con = duckdb.connect()
    for table, rows in counts.items():
        if rows:
            assert read_back(con, tmp_path / "pq", table) == rows, table
    assert (tmp_path / "pq" / "samples" / "host=spark-1").is_dir()
    assert any((tmp_path / "pq" / "bundles" / "host=box-2").glob("date=2026-11-0*"))


def test_sql_is_read_only_and_speaks_json_and_csv(fleet):
    rows = run_evidence(
        "sql",
        "--archive",
        str(fleet),
        "--json",
        "select host, count(*) as n from bundles group by host order by host",
    )
    assert json.loads(rows.stdout) == [{"host": "box-2", "n": 168}, {"host": "spark-1", "n": 169}]
    as_csv = run_evidence("sql", "--archive", str(fleet), "--csv", "select 1 as one, 'x' as two")
    assert as_csv.stdout.splitlines() == ["one,two", "1,x"]
    table = run_evidence("sql", "--archive", str(fleet), "select count(*) as n from bundles")
    assert "337" in table.stdout and "(1 row)" in table.stdout
    refused = run_evidence("sql", "--archive", str(fleet), "delete from bundles")
    assert refused.returncode == 2 and refused.stderr.startswith("evidence: sql: ")
    assert sql(fleet, "select count(*) from bundles")[0][0] == 337


def test_the_collector_never_loads_duckdb():
    code = (
        "import sys; import evidence.cli, evidence.capture.runner; "
        "import evidence.capture.probes; "
        "evidence.capture.probes.ordered(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('duckdb', 'jinja2')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_analyst_commands_without_an_archive_say_so(tmp_path):
    result = run_evidence("baseline", "--archive", str(tmp_path))
    assert result.returncode == 2 and "run `evidence ingest` first" in result.stderr
    assert shutil.which(EVIDENCE) or Path(EVIDENCE).exists()
    assert bundles(tmp_path) == []


def test_export_to_a_place_that_cannot_be_written_is_one_line(fleet, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run_evidence("export", "--archive", str(fleet), "--parquet", str(blocker / "pq"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "cannot write the export" in result.stderr
