"""The analyst against hostile input and a careless operator (issue 14): a confined `sql`,
bundles that are not bundles yet, a manifest too big to parse, a private database, a
damaged one and its rebuild, a read-only archive, absurd Prometheus values, and text
from the machine that would rewrite a terminal or a Markdown page."""

import os
import random
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import orjson
import pytest
from conftest import EVIDENCE, run_evidence
from incidents import DAY_S, KINDS, TONIGHT, bundle
from synth import Host, write_bundle
from test_reliability import bind_read_only, fill, mounts, one_line  # noqa: F401

from evidence.analyze.ingest import DATABASE, QUARANTINE, ingest
from evidence.analyze.validate import MAX_MANIFEST_BYTES
from evidence.archive.layout import INPROGRESS_SUFFIX
from evidence.reports.charts import Line, line_chart


def synth(where: Path, n: int, seed: int = 3) -> list[Path]:
    rng = random.Random(seed)
    host = Host("lab", booted_at=1.79e9 - 86400)
    return [write_bundle(where, host, 1.79e9 + 60 * i, rng, start=1.79e9) for i in range(n)]


def query(archive: Path, text: str) -> list:
    con = duckdb.connect(str(archive / DATABASE), read_only=True)
    try:
        return con.execute(text).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    archive = tmp_path_factory.mktemp("small")
    synth(archive, 2)
    assert not ingest(archive).quarantined
    return archive


# -- a confined `evidence sql` ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "COPY bundles TO '{out}/copied.csv'",
        "EXPORT DATABASE '{out}/exported'",
        "SELECT * FROM read_text('/etc/shadow')",
        "SELECT * FROM glob('/root/**')",
        "INSTALL httpfs",
        "ATTACH '{out}/other.duckdb' AS other",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM 'https://example.invalid/a.csv'",
    ],
)
def test_sql_reaches_nothing_but_the_archive(small, tmp_path, text):
    duckdb.connect(str(tmp_path / "other.duckdb")).close()
    before = sorted(tmp_path.iterdir())
    result = run_evidence("sql", "--archive", str(small), text.format(out=tmp_path))
    assert result.returncode == 2, result
    assert one_line(result).startswith("evidence: sql: refused: ")
    assert result.stdout == ""
    assert sorted(tmp_path.iterdir()) == before


@pytest.mark.parametrize(
    "text",
    [
        "SET enable_external_access = true",
        "SET lock_configuration = false",
        "SET memory_limit = '100GB'",
        "RESET threads",
    ],
)
def test_sql_cannot_undo_its_confinement(small, text):
    result = run_evidence("sql", "--archive", str(small), text)
    assert result.returncode == 2, result
    assert "locked" in one_line(result)


def test_sql_is_bounded_in_memory_and_in_rows_printed(small):
    start = time.monotonic()
    many = run_evidence("sql", "--archive", str(small), "--csv", "SELECT * FROM range(10000000)")
    assert many.returncode == 0, many.stderr
    assert len(many.stdout.splitlines()) == 1 + 10_000
    assert one_line(many) == "evidence: printed the first 10000 rows; there are more"
    assert time.monotonic() - start < 20
    few = run_evidence("sql", "--archive", str(small), "--max-rows", "3", "FROM range(5)")
    assert "(3 rows)" in few.stdout and "there are more" in few.stderr
    huge = run_evidence("sql", "--archive", str(small), "SELECT list(range) FROM range(300000000)")
    assert huge.returncode == 2
    assert "Out of Memory" in one_line(huge)


# -- bundles that are not bundles yet, and a manifest too big to parse -------------------------


def test_ingest_refuses_a_capture_still_writing(tmp_path):
    (made,) = synth(tmp_path / "src", 1)
    sealed = orjson.loads((made / "manifest.json").read_bytes())
    writing = made.with_name(f".{made.name}{INPROGRESS_SUFFIX}")
    made.rename(writing)
    (writing / "manifest.json").write_bytes(
        orjson.dumps(
            {**sealed, "finished_at": None, "complete": False, "partial_reason": "in progress"}
        )
    )
    archive = tmp_path / "a"
    early = run_evidence("ingest", "--archive", str(archive), "--json", str(writing))
    assert early.returncode == 8
    (reason,) = [q["reason"] for q in orjson.loads(early.stdout)["quarantined"]]
    assert "still writing" in reason
    # Sealed and renamed into place, as the capture does: now it goes in, whole.
    writing.rename(made)
    (made / "manifest.json").write_bytes(orjson.dumps(sealed))
    late = run_evidence("ingest", "--archive", str(archive), "--json", str(made))
    assert late.returncode == 0, late.stdout
    assert orjson.loads(late.stdout)["ingested"] == 1
    assert query(archive, "SELECT complete FROM bundles") == [(True,)]


def test_an_unsealed_manifest_in_a_visible_directory_is_not_a_bundle(tmp_path):
    (made,) = synth(tmp_path, 1)
    manifest = orjson.loads((made / "manifest.json").read_bytes())
    manifest.update(finished_at=None, complete=False, partial_reason="capture in progress")
    (made / "manifest.json").write_bytes(orjson.dumps(manifest))
    summary = ingest(tmp_path)
    assert not summary.ingested
    assert "not sealed" in summary.quarantined[0]["reason"]


