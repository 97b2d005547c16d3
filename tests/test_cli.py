"""The command line as an operator meets it: help, output modes, exit codes, progress."""

import os
import pty
import re
import subprocess
import time
from pathlib import Path

import orjson
from click.testing import CliRunner
from conftest import EVIDENCE, run_evidence

from evidence.cli import main
from evidence.cli.exits import EXITS, Exit

README = Path(__file__).parent.parent / "README.md"


def test_every_command_has_help_and_is_in_the_readme():
    readme = README.read_text()
    runner = CliRunner()
    for name, command in main.commands.items():
        result = runner.invoke(main, [name, "--help"])
        assert result.exit_code == 0, name
        assert command.help and len(command.help) > 40, name
        assert f"evidence {name}" in readme, f"{name} is missing from the README"


def test_every_exit_status_is_drawn_from_the_one_table():
    """Help and README say each status with the table's words: 1 is an internal error only."""
    runner = CliRunner()
    shown = set()
    for name in main.commands:
        help_text = runner.invoke(main, [name, "--help"]).output
        if "Exit status:" not in help_text:
            continue
        for code, meaning in re.findall(
            r"^\s+(\d+)  (.*)$", help_text.split("Exit status:")[1], re.M
        ):
            shown.add(int(code))
            assert int(code) == 0 or meaning == EXITS[Exit(int(code))], (name, code)
    assert {Exit.QUARANTINED, Exit.CHECK_FAILED, Exit.NOTHING_TO_COMPARE, Exit.STOPPED} <= shown
    section = README.read_text().split("### Exit status")[1].split("\n## ")[0]
    rows = dict(re.findall(r"^\| (\d+) \| (.+) \|$", section, re.M))
    assert {int(c): m for c, m in rows.items()} == {int(c): m for c, m in EXITS.items()}


def test_unknown_trigger_kind_is_a_usage_error(tmp_path):
    result = run_evidence("capture", "--archive", str(tmp_path), "--trigger", "pager:x")
    assert result.returncode == 2
    assert "unknown kind 'pager'" in result.stderr and "Traceback" not in result.stderr


def test_plain_output_is_the_path_and_quiet_is_silent(tmp_path):
    plain = run_evidence(
        "capture", "--archive", str(tmp_path), "--window", "0", "--trigger", "cron:baseline"
    )
    assert plain.returncode == 0
    path = Path(plain.stdout.strip())
    assert path.is_dir() and path.name.endswith("_cron-baseline")
    assert "processes" in plain.stderr  # the per-probe summary goes to stderr
    quiet = run_evidence("capture", "--archive", str(tmp_path), "--window", "0", "--quiet")
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == ""


def test_json_summary_names_the_trigger_and_every_probe(tmp_path):
    result = run_evidence(
        "capture",
        "--archive",
        str(tmp_path),
        "--window",
        "0",
        "--json",
        "--trigger",
        "alert:HostMemoryLow",
        "--detail",
        "fired by test",
    )
    summary = orjson.loads(result.stdout)
    assert summary["trigger"]["kind"] == "alert" and summary["trigger"]["name"] == "HostMemoryLow"
    assert summary["trigger"]["detail"] == "fired by test"
    assert set(summary["probes"]) >= {
        "processes",
        "memory",
        "vmstat",
        "pressure",
        "host",
        "kernel",
        "logs",
    }
    assert summary["probes"]["logs"] == {
        "status": "skipped",
        "reason": "no logs configured ([[logs]], or unit/container of an [[engines]] entry)",
    }
    assert summary["collector"]["cpu_s"] > 0
    assert summary["host"]["boot_id"]


def _stderr_of(args: list[str], tty: bool) -> str:
    if not tty:
        return subprocess.run([EVIDENCE, *args], capture_output=True, text=True).stderr
    leader, follower = pty.openpty()
    proc = subprocess.Popen([EVIDENCE, *args], stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    chunks = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            data = os.read(leader, 4096)
        except OSError:
            break  # the pty closes when the child exits
        if not data:
            break
        chunks.append(data)
    proc.wait()
    os.close(leader)
    return b"".join(chunks).decode()


def test_progress_bar_only_when_stderr_is_a_terminal(tmp_path):
    args = ["capture", "--archive", str(tmp_path), "--window", "2"]
    assert "watching [" in _stderr_of(args, tty=True)
    assert "watching [" not in _stderr_of(args, tty=False)


def test_a_mistyped_archive_is_said_and_never_created(tmp_path):
    typo = tmp_path / "arhcive"
    for command in (["classify", "latest"], ["runbook", "latest"], ["timeline"], ["paths"]):
        result = run_evidence(*command, "--archive", str(typo))
        assert not typo.exists(), command
        if command != ["paths"]:
            assert result.returncode == 2 and result.stderr.count("\n") == 1, command
