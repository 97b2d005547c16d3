"""Reliability under fault: the real `evidence capture` (and `evidence ingest`) while the
machine itself is failing.

Already proven elsewhere, and not repeated here:
- the window + 3 s bound on a healthy machine (test_safety), with one hung NVML call at
  the freeze or in the window (test_gpu), with one black-hole engine (test_engines), with
  one hung container runtime (test_safety), with a probe blocked on a FIFO in-process
  (test_probes); a FIFO named as a log file is refused in-process (test_logs);
- one SIGKILL during sampling, recovered by the next capture (test_safety);
- an archive path that is not a directory: exit 4 (test_safety); a nearly full disk:
  exit 5 or 4 and a truthful manifest (test_safety, test_bundle);
- eight hand-made broken bundles quarantined by `evidence ingest` (test_archive).

Here: those faults all at once, and on a busy box; a capture under memory pressure;
SIGKILL at random moments of the whole capture, and torn files in what it leaves; an
archive that is really read-only (a read-only mount, an immutable directory, an
unprivileged user); a disk with no space or no inodes left; and `evidence ingest` on a
read-only or full disk. The hypothesis fuzzing of ingest is in test_fuzz_ingest.py.

Most of these need root (mounts, cgroups, setpriv, chattr) and stress-ng; without them
they skip and say why, and fail instead under EVIDENCE_REQUIRE_INTEGRATION=1.
"""

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import duckdb
import orjson
import pytest
from conftest import (
    EVIDENCE,
    bundle_errors,
    bundles,
    errors,
    manifest,
    need,
    read_records,
    run_evidence,
    write_config,
)
from fakes import BlackHole
from synth import Host, write_bundle
from test_gpu import fake_nvml, scenario  # noqa: F401  (fake_nvml is a fixture)

from evidence.analyze import validate
from evidence.analyze.ingest import QUARANTINE, ingest
from evidence.archive.layout import partial_path
from evidence.capture.bundle import INCOMPLETE, MANIFEST
from evidence.capture.runner import SEAL_MARGIN_S

ROOT = Path(__file__).parent.parent


def capture(archive: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return run_evidence("capture", "--archive", str(archive), *args, **kwargs)


def timed(argv: list[str], **kwargs) -> tuple[subprocess.CompletedProcess, float]:
    """Run a command; its result and the wall time of the whole process."""
    start = time.monotonic()
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, **kwargs)
    return result, time.monotonic() - start


def one_line(result: subprocess.CompletedProcess) -> str:
    """The single line a failed command must print: no traceback, no internal error."""
    assert result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert result.stderr.startswith("evidence: "), result.stderr
    return result.stderr.strip()


def mount_tmpfs(path: Path, options: str) -> None:
    need(os.geteuid() == 0, "mounting a tmpfs needs root")
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True
    )
    need(done.returncode == 0, f"this machine does not allow a tmpfs mount: {done.stderr.strip()}")


def umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


@pytest.fixture
def mounts() -> Iterator[list[Path]]:
    """Mount points a test made; unmounted (innermost first) whatever happens."""
    made: list[Path] = []
    yield made
    for path in reversed(made):
        umount(path)


def remount_read_only(path: Path) -> None:
    done = subprocess.run(["mount", "-o", "remount,ro", str(path)], capture_output=True, text=True)
    need(done.returncode == 0, f"cannot remount read-only: {done.stderr.strip()}")


def bind_read_only(path: Path, mounts: list[Path]) -> None:
    """Make `path` read-only in place: a bind mount of itself, remounted read-only."""
    need(os.geteuid() == 0, "a read-only bind mount needs root")
    done = subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True, text=True)
    need(done.returncode == 0, f"this machine does not allow a bind mount: {done.stderr.strip()}")
    mounts.append(path)
    done = subprocess.run(
        ["mount", "-o", "remount,bind,ro", str(path)], capture_output=True, text=True
    )
    need(done.returncode == 0, f"cannot remount the bind mount read-only: {done.stderr.strip()}")


