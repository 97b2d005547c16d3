"""The lab's frame: one scenario at a time, brought about with real processes, captured by
the real collector, classified by the real analyst, and torn down.

A scenario is a module in lab/scenarios/ registering a Scenario subclass. Everything it
starts goes through Lab.spawn, so teardown kills exactly those processes, by pid, and
nothing else on the machine. Results are printed as a table with the pass rate.
"""

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import orjson

from evidence.archive.recorder import socket_path
from evidence.cli.exits import Exit

EVIDENCE = str(Path(sys.executable).parent / "evidence")
REGISTRY: dict[str, "Scenario"] = {}


@dataclass
class Lab:
    """What a scenario works with: a scratch folder, an archive, a config, its processes."""

    workdir: Path
    archive: Path
    config: Path
    procs: list[subprocess.Popen] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # added to the capture's environment
    capture_pid: int | None = None  # the collector's process, once started

    def spawn(self, argv: list[str], **kwargs: Any) -> subprocess.Popen:
        """Start a process of the scenario's, in its own session, remembered for teardown."""
        kwargs.setdefault("stdout", subprocess.DEVNULL)
        kwargs.setdefault("stderr", subprocess.DEVNULL)
        proc = subprocess.Popen(argv, start_new_session=True, **kwargs)
        self.procs.append(proc)
        return proc

    def python(self, code: str, *args: str, **kwargs: Any) -> subprocess.Popen:
        """A Python process running `code` (argv[0] may be renamed with exec -a style tricks
        by the scenario itself), remembered for teardown."""
        return self.spawn([sys.executable, "-c", code, *args], **kwargs)

    def write_config(self, text: str) -> Path:
        self.config.write_text(text)
        return self.config

    def teardown(self) -> None:
        """Stop every process this lab started (and their process groups), nothing else."""
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        deadline = time.monotonic() + 3
        for proc in self.procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


class Scenario:
    """One fault brought about on purpose. Subclasses set name, expect, and start()."""

    name: ClassVar[str]
    expect: ClassVar[tuple[str, ...]]  # verdicts that count as recognising it
    window_s: ClassVar[float] = 20.0
    config: ClassVar[str] = ""  # evidence's config for the capture (engines, checks...)
    # How the bundle is made: "capture" runs `evidence capture --trigger manual:lab-NAME`;
    # "check" runs `evidence check`, which runs the config's [[checks]] and captures when
    # one fails (trigger healthcheck:NAME, the checks' answers in the bundle).
    command: ClassVar[str] = "capture"

    def unavailable(self) -> str | None:
        """Why this machine cannot run the scenario, or None."""
        return None

    def start(self, lab: Lab) -> None:
        """Bring the condition about; return when it is in place for the capture."""
        raise NotImplementedError

    def during(self, lab: Lab) -> None:
        """Called once the capture has started (a burst to catch in the window); optional."""

    def stop(self, lab: Lab) -> None:
        """Extra teardown beyond killing the lab's processes (a cgroup to remove); optional."""


def register(cls: type[Scenario]) -> type[Scenario]:
    REGISTRY[cls.name] = cls()
    return cls


@dataclass
class Result:
    name: str
    status: str  # passed, failed, skipped
    expected: tuple[str, ...]
    verdict: str | None = None
    reason: str | None = None
    seconds: float = 0.0
    bundle: str | None = None
    top: list[tuple[str, int]] = field(default_factory=list)


LOCK = Path(tempfile.gettempdir()) / "evidence-lab.lock"


def run(scenario: Scenario, keep: Path | None = None, recorder: bool = False) -> Result:
    """Run one scenario end to end; never raises for the scenario's own failures. One
    scenario at a time on the machine: the collector reads the whole machine, so two
    staged at once would each be the other's evidence. With recorder, `evidence record`
    runs from before the fault is brought about, and the capture takes its history."""
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return _run(scenario, keep, recorder)
    finally:
        os.close(fd)


