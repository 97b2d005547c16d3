"""The collector's safety promises, each shown on a real capture of this machine."""

import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import orjson
import pytest
from conftest import EVIDENCE, bundles, manifest, run_evidence, write_config

from evidence.capture.runner import SEAL_MARGIN_S


def capture(archive: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return run_evidence("capture", "--archive", str(archive), *args, **kwargs)


def test_files_are_private_and_nothing_is_written_outside_the_archive(tmp_path):
    home, cwd, tmp = (tmp_path / d for d in ("home", "cwd", "tmp"))
    for d in (home, cwd, tmp):
        d.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "XDG_DATA_HOME": str(home / "d"),
        "XDG_CACHE_HOME": str(home / "c"),
        "XDG_CONFIG_HOME": str(home / "cfg"),
    }
    env.pop("EVIDENCE_CONFIG", None)
    archive = tmp_path / "archive"
    result = capture(archive, "--window", "1", cwd=cwd, env=env)
    assert result.returncode == 0, result.stderr
    assert [list(d.iterdir()) for d in (home, cwd, tmp)] == [[], [], []]
    seen = 0
    for path in archive.rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
        seen += 1
    assert seen > 10


def test_whole_capture_ends_within_window_plus_three_seconds(tmp_path):
    start = time.monotonic()
    result = capture(tmp_path, "--window", "3", "--json")
    elapsed = time.monotonic() - start
    assert result.returncode == 0, result.stderr
    summary = orjson.loads(result.stdout)
    assert elapsed < 3 + SEAL_MARGIN_S
    assert summary["complete"] is True
    assert summary["probes"]["memory"]["status"] == "ok"
    samples = (Path(summary["path"]) / "memory.samples.jsonl").read_text().splitlines()
    assert 2 <= len(samples) <= 4  # once a second through a 3 s window


def test_a_hung_log_source_costs_its_timeout_and_the_bundle_is_sealed(tmp_path):
    # A docker client that never answers, as when the daemon is wedged.
    fakebin = tmp_path / "bin"
    fakebin.mkdir()
    docker = fakebin / "docker"
    # ...and leaves a grandchild holding its stdout, as a shell wrapper does.
    docker.write_text("#!/bin/sh\nsleep 61.5 &\nexec sleep 60\n")
    docker.chmod(0o755)
    log = tmp_path / "ok.log"
    log.write_text("engine started\n")
    config = write_config(
        tmp_path / "c.toml",
        f'[[logs]]\ncontainer = "llama"\nruntime = "docker"\n\n[[logs]]\npath = "{log}"\n',
    )
    env = {**os.environ, "PATH": f"{fakebin}:{os.environ['PATH']}"}
    start = time.monotonic()
    result = capture(tmp_path / "a", "--window", "0", "--config", str(config), "--json", env=env)
    elapsed = time.monotonic() - start
    assert result.returncode == 0, result.stderr
    assert elapsed < SEAL_MARGIN_S
    (bundle,) = bundles(tmp_path / "a")
    sources = orjson.loads((bundle / "logs.json").read_bytes())["sources"]
    by_kind = {s["kind"]: s for s in sources}
    assert by_kind["container"]["status"] == "timeout"
    assert by_kind["file"]["status"] == "ok" and by_kind["file"]["lines"] == ["engine started"]
    leftover = subprocess.run(["pgrep", "-f", "sleep 61.5"], capture_output=True, text=True)
    assert leftover.stdout == ""  # the client's whole process group went, nothing else


def test_sigkill_leaves_no_visible_half_bundle_and_the_next_capture_keeps_it(tmp_path):
    archive = tmp_path / "a"
    proc = subprocess.Popen(
        [EVIDENCE, "capture", "--archive", str(archive), "--window", "30", "--quiet"]
    )
    try:
        deadline = time.monotonic() + 15
        leftover = None
        while time.monotonic() < deadline:
            hidden = bundles(archive, include_hidden=True)
            samples = hidden[0] / "memory.samples.jsonl" if hidden else None
            if samples and samples.exists() and samples.read_text().count("\n") >= 2:
                leftover = hidden[0]
                break
            time.sleep(0.1)
        assert leftover is not None, "the capture never started sampling"
        before = {p.name for p in leftover.iterdir()}
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert bundles(archive) == []  # nothing visible: a reader never sees half a bundle
    assert leftover.name.startswith(".")

    result = capture(archive, "--window", "0")
    assert result.returncode == 0, result.stderr
    assert "kept the unfinished bundle" in result.stderr
    partial = [b for b in bundles(archive) if b.name.endswith("-partial")]
    assert len(partial) == 1 and len(bundles(archive)) == 2
    kept = manifest(partial[0])
    assert kept["complete"] is False
    assert "stopped before sealing" in kept["partial_reason"]
    assert before - {".manifest.json.tmp"} <= {p.name for p in partial[0].iterdir()}
    assert orjson.loads((partial[0] / "processes.json").read_bytes())["count"] > 0
    for line in (partial[0] / "memory.samples.jsonl").read_bytes().splitlines():
        orjson.loads(line)  # every line whole
    listed = {f["name"] for f in kept["files"]}
    assert {"processes.json", "memory.json", "memory.samples.jsonl"} <= listed


