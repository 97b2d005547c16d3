"""A flapping trigger makes a bounded number of bundles, and nothing is silently dropped:
the refused triggers are counted in the next bundle of the same trigger."""

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from conftest import EVIDENCE, bundle_errors, bundles, manifest, run_evidence, write_config

from evidence.cli.exits import Exit


def _flood(archive, config, trigger: str, n: int) -> list[subprocess.CompletedProcess]:
    args = [EVIDENCE, "capture", "--window", "0", "--trigger", trigger, "--quiet"]
    args += ["--archive", str(archive), "--config", str(config)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(
            pool.map(
                lambda _: subprocess.run(args, capture_output=True, text=True, timeout=60),
                range(n),
            )
        )


def test_a_flood_of_triggers_captures_once_and_counts_the_rest(tmp_path):
    config = write_config(tmp_path / "c.toml", '[capture]\nmin_interval = "3s"\n')
    archive = tmp_path / "archive"
    results = _flood(archive, config, "healthcheck:gateway", 12)
    codes = sorted(r.returncode for r in results)
    assert codes.count(0) == 1, [r.stderr for r in results]
    assert codes.count(Exit.LIMITED) == 11
    refused = next(r for r in results if r.returncode == Exit.LIMITED)
    assert "healthcheck:gateway" in refused.stderr and refused.stderr.count("\n") == 1
    assert len(bundles(archive)) == 1
    assert "skipped" not in manifest(bundles(archive)[0])["trigger"]

    time.sleep(3.2)
    later = run_evidence(
        "capture", "--window", "0", "--trigger", "healthcheck:gateway", "--quiet",
        "--archive", str(archive), "--config", str(config),
    )  # fmt: skip
    assert later.returncode == 0, later.stderr
    (_, newest) = bundles(archive)
    skipped = manifest(newest)["trigger"]["skipped"]
    assert skipped["count"] == 11 and skipped["first"] <= skipped["last"]
    assert bundle_errors(newest) == []  # the count is part of the bundle contract


def test_each_trigger_has_its_own_interval_and_a_person_is_never_limited(tmp_path):
    config = write_config(tmp_path / "c.toml", '[capture]\nmin_interval = "1h"\n')
    archive = tmp_path / "archive"
    for trigger in ("healthcheck:gateway", "healthcheck:engine", "manual", "manual"):
        result = run_evidence(
            "capture", "--window", "0", "--trigger", trigger, "--quiet",
            "--archive", str(archive), "--config", str(config),
        )  # fmt: skip
        assert result.returncode == 0, (trigger, result.stderr)
    assert len(bundles(archive)) == 4


def test_a_torn_state_file_costs_the_interval_not_the_capture(tmp_path):
    archive = tmp_path / "archive"
    archive.mkdir(mode=0o700)
    (archive / "triggers.json").write_text('{"healthcheck:gateway": {"last": ')
    result = run_evidence(
        "capture", "--window", "0", "--trigger", "healthcheck:gateway", "--quiet",
        "--archive", str(archive),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert len(bundles(archive)) == 1
