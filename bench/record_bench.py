"""The resident recorder's cost on this machine, and the freeze through it, as figures.

Figures, never assertions: the bench reports "met" or "missed" and exits 0 once it could
measure; 1 only when the recorder or a capture fails, because then there is nothing to
measure.

1. The recorder's own cost over a run at the default paces (10 minutes; --quick: 1): CPU
   as a share of one core, its peak RSS, and what it wrote on average (the bytes passed to
   write, /proc/PID/io wchar).
2. The freeze through the recorder: snapshot captures asking for the last hour, the ring
   first filled with an hour of this machine's own readings at the default paces (written
   through the ring, as the recorder would have). From the capture process's start to
   the history sealed in the bundle (recorder.json written), idle and under the fault
   lab's memory-pressure stall, beside the capture's cold-start freeze without a recorder.

Run: .venv/bin/python bench/record_bench.py [--seconds S] [--runs N]
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from benchlib import Row, fmt_s, machine, render, verdict

from evidence.archive.clock import iso
from evidence.archive.recorder import RING, socket_path
from evidence.capture.config import Config, RecorderSettings
from evidence.capture.probes import Context
from evidence.capture.probes.memory import Memory
from evidence.capture.probes.pressure import Pressure
from evidence.capture.probes.processes import Processes
from evidence.capture.probes.vmstat import Vmstat
from evidence.capture.redact import scrub
from evidence.record.recorder import slim
from evidence.record.ring import Ring

GOAL_CPU_PCT = 1.0
GOAL_RSS_BYTES = 40 * 1_000_000
GOAL_WRITE_BPS = 20 * 1000
GOAL_FREEZE_S = 0.2
REPO = Path(__file__).resolve().parent.parent


def evidence_exe() -> str:
    exe = Path(sys.executable).parent / "evidence"
    if not exe.exists():
        raise SystemExit(f"{exe} is missing: run `make` first")
    return str(exe)


def child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("EVIDENCE_")}


def _proc(pid: int) -> tuple[float, int, int]:
    """CPU seconds, RSS bytes and bytes written so far by a process."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(stat[11]) + int(stat[12])) / ticks
    rss = int(stat[21]) * os.sysconf("SC_PAGE_SIZE")
    io = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return cpu, rss, int(io["wchar"])


