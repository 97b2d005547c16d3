"""systemd units that start the collector: the OnFailure= capture, the baseline and check
timers, the webhook receiver, the prune timer that keeps the archive bounded, and the
resident recorder; and the cron lines that do the same on a box without systemd.

Invariants:
- Stdlib only: the collector imports this module, and must never load duckdb or jinja2.
- Every ExecStart runs the absolute `evidence` path it was given, and every value written
  into a unit is quoted for systemd (spaces, quotes, backslashes, `%` specifiers, `$`
  variables), so systemd runs exactly the argv that was meant.
- The units bound what they start: a timeout above the capture's own bound, low CPU and I/O
  priority, a memory ceiling, and no way to restart, stop or kill any unit but their own.
- install() writes only the files it is given, only into the directory it is given, and
  never replaces a file that says something else unless told to.
"""

import math
import os
import re
import shlex
from pathlib import Path

from evidence.capture.config import MAX_WINDOW_S

CAPTURE_TEMPLATE = "evidence-capture@.service"
BASELINE_SERVICE = "evidence-baseline.service"
BASELINE_TIMER = "evidence-baseline.timer"
CHECK_SERVICE = "evidence-check.service"
CHECK_TIMER = "evidence-check.timer"
SERVE_SERVICE = "evidence-serve.service"
PRUNE_SERVICE = "evidence-prune.service"
PRUNE_TIMER = "evidence-prune.timer"
RECORD_SERVICE = "evidence-record.service"
UNIT_NAMES = (
    CAPTURE_TEMPLATE,
    BASELINE_SERVICE,
    BASELINE_TIMER,
    CHECK_SERVICE,
    CHECK_TIMER,
    SERVE_SERVICE,
    PRUNE_SERVICE,
    RECORD_SERVICE,
    PRUNE_TIMER,
)

DEFAULT_LISTEN = "127.0.0.1:9095"
# A capture ends within its window plus 3 s, but may first wait lock_wait_s (10 s) for
# another capture, and Python's own start takes seconds on a box that is swapping.
TIMEOUT_MARGIN_S = 30
# A baseline every 10 minutes is about 700 MB a day: without prune the archive fills the disk.
KEEP_DAYS = 30
MAX_SIZE = "10G"

# What systemd passes to a unit started by OnFailure= (systemd.exec(5), "$MONITOR_*"): how
# the failed unit ended. oom-kill is the kernel's or systemd-oomd's kill, signal/KILL
# somebody else's SIGKILL (earlyoom escalating, a person). A SIGTERM is a clean stop to
# systemd: it fails nothing, and starts no capture.
_MONITOR_DETAIL = (
    '"result=${MONITOR_SERVICE_RESULT} exit=${MONITOR_EXIT_CODE}/${MONITOR_EXIT_STATUS}'
    ' invocation=${MONITOR_INVOCATION_ID}"'
)

# The [Service] settings every unit that runs the collector shares.
_BOUNDS = """\
# Low priority: the evidence must not compete with what is failing. I/O stays in the
# best-effort class (lowest level) rather than idle: under a swap storm the disk is never
# idle, and an idle-class collector could wait forever to page its own code back in.
Nice=10
IOSchedulingClass=best-effort
IOSchedulingPriority=7
# It can never be what takes the machine down: a hard ceiling far above what it uses.
MemoryMax=256M
# Killed last, not first. A high OOMScoreAdjust would make the kernel kill the collector
# first, at the moment it is needed. It cannot be the hog (MemoryMax above caps it), so it
# may be protected; -500 rather than -1000, so that an OOM inside its own 256M ceiling can
# still end it. ManagedOOMPreference=avoid asks the same of systemd-oomd.
OOMScoreAdjust=-500
ManagedOOMPreference=avoid
# Writes nothing but the archive, private, and no bytecode caches beside the code.
UMask=0077
Environment=PYTHONDONTWRITEBYTECODE=1"""

# The recorder runs all the time, through the failures it records: it is protected rather
# than merely bounded.
_RECORDER_BOUNDS = """\
# Its working set (about 40 MB) and the ring's recent pages are never reclaimed for others:
# under pressure it must not page itself back in from the disk it is recording.
MemoryMin=64M
MemoryMax=256M
# Killed next to last: -900, not -1000, so an OOM inside its own ceiling can still end it.
OOMScoreAdjust=-900
ManagedOOMPreference=avoid
# Gentle on the CPU. The quota holds the captures it starts too (they run in its control
# group), so it is what a capture needs, not what the recorder needs (about 1 %).
Nice=5
CPUQuota=50%
IOSchedulingClass=best-effort
IOSchedulingPriority=7
UMask=0077
Environment=PYTHONDONTWRITEBYTECODE=1"""

_PLAIN = re.compile(r"[A-Za-z0-9_@+=:,./-]+")


class UnitConflict(FileExistsError):
    """A unit file already exists with other content, and install() was not forced."""


