"""`evidence record`: the hour before the capture, in the bundle and in the diagnosis; the
recorder's own captures; a source that hangs; no recorder at all."""

import contextlib
import json
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import EVIDENCE, bundle_errors, bundles, run_evidence, write_config

from evidence.archive.clock import iso
from evidence.archive.recorder import read_answer, socket_path
from evidence.capture.config import Config, RecorderSettings
from evidence.capture.probes import Probe, Reading
from evidence.capture.probes.memory import Memory
from evidence.record import recorder as recorder_module
from evidence.record import sources
from evidence.record.recorder import Recorder
from evidence.record.server import RecorderBusy, Server
from evidence.record.triggers import Triggers
from lab.builder import Builder

FAST = """
[recorder]
host_interval_s = 0.2
process_interval_s = 0.5
engine_interval_s = 1
"""


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A folder with a short path: a Unix socket's path is at most 107 bytes."""
    with tempfile.TemporaryDirectory(prefix="ev-", dir="/tmp") as d:
        yield Path(d)


def wait_for(condition: Any, timeout: float, what: str) -> None:
    until = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < until, f"timed out waiting for {what}"
        time.sleep(0.05)


def start_recorder(archive: Path, config: Path, *extra: str) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [EVIDENCE, "record", "--archive", str(archive), "--config", str(config), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: socket_path(archive).exists() or child.poll() is not None, 30, "the socket")
    assert child.poll() is None, child.communicate()
    return child


def ask(root: Path, since: float) -> tuple[dict[str, Any], dict[str, bytes]]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(5)
        conn.connect(str(socket_path(root)))
        conn.sendall(b'{"since": %f}\n' % since)
        head, files = read_answer(conn)
    return head, dict(files)


def snapshot(archive: Path, trigger: str) -> dict[str, Any]:
    """A window-0 capture with this trigger; what its manifest says of the recorder."""
    done = run_evidence("capture", "--archive", str(archive), "--window", "0", "--trigger", trigger)
    assert done.returncode == 0, done.stderr
    (bundle,) = [b for b in bundles(archive) if b.name.endswith(trigger.replace(":", "-"))]
    return json.loads((bundle / "manifest.json").read_text())["probes"]["recorder"]


def stop(child: subprocess.Popen[str]) -> str:
    child.terminate()
    _, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    return err


# -- the hour before, end to end ------------------------------------------------------------


