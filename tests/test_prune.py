"""A bounded archive that keeps what it must: prune by age and size, baselines first, never
a bundle a changelog entry, a report's comparison or `evidence keep` refers to."""

import os
import time
from pathlib import Path

import orjson
import pytest
from conftest import bundles, run_evidence
from incidents import DAY_S, bundle

from evidence.archive.clock import iso
from evidence.archive.lock import INGEST_LOCK
from evidence.capture.serve import JOURNAL, ROTATED

NOW = time.time()


def _id(path: Path) -> str:
    return orjson.loads((path / "manifest.json").read_bytes())["bundle_id"]


@pytest.fixture
def lab(tmp_path) -> dict:
    """Forty days of one host: a baseline every four days, an incident every ten."""
    made = {}
    for days in range(40, 0, -4):
        made[f"baseline-{days}"] = bundle(
            tmp_path, "no-fault", NOW - days * DAY_S - 60, trigger=("cron", "baseline")
        )
    for days in (38, 28, 18, 8):
        made[f"leak-{days}"] = bundle(tmp_path, "leak-ratchet", NOW - days * DAY_S, seed=days)
    return {"root": tmp_path, "made": made}


def _prune(root: Path, *args: str) -> dict:
    result = run_evidence("prune", "--archive", str(root), "--json", *args)
    assert result.returncode == 0, result.stderr
    return orjson.loads(result.stdout)


def test_age_removes_old_bundles_but_keeps_what_is_referred_to(lab):
    root, made = lab["root"], lab["made"]
    kept = run_evidence("keep", _id(made["leak-38"]), "--archive", str(root), "--reason", "RMA")
    assert kept.returncode == 0, kept.stderr
    log = root / "CHANGELOG.md"
    entry = run_evidence(
        "changelog", str(made["leak-28"]), "--change", "ttl: 600",
        "--append", str(log), "--archive", str(root),
    )  # fmt: skip
    assert entry.returncode == 0, entry.stderr
    out = _prune(root, "--keep-days", "15")
    removed = {Path(b["path"]).name for b in out["removed"]}
    left = {p.name for p in bundles(root)}
    assert made["leak-38"].name in left  # kept by hand
    assert made["leak-28"].name in left  # the changelog entry's incident
    assert made["leak-18"].name not in left and made["leak-18"].name in removed
    assert made["baseline-40"].name not in left
    assert made["baseline-4"].name in left and made["leak-8"].name in left  # young enough
    why = {Path(k["path"]).name: k["kept_because"] for k in out["kept"]}
    assert why[made["leak-38"].name] == ["RMA"]
    assert any("changelog" in w for w in why[made["leak-28"].name])


def test_size_takes_baselines_before_any_incident(lab):
    root = lab["root"]
    sizes = {p.name: sum(f.stat().st_size for f in p.iterdir()) for p in bundles(root)}
    # Room for the incidents and the host's newest bundle (a baseline, always kept).
    budget = sum(v for k, v in sizes.items() if "_alert" in k)
    budget += sizes[lab["made"]["baseline-4"].name]
    out = _prune(root, "--max-size", str(budget))
    gone = [Path(b["path"]).name for b in out["removed"]]
    assert len(gone) == 9 and all("_cron" in name for name in gone)
    left = {p.name for p in bundles(root)}
    assert all(name in left for name in sizes if "_alert" in name)
    assert out["left_bytes"] <= budget


def test_the_newest_bundle_of_a_host_stays_whatever_the_limits(lab):
    out = _prune(lab["root"], "--keep-days", "0", "--max-size", "0")
    (left,) = bundles(lab["root"])
    assert left.name == lab["made"]["baseline-4"].name
    assert any("newest bundle" in w for k in out["kept"] for w in k["kept_because"])


def test_a_dry_run_lists_the_same_and_removes_nothing(lab):
    before = bundles(lab["root"])
    dry = _prune(lab["root"], "--keep-days", "15", "--dry-run")
    assert bundles(lab["root"]) == before
    real = _prune(lab["root"], "--keep-days", "15")
    assert [b["path"] for b in dry["removed"]] == [b["path"] for b in real["removed"]]


def test_the_database_keeps_the_history_of_a_removed_bundle(lab):
    root = lab["root"]
    assert run_evidence("ingest", "--archive", str(root)).returncode == 0
    old = _id(lab["made"]["leak-18"])
    _prune(root, "--keep-days", "15")
    assert not lab["made"]["leak-18"].exists()
    query = f"select bundle_id from bundles where bundle_id = '{old}'"
    result = run_evidence("sql", query, "--archive", str(root), "--json")
    assert orjson.loads(result.stdout) == [{"bundle_id": old}]
    again = run_evidence("ingest", "--archive", str(root))
    assert again.returncode == 0, again.stderr  # nothing quarantined for a removed bundle