def _start_recorder(lab: Lab) -> None:
    """The resident recorder on the lab's archive, once it answers on its socket. Its own
    configuration is empty: an engine scenario writes the capture's (its engines' ports)
    only as it brings the fault about, after the recorder started. The recorder keeps the
    host; the engines it finds on their usual ports, and the capture reads the lab's."""
    config = lab.workdir / "recorder.toml"
    config.write_text("")
    argv = [EVIDENCE, "record", "--quiet", "--ring-size", "8"]
    proc = lab.spawn(argv + ["--archive", str(lab.archive), "--config", str(config)])
    until = time.monotonic() + 30
    while not socket_path(lab.archive).exists():
        if proc.poll() is not None or time.monotonic() > until:
            raise RuntimeError(f"the recorder did not start (exit {proc.poll()})")
        time.sleep(0.05)
    time.sleep(RECORDER_LEAD_S)  # the box as it was before the fault


RECORDER_LEAD_S = 5.0


def _lab_bundle(archive: Path) -> Path:
    """The newest bundle the lab's capture made: the recorder may have captured too."""
    made = [p for p in archive.glob("bundles/*/*") if p.is_dir() and not p.name.startswith(".")]
    return max((p for p in made if "_recorder-" not in p.name), key=lambda p: p.name)


def _run(scenario: Scenario, keep: Path | None, recorder: bool) -> Result:
    why = scenario.unavailable()
    if why:
        return Result(scenario.name, "skipped", scenario.expect, reason=why)
    began = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix=f"lab-{scenario.name}-", dir=keep))
    lab = Lab(workdir, workdir / "archive", workdir / "evidence.toml")
    lab.write_config(scenario.config)
    result = Result(scenario.name, "failed", scenario.expect)
    try:
        if recorder:
            _start_recorder(lab)
        scenario.start(lab)
        if scenario.command == "check":
            argv = [EVIDENCE, "check", "--window", str(scenario.window_s)]
            captured: tuple[int, ...] = (Exit.CHECK_FAILED,)  # its bundle was captured
        else:
            argv = [EVIDENCE, "capture", "--window", str(scenario.window_s), "--quiet"]
            argv += ["--trigger", f"manual:lab-{scenario.name}"]
            captured = (Exit.OK, Exit.INCOMPLETE)
        capture = subprocess.Popen(
            argv + ["--archive", str(lab.archive), "--config", str(lab.config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **lab.env},
        )
        lab.capture_pid = capture.pid
        scenario.during(lab)
        _, err = capture.communicate(timeout=scenario.window_s + 60)
        if capture.returncode not in captured:
            why = "every check passed: nothing captured" if capture.returncode == 0 else ""
            result.reason = (
                f"{scenario.command} exited {capture.returncode}: {why or err.strip()[-300:]}"
            )
            return result
        classified = subprocess.run(
            [EVIDENCE, "classify", str(_lab_bundle(lab.archive)), "--json"]
            + ["--archive", str(lab.archive)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if classified.returncode != 0:
            result.reason = f"classify exited {classified.returncode}: {classified.stderr[-300:]}"
            return result
        verdict = orjson.loads(classified.stdout)
        result.verdict = verdict["verdict"]
        result.bundle = verdict["bundle_id"]
        result.top = [(c["fault"], c["score"]) for c in verdict["candidates"][:3]]
        if result.verdict in scenario.expect:
            result.status = "passed"
        else:
            # What the expected fault's rule saw, so a failure far away (CI) says why.
            said = [
                f"{c['fault']}: "
                + " / ".join(c["evidence_for"] + c["evidence_against"] + c["missing"])
                for c in verdict["candidates"]
                if c["fault"] in scenario.expect
            ]
            result.reason = "; ".join([*(f"{f} {s}" for f, s in result.top), *said])
        return result
    except Exception as exc:  # the lab reports a broken scenario, it does not stop the others
        result.reason = f"{type(exc).__name__}: {exc}"
        return result
    finally:
        lab.teardown()
        scenario.stop(lab)
        result.seconds = time.monotonic() - began
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


def table(results: list[Result]) -> str:
    rows = [("scenario", "expected", "verdict", "result", "s", "why")]
    for r in results:
        why = r.reason or ""
        rows.append(
            (r.name, " or ".join(r.expected), r.verdict or "-", r.status, f"{r.seconds:.0f}", why)
        )
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row[:5], widths, strict=True)) + "  " + row[5]
             for row in rows]  # fmt: skip
    ran = [r for r in results if r.status != "skipped"]
    passed = sum(r.status == "passed" for r in ran)
    lines.append(
        f"\n{passed} of {len(ran)} scenarios that could run here passed"
        f" ({len(results) - len(ran)} skipped with their reason)"
    )
    return "\n".join(lines)