def quote(word: str, *, executable: bool = False) -> str:
    """One literal word of an ExecStart= line, as systemd will hand it to the program.

    `%` starts a specifier, so it is doubled; `$` starts a variable in an argument, so it
    is doubled there, but not in the executable's path, which systemd does not expand. A
    word with anything outside a conservative plain set is double-quoted with its
    backslashes and quotes escaped. A control character cannot be carried: ValueError.
    """
    if any(ord(c) < 32 or c == "\x7f" for c in word):
        raise ValueError(f"{word!r}: control characters cannot be passed in a unit file")
    text = word.replace("%", "%%")
    if not executable:
        text = text.replace("$", "$$")
    if _PLAIN.fullmatch(word):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unit_files(
    evidence: str,
    archive: str | None = None,
    config: str | None = None,
    *,
    window_s: float = 30.0,
    check_timeout_s: float = 60.0,
    listen: str = DEFAULT_LISTEN,
    token_file: str | None = None,
    keep_days: float = KEEP_DAYS,
    max_size: str = MAX_SIZE,
) -> dict[str, str]:
    """File name -> content of every unit, for the `evidence` at that absolute path.

    archive and config, when given, are passed to every command (made absolute: a unit runs
    in /). window_s is the window of an OnFailure= capture and of the bundle `evidence
    check` captures on a failure; check_timeout_s the longest configured check; keep_days
    and max_size what the hourly `evidence prune` keeps.
    """
    if not os.path.isabs(evidence):
        raise ValueError(f"{evidence!r}: the evidence command must be an absolute path")
    evidence = os.path.normpath(evidence)  # systemd refuses a path with // or /./ in it
    if any(c in evidence for c in "\\\"'"):
        raise ValueError(f"{evidence!r}: systemd cannot run a command whose path holds \\ \" or '")
    if not (math.isfinite(window_s) and 0 <= window_s <= MAX_WINDOW_S):
        raise ValueError(f"window_s must be 0 to {MAX_WINDOW_S} seconds, not {window_s!r}")
    common: list[str] = []  # in unit syntax
    if archive is not None:
        common += ["--archive", quote(_absolute(archive))]
    if config is not None:
        common += ["--config", quote(_absolute(config))]

    def run(*words: str) -> str:
        """An ExecStart= line; words are already in unit syntax (literals through quote())."""
        return "ExecStart=" + " ".join([quote(evidence, executable=True), *words, *common])

    window = quote(f"{window_s:g}")
    capture_timeout = math.ceil(window_s) + TIMEOUT_MARGIN_S
    check_timeout = math.ceil(check_timeout_s) + 2 + capture_timeout
    serve = ["serve", "--listen", quote(listen)]
    if token_file is not None:
        serve += ["--token-file", quote(_absolute(token_file))]

    # %i is the instance: the failed unit's name (OnFailure=evidence-capture@%n.service),
    # so the trigger is systemd:<that unit>. %i, not %I: unescaping would turn the '-' of
    # llama-server.service into '/'.
    prune = ["prune", "--keep-days", quote(f"{keep_days:g}"), "--max-size", quote(max_size)]
    capture = ["capture", "--window", window, "--trigger", "systemd:%i"]
    capture += ["--detail", _MONITOR_DETAIL, "--quiet"]
    return {
        CAPTURE_TEMPLATE: _unit(
            [
                "[Unit]",
                "Description=evidence: freeze a bundle after %i failed",
                "# Started by OnFailure=evidence-capture@%n.service in any unit. A unit that",
                "# crash-loops costs at most three bundles in ten minutes.",
                "StartLimitIntervalSec=10min",
                "StartLimitBurst=3",
                "",
                "[Service]",
                "Type=oneshot",
                "# Root: it reads every process, the kernel log and the GPUs.",
                "User=root",
                run(*capture),
                f"TimeoutStartSec={capture_timeout}s",
                "TimeoutStopSec=10s",
                _BOUNDS,
            ]
        ),
        BASELINE_SERVICE: _unit(
            [
                "[Unit]",
                "Description=evidence: baseline snapshot",
                "",
                "[Service]",
                "Type=oneshot",
                "User=root",
                run("capture", "--window", "0", "--trigger", "cron:baseline", "--quiet"),
                f"TimeoutStartSec={TIMEOUT_MARGIN_S}s",
                "TimeoutStopSec=10s",
                _BOUNDS,
            ]
        ),
        BASELINE_TIMER: _unit(
            [
                "[Unit]",
                "Description=evidence: baseline snapshot every 10 minutes",
                "",
                "[Timer]",
                "OnCalendar=*:0/10",
                "# A slot missed while the machine was off is taken at boot: the first",
                "# reading of a new boot is evidence too.",
                "Persistent=true",
                "AccuracySec=1s",
                "RandomizedDelaySec=0",
                "",
                "[Install]",
                "WantedBy=timers.target",
            ]
        ),
        CHECK_SERVICE: _unit(
            [
                "[Unit]",
                "Description=evidence: health checks, capturing a bundle on a failure",
                "",
                "[Service]",
                "Type=oneshot",
                "User=root",
                run("check", "--window", window),
                f"TimeoutStartSec={check_timeout}s",
                "TimeoutStopSec=10s",
                _BOUNDS,
            ]
        ),
        CHECK_TIMER: _unit(
            [
                "[Unit]",
                "Description=evidence: health checks every minute",
                "",
                "[Timer]",
                "# A run still going when the next minute comes is not started twice.",
                "OnCalendar=*:*:00",
                "AccuracySec=1s",
                "RandomizedDelaySec=0",
                "",
                "[Install]",
                "WantedBy=timers.target",
            ]
        ),
        SERVE_SERVICE: _unit(
            [
                "[Unit]",
                "Description=evidence: Alertmanager webhook receiver",
                "After=network.target",
                "",
                "[Service]",
                "Type=exec",
                "User=root",
                run(*serve),
                "Restart=on-failure",
                "RestartSec=5s",
                "# SIGTERM to serve alone: it lets its running capture process finish (the",
                "# window, the lock wait, a slow start) and then exits; what is left past",
                "# the stop timeout is killed.",
                "KillMode=mixed",
                f"TimeoutStopSec={capture_timeout + TIMEOUT_MARGIN_S}s",
                _BOUNDS,
                "",
                "[Install]",
                "WantedBy=multi-user.target",
            ]
        ),
        PRUNE_SERVICE: _unit(
            [
                "[Unit]",
                "Description=evidence: keep the archive bounded",
                "",
                "[Service]",
                "Type=oneshot",
                "User=root",
                run(*prune),
                "# It waits up to 10 s for an ingest, then removes what is past the limits.",
                "TimeoutStartSec=10min",
                "TimeoutStopSec=10s",
                _BOUNDS,
            ]
        ),
        RECORD_SERVICE: _unit(
            [
                "[Unit]",
                "Description=evidence: the resident recorder (the hour before every capture)",
                "",
                "[Service]",
                "Type=exec",
                "User=root",
                run("record", "--quiet"),
                "# It starts captures itself; it restarts nothing but itself.",
                "Restart=always",
                "RestartSec=5s",
                "# Its own captures run in its control group: let a running one finish.",
                "KillMode=mixed",
                f"TimeoutStopSec={capture_timeout}s",
                _RECORDER_BOUNDS,
                "",
                "[Install]",
                "WantedBy=multi-user.target",
            ]
        ),
        PRUNE_TIMER: _unit(
            [
                "[Unit]",
                "Description=evidence: prune the archive every hour",
                "",
                "[Timer]",
                "# Hourly: a flood of alerts or a crash-looping unit fills the archive in",
                "# hours, not days. At :45, away from the baselines at :00, :10, ...",
                "OnCalendar=*:45",
                "Persistent=true",
                "AccuracySec=1min",
                "",
                "[Install]",
                "WantedBy=timers.target",
            ]
        ),
    }