def test_a_manifest_over_the_bound_is_quarantined_unparsed(tmp_path, monkeypatch):
    (made,) = synth(tmp_path, 1)
    raw = (made / "manifest.json").read_bytes()
    (made / "manifest.json").write_bytes(raw + b" " * (MAX_MANIFEST_BYTES + 1 - len(raw)))
    parsed = []
    monkeypatch.setattr(
        "evidence.analyze.validate.orjson.loads",
        lambda data: parsed.append(len(data)) or orjson.loads(data),
    )
    summary = ingest(tmp_path)
    assert not summary.ingested and parsed == []
    (entry,) = summary.quarantined
    assert f"{MAX_MANIFEST_BYTES + 1} bytes, over the {MAX_MANIFEST_BYTES}" in entry["reason"]
    assert entry["reason"] in (tmp_path / QUARANTINE).read_text()


# -- a private database ------------------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_database_and_its_wal_are_private_under_a_umask_of_022(tmp_path):
    synth(tmp_path, 3)
    seen: dict[str, int] = {}

    def look(done: int, total: int) -> None:
        for path in tmp_path.glob(f"{DATABASE}*"):
            seen[path.name] = _mode(path)

    old = os.umask(0o022)
    try:
        assert len(ingest(tmp_path, progress=look).ingested) == 3
        assert os.umask(0o022) == 0o022  # the ingest gave the umask back
    finally:
        os.umask(old)
    assert f"{DATABASE}.wal" in seen, seen
    assert set(seen.values()) == {0o600}, seen
    assert _mode(tmp_path / DATABASE) == 0o600


def test_the_parquet_export_is_private_under_a_umask_of_022(small, tmp_path):
    target = tmp_path / "pq"
    result = subprocess.run(
        [EVIDENCE, "export", "--archive", str(small), "--parquet", str(target)],
        capture_output=True,
        text=True,
        preexec_fn=lambda: os.umask(0o022),
    )
    assert result.returncode == 0, result.stderr
    found = [target, *target.rglob("*")]
    assert any(p.suffix == ".parquet" for p in found)
    for path in found:
        assert _mode(path) == (0o700 if path.is_dir() else 0o600), path


# -- a damaged database, a full disk -----------------------------------------------------------


def _damage(db: Path) -> bytes:
    data = bytearray(db.read_bytes())
    for i in range(0, len(data), 7):
        data[i] ^= 0x5A
    db.write_bytes(bytes(data))
    return bytes(data)


def test_a_damaged_database_says_so_and_one_command_rebuilds_it(tmp_path):
    synth(tmp_path, 3)
    assert run_evidence("ingest", "--archive", str(tmp_path)).returncode == 0
    damaged = _damage(tmp_path / DATABASE)
    for argv in (
        ("sql", "SELECT count(*) FROM bundles"),
        ("timeline", "--host", "lab"),
        ("classify", "latest"),
        ("ingest",),
    ):
        result = run_evidence(*argv, "--archive", str(tmp_path))
        assert result.returncode == 7, (argv, result.stderr)
        line = one_line(result)
        assert "the archive database is damaged" in line, line
        assert f"`evidence ingest --rebuild --archive {tmp_path}`" in line
    rebuilt = run_evidence("ingest", "--rebuild", "--archive", str(tmp_path))
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert rebuilt.stdout.startswith("ingested 3 bundle(s)")
    (kept,) = tmp_path.glob(f"{DATABASE}.before-rebuild-*")
    assert kept.read_bytes() == damaged  # moved aside, never deleted
    assert query(tmp_path, "SELECT count(*) FROM bundles") == [(3,)]


def test_sql_on_a_file_that_is_no_database_is_not_called_locked(tmp_path):
    (tmp_path / DATABASE).write_bytes(b"not a database " * 1000)
    result = run_evidence("sql", "--archive", str(tmp_path), "SELECT 1")
    assert result.returncode == 7, result.stderr
    assert "damaged" in one_line(result) and "lock" not in result.stderr


def test_ingest_onto_a_full_disk_with_no_database_yet_exits_4(tmp_path, small_disk):
    src = tmp_path / "src"
    synth(src, 1)
    archive = small_disk / "archive"
    archive.mkdir()
    fill(small_disk / "filler")
    result = run_evidence("ingest", "--archive", str(archive), str(src))
    assert result.returncode == 4, result.stderr
    assert "No space left on device" in one_line(result)
    (small_disk / "filler").unlink()
    again = run_evidence("ingest", "--archive", str(archive), str(src))
    assert again.returncode == 0, again.stderr


# -- a read-only archive -----------------------------------------------------------------------