def start_recorder(exe: str, archive: Path) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(
        [exe, "record", "--quiet", "--archive", str(archive)], env=child_env(),
        stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    until = time.monotonic() + 30
    while not socket_path(archive).exists():
        if child.poll() is not None or time.monotonic() > until:
            raise SystemExit(f"the recorder did not start: {child.stderr.read().decode()}")
        time.sleep(0.05)
    return child


def stop(child: subprocess.Popen[bytes]) -> None:
    child.terminate()
    child.wait(timeout=30)


def cost_rows(exe: str, seconds: float) -> list[Row]:
    print(f"the recorder at its default paces for {seconds:g} s ...", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="evidence-bench-record-") as work:
        child = start_recorder(exe, Path(work))
        time.sleep(2)  # past the first reads (the process table, the engines' discovery)
        cpu0, peak, wrote0 = _proc(child.pid)
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            time.sleep(min(5.0, seconds))
            peak = max(peak, _proc(child.pid)[1])
        cpu1, rss, wrote1 = _proc(child.pid)
        wall = time.monotonic() - t0
        stop(child)
    cpu_pct = 100 * (cpu1 - cpu0) / wall
    peak = max(peak, rss)
    rate = (wrote1 - wrote0) / wall
    return [
        Row(f"1. recorder CPU over {wall:.0f} s", f"<= {GOAL_CPU_PCT:g} % of a core",
            f"{cpu_pct:.2f} %", verdict(cpu_pct <= GOAL_CPU_PCT)),
        Row("   recorder peak RSS", f"<= {GOAL_RSS_BYTES / 1e6:.0f} MB",
            f"{peak / 1e6:.1f} MB", verdict(peak <= GOAL_RSS_BYTES)),
        Row("   written, on average", f"<= {GOAL_WRITE_BPS / 1000:.0f} KB/s",
            f"{rate / 1000:.2f} KB/s", verdict(rate <= GOAL_WRITE_BPS)),
        Row("   the default ring holds, at that rate", "(info)",
            f"{RecorderSettings().ring_bytes / max(rate, 1) / 3600:.1f} h"),
    ]  # fmt: skip


def fill_an_hour(archive: Path) -> int:
    """An hour of this machine's readings at the default paces, written into the ring as the
    recorder would have (each source's own sample, its time moved back)."""
    settings = RecorderSettings()
    ctx = Context(config=Config(), started=time.time())
    probes = [Memory(ctx), Vmstat(ctx), Pressure(ctx), Processes(ctx)]
    paces = [settings.host_interval_s] * 3 + [settings.process_interval_s]
    for probe in probes:
        probe.deadline = time.monotonic() + 5
        probe.freeze()
    lines = {p.name: slim(p.name, p.sample()) for p in probes}
    ring = Ring(archive / RING, settings.ring_bytes)
    now = time.time()
    records = []
    for probe, pace in zip(probes, paces, strict=True):
        t = now - settings.history_s
        while t < now:
            records.append((t, probe.name, lines[probe.name]))
            t += pace
    records.sort(key=lambda r: r[0])
    for t, name, record in records:
        ring.append(t, name.encode() + b"\t" + orjson.dumps(scrub({"t": iso(t), **record})))
    ring.close()
    return len(records)


def capture(exe: str, archive: Path) -> dict[str, Any]:
    done = subprocess.run(
        [exe, "capture", "--archive", str(archive), "--window", "0", "--trigger", "manual:bench",
         "--quiet"], env=child_env(), capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode not in (0, 5):
        raise SystemExit(f"capture exited {done.returncode}: {done.stderr.strip()}")
    newest = max((archive / "bundles").glob("*/*"), key=lambda p: p.stat().st_mtime)
    manifest = json.loads((newest / "manifest.json").read_text())
    started = _epoch(manifest["collector"]["process_started_at"])
    out = {"freeze_s": manifest["collector"]["freeze_done_after_process_start_s"]}
    if manifest["probes"]["recorder"]["status"] == "ok":
        record = json.loads((newest / "recorder.json").read_text())
        out["history_s"] = _epoch(record["collected_at"]) - started
        out["ask_s"] = manifest["probes"]["recorder"]["duration_ms"] / 1000
        out["records"] = record["records"]
        out["bytes"] = sum((newest / f).stat().st_size for f in record["files"])
    return out


def _epoch(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def freeze_rows(exe: str, runs: int, notes: list[str]) -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="evidence-bench-freeze-") as work:
        cold = [capture(exe, Path(work) / "cold")["freeze_s"] for _ in range(runs)]
        archive = Path(work) / "warm"
        archive.mkdir(mode=0o700)
        filled = fill_an_hour(archive)
        child = start_recorder(exe, archive)
        try:
            idle = [capture(exe, archive) for _ in range(runs)]
            under = _under_pressure(exe, archive, runs, notes)
        finally:
            stop(child)
    first = idle[0]
    rows.append(Row("2. cold start: capture start to the freeze done, median", "(info)",
                    fmt_s(statistics.median(cold))))  # fmt: skip
    for label, got in (("idle", idle), ("under the memory-pressure stall", under)):
        if not got:
            rows.append(Row(f"   history sealed, {label}", f"<= {GOAL_FREEZE_S:g} s", "skipped",
                            "(see notes)"))  # fmt: skip
            continue
        sealed = statistics.median(g["history_s"] for g in got)
        ask = statistics.median(g["ask_s"] for g in got)
        rows.append(
            Row(
                f"   history sealed, {label}: capture start to recorder.json, median",
                f"<= {GOAL_FREEZE_S:g} s",
                fmt_s(sealed),
                verdict(sealed <= GOAL_FREEZE_S),
            )
        )
        rows.append(Row("     of which asking the recorder and receiving the hour", "(info)",
                        fmt_s(ask)))  # fmt: skip
    rows.append(Row("   the hour handed over", "(info)",
                    f"{first['records']} readings, {first['bytes'] / 1e6:.2f} MB "
                    f"(ring filled with {filled})"))  # fmt: skip
    return rows


def _under_pressure(exe: str, archive: Path, runs: int, notes: list[str]) -> list[dict[str, Any]]:
    sys.path.insert(0, str(REPO))
    from lab.core import Lab
    from lab.scenarios.host import MemoryPressureStall

    scenario = MemoryPressureStall()
    why = scenario.unavailable()
    if why:
        notes.append(f"the freeze under memory pressure not measured: {why}")
        return []
    print(f"{runs} captures under the memory-pressure stall ...", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="evidence-bench-stall-") as work:
        lab = Lab(Path(work), Path(work) / "archive", Path(work) / "c.toml")
        try:
            scenario.start(lab)
            return [capture(exe, archive) for _ in range(runs)]
        finally:
            lab.teardown()
            scenario.stop(lab)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600.0,
                        help="how long the recorder's cost is measured (default 600)")  # fmt: skip
    parser.add_argument("--runs", type=int, default=5, help="captures per case (default 5)")
    args = parser.parse_args(argv)
    exe = evidence_exe()
    notes: list[str] = []
    print("\n".join(machine("evidence record benchmark")) + "\n", flush=True)
    rows = cost_rows(exe, args.seconds) + freeze_rows(exe, args.runs, notes)
    print(render(rows))
    for note in notes:
        print(f"note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
