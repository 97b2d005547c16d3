"""The collector's cost on this machine, printed as figures against the goals.

Figures, never assertions: timing depends on the machine and its load, so the bench
reports "met" or "missed" and always exits 0 once it could measure. It exits 1 only
when `evidence capture` itself fails, because then there is nothing to measure.

Run: .venv/bin/python bench/capture_bench.py [--runs N] [--window S] [--sos-runs N]
     [--skip-sos]
"""

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib import MB, Row, fmt_mb, fmt_s, machine, render, verdict

from evidence.capture.runner import SEAL_MARGIN_S

GOAL_FREEZE_S = 0.5
GOAL_CPU_S = 1.0
GOAL_RSS_BYTES = 60 * MB
GOAL_BUNDLE_BYTES = 5 * MB
GOAL_SOS_RATIO = 8.0
GOAL_BARE_RATIO = 2.5
UNITS_NICE = 10  # what `evidence units` writes as Nice=

SOS_PLUGINS = "memory,process,kernel,logs"

# The least a snapshot could do: the same kinds of evidence, no bounds, no redaction,
# no manifest. Stdlib json rather than orjson, as a throwaway script would be written.
BARE_SCRIPT = r"""
import errno, glob, json, os, sys
import psutil

def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError as exc:
        return f"unreadable: {exc}"

out = {name: read(f"/proc/{name}") for name in ("meminfo", "vmstat", "swaps")}
out["pressure"] = {os.path.basename(p): read(p) for p in sorted(glob.glob("/proc/pressure/*"))}
out["processes"] = [
    {
        "pid": p.info["pid"],
        "name": p.info["name"],
        "cmdline": p.info["cmdline"],
        "rss": p.info["memory_info"].rss if p.info["memory_info"] else None,
    }
    for p in psutil.process_iter(["pid", "name", "cmdline", "memory_info"], ad_value=None)
]
kmsg = []
try:
    fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
except OSError:
    fd = None
while fd is not None:
    try:
        kmsg.append(os.read(fd, 8192).decode("utf-8", "replace"))
    except OSError as exc:
        if exc.errno == errno.EAGAIN:
            break
        if exc.errno != errno.EPIPE:  # EPIPE: a record was overwritten under us; go on
            raise
out["kmsg"] = kmsg
with open(sys.argv[1], "w", encoding="utf-8") as f:
    json.dump(out, f)
"""


class BenchError(Exception):
    """A command the bench depends on failed; nothing meaningful can be printed."""


@dataclass
class Timed:
    wall_s: float
    rc: int
    cpu_s: float  # RUSAGE_CHILDREN delta: the command plus everything it waited for
    stderr: str


def run_timed(cmd: list[str], env: dict[str, str] | None = None) -> Timed:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return Timed(wall, proc.returncode, cpu, proc.stderr.decode("utf-8", "replace"))


def config_note() -> str:
    # A config file on the machine would change the caps, and "default caps" is the goal.
    for path in (Path("/etc/evidence/config.toml"), Path("~/.config/evidence/config.toml")):
        if path.expanduser().is_file():
            return f"{path} exists: caps are that file's, not the defaults"
    return "none (default caps)"


def header() -> str:
    lines = machine("evidence capture benchmark")
    lines += [f"config:  {config_note()}", f"user:    uid {os.getuid()}"]
    return "\n".join(lines)


def child_env() -> dict[str, str]:
    # The caller's EVIDENCE_* would point the collector at another config or archive.
    return {k: v for k, v in os.environ.items() if not k.startswith("EVIDENCE_")}


def bundle_dirs(archive: Path) -> set[Path]:
    return {p for p in archive.glob("bundles/*/*") if p.is_dir() and not p.name.startswith(".")}


class Evidence:
    """Runs `evidence capture` into one archive and finds the bundle each run sealed."""

    def __init__(self, exe: str, archive: Path):
        self.exe, self.archive, self.env = exe, archive, child_env()

    def capture(self, window: float, nice: int = 0) -> tuple[Timed, Path, dict[str, Any]]:
        before = bundle_dirs(self.archive)
        cmd = [self.exe, "capture", "--archive", str(self.archive), "--window", f"{window:g}"]
        niced = ["nice", "-n", str(nice)] if nice else []
        timed = run_timed([*niced, *cmd, "-q"], self.env)
        # 5 is a sealed bundle with dropped evidence: still a capture whose cost counts.
        if timed.rc not in (0, 5):
            raise BenchError(f"{' '.join(cmd)} -q exited {timed.rc}: {timed.stderr.strip()}")
        new = bundle_dirs(self.archive) - before
        if len(new) != 1:
            raise BenchError(f"expected one new bundle under {self.archive}, found {len(new)}")
        bundle = new.pop()
        manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
        return timed, bundle, manifest