@pytest.fixture
def read_only(tmp_path, mounts) -> Iterator[dict]:  # noqa: F811
    """Three incidents ingested, a fourth captured since and not ingested, then the archive
    remounted read-only."""
    archive = tmp_path / "a"
    made = [bundle(archive, "leak-ratchet", TONIGHT - d * DAY_S, seed=d) for d in (20, 10, 5)]
    assert not ingest(archive).quarantined
    made.append(bundle(archive, "leak-ratchet", TONIGHT, seed=1))
    bind_read_only(archive, mounts)
    yield {"archive": archive, "made": made, "ids": query(archive, "SELECT bundle_id FROM bundles")}


def _tree(root: Path) -> list[tuple[str, int, int]]:
    return [(str(p), p.lstat().st_mode, p.lstat().st_mtime_ns) for p in sorted(root.rglob("*"))]


def test_read_commands_read_a_read_only_archive_as_it_is(read_only, tmp_path):
    archive, made = read_only["archive"], read_only["made"]
    before = _tree(archive)
    ingested = made[2]
    for argv in (
        ("classify", str(ingested)),
        ("runbook", str(ingested)),
        ("compare", str(ingested)),
        ("report", str(ingested), "--out", str(tmp_path / "page.html")),
        ("classify", "latest"),
    ):
        result = run_evidence(*argv, "--archive", str(archive))
        assert result.returncode == 0, (argv, result.stderr)
        assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert (tmp_path / "page.html").is_file()
    for argv in (("classify", str(made[3])), ("runbook", str(made[3]))):
        result = run_evidence(*argv, "--archive", str(archive))
        assert result.returncode == 4, (argv, result.stderr)
        assert "not ingested yet" in one_line(result)
        assert "Read-only file system" in result.stderr
    pruned = run_evidence("prune", "--keep-days", "0", "--archive", str(archive))
    assert pruned.returncode == 4, pruned.stderr
    assert "Read-only file system" in one_line(pruned)
    dry = run_evidence("prune", "--keep-days", "0", "--dry-run", "--archive", str(archive))
    assert dry.returncode == 0, dry.stderr
    assert _tree(archive) == before


# -- absurd values, and text from the machine --------------------------------------------------


def test_a_chart_of_absurd_values_draws_them_clipped_and_says_so():
    for unit in ("bytes", "ratio", "count"):
        svg = line_chart("t", [Line("a", [(1e9, 1e307), (1e9 + 10, -1e307), (1e9 + 20, 1)])], unit)
        assert "2 readings beyond ±1e+12" in svg and "drawn at the limit" in svg
        assert "inf" not in svg and "nan" not in svg


def test_a_report_over_prometheus_values_of_1e307_is_drawn(tmp_path, monkeypatch):
    def absurd(at: float, seed: int) -> dict:
        history = KINDS["leak-ratchet"](at, seed)
        history["kv_cache_usage"] = [
            (t, 1e307 if i % 2 else -1e307) for i, (t, _) in enumerate(history["kv_cache_usage"])
        ]
        return history

    monkeypatch.setitem(KINDS, "absurd", absurd)
    bundle(tmp_path, "absurd", TONIGHT)
    result = run_evidence("report", "latest", "--archive", str(tmp_path))
    assert result.returncode == 0, result.stderr
    page = Path(result.stdout.strip()).read_text()
    assert "readings beyond ±1e+12% drawn at the limit" in page


HOST = "box<img src=x onerror=alert(1)>*|_\x1b]0;owned\x07"
MODEL = "qwen<script>alert(2)</script>|x\x1b[2J\x9b31m"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    """Three leaks of a host and a model whose names hold Markdown, HTML and escapes."""
    archive = tmp_path_factory.mktemp("hostile")
    for seed, days in enumerate((20, 10, 0), 1):
        bundle(archive, "leak-ratchet", TONIGHT - days * DAY_S, host=HOST, model=MODEL, seed=seed)
    assert not ingest(archive).quarantined
    return archive


def _controls(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]


@pytest.mark.parametrize("command", ["runbook", "changelog"])
def test_markdown_entries_escape_what_the_machine_named(hostile, command):
    result = run_evidence(command, "latest", "--archive", str(hostile))
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert _controls(text) == []
    outside_code = "".join(text.split("`")[::2])  # a code span shows its text as it is
    for raw in ("<img", "<script"):
        assert raw not in outside_code, raw
    assert "box&lt;img src=x onerror=alert(1)&gt;\\*\\|\\_" in text
    assert "qwen&lt;script&gt;alert(2)&lt;/script&gt;\\|x" in text
    for row in (line for line in text.splitlines() if line.startswith("| ")):
        assert row.replace("\\|", "").count("|") == 9, row  # eight cells, no more


@pytest.mark.parametrize(
    "argv",
    [
        ("classify", "latest"),
        ("runbook", "latest"),
        ("sql", "SELECT host, model FROM engine_models"),
        ("sql", "--csv", "SELECT host, model FROM engine_models"),
    ],
)
def test_nothing_printed_carries_a_terminal_control_sequence(hostile, argv):
    result = run_evidence(*argv, "--archive", str(hostile))
    assert result.returncode == 0, result.stderr
    assert _controls(result.stdout) == []
    assert "box" in result.stdout or "qwen" in result.stdout  # the words are kept