def test_a_capture_holds_the_recorders_history_and_the_diagnosis_names_it(short_dir: Path):
    archive, config = short_dir / "archive", write_config(short_dir / "config.toml", FAST)
    child = start_recorder(archive, config, "--ring-size", "2")
    try:
        time.sleep(3)  # some fifteen readings of the host before anything happens
        done = run_evidence(
            "capture", "--archive", str(archive), "--config", str(config),
            "--window", "1", "--trigger", "hook:test", "--json",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    finally:
        said = stop(child)
    assert "recording into" in said and "stopped; the ring is kept" in said
    (bundle,) = bundles(archive)
    manifest = json.loads((bundle / "manifest.json").read_text())
    entry = manifest["probes"]["recorder"]
    assert entry["status"] == "ok"
    assert {"recorder.json", "memory.history.jsonl", "vmstat.history.jsonl"} <= set(entry["files"])
    assert bundle_errors(bundle) == []
    started = manifest["started_at"]
    lines = [orjson.loads(x) for x in (bundle / "memory.history.jsonl").read_bytes().splitlines()]
    assert len(lines) >= 10
    assert all(line["t"] < started for line in lines)  # all from before the capture began
    record = json.loads((bundle / "recorder.json").read_text())
    assert record["records"] >= 30 and record["skipped"] == 0
    assert record["sources"]["memory"]["status"] == "ok"
    # The analyst reads the hour before and the window as one series, and says whose.
    assert run_evidence("ingest", "--archive", str(archive)).returncode == 0
    done = run_evidence("classify", "latest", "--archive", str(archive), "--json")
    assert done.returncode == 0, done.stderr
    series = json.loads(done.stdout)["context"]["series"]["available"]
    assert series["origin"].startswith("recorder (") and series["origin"].endswith("and bundle")
    assert series["points"] > len(lines)


def test_without_a_recorder_the_capture_says_so_and_goes_on(short_dir: Path):
    done = run_evidence("capture", "--archive", str(short_dir), "--window", "0", "--json")
    assert done.returncode == 0, done.stderr
    (bundle,) = bundles(short_dir)
    entry = json.loads((bundle / "manifest.json").read_text())["probes"]["recorder"]
    assert entry["status"] == "absent" and "no recorder running" in entry["reason"]
    assert not list(bundle.glob("*.history.jsonl"))


def test_a_cron_baseline_takes_no_history(short_dir: Path):
    archive, config = short_dir / "archive", write_config(short_dir / "config.toml", FAST)
    child = start_recorder(archive, config, "--ring-size", "1")
    try:
        time.sleep(1)
        entry = snapshot(archive, "cron:baseline")
    finally:
        stop(child)
    (bundle,) = bundles(archive)
    assert entry["status"] == "skipped" and not list(bundle.glob("*.history.jsonl"))


def test_a_second_recorder_on_the_same_archive_is_refused(short_dir: Path):
    archive, config = short_dir / "archive", write_config(short_dir / "config.toml", FAST)
    child = start_recorder(archive, config, "--ring-size", "1")
    try:
        done = run_evidence("record", "--archive", str(archive), "--for", "1")
        assert done.returncode == 3
        assert "another recorder already listens" in done.stderr
        assert "Traceback" not in done.stderr
    finally:
        stop(child)


def test_the_ring_survives_the_recorder_and_the_next_one_resumes_it(short_dir: Path):
    archive, config = short_dir / "archive", write_config(short_dir / "config.toml", FAST)
    done = run_evidence("record", "--archive", str(archive), "--config", str(config),
                        "--ring-size", "1", "--for", "1.5")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not socket_path(archive).exists()  # removed on the way out
    done = run_evidence("record", "--archive", str(archive), "--config", str(config),
                        "--ring-size", "1", "--for", "0.5")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "readings kept from before" in done.stderr


def test_a_recorder_killed_with_sigkill_costs_the_capture_nothing_and_its_ring_resumes(
    short_dir: Path,
):
    archive, config = short_dir / "archive", write_config(short_dir / "config.toml", FAST)
    child = start_recorder(archive, config, "--ring-size", "1")
    time.sleep(2)
    child.send_signal(signal.SIGKILL)  # mid-write, as likely as not
    child.communicate()
    killed_at = time.time()
    assert socket_path(archive).exists()  # nobody removed it
    entry = snapshot(archive, "hook:after-kill")
    assert entry["status"] == "absent" and "nothing listens" in entry["reason"]
    child = start_recorder(archive, config, "--ring-size", "1")
    try:
        time.sleep(1)
        assert snapshot(archive, "hook:resumed")["status"] == "ok"
    finally:
        said = stop(child)
    assert "readings kept from before" in said
    resumed = next(b for b in bundles(archive) if b.name.endswith("hook-resumed"))
    record = json.loads((resumed / "recorder.json").read_text())
    assert record["skipped"] <= 1  # at most the record it was writing
    lines = (resumed / "memory.history.jsonl").read_bytes().splitlines()
    before = [x for x in lines if orjson.loads(x)["t"] < iso(killed_at)]
    assert len(before) >= 5  # what the killed recorder kept is handed on


# -- the recorder's own captures ----------------------------------------------------------------


def test_the_recorder_captures_by_itself_when_memory_runs_low(short_dir: Path):
    archive = short_dir / "archive"
    # Every box has less available than all of its memory: the condition holds at once.
    config = write_config(
        short_dir / "config.toml", "window_s = 1\n" + FAST + "available_share = 1.0\n"
    )
    child = start_recorder(archive, config, "--ring-size", "1")
    try:
        wait_for(lambda: len(bundles(archive)) == 1, 60, "the recorder's capture")
        time.sleep(1.5)  # it fires once on the way in, not on every reading after
    finally:
        said = stop(child)
    (bundle,) = bundles(archive)
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["trigger"]["kind"] == "recorder"
    assert manifest["trigger"]["name"] == "low-memory"
    assert manifest["probes"]["recorder"]["status"] == "ok"  # it took its own history
    assert "capturing: low-memory" in said


def settings(**kw: Any) -> RecorderSettings:
    return RecorderSettings(**kw)


def test_each_trigger_fires_once_on_its_way_in():
    t = Triggers(settings(psi_pct=20.0, psi_for_s=30, available_share=0.05))
    mem = {"meminfo_kb": {"MemTotal": 100, "MemAvailable": 50}}
    low = {"meminfo_kb": {"MemTotal": 100, "MemAvailable": 4}}
    assert [t.memory(0, m) for m in (mem, low, low, mem, low)] == [
        None, "low-memory", None, None, "low-memory",
    ]  # fmt: skip
    kills = [{"counters": {"oom_kill": n}} for n in (3, 3, 4, 4, 6)]
    assert [t.vmstat(0, k) for k in kills] == [None, None, "oom-kill", None, "oom-kill"]

    def psi(v: float) -> dict[str, Any]:
        return {"system": {"memory": {"some": {"avg10": v}}}}

    readings = [(0, 25), (10, 30), (29, 40), (31, 40), (40, 50), (50, 5), (60, 25), (95, 25)]
    fired = [t.pressure(at, psi(v)) for at, v in readings]
    # Above the line for 30 s: once; below it and above again: the clock starts over.
    assert fired == [None, None, None, "memory-pressure", None, None, None, "memory-pressure"]

    def engines(*states: tuple[str, str]) -> dict[str, Any]:
        return {"engines": [{"name": n, "status": s} for n, s in states]}

    assert t.engines(0, engines(("llm", "error"), ("img", "ok"))) is None  # never answered
    assert t.engines(0, engines(("llm", "ok"), ("img", "ok"))) is None
    assert t.engines(0, engines(("llm", "timeout"), ("img", "ok"))) == "engine-down-llm"
    assert t.engines(0, engines(("llm", "timeout"), ("img", "ok"))) is None


# -- a source that hangs --------------------------------------------------------------------


@contextlib.contextmanager
def recording(root: Path, for_s: float) -> Iterator[Recorder]:
    """A recorder in this process, answering on root's socket, sampling fast for for_s."""
    config = Config(recorder=settings(host_interval_s=0.1, process_interval_s=0.1))
    rec = Recorder(config, root, ring_bytes=1024 * 1024)
    rec.start()
    server = Server(rec, root)
    server.start()
    stopping = threading.Event()
    loop = threading.Thread(target=rec.run, args=(stopping, for_s))
    loop.start()
    try:
        yield rec
    finally:
        stopping.set()
        loop.join()
        server.close()
        rec.close()


class HangingGpu(Probe):
    """NVML that answers its first read and then hangs in every sample."""

    name = "gpu"
    order = 5
    priority = 900
    samples = True
    release = threading.Event()

    def freeze(self) -> Reading:
        return Reading(record={"nvidia": {}, "amd": {}})

    def sample(self) -> dict[str, Any] | None:
        self.release.wait(30)
        return None


def test_a_hanging_source_goes_stale_is_said_so_and_the_others_go_on(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(recorder_module, "ordered", lambda: [Memory, HangingGpu])
    monkeypatch.setattr(sources, "STALE_MIN_S", 0.5)
    try:
        with recording(short_dir, 3.0):
            time.sleep(2.0)
            head, names = ask(short_dir, time.time() - 60)
    finally:
        HangingGpu.release.set()
    assert head["sources"]["gpu"]["status"] == "stale"
    assert "the other sources go on" in head["sources"]["gpu"]["reason"]
    assert head["sources"]["memory"]["status"] == "ok"
    assert "gpu.history.jsonl" not in names
    assert len(names["memory.history.jsonl"].splitlines()) >= 10  # ten a second, on and on


class LateGpu(Probe):
    """A source missing when the recorder started (a driver loaded later, an engine
    started after the recorder at boot), there on a later look."""

    name = "gpu"
    order = 5
    priority = 900
    samples = True
    looks = 0

    def freeze(self) -> Reading:
        type(self).looks += 1
        if type(self).looks == 1:
            return Reading("absent", "no driver yet")
        return Reading(record={"nvidia": {}, "amd": {}})

    def sample(self) -> dict[str, Any] | None:
        return {"nvidia": {"devices": []}}


def test_a_source_missing_at_the_start_is_looked_for_again(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(recorder_module, "ordered", lambda: [Memory, LateGpu])
    monkeypatch.setattr(sources, "RETRY_S", 0.5)
    with recording(short_dir, 5.0):
        time.sleep(0.3)
        head, files = ask(short_dir, time.time() - 60)
        assert head["sources"]["gpu"]["status"] == "absent" and "gpu.history.jsonl" not in files
        time.sleep(1.5)
        head, files = ask(short_dir, time.time() - 60)
    assert head["sources"]["gpu"]["status"] == "ok"
    assert len(files["gpu.history.jsonl"].splitlines()) >= 3


def test_a_socket_left_by_a_dead_recorder_is_taken_over_and_a_live_one_is_not(short_dir: Path):
    rec = Recorder(Config(), short_dir, ring_bytes=1024 * 1024)
    path = socket_path(short_dir)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()  # the file stays, nothing listens
    server = Server(rec, short_dir)
    try:
        assert path.stat().st_mode & 0o777 == 0o600
        with pytest.raises(RecorderBusy):
            Server(rec, short_dir)
    finally:
        server.close()
        rec.close()


def test_a_malformed_question_costs_its_connection_not_the_server(short_dir: Path):
    rec = Recorder(Config(), short_dir, ring_bytes=1024 * 1024)
    rec.ring.append(
        time.time(), b'memory\t{"t": "%s", "meminfo_kb": {}}' % iso(time.time()).encode()
    )
    server = Server(rec, short_dir)
    server.start()
    try:
        for question in (b"not json\n", b'{"until": 1}\n', b"[]\n"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(5)
                conn.connect(str(socket_path(short_dir)))
                conn.sendall(question)
                assert conn.recv(100) == b""  # closed without an answer
        head, files = ask(short_dir, 0)
        assert head["records"] == 1 and list(files) == ["memory.history.jsonl"]
    finally:
        server.close()
        rec.close()


# -- the analyst: finer where both exist ----------------------------------------------------

GIB = 2**30


def test_where_prometheus_stopped_scraping_the_recorders_hour_takes_its_place(short_dir: Path):
    """Prometheus on the same box starved 40 minutes before the capture: its history stops
    there. The recorder's hour shows available memory running out meanwhile; read at
    Prometheus's step, it fills the gap, and the diagnosis sees the machine run out."""
    at = 1_796_000_000.0
    total = 64 * GIB
    scraped = [(at - 86400 + 60 * k, 40.0 * GIB) for k in range(1440 - 40)]
    recorded = [(at - 3600 + k, 40.0 * GIB - max(0, k - 1800) * 22 * 2**20) for k in range(3600)]
    b = Builder("spark-1", at, total=total, trigger=("alert", "HostDown"))
    b.memory([(at + k, total - 0.3 * GIB) for k in range(30)])
    b.recorder([(t, total - v) for t, v in recorded])
    b.prometheus({"host_memory_available": scraped, "host_memory_total": [(at - 60, total)]})
    b.host().processes([{"pid": 4242, "name": "llama-server", "rss_bytes": 50 * GIB}])
    bundle = b.write(short_dir)
    assert run_evidence("ingest", "--archive", str(short_dir)).returncode == 0
    done = run_evidence("classify", str(bundle), "--archive", str(short_dir), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    series = result["context"]["series"]["available"]
    # Prometheus until the recorder's hour begins (its last 20 scrapes are replaced too).
    assert series["origin"].startswith("prometheus (1380 points) and recorder (3600 readings)")
    assert 1380 + 58 <= series["points"] <= 1380 + 62  # the hour at Prometheus's minute
    exhaustion = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    assert any("available memory fell to" in e for e in exhaustion["evidence_for"])