def collector_files() -> list[str]:
    """The files `evidence capture` reads to start: its modules and shared libraries."""
    code = (
        "import sys, evidence.cli, evidence.capture.runner, "
        "evidence.capture.probes; "
        "evidence.capture.probes.ordered(); "
        "files = {getattr(m, '__file__', None) for m in list(sys.modules.values())}; "
        "files |= {getattr(getattr(m, '__spec__', None), 'cached', None) "
        "for m in list(sys.modules.values())}; "
        "maps = open('/proc/self/maps').read().split(); "
        "files |= {w for w in maps if w.startswith('/')}; "
        "print('\\n'.join(sorted(f for f in files if f)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return [f for f in out.stdout.splitlines() if os.path.isfile(f)]


def evict_from_page_cache(files: list[str]) -> None:
    """Drop these files' clean, unmapped pages from the page cache, as memory pressure does
    to a collector that has not run for a while: its next start reads them from disk."""
    for name in files:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


# -- memory pressure ---------------------------------------------------------------------------


class MemoryCgroup:
    """A memory cgroup of the test's own, with a hard limit: what is put in it is under as
    much memory pressure as the limit makes, and the rest of the machine is not.

    cgroup v2 where the memory controller is delegated to the root's children, else the
    v1 memory hierarchy (a child of this process's own memory cgroup).
    """

    def __init__(self) -> None:
        need(os.geteuid() == 0, "a memory cgroup of the test's own needs root")
        self.v2 = "memory" in _read("/sys/fs/cgroup/cgroup.subtree_control").split()
        if self.v2:
            parent = Path("/sys/fs/cgroup")
        else:
            mount = _v1_memory_mount()
            need(mount is not None, "no cgroup v2 memory controller and no v1 memory hierarchy")
            own = next(
                (
                    line.split(":", 2)[2]
                    for line in _read("/proc/self/cgroup").splitlines()
                    if "memory" in line.split(":", 2)[1].split(",")
                ),
                "/",
            )
            parent = mount / own.lstrip("/")
        self.path = parent / f"evidence-test-{os.getpid()}"
        try:
            self.path.mkdir()
        except OSError as exc:
            need(False, f"cannot create a memory cgroup under {parent}: {exc.strerror}")
        self.limit_file = "memory.max" if self.v2 else "memory.limit_in_bytes"

    def limit(self, nbytes: int) -> None:
        (self.path / self.limit_file).write_text(str(nbytes))

    def usage(self) -> int:
        return int(_read(self.path / ("memory.current" if self.v2 else "memory.usage_in_bytes")))

    def hits(self) -> int:
        """How often usage ran into the limit (and had to reclaim, or kill)."""
        if self.v2:
            events = dict(line.split() for line in _read(self.path / "memory.events").splitlines())
            return int(events.get("max", 0)) + int(events.get("oom_kill", 0))
        return int(_read(self.path / "memory.failcnt"))

    def argv(self, command: list[str]) -> list[str]:
        """`command`, started inside this cgroup."""
        procs = self.path / "cgroup.procs"
        return ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "in-cgroup", *command]

    def close(self) -> None:
        for _ in range(50):
            pids = [int(p) for p in _read(self.path / "cgroup.procs").split()]
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
        try:
            self.path.rmdir()
        except OSError:
            time.sleep(0.5)
            self.path.rmdir()


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _v1_memory_mount() -> Path | None:
    for line in _read("/proc/self/mountinfo").splitlines():
        fields = line.split(" - ")
        if len(fields) == 2 and fields[1].startswith("cgroup ") and "memory" in fields[1]:
            options = fields[1].split()[-1].split(",")
            if "memory" in options:
                return Path(line.split()[4])
    return None


@pytest.fixture
def cgroup() -> Iterator[MemoryCgroup]:
    group = MemoryCgroup()
    yield group
    group.close()


LIMIT = 320 * 2**20  # the cgroup's ceiling
HEADROOM = 16 * 2**20  # what stress-ng leaves under it: less than a capture needs