def bundle_bytes(bundle: Path) -> tuple[int, list[tuple[str, int]]]:
    sizes = sorted(
        ((p.name, p.stat().st_size) for p in bundle.rglob("*") if p.is_file()),
        key=lambda item: item[1],
        reverse=True,
    )
    return sum(size for _, size in sizes), sizes


def phase_table(manifest: dict[str, Any]) -> list[str]:
    """Per-phase cost, plus what came before the freeze (interpreter, imports, lock).

    The runner starts its phase clock after the lock, so the collector's total minus
    the phases is the start-up cost the phases do not show.
    """
    collector = manifest["collector"]
    phases: dict[str, dict[str, float]] = collector["phases"]
    freeze_wall = phases.get("freeze", {}).get("wall_s", 0.0)
    startup = {
        "wall_s": collector["freeze_done_after_process_start_s"] - freeze_wall,
        "cpu_s": collector["cpu_s"] - sum(p["cpu_s"] for p in phases.values()),
    }
    lines = [f"  {'phase':<34} {'wall':>9} {'cpu':>9}"]
    for name, cost in [("start-up (before the freeze)", startup), *phases.items()]:
        lines.append(f"  {name:<34} {fmt_s(cost['wall_s']):>9} {fmt_s(cost['cpu_s']):>9}")
    lines.append(f"  {'total':<34} {'':>9} {fmt_s(collector['cpu_s']):>9}")
    return lines


def probe_table(manifest: dict[str, Any]) -> list[str]:
    lines = []
    for name, probe in manifest["probes"].items():
        sampling = probe.get("sampling")
        extra = f", {sampling['samples']} samples, {sampling['gaps']} gaps" if sampling else ""
        lines.append(
            f"  {name:<12} {probe['status']:<8} freeze {probe['duration_ms']:>7.1f} ms{extra}"
        )
    return lines


def sos_command(tmp: Path) -> list[str]:
    return [
        "sos",
        "report",
        "--batch",
        "--only-plugins",
        SOS_PLUGINS,
        "--tmp-dir",
        str(tmp),
        "--quiet",
    ]


def measure_sos(runs: int, scratch: Path) -> tuple[list[float], str | None]:
    walls: list[float] = []
    for i in range(runs):
        # Each run gets its own tmp dir so its tarball and checksum are removed with it.
        tmp = scratch / f"sos-{i}"
        tmp.mkdir()
        try:
            timed = run_timed(sos_command(tmp))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if timed.rc != 0:
            tail = " ".join(timed.stderr.strip().splitlines()[-2:])
            return walls, f"sos report exited {timed.rc}: {tail}"
        walls.append(timed.wall_s)
    return walls, None


def measure_bare(runs: int, scratch: Path) -> list[float]:
    walls = []
    for i in range(runs):
        out = scratch / f"bare-{i}.json"
        timed = run_timed([sys.executable, "-c", BARE_SCRIPT, str(out)])
        if timed.rc != 0:
            raise BenchError(f"the bare script exited {timed.rc}: {timed.stderr.strip()}")
        out.unlink()
        walls.append(timed.wall_s)
    return walls


def evidence_exe() -> str:
    # The console script next to this interpreter is the one `make bench` installed.
    local = Path(sys.executable).parent / "evidence"
    if local.is_file():
        return str(local)
    found = shutil.which("evidence")
    if not found:
        raise BenchError("no `evidence` console script; run `make .venv/.installed` first")
    return found


