"""The systemd units: systemd itself accepts them, and they run what they say.

`systemd-analyze verify` loads unit files the way PID 1 does, without a running systemd:
it needs neither systemd as PID 1 nor a bus, so it works as root in a CI container. What it
cannot do is run a unit, so the capture template's ExecStart= is expanded here the way
systemd expands it (specifiers, then quoted words, then variables) and run by hand.
"""

import os
import re
import shlex
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest
from conftest import EVIDENCE, bundles, manifest, need, run_evidence

from evidence.capture.units import (
    BASELINE_SERVICE,
    BASELINE_TIMER,
    CAPTURE_TEMPLATE,
    CHECK_SERVICE,
    CHECK_TIMER,
    PRUNE_SERVICE,
    PRUNE_TIMER,
    RECORD_SERVICE,
    SERVE_SERVICE,
    UNIT_NAMES,
    UnitConflict,
    cron_lines,
    install,
    quote,
    unit_files,
)

# The README's example: any unit that should leave evidence when it fails.
LLAMA_SERVER_UNIT = """\
[Unit]
Description=llama.cpp server
OnFailure=evidence-capture@%n.service

[Service]
ExecStart=/usr/local/bin/llama-server -m /models/chat.gguf --port 8080
Restart=on-failure
RestartSec=10s

[Install]
WantedBy=multi-user.target
"""

# Names that need every kind of quoting a unit file has. systemd refuses \\, " and ' in the
# path of a command (and so does unit_files), but an argument may hold anything.
AWKWARD_BIN = "bin dir %n $HOME"
AWKWARD = 'arch ive %i ${X} $$ "q" back\\slash'


def need_systemd_analyze() -> None:
    need(shutil.which("systemd-analyze") is not None, "systemd-analyze (apt-get install systemd)")


@cache
def verify_flags() -> tuple[str, ...]:
    """--man=no: no man(1) lookups; --recursive-errors=no: a warning about these units
    (an unknown key, a bad value) is a failure, one about the host's own units is not."""
    help_text = subprocess.run(
        ["systemd-analyze", "--help"], capture_output=True, text=True, check=False
    ).stdout
    flags = ["--man=no"]
    if "--recursive-errors" in help_text:  # systemd 250 and newer
        flags.append("--recursive-errors=no")
    return tuple(flags)