def test_under_severe_memory_pressure_the_capture_still_seals_within_window_plus_3_s(
    tmp_path, cgroup
):
    stress = shutil.which("stress-ng")
    need(stress is not None, "stress-ng is not installed (apt-get install stress-ng)")
    cgroup.limit(LIMIT)
    # One worker keeps touching all but HEADROOM of the cgroup's memory. There is no swap
    # to push it to: what the capture needs is taken by reclaim (its own page cache) or by
    # the OOM killer, which takes the stress-ng worker (oom_score_adj 1000) and stress-ng
    # starts another, so the pressure lasts the whole capture. The rest of the machine
    # never notices: the limit is the cgroup's, not the host's.
    vm_bytes = (LIMIT - HEADROOM) // 2**20
    hog = subprocess.Popen(
        cgroup.argv(
            [stress, "--vm", "1", "--vm-bytes", f"{vm_bytes}M", "--vm-keep", "-t", "120s", "-q"]
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while cgroup.usage() < LIMIT - 3 * HEADROOM and time.monotonic() < deadline:
            time.sleep(0.1)
        assert cgroup.usage() >= LIMIT - 3 * HEADROOM, "stress-ng never filled the cgroup"
        # Cold, as after a night of pressure: the collector's code is read from disk, into
        # the full cgroup.
        evict_from_page_cache(collector_files())
        hits = cgroup.hits()
        result, elapsed = timed(
            cgroup.argv([EVIDENCE, "capture", "--archive", str(tmp_path / "a"), "--window", "3"])
        )
        pressure = cgroup.hits() - hits
    finally:
        hog.kill()
        hog.wait()
    assert pressure > 0, "the capture never ran into the limit: no pressure was applied"
    assert result.returncode == 0, result.stderr
    assert elapsed < 3 + SEAL_MARGIN_S, f"{elapsed:.2f} s under pressure ({pressure} hits)"
    (bundle,) = bundles(tmp_path / "a")
    kept = manifest(bundle)
    assert kept["complete"] is True
    assert bundle_errors(bundle) == []
    for probe in ("processes", "memory", "vmstat", "pressure"):
        assert kept["probes"][probe]["status"] == "ok", (probe, kept["probes"][probe])
    assert kept["probes"]["memory"]["sampling"]["samples"] >= 2


# -- sources that hang, all at once -------------------------------------------------------------


@pytest.fixture
def wedged(tmp_path) -> Iterator[dict]:
    """Every kind of source that hangs: an engine that accepts and never answers, a FIFO
    named as a log file with a writer that never writes, a container runtime and a
    journalctl that never answer (and leave a grandchild holding their output)."""
    hole = BlackHole()
    fifo = tmp_path / "engine.log"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"exec sleep 120 > '{fifo}'"])
    fakebin = tmp_path / "bin"
    fakebin.mkdir()
    for tool in ("docker", "journalctl"):
        (fakebin / tool).write_text("#!/bin/sh\nsleep 119.5 &\nexec sleep 119\n")
        (fakebin / tool).chmod(0o755)
    ok = tmp_path / "ok.log"
    ok.write_text("engine started\n")
    config = write_config(
        tmp_path / "c.toml",
        f'[[engines]]\nkind = "llama-server"\nurl = "{hole.url}"\nname = "wedged"\n\n'
        f'[[logs]]\npath = "{fifo}"\n\n[[logs]]\ncontainer = "llama"\nruntime = "docker"\n\n'
        f'[[logs]]\nunit = "llama.service"\n\n[[logs]]\npath = "{ok}"\n',
    )
    env = {**os.environ, "PATH": f"{fakebin}:{os.environ['PATH']}"}
    yield {"config": config, "env": env, "fifo": fifo}
    writer.kill()
    writer.wait()
    hole.close()


