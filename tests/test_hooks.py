"""The memory killers' hooks: earlyoom runs the README's script, and a bundle names the victim.

How earlyoom runs a hook (kill.c, https://github.com/rfjakob/earlyoom): it forks, adds
EARLYOOM_PID, EARLYOOM_UID and EARLYOOM_NAME (and, since 1.8, EARLYOOM_CMDLINE) to its own
environment, and execs the script itself, with no shell and no arguments, from /proc (its
working directory). -N runs it after the victim is gone (earlyoom waits for the victim to
exit, then does not wait for the hook); -P (1.8 and newer) runs it before the kill and waits
at most 200 ms for it before killing anyway.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import EVIDENCE, bundles, manifest, need

# The README's hook, character for character. The test runs it with the evidence command of
# this checkout in place of /opt/evidence's.
EARLYOOM_HOOK = """\
#!/bin/sh
# /usr/local/sbin/evidence-earlyoom: earlyoom -N (after each kill) or -P (before it).
# earlyoom runs this directly, without a shell or arguments, with the victim in
# EARLYOOM_PID and EARLYOOM_NAME; the name is the victim's own choice, so it stays quoted.
exec /opt/evidence/.venv/bin/evidence capture --window 0 --trigger hook:earlyoom \\
    --detail "victim $EARLYOOM_PID $EARLYOOM_NAME" --quiet
"""
README_EVIDENCE = "/opt/evidence/.venv/bin/evidence"
PREHOOK_WAIT_S = 0.2  # earlyoom's PREHOOK_STARTUP_SLEEP_MS
WITHIN_S = 5.0  # "within a couple of seconds", with room for a slow CI machine


@pytest.fixture
def hook(tmp_path) -> Path:
    assert README_EVIDENCE in EARLYOOM_HOOK
    path = tmp_path / "evidence-earlyoom"
    path.write_text(EARLYOOM_HOOK.replace(README_EVIDENCE, EVIDENCE))
    path.chmod(0o755)
    return path


@pytest.fixture
def victim(tmp_path):
    """A process to be the victim, named the way an engine would be (its comm)."""
    name = tmp_path / "llama-server"
    name.symlink_to(shutil.which("sleep"))  # comm is the name that was executed
    process = subprocess.Popen([str(name), "120"])
    yield process
    process.kill()
    process.wait()


def earlyoom_env(archive: Path, pid: int, name: str, uid: int = 0) -> dict[str, str]:
    """earlyoom's own environment plus what it sets for the hook."""
    return {
        **os.environ,
        "EVIDENCE_ARCHIVE": str(archive),
        "EARLYOOM_PID": str(pid),
        "EARLYOOM_UID": str(uid),
        "EARLYOOM_NAME": name,
        "EARLYOOM_CMDLINE": f"/usr/local/bin/{name} -m /models/chat.gguf",
    }


def run_like_earlyoom(script: Path, env: dict[str, str]) -> subprocess.Popen:
    # execv(script, [script, NULL]) from a fork of earlyoom, whose working directory is /proc.
    return subprocess.Popen([str(script)], env=env, cwd="/proc")


def first_bundle(archive: Path, within_s: float = WITHIN_S) -> Path:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        found = bundles(archive)
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no bundle in {archive} within {within_s} s")


def test_post_kill_hook_records_the_victim(tmp_path, hook, victim):
    archive = tmp_path / "archive"
    # -N: the victim is killed and has exited; then the hook, which earlyoom does not wait for.
    victim.send_signal(signal.SIGTERM)
    victim.wait(timeout=10)
    started = time.monotonic()
    process = run_like_earlyoom(hook, earlyoom_env(archive, victim.pid, "llama-server"))
    bundle = first_bundle(archive)
    assert time.monotonic() - started < WITHIN_S
    assert process.wait(timeout=30) == 0
    trigger = manifest(bundle)["trigger"]
    assert (trigger["kind"], trigger["name"]) == ("hook", "earlyoom")
    assert trigger["detail"] == f"victim {victim.pid} llama-server"
    assert bundle.name.endswith("_hook-earlyoom")