def test_sigterm_keeps_what_was_read_as_a_visible_partial_bundle(tmp_path):
    archive = tmp_path / "a"
    proc = subprocess.Popen(
        [EVIDENCE, "capture", "--archive", str(archive), "--window", "30"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        hidden = bundles(archive, include_hidden=True)
        samples = hidden[0] / "memory.samples.jsonl" if hidden else None
        if samples and samples.exists():
            break
        time.sleep(0.1)
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=10)
    assert time.monotonic() - start < 2
    assert proc.returncode == 143
    assert "stopped by SIGTERM; kept what was captured as" in err and err.count("\n") == 1
    (bundle,) = bundles(archive)
    assert bundle.name.endswith("-partial")
    kept = manifest(bundle)
    assert kept["complete"] is False and "SIGTERM" in kept["partial_reason"]
    assert orjson.loads((bundle / "processes.json").read_bytes())["count"] > 0
    assert bundles(archive, include_hidden=True) == [bundle]  # nothing left hidden


def test_overlapping_captures_do_not_stack(tmp_path):
    archive = tmp_path / "a"
    config = write_config(tmp_path / "c.toml", "[capture]\nlock_wait_s = 0.5\n")
    first = subprocess.Popen(
        [EVIDENCE, "capture", "--archive", str(archive), "--window", "4", "--quiet"]
    )
    try:
        deadline = time.monotonic() + 10
        while not bundles(archive, include_hidden=True) and time.monotonic() < deadline:
            time.sleep(0.05)
        start = time.monotonic()
        second = capture(archive, "--window", "0", "--config", str(config))
        waited = time.monotonic() - start
    finally:
        assert first.wait(timeout=20) == 0
    assert second.returncode == 3
    assert second.stderr.count("\n") == 1
    assert "another capture is running (pid" in second.stderr
    assert 0.5 <= waited < 3
    assert len(bundles(archive)) == 1


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("window_s = -1\n", "window_s"),
        ('[[engines]]\nkind = "tgi"\nurl = "http://127.0.0.1:1"\n', "engines[0].kind"),
        ('[[engines]]\nkind = "ollama"\nurl = "localhost:11434"\n', "engines[0].url"),
        ("[capture]\nlog_since = 'yesterday'\n", "capture.log_since"),
        ("windw_s = 3\n", "windw_s"),
        ("window_s = inf\n", "window_s"),
        ("window_s = nan\n", "window_s"),
        ("window_s = 100000\n", "window_s"),
        ("[capture]\nlock_wait_s = nan\n", "capture.lock_wait_s"),
        ("[capture]\nlog_bytes = inf\n", "capture.log_bytes"),
        ('[[engines]]\nkind = "vllm"\nurl = "http://[::1"\n', "engines[0].url"),
        ("this is not toml\n", "not valid TOML"),
    ],
)
def test_bad_configuration_is_one_line_naming_the_key_and_exit_2(tmp_path, text, key):
    config = write_config(tmp_path / "c.toml", text)
    result = capture(tmp_path / "a", "--window", "0", "--config", str(config))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and key in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "a").exists()  # nothing captured, nothing created


def test_missing_config_file_is_a_usage_error(tmp_path):
    result = capture(tmp_path / "a", "--config", str(tmp_path / "nope.toml"))
    assert result.returncode == 2 and "configuration file not found" in result.stderr


def test_unwritable_archive_is_one_line_and_exit_4(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = capture(blocker / "archive", "--window", "0")
    assert result.returncode == 4
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_full_disk_keeps_the_important_evidence_and_drops_logs_first(tmp_path, small_disk):
    log = tmp_path / "big.log"
    log.write_bytes(b"x" * 120 + b"\n" * 1 + (b"loading model shard ...\n" * 20000))
    config = write_config(
        tmp_path / "c.toml", f'[[logs]]\npath = "{log}"\n[capture]\nlog_bytes = 400000\n'
    )
    # Leave only about 96 KiB free: enough for the manifest and the process list.
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (160 * 1024))
    result = capture(small_disk / "archive", "--window", "2", "--config", str(config))
    assert result.returncode == 5, result.stderr
    (bundle,) = bundles(small_disk / "archive")
    kept = manifest(bundle)
    assert kept["complete"] is False and "disk filled" in kept["partial_reason"]
    dropped = {d["file"] for d in kept["dropped"]}
    assert "logs.json" in dropped
    for name in ("processes.json", "memory.json", "pressure.json"):
        assert (bundle / name).exists(), name
        assert name not in dropped
    present = {p.name for p in bundle.iterdir()}
    assert {f["name"] for f in kept["files"]} == present - {"manifest.json"}
    assert_dropped_is_gone_or_cut(kept, present)


def assert_dropped_is_gone_or_cut(kept: dict, present: set[str]) -> None:
    """What the manifest calls dropped is really gone, unless it says the file was cut short."""
    for item in kept["dropped"]:
        if item["file"] in present:
            assert "cut short" in item["reason"], item


@pytest.mark.parametrize("free_kib", [24, 48, 72, 96, 120])
def test_on_any_nearly_full_disk_the_manifest_tells_the_truth(tmp_path, small_disk, free_kib):
    small_disk.joinpath("filler").write_bytes(b"\0" * ((256 - free_kib) * 1024))
    result = capture(small_disk / "archive", "--window", "1")
    assert result.returncode in (0, 4, 5), result.stderr
    if result.returncode == 4:
        assert result.stderr.count("\n") == 1  # not even a manifest fits: said in one line
        return
    (bundle,) = bundles(small_disk / "archive")
    kept = manifest(bundle)
    present = {p.name for p in bundle.iterdir()} - {"manifest.json"}
    assert {f["name"] for f in kept["files"]} == present
    assert_dropped_is_gone_or_cut(kept, present)
    for name, probe in kept["probes"].items():
        assert set(probe["files"]) <= present, name
    assert kept["complete"] is (not kept["dropped"])