def test_prune_waits_for_no_ingest_and_says_so(lab):
    import fcntl

    root = lab["root"]
    fd = os.open(root / INGEST_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        result = run_evidence("prune", "--keep-days", "1", "--archive", str(root), timeout=60)
    finally:
        os.close(fd)
    assert result.returncode == 3 and "ingest" in result.stderr
    assert len(bundles(root)) == len(lab["made"])


def test_bad_usage_is_one_line(lab):
    for args in ((), ("--max-size", "lots"), ("--keep-days", "-1")):
        result = run_evidence("prune", "--archive", str(lab["root"]), *args)
        assert result.returncode == 2, (args, result.stderr)
    unknown = run_evidence("keep", "20200101T000000Z-000000000000", "--archive", str(lab["root"]))
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1


def _old_bundle_outside(outside: Path) -> Path:
    """A sealed bundle, forty days old, in a directory that is not the archive's, beside a
    newer one (so that it is not the newest of its host, which prune would keep anyway)."""
    bundle(outside, "no-fault", NOW - 39 * DAY_S, host="elsewhere", seed=8)
    return bundle(outside, "no-fault", NOW - 40 * DAY_S, host="elsewhere", seed=9)


def test_a_symlink_out_of_the_archive_is_never_followed(lab, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    victim = _old_bundle_outside(outside)
    host_dir = bundles(lab["root"])[0].parent
    # A host directory that is a link, and a bundle directory that is a link.
    (host_dir.parent / "planted-host").symlink_to(victim.parent, target_is_directory=True)
    (host_dir / f"{victim.name}-planted").symlink_to(victim, target_is_directory=True)
    out = _prune(lab["root"], "--keep-days", "0")
    assert victim.is_dir() and (victim / "manifest.json").is_file()
    assert all(Path(b["path"]).parent == host_dir for b in out["removed"]), out["removed"]


def test_only_a_directory_with_a_sealed_manifest_is_a_bundle(lab):
    host_dir = bundles(lab["root"])[0].parent
    sealed = manifest_of(lab["made"]["baseline-40"])
    made_by_hand = host_dir / "20200101T000000Z_notes"
    made_by_hand.mkdir()
    (made_by_hand / "keep-me.txt").write_text("an operator's notes")
    unsealed = host_dir / "20200101T000001Z_manual"
    unsealed.mkdir()
    (unsealed / "manifest.json").write_bytes(
        orjson.dumps({**sealed, "finished_at": None, "complete": False})
    )
    linked = host_dir / "20200101T000002Z_manual"
    linked.mkdir()
    (linked / "manifest.json").symlink_to(lab["made"]["baseline-40"] / "manifest.json")
    out = _prune(lab["root"], "--keep-days", "0")
    gone = {Path(b["path"]) for b in out["removed"]}
    for path in (made_by_hand, unsealed, linked):
        assert path.is_dir() and path not in gone, path
    assert (made_by_hand / "keep-me.txt").read_text() == "an operator's notes"
    assert lab["made"]["baseline-40"] in gone  # the sealed ones still go


def manifest_of(path: Path) -> dict:
    return orjson.loads((path / "manifest.json").read_bytes())


def test_an_archive_that_does_not_exist_yet_is_nothing_to_prune(tmp_path):
    # The hourly timer, on a machine that has not captured anything yet.
    root = tmp_path / "not-yet"
    result = run_evidence("prune", "--keep-days", "30", "--archive", str(root))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"no archive at {root} yet: nothing to prune\n"
    out = _prune(root, "--keep-days", "30")
    assert out["removed"] == [] and out["freed_bytes"] == 0 and out["journal"] is None
    assert not root.exists()  # prune does not make an archive


def test_an_archive_that_is_not_a_directory_is_one_line_and_exit_4(tmp_path):
    root = tmp_path / "a-file"
    root.write_text("not an archive")
    for path in (root, root / "inner"):
        result = run_evidence("prune", "--keep-days", "1", "--archive", str(path))
        assert result.returncode == 4, result.stderr
        assert result.stderr.count("\n") == 1 and "Not a directory" in result.stderr


def test_an_archive_the_user_may_not_write_is_one_line_and_exit_4(world, nobody):
    archive = world / "a"
    for days in (40, 39):
        bundle(archive, "no-fault", NOW - days * DAY_S, seed=days)
    before = bundles(archive)
    argv = [*nobody.evidence, "prune", "--keep-days", "1", "--archive", str(archive)]
    result = nobody.run(argv, home=world)
    assert result.returncode == 4, result.stderr
    assert result.stderr.count("\n") == 1 and "Permission denied" in result.stderr
    dry = nobody.run([*argv, "--dry-run"], home=world)  # reading is allowed: it lists
    assert dry.returncode == 0 and "would remove 1 bundle(s)" in dry.stdout, dry.stderr
    assert bundles(archive) == before


def _journal(root: Path, days_ago: list[float]) -> None:
    for name, ages in ((ROTATED, days_ago[:1]), (JOURNAL, days_ago[1:])):
        lines = (
            orjson.dumps({"event": "alert", "received_at": iso(NOW - d * DAY_S)}) + b"\n"
            for d in ages
        )
        (root / name).write_bytes(b"".join(lines))


def test_prune_trims_the_alert_journal_as_it_removes_bundles(lab):
    root = lab["root"]
    _journal(root, [40, 20, 16, 2])
    dry = _prune(root, "--keep-days", "15", "--dry-run")
    assert dry["journal"] is None and (root / ROTATED).exists()
    out = _prune(root, "--keep-days", "15")
    assert out["journal"]["lines"] == 3 and out["journal"]["freed_bytes"] > 0
    assert not (root / ROTATED).exists()
    left = [orjson.loads(line) for line in (root / JOURNAL).read_bytes().splitlines()]
    assert left[0]["received_at"] == iso(NOW - 2 * DAY_S) and left[1]["event"] == "trimmed"
    _journal(root, [40, 2])
    text = run_evidence("prune", "--keep-days", "15", "--archive", str(root))
    assert text.returncode == 0, text.stderr
    assert "trimmed 1 line(s) from the alert journal" in text.stdout
    assert _prune(root, "--max-size", "1G")["journal"] is None  # age alone bounds the journal