def test_pre_kill_hook_runs_while_earlyoom_goes_ahead_with_the_kill(tmp_path, hook, victim):
    archive = tmp_path / "archive"
    process = run_like_earlyoom(hook, earlyoom_env(archive, victim.pid, "llama-server"))
    # -P: earlyoom waits at most 200 ms for the hook, then kills whatever the hook is doing.
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=PREHOOK_WAIT_S)
    victim.send_signal(signal.SIGTERM)
    bundle = first_bundle(archive)
    assert process.wait(timeout=30) == 0
    trigger = manifest(bundle)["trigger"]
    assert (trigger["kind"], trigger["name"]) == ("hook", "earlyoom")
    assert trigger["detail"] == f"victim {victim.pid} llama-server"


def test_a_hostile_process_name_is_recorded_not_run(tmp_path, hook):
    # earlyoom's man page: EARLYOOM_NAME "can contain spaces, newlines, special characters and
    # is controlled by the user, or it can be empty".
    archive, marker = tmp_path / "archive", tmp_path / "pwned"
    name = f'-x $(touch {marker}) `touch {marker}2` "q" \\ *\nz'
    process = run_like_earlyoom(hook, earlyoom_env(archive, 4242, name, uid=1000))
    assert process.wait(timeout=30) == 0
    assert manifest(first_bundle(archive))["trigger"]["detail"] == f"victim 4242 {name}"
    assert not list(tmp_path.glob("pwned*"))
    empty = tmp_path / "empty"
    process = run_like_earlyoom(hook, earlyoom_env(empty, 4243, ""))
    assert process.wait(timeout=30) == 0
    assert manifest(first_bundle(empty))["trigger"]["detail"] == "victim 4243 "


def test_the_real_earlyoom_runs_the_hook_in_dry_run(tmp_path, hook):
    """earlyoom itself, in --dryrun: it picks a victim and runs -N, and never sends a signal.

    -m 99 -s 100 put any machine "below the limits", so it acts at once; --dryrun is what
    keeps it from killing (kill_wait() returns before kill() when dryrun is set). The victim
    is ours: a sleep with oom_score_adj 1000 and a preferred name.
    """
    need(shutil.which("earlyoom") is not None, "earlyoom (apt-get install earlyoom)")
    usage = subprocess.run(["earlyoom", "-h"], capture_output=True, text=True, timeout=10)
    assert "-N /PATH/TO/SCRIPT" in usage.stdout + usage.stderr
    assert "--dryrun" in usage.stdout + usage.stderr
    name = tmp_path / "ev-victim"
    name.symlink_to(shutil.which("sleep"))
    victim = subprocess.Popen([str(name), "120"])
    Path(f"/proc/{victim.pid}/oom_score_adj").write_text("1000")
    archive = tmp_path / "archive"
    log = tmp_path / "earlyoom.log"
    env = {**os.environ, "EVIDENCE_ARCHIVE": str(archive)}
    command = ["earlyoom", "--dryrun", "-m", "99", "-s", "100", "-r", "0"]
    command += ["--prefer", "^ev-victim$", "-N", str(hook)]
    with log.open("wb") as out:
        earlyoom = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        bundle = first_bundle(archive, within_s=20)
        assert victim.poll() is None, "earlyoom killed the victim in --dryrun"
    finally:
        earlyoom.terminate()
        earlyoom.wait(timeout=10)
        drain(earlyoom.pid)  # hooks it started are in its process group
        victim.kill()
        victim.wait()
    output = log.read_text()
    assert "dryrun" in output, output
    trigger = manifest(bundle)["trigger"]
    assert (trigger["kind"], trigger["name"]) == ("hook", "earlyoom")
    assert trigger["detail"] == f"victim {victim.pid} ev-victim", output


def drain(group: int, within_s: float = 30.0) -> None:
    """Wait until no live process is left in a process group (zombies do not count)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not members(group):
            return
        time.sleep(0.1)
    for pid in members(group):
        os.kill(pid, signal.SIGKILL)
    raise AssertionError(f"hooks of earlyoom still running after {within_s} s")


def members(group: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if fields[0] != "Z" and int(fields[2]) == group:
            found.append(int(stat.parent.name))
    return found