def bench(args: argparse.Namespace) -> int:
    # Flushed so the progress lines on stderr come after it, not before.
    print(header() + "\n", flush=True)
    exe = evidence_exe()
    rows: list[Row] = []
    notes: list[str] = []

    with tempfile.TemporaryDirectory(prefix="evidence-bench-") as tmpdir:
        scratch = Path(tmpdir)
        ev = Evidence(exe, scratch / "archive")

        # The windowed capture runs first so that RUSAGE_CHILDREN's ru_maxrss, a maximum
        # over every child reaped so far, is this capture's own peak and no other's.
        # It also warms the page cache for the snapshot runs below, which is why they
        # report a warm start rather than the very first run on a cold machine.
        print(f"capturing a {args.window:g} s bundle ...", file=sys.stderr)
        timed, bundle, windowed = ev.capture(args.window)
        child_maxrss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        size, sizes = bundle_bytes(bundle)

        print(f"{args.runs} snapshot captures (--window 0) ...", file=sys.stderr)
        freeze_done: list[float] = []
        snap_walls: list[float] = []
        for _ in range(args.runs):
            snap, _, manifest = ev.capture(0)
            freeze_done.append(manifest["collector"]["freeze_done_after_process_start_s"])
            snap_walls.append(snap.wall_s)
        snap_median = statistics.median(snap_walls)

        n = args.runs
        rows += [
            Row(
                f"1. freeze done after process start, median of {n}",
                f"<= {GOAL_FREEZE_S:g} s",
                fmt_s(statistics.median(freeze_done)),
                verdict(statistics.median(freeze_done) <= GOAL_FREEZE_S),
            ),
            Row(
                f"   freeze done after process start, max of {n}",
                f"<= {GOAL_FREEZE_S:g} s",
                fmt_s(max(freeze_done)),
                verdict(max(freeze_done) <= GOAL_FREEZE_S),
            ),
            Row(
                f"   whole `--window 0` command wall, median of {n}",
                "(info)",
                fmt_s(snap_median),
            ),
            Row(
                f"   whole `--window 0` command wall, max of {n}",
                "(info)",
                fmt_s(max(snap_walls)),
            ),
        ]

        label = f"{args.window:g} s bundle"
        collector = windowed["collector"]
        rows += [
            Row(
                f"2. CPU of a {label}, manifest",
                f"<= {GOAL_CPU_S:.1f} s",
                fmt_s(collector["cpu_s"]),
                verdict(collector["cpu_s"] <= GOAL_CPU_S),
            ),
            Row(
                f"   CPU of a {label}, getrusage(CHILDREN) delta",
                f"<= {GOAL_CPU_S:.1f} s",
                fmt_s(timed.cpu_s),
                verdict(timed.cpu_s <= GOAL_CPU_S),
            ),
            Row(
                f"   peak RSS of a {label}, manifest",
                f"<= {GOAL_RSS_BYTES // MB} MB",
                fmt_mb(collector["peak_rss_bytes"]),
                verdict(collector["peak_rss_bytes"] <= GOAL_RSS_BYTES),
            ),
            Row(
                f"   peak RSS of a {label}, getrusage(CHILDREN)",
                f"<= {GOAL_RSS_BYTES // MB} MB",
                fmt_mb(child_maxrss),
                verdict(child_maxrss <= GOAL_RSS_BYTES),
            ),
            Row(
                f"   wall of the {label} command",
                "(info)",
                fmt_s(timed.wall_s),
            ),
            Row(
                f"3. size of a {label} (sum of {len(sizes)} files)",
                f"<= {GOAL_BUNDLE_BYTES // MB} MB",
                fmt_mb(size),
                verdict(size <= GOAL_BUNDLE_BYTES),
            ),
        ]
        if args.window != 30:
            notes.append(
                f"--window {args.window:g}: rows 2 and 3 are for a {label}; "
                "the goals are set for 30 s."
            )

        sos_rows = [
            Row(f"4. evidence --window 0 wall, median of {n}", "(info)", fmt_s(snap_median))
        ]
        if args.skip_sos:
            sos_rows.append(Row("   sos report", "(info)", "skipped", "(--skip-sos)"))
        elif shutil.which("sos") is None:
            sos_rows.append(Row("   sos report", "(info)", "not installed", "skipped"))
            notes.append("sosreport is not installed; `apt-get install sosreport` provides it.")
        else:
            print(f"{args.sos_runs} sos report run(s) ...", file=sys.stderr)
            sos_walls, failure = measure_sos(args.sos_runs, scratch)
            if failure:
                notes.append(failure)
            if sos_walls:
                sos_median = statistics.median(sos_walls)
                ratio = sos_median / snap_median
                sos_rows += [
                    Row(
                        f"   sos report ({SOS_PLUGINS}), median of {len(sos_walls)}",
                        "(info)",
                        fmt_s(sos_median),
                    ),
                    Row(
                        "   sos report wall / evidence wall",
                        f">= {GOAL_SOS_RATIO:g}x",
                        f"{ratio:.1f}x",
                        verdict(ratio >= GOAL_SOS_RATIO),
                    ),
                ]
            else:
                sos_rows.append(Row("   sos report", "(info)", "failed", "see notes"))
        rows += sos_rows

        print(f"{n} bare-script runs ...", file=sys.stderr)
        bare_median = statistics.median(measure_bare(n, scratch))
        bare_ratio = snap_median / bare_median
        rows += [
            Row(f"5. bare script wall, median of {n}", "(info)", fmt_s(bare_median)),
            Row(
                "   evidence wall / bare script wall",
                f"<= {GOAL_BARE_RATIO:g}x",
                f"{bare_ratio:.2f}x",
                verdict(bare_ratio <= GOAL_BARE_RATIO),
            ),
        ]

        rows += pressure_rows(ev, args.runs, statistics.median(freeze_done), notes)
        rows += saturated_rows(ev, args.window, timed.wall_s, notes)

    print(render(rows))
    print()
    print(f"cost by phase of the {label} (manifest):")
    print("\n".join(phase_table(windowed)))
    print()
    print(f"probes of the {label}:")
    print("\n".join(probe_table(windowed)))
    print()
    largest = ", ".join(f"{name} {size / 1000:.1f} kB" for name, size in sizes[:4])
    print(f"largest files of the {label}: {largest}")
    notes.append("MB is 10^6 bytes. Timing rows are figures, not pass/fail tests.")
    print()
    for note in notes:
        print(f"note: {note}")
    return 0