def verify(directory: Path, *names: str) -> subprocess.CompletedProcess:
    # Files from one directory: verify adds it to the unit search path, so a timer finds its
    # service and an OnFailure= finds the template. Warnings and errors only on stderr.
    env = {**os.environ, "SYSTEMD_LOG_LEVEL": "warning", "SYSTEMD_LOG_COLOR": "0"}
    return subprocess.run(
        ["systemd-analyze", "verify", *verify_flags(), *(f"./{n}" for n in names)],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def complaints(done: subprocess.CompletedProcess, directory: Path) -> list[str]:
    """What verify said about these units (a host whose own units draw warnings of their
    own, from a newer or older systemd, must not fail the test)."""
    ours = (str(directory), "evidence-", "llama-server", "foo@")
    return [line for line in done.stderr.splitlines() if any(o in line for o in ours)]


def exec_start(unit_text: str) -> str:
    [line] = [x for x in unit_text.splitlines() if x.startswith("ExecStart=")]
    return line.removeprefix("ExecStart=")


def systemd_argv(value: str, specifiers: dict[str, str], env: dict[str, str]) -> list[str]:
    """The argv systemd runs for an ExecStart= value (systemd.service(5), "Command lines").

    Specifiers are expanded on the whole line when the unit is loaded (%% is a literal %);
    the line is then split into words, double quotes with \\\\ and \\" escapes as in a POSIX
    shell; ${NAME} is replaced at run time (empty when unset) and $$ is a literal $.
    """
    line = re.sub(r"%(.)", lambda m: {"%": "%", **specifiers}[m.group(1)], value)
    words = shlex.split(line)
    for word in words[1:]:  # $NAME, split into words, is not something these units use
        assert not re.search(r"\$[A-Za-z_]", re.sub(r"\$\$|\$\{\w+\}", "", word)), word

    def variables(word: str) -> str:
        return re.sub(
            r"\$\$|\$\{(\w+)\}", lambda m: "$" if m[0] == "$$" else env.get(m[1], ""), word
        )

    return [words[0], *(variables(w) for w in words[1:])]


@pytest.fixture
def awkward_evidence(tmp_path) -> str:
    """The real evidence command, reached through a path that must be quoted."""
    directory = tmp_path / AWKWARD_BIN
    directory.mkdir()
    (directory / "evidence").symlink_to(EVIDENCE)
    return str(directory / "evidence")


def test_every_unit_is_generated_and_names_the_absolute_command():
    files = unit_files("/opt/evidence/.venv/bin/evidence")
    assert tuple(files) == UNIT_NAMES
    for name, text in files.items():
        if name.endswith(".service"):
            assert exec_start(text).startswith("/opt/evidence/.venv/bin/evidence "), name
            assert "User=root" in text and "MemoryMax=256M" in text, name
            # Protected, never killed first; the recorder, there through it all, most.
            adjust = "-900" if name == RECORD_SERVICE else "-500"
            assert f"OOMScoreAdjust={adjust}" in text, name
        assert "Documentation=" not in text
    for timer in (BASELINE_TIMER, CHECK_TIMER, PRUNE_TIMER):
        assert timer.replace(".timer", ".service") in files  # what the timer starts
    with pytest.raises(ValueError):
        unit_files("evidence")  # systemd wants an absolute path, and so do we
    with pytest.raises(ValueError):
        unit_files('/opt/"evidence"/bin/evidence')  # a path systemd would refuse to run
    for window in (float("nan"), -1, 3601):
        with pytest.raises(ValueError):
            unit_files("/opt/evidence/.venv/bin/evidence", window_s=window)


def test_timers_and_the_commands_they_start():
    files = unit_files("/opt/evidence/.venv/bin/evidence", window_s=30)
    baseline = files[BASELINE_TIMER]
    for line in ("OnCalendar=*:0/10", "Persistent=true", "AccuracySec=1s", "RandomizedDelaySec=0"):
        assert line in baseline.splitlines()
    assert "OnCalendar=*:*:00" in files[CHECK_TIMER].splitlines()
    assert systemd_argv(exec_start(files[BASELINE_SERVICE]), {}, {})[1:] == [
        "capture",
        "--window",
        "0",
        "--trigger",
        "cron:baseline",
        "--quiet",
    ]
    check = ["check", "--window", "30"]  # the bundle of a failed check, as the timeout says
    assert systemd_argv(exec_start(files[CHECK_SERVICE]), {}, {})[1:] == check
    serve = files[SERVE_SERVICE]
    assert systemd_argv(exec_start(serve), {}, {})[1:] == ["serve", "--listen", "127.0.0.1:9095"]
    assert "Restart=on-failure" in serve and "WantedBy=multi-user.target" in serve
    # A stop lets the running capture process finish: SIGTERM to serve alone, and time for it.
    assert "KillMode=mixed" in serve.splitlines()
    stop = re.search(r"^TimeoutStopSec=(\d+)s$", serve, re.M)
    assert stop and int(stop[1]) > 30 + 3 + 10 + 30
    # Above the capture's own bound (window + 3 s) with room for the lock wait.
    timeout = re.search(r"^TimeoutStartSec=(\d+)s$", files[CAPTURE_TEMPLATE], re.M)
    assert timeout and int(timeout[1]) > 30 + 3 + 10


def test_the_recorder_unit_is_protected_and_runs_a_recorder_the_real_command_accepts(tmp_path):
    archive = tmp_path / "archive"
    files = unit_files(EVIDENCE, archive=str(archive))
    unit = files[RECORD_SERVICE].splitlines()
    for line in ("MemoryMin=64M", "OOMScoreAdjust=-900", "Restart=always", "KillMode=mixed"):
        assert line in unit
    assert any(x.startswith("CPUQuota=") for x in unit) and any(x.startswith("Nice=") for x in unit)
    assert "WantedBy=multi-user.target" in unit
    argv = systemd_argv(exec_start(files[RECORD_SERVICE]), {}, {})
    assert argv[1:3] == ["record", "--quiet"]
    done = subprocess.run([*argv, "--for", "0.5", "--ring-size", "1"], cwd="/",
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (archive / "recorder.ring").stat().st_size == 2**20


def test_the_cron_lines_start_the_recorder_at_boot_and_run_as_the_units_do(tmp_path):
    archive = tmp_path / "an archive"
    lines = [x for x in cron_lines(EVIDENCE, str(archive)).splitlines() if not x.startswith("#")]
    schedules = {x.split(" root ")[0]: shlex.split(x.split(" root ", 1)[1]) for x in lines}
    assert set(schedules) == {"@reboot", "*/10 * * * *", "* * * * *", "45 * * * *"}
    reboot = schedules["@reboot"]
    assert reboot[:3] == [EVIDENCE, "record", "--quiet"] and reboot[-2:] == [
        "--archive",
        str(archive),
    ]
    done = subprocess.run([*reboot, "--for", "0.5", "--ring-size", "1"], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert schedules["*/10 * * * *"][1:6] == [
        "capture",
        "--window",
        "0",
        "--trigger",
        "cron:baseline",
    ]
    done = run_evidence("units", "--cron", "--archive", str(archive))
    assert done.returncode == 0 and done.stdout == cron_lines(EVIDENCE, str(archive))


def test_the_prune_timer_runs_a_prune_the_real_command_accepts(tmp_path):
    archive = tmp_path / "archive"
    archive.mkdir(mode=0o700)
    files = unit_files(EVIDENCE, archive=str(archive))
    timer = files[PRUNE_TIMER].splitlines()
    assert "OnCalendar=*:45" in timer and "Persistent=true" in timer
    argv = systemd_argv(exec_start(files[PRUNE_SERVICE]), {}, {})
    assert argv[1:6] == ["prune", "--keep-days", "30", "--max-size", "10G"]
    done = subprocess.run(argv, cwd="/", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "removed 0 bundle(s)" in done.stdout


def test_archive_config_and_token_file_reach_every_command(tmp_path):
    archive, config, token = tmp_path / AWKWARD, tmp_path / "c.toml", tmp_path / "t k"
    files = unit_files(
        EVIDENCE, str(archive), str(config), token_file=str(token), listen="127.0.0.1:9999"
    )
    for name, text in files.items():
        if name.endswith(".service"):
            argv = systemd_argv(exec_start(text), {"i": "x.service"}, {})
            assert argv[0] == EVIDENCE
            assert argv[-4:] == ["--archive", str(archive), "--config", str(config)], name
    serve = systemd_argv(exec_start(files[SERVE_SERVICE]), {}, {})
    assert serve[1:6] == ["serve", "--listen", "127.0.0.1:9999", "--token-file", str(token)]


@pytest.mark.parametrize(
    "word",
    ["plain", "with space", "50%", "%n", "$HOME", "${X}", "$$", 'q"uote', "back\\slash", "", "ü"],
)
def test_quoting_survives_systemds_expansion(word):
    assert systemd_argv(f"/bin/x {quote(word)}", {"n": "expanded"}, {"X": "no"}) == ["/bin/x", word]


def test_control_characters_cannot_be_written_into_a_unit():
    with pytest.raises(ValueError):
        unit_files(EVIDENCE, archive="/var/lib/evi\ndence")


def test_systemd_accepts_every_unit(tmp_path, awkward_evidence):
    need_systemd_analyze()
    units = tmp_path / "units"
    install(units, unit_files(awkward_evidence, archive=str(tmp_path / AWKWARD)))
    done = verify(units, *UNIT_NAMES)
    # systemd checks that the ExecStart= binary is executable: the quoting of the awkward
    # path is proven by systemd finding the command, and nothing else may be said either.
    assert (done.returncode, complaints(done, units)) == (0, []), done.stderr


def test_systemd_rejects_what_is_wrong(tmp_path):
    # The check above would pass vacuously if verify said nothing about broken units.
    need_systemd_analyze()
    files = unit_files(str(tmp_path / "no-such-evidence"))
    files[SERVE_SERVICE] = files[SERVE_SERVICE].replace("Nice=10", "Nice=10\nNoSuchKey=1")
    install(tmp_path, files)
    missing = verify(tmp_path, BASELINE_SERVICE)
    assert missing.returncode != 0
    assert any("no-such-evidence" in line for line in complaints(missing, tmp_path))
    unknown = verify(tmp_path, SERVE_SERVICE)
    assert any("NoSuchKey" in line for line in complaints(unknown, tmp_path))


def test_an_onfailure_unit_and_the_instance_it_starts_verify(tmp_path):
    need_systemd_analyze()
    units = tmp_path / "units"
    install(units, unit_files(EVIDENCE))
    example = LLAMA_SERVER_UNIT.replace("/usr/local/bin/llama-server", shutil.which("sleep"))
    (units / "llama-server.service").write_text(example)
    instance = "evidence-capture@llama-server.service.service"  # %n of llama-server.service
    done = verify(units, "llama-server.service", CAPTURE_TEMPLATE, instance)
    assert (done.returncode, complaints(done, units)) == (0, []), done.stderr
    # A templated unit's name has an @ of its own; it is still a valid instance.
    (units / "foo@.service").write_text(example.replace("llama.cpp server", "foo %i"))
    done = verify(units, "foo@bar.service", "evidence-capture@foo@bar.service.service")
    assert (done.returncode, complaints(done, units)) == (0, []), done.stderr


@pytest.mark.parametrize("failed_unit", ["llama-server.service", "foo@bar.service"])
def test_the_instance_name_becomes_the_trigger(tmp_path, awkward_evidence, failed_unit):
    archive = tmp_path / AWKWARD
    template = unit_files(awkward_evidence, archive=str(archive), window_s=0)[CAPTURE_TEMPLATE]
    # OnFailure=evidence-capture@%n.service in the failed unit names this instance.
    on_failure = re.search(r"^OnFailure=(\S+)$", LLAMA_SERVER_UNIT, re.M)[1]
    started = on_failure.replace("%n", failed_unit)
    instance = started[started.index("@") + 1 : started.rindex(".")]
    assert instance == failed_unit
    # What systemd passes to a unit started by OnFailure= (systemd.exec(5), $MONITOR_*).
    monitor = {
        "MONITOR_SERVICE_RESULT": "oom-kill",
        "MONITOR_EXIT_CODE": "killed",
        "MONITOR_EXIT_STATUS": "KILL",
        "MONITOR_INVOCATION_ID": "cc8fdc149b2b4ca698d4f259f4054236",
        "MONITOR_UNIT": failed_unit,
    }
    argv = systemd_argv(exec_start(template), {"i": instance}, monitor)
    assert argv[0] == awkward_evidence
    done = subprocess.run(
        argv, env={**os.environ, **monitor}, cwd="/", capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    [bundle] = bundles(archive)
    m = manifest(bundle)
    assert m["trigger"]["kind"] == "systemd"
    assert m["trigger"]["name"] == failed_unit
    assert m["trigger"]["detail"] == (
        "result=oom-kill exit=killed/KILL invocation=cc8fdc149b2b4ca698d4f259f4054236"
    )
    assert m["window_s"] == 0


def test_install_writes_0644_and_a_second_run_writes_nothing(tmp_path):
    files = unit_files(EVIDENCE)
    target = tmp_path / "system"
    old = os.umask(0o077)  # the installer's umask must not make a unit unreadable
    try:
        written = install(target, files)
    finally:
        os.umask(old)
    assert written == [target / name for name in files]
    for name, text in files.items():
        assert (target / name).read_text() == text
        assert (target / name).stat().st_mode & 0o777 == 0o644
    before = {p.name: p.stat().st_mtime_ns for p in target.iterdir()}
    assert install(target, files) == []
    assert {p.name: p.stat().st_mtime_ns for p in target.iterdir()} == before


def test_install_refuses_to_clobber_unless_forced(tmp_path):
    files = unit_files(EVIDENCE)
    install(tmp_path, files)
    (tmp_path / CHECK_TIMER).write_text("# the operator's own timer\n")
    (tmp_path / SERVE_SERVICE).unlink()
    with pytest.raises(UnitConflict, match=CHECK_TIMER):
        install(tmp_path, files)
    # Nothing at all was written: not even the missing file.
    assert (tmp_path / CHECK_TIMER).read_text() == "# the operator's own timer\n"
    assert not (tmp_path / SERVE_SERVICE).exists()
    written = install(tmp_path, files, force=True)
    assert sorted(p.name for p in written) == sorted([CHECK_TIMER, SERVE_SERVICE])
    assert (tmp_path / CHECK_TIMER).read_text() == files[CHECK_TIMER]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(files)  # no temp files left


def test_install_takes_plain_file_names_only(tmp_path):
    with pytest.raises(ValueError):
        install(tmp_path, {"../escape.service": "[Unit]\n"})
    assert list(tmp_path.iterdir()) == []


def test_the_help_names_every_unit_and_enables_every_timer():
    from evidence.cli.collector import units

    text = " ".join((units.help or "").split())
    for name in UNIT_NAMES:
        stem = name.removesuffix(".service").removesuffix(".timer")
        assert stem in text, f"`evidence units --help` does not name {name}"
    enabled = text.split("enable --now", 1)[1].split()
    timers = [name for name in UNIT_NAMES if name.endswith(".timer")]
    assert all(t in enabled for t in timers), enabled