def cron_lines(evidence: str, archive: str | None = None, config: str | None = None) -> str:
    """/etc/cron.d lines for a box without systemd: the recorder at boot, a baseline every
    10 minutes, the checks every minute and prune every hour, as the units do."""
    common = ""
    if archive is not None:
        common += f" --archive {shlex.quote(_absolute(archive))}"
    if config is not None:
        common += f" --config {shlex.quote(_absolute(config))}"
    run = shlex.quote(os.path.normpath(evidence))
    lines = [
        "# /etc/cron.d/evidence: what the systemd units do, for a box without systemd.",
        "# cron starts the recorder once, at boot; nothing restarts it if it dies.",
        f"@reboot root {run} record --quiet{common}",
        f"*/10 * * * * root {run} capture --window 0 --trigger cron:baseline --quiet{common}",
        f"* * * * * root {run} check{common}",
        f"45 * * * * root {run} prune --keep-days {KEEP_DAYS} --max-size {MAX_SIZE}{common}",
    ]
    return "\n".join(line.replace("%", "\\%") for line in lines) + "\n"


def install(directory: Path, files: dict[str, str], force: bool = False) -> list[Path]:
    """Write files into directory (0644) and return the paths written.

    A file that already holds the same content is left alone (and not returned), so a
    second run writes nothing. One that holds other content is a UnitConflict, and nothing
    at all is written, unless force. Each file is replaced atomically.
    """
    directory = Path(directory)
    for name in files:
        if not name or name in (".", "..") or "/" in name or "\0" in name:
            raise ValueError(f"{name!r}: not a plain file name")
    todo: list[tuple[Path, bytes]] = []
    conflicts: list[str] = []
    for name, text in files.items():
        path = directory / name
        data = text.encode()
        try:
            current = path.read_bytes()
        except FileNotFoundError:
            current = None
        if current == data:
            if path.stat().st_mode & 0o777 != 0o644:
                path.chmod(0o644)
            continue
        if current is not None and not force:
            conflicts.append(str(path))
        todo.append((path, data))
    if conflicts:
        raise UnitConflict(f"{', '.join(conflicts)}: exists with other content (force to replace)")
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for path, data in todo:
        _write(path, data)
        written.append(path)
    return written


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o644)  # whatever the umask
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _absolute(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def _unit(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"