def pressure_rows(ev: "Evidence", runs: int, idle_median: float, notes: list[str]) -> list[Row]:
    """The freeze under the fault lab's memory-pressure stall, against the idle machine."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from lab.core import Lab
    from lab.scenarios.host import MemoryPressureStall

    scenario = MemoryPressureStall()
    why = scenario.unavailable()
    if why:
        notes.append(f"freeze under memory pressure not measured: {why}")
        return [Row("6. freeze under memory pressure", "(info)", "skipped", "(see notes)")]
    print(f"{runs} snapshot captures under the memory-pressure stall ...", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="evidence-bench-pressure-") as work:
        lab = Lab(Path(work), Path(work) / "archive", Path(work) / "c.toml")
        try:
            scenario.start(lab)
            freeze = [
                ev.capture(0)[2]["collector"]["freeze_done_after_process_start_s"]
                for _ in range(runs)
            ]
            psi = Path("/proc/pressure/memory").read_text().split()[1]
        finally:
            lab.teardown()
            scenario.stop(lab)
    under = statistics.median(freeze)
    return [
        Row(
            f"6. freeze under memory pressure ({psi}), median of {runs}",
            f"<= {GOAL_FREEZE_S:g} s",
            fmt_s(under),
            verdict(under <= GOAL_FREEZE_S),
        ),
        Row("   under pressure / idle", "(info)", f"{under / idle_median:.2f}x"),
    ]


def saturated_rows(ev: "Evidence", window: float, idle_wall: float, notes: list[str]) -> list[Row]:
    """The seal of a windowed capture with every core saturated, beside the idle one: a
    box under a build or a CPU-offloaded model, the collector at the units' Nice=10."""
    bound = window + SEAL_MARGIN_S
    idle = Row(
        f"7. seal of a {window:g} s bundle, idle",
        f"<= {bound:g} s",
        fmt_s(idle_wall),
        verdict(idle_wall <= bound),
    )
    stress = shutil.which("stress-ng")
    if stress is None:
        notes.append("seal under full CPU load not measured: apt-get install stress-ng")
        return [idle, Row("   seal under full CPU load", "(info)", "skipped", "(see notes)")]
    print(f"a {window:g} s capture with stress-ng on every core ...", file=sys.stderr)
    hog = subprocess.Popen(
        [stress, "--cpu", "0", "--timeout", f"{window + 60:g}s", "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # Its own process group, so its workers are killed with it; not its own session,
        # which autogroup scheduling would give a CPU share of its own whatever our nice.
        process_group=0,
    )
    try:
        time.sleep(0.5)  # the workers spinning before the capture starts
        loaded, _, manifest = ev.capture(window, nice=UNITS_NICE)
    finally:
        os.killpg(hog.pid, signal.SIGKILL)
        hog.wait()
    unread = [n for n, p in manifest["probes"].items() if "ran out of time" in (p["reason"] or "")]
    return [
        idle,
        Row(
            f"   seal under full CPU load ({os.cpu_count()} cores, Nice={UNITS_NICE})",
            f"<= {bound:g} s",
            fmt_s(loaded.wall_s),
            verdict(loaded.wall_s <= bound),
        ),
        Row(
            "   under load: exit, probes not read in time",
            "(info)",
            f"{loaded.rc}, {', '.join(unread) or 'none'}",
        ),
        Row(
            "   under load: start-up (process start to freeze done)",
            "(info)",
            fmt_s(manifest["collector"]["freeze_done_after_process_start_s"]),
        ),
    ]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=10, help="snapshot and bare-script runs (default 10)"
    )
    parser.add_argument(
        "--window",
        type=float,
        default=30.0,
        help="seconds of the windowed capture for CPU, RSS and size (default 30)",
    )
    parser.add_argument("--sos-runs", type=int, default=2, help="sos report runs (default 2)")
    parser.add_argument("--skip-sos", action="store_true", help="do not run sos report")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.sos_runs < 1 or args.window < 0:
        parser.error("--runs and --sos-runs must be at least 1, --window at least 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return bench(args)
    except BenchError as exc:
        print(f"capture_bench: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