def test_every_hung_source_at_once_costs_its_timeout_not_the_bundle(
    tmp_path,
    fake_nvml,  # noqa: F811
    wedged,
):
    # The GPU stops answering once sampling has begun; its engine, the logs' FIFO, the
    # container runtime and the journal hang at the same time.
    env = {
        **wedged["env"],
        "LD_LIBRARY_PATH": str(fake_nvml),
        "FAKE_NVML_SCENARIO": str(scenario(tmp_path, "hang-in-window")),
    }
    archive = tmp_path / "a"
    argv = [EVIDENCE, "capture", "--archive", str(archive), "--window", "3"]
    result, elapsed = timed([*argv, "--config", str(wedged["config"])], env=env)
    assert result.returncode == 0, result.stderr
    assert elapsed < 3 + SEAL_MARGIN_S, f"{elapsed:.2f} s"
    (bundle,) = bundles(archive)
    assert bundle_errors(bundle) == []
    kept = manifest(bundle)
    assert kept["complete"] is True
    gpu = kept["probes"]["gpu"]["sampling"]
    assert gpu["gaps"] + gpu["errors"] >= 1, gpu
    engines = orjson.loads((bundle / "engines.json").read_bytes())["engines"]
    assert {e["name"]: e["status"] for e in engines} == {"wedged": "timeout"}
    sources = orjson.loads((bundle / "logs.json").read_bytes())["sources"]
    by_kind = {}
    for source in sources:
        by_kind.setdefault(source["kind"], []).append(source)
    fifo, ok = by_kind["file"]
    assert fifo["status"] == "error" and "not a regular file" in fifo["reason"]
    assert ok["status"] == "ok" and ok["lines"] == ["engine started"]
    assert [s["status"] for s in by_kind["container"] + by_kind["journald"]] == [
        "timeout",
        "timeout",
    ]
    for probe in ("processes", "memory", "vmstat", "pressure"):  # what the freeze left of it
        assert kept["probes"][probe]["sampling"]["samples"] >= 1, probe


def test_a_gpu_off_the_bus_and_its_wedged_engine_on_a_busy_box_cost_no_more_than_3_s(
    tmp_path,
    fake_nvml,  # noqa: F811
):
    # The correlated failure: the GPU falls off the bus, so NVML hangs, and the engine on it
    # accepts connections and never answers; the box's CPUs are busy (a build, a spinning
    # engine). Each hang alone costs its timeout (test_gpu, test_engines), and a snapshot
    # (--window 0: cron baselines, OnFailure= and earlyoom captures) of a busy box without
    # them takes about a second; together the bound is still the window plus three seconds.
    stress = shutil.which("stress-ng")
    need(stress is not None, "stress-ng is not installed (apt-get install stress-ng)")
    hole = BlackHole()
    config = write_config(
        tmp_path / "c.toml",
        f'[[engines]]\nkind = "llama-server"\nurl = "{hole.url}"\nname = "wedged"\n',
    )
    env = {
        **os.environ,
        "LD_LIBRARY_PATH": str(fake_nvml),
        "FAKE_NVML_SCENARIO": str(scenario(tmp_path, "hang-memory")),
    }
    busy = subprocess.Popen(
        [stress, "--cpu", str(2 * (os.cpu_count() or 1)), "-t", "60s", "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    runs = []
    try:
        time.sleep(0.5)
        argv = [EVIDENCE, "capture", "--window", "0", "--quiet"]
        control, alone = timed([*argv, "--archive", str(tmp_path / "control")])
        assert control.returncode == 0, control.stderr
        for i in range(3):
            archive = str(tmp_path / f"a{i}")
            result, elapsed = timed([*argv, "--archive", archive, "--config", str(config)], env=env)
            kept = manifest(bundles(tmp_path / f"a{i}")[0])
            assert kept["probes"]["gpu"]["status"] == "timeout"
            assert kept["probes"]["engines"]["status"] == "timeout"
            # The hangs may leave later probes unread: then it is not complete, and says so.
            assert result.returncode == (0 if kept["complete"] else 5), result.stderr
            assert kept["probes"]["processes"]["status"] == "ok"
            assert kept["probes"]["memory"]["status"] == "ok"
            runs.append((round(elapsed, 2), timeline(kept)))
    finally:
        busy.kill()
        busy.wait()
        hole.close()
    assert alone < SEAL_MARGIN_S / 2, f"the busy box alone: {alone:.2f} s"
    assert max(t for t, _ in runs) < SEAL_MARGIN_S, f"bound {SEAL_MARGIN_S} s: {runs}"


def timeline(kept: dict) -> str:
    """Where a capture's time went, by its own clock: process start, the runner's start, the
    end of the freeze, the seal."""
    collector = kept["collector"]
    start = datetime.fromisoformat(collector["process_started_at"]).timestamp()

    def at(stamp: str) -> float:
        return round(datetime.fromisoformat(stamp).timestamp() - start, 2)

    return (
        f"runner started at +{at(kept['started_at'])} s, freeze done at "
        f"+{collector['freeze_done_after_process_start_s']:.2f} s, sealed at "
        f"+{at(kept['finished_at'])} s"
    )


# -- SIGKILL at random moments ------------------------------------------------------------------

KILL_ITERATIONS = int(os.environ.get("EVIDENCE_KILL_ITERATIONS", "16"))
KILL_SEED = int(os.environ.get("EVIDENCE_KILL_SEED", "20261110"))


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file()}


def assert_kept_everything(leftover: dict[str, bytes], partial: Path) -> None:
    """The recovered bundle holds every byte the dead capture had written: a file as it
    was, a JSONL file less only its half-written last line, a half-written JSON file set
    aside whole as <name>.incomplete; and the analyst accepts it."""
    now = snapshot(partial)
    kept = orjson.loads(now[MANIFEST])
    dropped = {d["file"] for d in kept["dropped"]}
    for name, data in leftover.items():
        if name == MANIFEST:
            try:
                before = orjson.loads(data)
            except orjson.JSONDecodeError:
                continue
            assert kept["bundle_id"] == before["bundle_id"]
            for probe, entry in before["probes"].items():
                assert kept["probes"][probe]["status"] == entry["status"], probe
        elif name.startswith("."):
            continue  # the manifest's temporary file: a manifest half replaced, not evidence
        elif name.endswith(".jsonl"):
            whole = data[: data.rfind(b"\n") + 1]
            assert now[name] == whole, name
            if whole != data:
                assert name in dropped, name
        elif name in now:
            assert now[name] == data, name
            orjson.loads(data)
        else:
            assert now[name + INCOMPLETE] == data, name
            assert name in dropped, name
    assert kept["complete"] is False
    assert "stopped before sealing" in kept["partial_reason"]
    assert errors(MANIFEST, kept) == []
    listed = {f["name"] for f in kept["files"]}
    assert listed == {n for n in now if n != MANIFEST and not n.startswith(".")} - {
        n for n in now if n.endswith(INCOMPLETE)
    }
    for name in listed:
        for record in read_records(partial / name):
            assert errors(name, record) == [], name
    validate.check(partial)  # raises if the analyst would quarantine it


def test_sigkill_at_random_moments_never_shows_half_a_bundle_and_loses_nothing(tmp_path):
    rng = random.Random(KILL_SEED)
    archive = tmp_path / "a"
    # How long a whole capture lives here (start-up, freeze, window, seal, exit), so that
    # the kills spread over all of it on a fast machine and a slow one alike.
    lifetime = {}
    for window in ("0", "1"):
        start = time.monotonic()
        assert capture(archive, "--window", window, "-q").returncode == 0
        lifetime[window] = time.monotonic() - start
    history, recovered = [], 0
    for i in range(KILL_ITERATIONS):
        window = rng.choice(["0", "0", "1"])
        life = lifetime[window]
        # Anywhere in its life; half the time in the first capture's busiest part, from the
        # end of start-up through the freeze, where most files are created and written.
        delay = (
            rng.uniform(0.25, 0.9) * lifetime["0"]
            if rng.random() < 0.5
            else rng.uniform(0, 1.05 * life)
        )
        twice = rng.random() < 0.25  # then kill the recovering capture too
        history.append((i, window, round(delay, 3), twice))
        where = f"seed {KILL_SEED}, iteration {history[-1]}"

        before = set(bundles(archive))
        victim = subprocess.Popen(
            [EVIDENCE, "capture", "--archive", str(archive), "--window", window, "--quiet"]
        )
        time.sleep(delay)
        victim.send_signal(signal.SIGKILL)
        victim.wait()

        for bundle in set(bundles(archive)) - before:  # only a sealed bundle is ever visible
            assert not bundle.name.endswith("-partial"), where
            assert manifest(bundle)["complete"] is True, where
            assert bundle_errors(bundle) == [], where
        hidden = [b for b in bundles(archive, include_hidden=True) if b.name.startswith(".")]
        assert len(hidden) <= 1, where
        left = {h: snapshot(h) for h in hidden}
        recovered += len(left)

        if twice:  # the next capture dies too, perhaps while it recovers the first
            second = subprocess.Popen(
                [EVIDENCE, "capture", "--archive", str(archive), "--window", "0", "--quiet"]
            )
            time.sleep(rng.uniform(0.25, 1.0) * lifetime["0"])
            second.send_signal(signal.SIGKILL)
            second.wait()

        result = capture(archive, "--window", "0")
        assert result.returncode == 0, (where, result.stderr)
        if not twice:
            assert result.stderr.count("kept the unfinished bundle") == len(hidden), where
        still_hidden = [b for b in bundles(archive, include_hidden=True) if b.name.startswith(".")]
        assert still_hidden == [], where
        for leftover, files in left.items():
            assert_kept_everything(files, partial_path(leftover))
    assert recovered > 0, f"no kill left anything to recover: {history}"

    # Everything the archive holds is whole: the analyst takes every bundle, partial or not.
    summary = ingest(archive, wait_s=5)
    assert summary.quarantined == [], summary.quarantined
    assert len(summary.ingested) == len(bundles(archive)) >= KILL_ITERATIONS + 2


def test_the_torn_files_of_a_killed_capture_are_kept_whole_or_set_aside(tmp_path):
    # A kill (or a power cut) in the middle of a write leaves torn files; random kills
    # rarely land inside one, so tear them by hand in a real leftover: a half sample line,
    # half a JSON record, a file created and never written.
    archive = tmp_path / "a"
    victim = subprocess.Popen(
        [EVIDENCE, "capture", "--archive", str(archive), "--window", "30", "--quiet"]
    )
    try:
        deadline = time.monotonic() + 15
        leftover = None
        while time.monotonic() < deadline and leftover is None:
            hidden = bundles(archive, include_hidden=True)
            samples = hidden[0] / "memory.samples.jsonl" if hidden else None
            if samples and samples.exists() and samples.read_bytes().count(b"\n") >= 2:
                leftover = hidden[0]
            time.sleep(0.05)
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()
    assert leftover is not None, "the capture never started sampling"
    with open(leftover / "memory.samples.jsonl", "ab") as f:
        f.write(b'{"t": "2026-11-10T03:12:00.000Z", "meminfo_kb": {"MemTot')
    processes = (leftover / "processes.json").read_bytes()
    (leftover / "processes.json").write_bytes(processes[: len(processes) // 2])
    (leftover / "vmstat.samples.jsonl").write_bytes(b"")
    (leftover / "kernel.json").write_bytes(b"")
    torn = snapshot(leftover)

    result = capture(archive, "--window", "0")
    assert result.returncode == 0, result.stderr
    assert "kept the unfinished bundle" in result.stderr
    partial = partial_path(leftover)
    assert_kept_everything(torn, partial)
    dropped = {d["file"] for d in manifest(partial)["dropped"]}
    assert {"memory.samples.jsonl", "processes.json", "kernel.json"} <= dropped
    summary = ingest(archive, wait_s=5)
    assert summary.quarantined == [] and len(summary.ingested) == 2


# -- an archive that cannot be written ---------------------------------------------------------


def tree(root: Path) -> dict[str, tuple[int, bytes]]:
    found = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        found[str(path)] = (info.st_mode, path.read_bytes() if path.is_file() else b"")
    return found


def test_a_read_only_mount_is_one_line_and_exit_4(tmp_path, mounts):
    disk = tmp_path / "disk"
    mount_tmpfs(disk, "size=8m,mode=0700")
    mounts.append(disk)
    archive = disk / "archive"
    assert capture(archive, "--window", "0", "-q").returncode == 0
    remount_read_only(disk)
    before = tree(archive)
    for target in (archive, disk / "new-archive"):  # an archive there, and one to be made
        result = capture(target, "--window", "0")
        assert result.returncode == 4, result.stderr
        assert "Read-only file system" in one_line(result)
    assert tree(archive) == before


def test_read_only_bundles_under_a_writable_archive_is_one_line_and_exit_4(tmp_path, mounts):
    # The lock and the rate limit's state can be written; the bundle cannot.
    archive = tmp_path / "a"
    assert capture(archive, "--window", "0", "-q").returncode == 0
    bind_read_only(archive / "bundles", mounts)
    result = capture(archive, "--window", "0")
    assert result.returncode == 4, result.stderr
    assert "Read-only file system" in one_line(result)
    assert len(bundles(archive, include_hidden=True)) == 1


def test_an_immutable_archive_stops_even_root_with_one_line_and_exit_4(tmp_path):
    need(os.geteuid() == 0 and shutil.which("chattr") is not None, "chattr +i needs root")
    archive = tmp_path / "a"
    assert capture(archive, "--window", "0", "-q").returncode == 0
    host_dir = bundles(archive)[0].parent
    done = subprocess.run(["chattr", "+i", str(host_dir)], capture_output=True, text=True)
    need(done.returncode == 0, f"this file system has no immutable flag: {done.stderr.strip()}")
    try:
        result = capture(archive, "--window", "0")
    finally:
        subprocess.run(["chattr", "-i", str(host_dir)], check=True)
    assert result.returncode == 4, result.stderr
    assert "Operation not permitted" in one_line(result)
    assert len(bundles(archive, include_hidden=True)) == 1


def open_to_all(path: Path) -> Path:
    path.mkdir()
    path.chmod(0o777)
    return path


def test_an_archive_the_user_may_not_write_is_one_line_and_exit_4(world, nobody):
    # chmod does not stop root: the capture runs as an unprivileged user instead.
    archive = world / "a"
    assert capture(archive, "--window", "0", "-q").returncode == 0  # root's, 0700
    home = open_to_all(world / "home")
    for target in (archive, archive / "inner"):
        argv = [*nobody.evidence, "capture", "--archive", str(target), "--window", "0"]
        result = nobody.run(argv, home)
        assert result.returncode == 4, result.stderr
        assert "Permission denied" in one_line(result)
    assert len(bundles(archive, include_hidden=True)) == 1


def test_an_unreadable_default_config_location_is_not_an_internal_error(world, nobody):
    # An unprivileged capture that inherited root's HOME (su without -, setpriv, sudo -E):
    # ~/.config/evidence/config.toml cannot even be looked at. That is no configuration,
    # or a configuration error (exit 2, one line); never "internal error".
    archive = open_to_all(world / "a")
    root_home = Path("/root")
    need(
        root_home.is_dir() and (root_home.stat().st_mode & 0o005) == 0,
        "/root is not a home others cannot read",
    )
    argv = [*nobody.evidence, "capture", "--archive", str(archive), "--window", "0", "--quiet"]
    result = nobody.run(argv, root_home)
    if result.returncode == 2:
        assert "config" in one_line(result)
    else:
        assert result.returncode == 0, result.stderr


def test_a_capture_refused_by_a_read_only_archive_does_not_use_up_its_trigger(tmp_path, mounts):
    # During an incident the disk went read-only (or full): the health check's capture
    # failed with exit 4, nothing was captured. Fixed a minute later, the next failure of
    # the same check must be captured, not refused as "captured N s ago".
    archive = tmp_path / "a"
    assert capture(archive, "--window", "0", "-q").returncode == 0
    bind_read_only(archive / "bundles", mounts)
    failed = capture(archive, "--window", "0", "--trigger", "healthcheck:gateway")
    assert failed.returncode == 4, failed.stderr
    umount(archive / "bundles")
    mounts.remove(archive / "bundles")
    again = capture(archive, "--window", "0", "--trigger", "healthcheck:gateway")
    assert again.returncode == 0, again.stderr
    assert len(bundles(archive)) == 2


# -- a full disk -------------------------------------------------------------------------------


def fill(path: Path, leave: int = 0) -> None:
    """Write zeros to `path` until the disk has no more than `leave` bytes free."""
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                free = os.statvfs(path).f_bavail * os.statvfs(path).f_frsize
                if free <= leave:
                    break
                f.write(b"\0" * min(65536, max(4096, free - leave)))
        except OSError:
            pass


def test_a_disk_with_no_space_at_all_is_exit_4_and_leaves_nothing_behind(tmp_path, mounts):
    disk = tmp_path / "disk"
    mount_tmpfs(disk, "size=256k,mode=0700")
    mounts.append(disk)
    (disk / "archive").mkdir()
    fill(disk / "filler")
    result = capture(disk / "archive", "--window", "0")
    assert result.returncode == 4, result.stderr
    assert "No space left on device" in one_line(result)
    # Nothing was captured, and the capture knows it: no hidden directory is left for the
    # next capture to present as "the unfinished bundle of a capture that died".
    assert bundles(disk / "archive", include_hidden=True) == []
    (disk / "filler").unlink()
    after = capture(disk / "archive", "--window", "0")
    assert after.returncode == 0, after.stderr
    assert "kept the unfinished bundle" not in after.stderr
    assert len(bundles(disk / "archive")) == 1


@pytest.mark.parametrize("inodes", [12, 14, 16])
def test_out_of_inodes_keeps_processes_memory_and_pressure_and_says_so(tmp_path, mounts, inodes):
    # A disk with bytes free and no inodes left: every new file fails with ENOSPC. The
    # README: on a full disk "the manifest, processes, memory and pressure are kept and the
    # logs are dropped first". With room for six files or more, there is room for those.
    disk = tmp_path / "disk"
    mount_tmpfs(disk, f"size=8m,nr_inodes={inodes},mode=0700")
    mounts.append(disk)
    result = capture(disk / "archive", "--window", "1")
    assert result.returncode == 5, result.stderr
    (bundle,) = bundles(disk / "archive")
    kept = manifest(bundle)
    present = {p.name for p in bundle.iterdir()} - {MANIFEST}
    assert {f["name"] for f in kept["files"]} == present  # the manifest tells the truth
    assert kept["complete"] is False and kept["dropped"]
    for name in ("processes.json", "memory.json", "pressure.json"):
        assert name in present, (name, sorted(present), kept["dropped"])


# -- ingest on a disk that cannot be written ---------------------------------------------------


def synth_bundles(where: Path, n: int, window: int = 30) -> list[Path]:
    rng = random.Random(3)
    host = Host("lab", booted_at=1.79e9 - 86400)
    return [
        write_bundle(where, host, 1.79e9 + 60 * i, rng, start=1.79e9, window=window)
        for i in range(n)
    ]


def test_ingest_into_a_read_only_archive_is_one_clear_line(tmp_path, mounts):
    archive = tmp_path / "a"
    synth_bundles(archive, 2, window=0)
    bind_read_only(archive, mounts)
    result = run_evidence("ingest", "--archive", str(archive))
    assert result.returncode not in (0, 8), result  # 8 would say "some were quarantined"
    assert "Read-only file system" in one_line(result)


def test_ingest_onto_a_full_disk_says_so_and_quarantines_nothing(tmp_path, mounts):
    # The archive's database fills its disk half way through: the bundles are fine, the
    # disk is not. Nothing may be quarantined for it, what went in is whole, and once there
    # is room again the next ingest takes the rest.
    made = synth_bundles(tmp_path / "elsewhere", 20)
    disk = tmp_path / "disk"
    mount_tmpfs(disk, "size=16m,mode=0700")
    mounts.append(disk)
    archive = disk / "archive"
    archive.mkdir()
    fill(disk / "filler", leave=4 * 2**20)  # room for about half of them
    result = run_evidence("ingest", "--archive", str(archive), str(tmp_path / "elsewhere"))
    (disk / "filler").unlink()
    assert result.returncode not in (0, 8), result  # 8 would say "some were quarantined"
    assert "No space left on device" in one_line(result)
    assert not (archive / QUARANTINE).exists(), (archive / QUARANTINE).read_text()

    again = run_evidence("ingest", "--archive", str(archive), str(tmp_path / "elsewhere"))
    assert again.returncode == 0, again.stderr
    con = duckdb.connect(str(archive / "evidence.duckdb"), read_only=True)
    try:
        per_bundle = con.execute(
            "select b.bundle_id, (select count(*) from samples s where s.bundle_id = b.bundle_id),"
            " (select count(*) from processes p where p.bundle_id = b.bundle_id) from bundles b"
        ).fetchall()
    finally:
        con.close()
    assert len(per_bundle) == len(made)
    assert len({(s, p) for _, s, p in per_bundle}) == 1, per_bundle  # every one whole
