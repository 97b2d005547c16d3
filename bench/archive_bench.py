"""The analyst's cost on this machine: ingest, the archive's size, baseline and timeline.

Figures, never assertions: timing depends on the machine and its load, so the bench
reports "met" or "missed" and always exits 0 once it could measure. It exits 1 only
when the generated archive does not ingest whole, because then the figures would be
about some other archive.

The archive is synthetic (tests/synth.py: the collector's exact bundle format, with true
checksums), so the bench needs no captures and runs the same on any machine. Ingest is
timed in-process (analyze.ingest.ingest, what `evidence ingest` calls after parsing its
options), so the interpreter's start-up and imports are not in the figure.

Run: .venv/bin/python bench/archive_bench.py [--bundles N] [--hosts N] [--window S]
     [--keep DIR]
"""

import argparse
import datetime
import math
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib import Row, fmt_mb, fmt_s, machine, render, verdict

REPO = Path(__file__).resolve().parent.parent
# synth lives beside the tests, not in the package; the repository root goes first so
# that `analyze` is this checkout's even where the package is not installed.
sys.path[:0] = [str(REPO), str(REPO / "tests")]


CLASSIFY_SAMPLE = 40  # bundles classified, spread over the archive's time
REPORT_SAMPLE = 5  # report pages rendered (each compares with every earlier incident)
GOAL_INGEST_RATIO = 3.0  # ingest wall / plain read_json wall
GOAL_BASELINE_S = 1.0

# A fixed start and seed: two runs of the bench build the same archive, so their
# figures differ by the machine, not by the data.
START = datetime.datetime(2025, 3, 3, tzinfo=datetime.UTC).timestamp()
SEED = 20250303
OOM = (
    "Out of memory: Killed process 4321 (llama-server) total-vm:66093824kB, "
    "anon-rss:31245380kB, file-rss:4096kB, shmem-rss:0kB, UID:1000 pgtables:65288kB "
    "oom_score_adj:0"
)


@dataclass
class Archive:
    root: Path
    hosts: list[str]
    first_ts: float
    last_ts: float
    seconds: float  # to generate it
    files: int
    raw_bytes: int
    kinds: list[str]  # file names the bundles hold, e.g. memory.samples.jsonl


def header() -> str:
    import duckdb

    return "\n".join([*machine("evidence archive benchmark"), f"duckdb:  {duckdb.__version__}"])


def generate(root: Path, bundles: int, n_hosts: int, window: int) -> Archive:
    """`bundles` bundles, spread round-robin over `n_hosts` hosts, one an hour each.

    Each host tells the timeline something: even hosts run llama-swap and change models
    twice; every host has one OOM kill (seen by two bundles in a row, as a kernel ring
    buffer keeps it) and reboots soon after; every 50th capture of a host is a failed
    health check's. Host 0 leaks 1 GiB a day, so baseline has a rising floor to find.
    """
    import synth

    rng = random.Random(SEED)
    hosts = [
        synth.Host(
            f"node-{i + 1}",
            floor_bytes=(20 + 5 * i) * synth.GIB,
            leak_per_day=synth.GIB if i == 0 else 0,
            boot_id=f"{i:08x}-0000-4000-8000-{rng.getrandbits(48):012x}",
            booted_at=START - 3600,
        )
        for i in range(n_hosts)
    ]
    steps = math.ceil(bundles / n_hosts)
    first, last = math.inf, -math.inf
    t0 = time.perf_counter()
    for n in range(bundles):
        index, step = n % n_hosts, n // n_hosts
        host = hosts[index]
        # Hourly, staggered by host and jittered within ten minutes, as cron and a
        # fleet's clocks would have it; never two bundles of a host in one second.
        ts = START + step * 3600 + index * 97 + rng.uniform(0, 600)
        oom_step = steps // 3 + index * 7
        kwargs: dict[str, Any] = {}
        if index % 2 == 0:
            kwargs["models"] = (
                ["qwen3-30b"]
                if step < steps // 2
                else ["qwen3-30b", "coder-32b"]
                if step < 3 * steps // 4
                else ["coder-32b"]
            )
        if step in (oom_step, oom_step + 1):
            kwargs["kernel_lines"] = [OOM]
        if step % 50 == 25:
            kwargs["trigger"] = ("healthcheck", "gateway")
            kwargs["failed_check"] = "gateway"
        synth.write_bundle(root, host, ts, rng, start=START, window=window, **kwargs)
        if step == oom_step + 3:
            host.boot_id = f"{index:08x}-0001-4000-8000-{rng.getrandbits(48):012x}"
            host.booted_at = ts + 600
        first, last = min(first, ts), max(last, ts)
    seconds = time.perf_counter() - t0
    files = [p for p in (root / "bundles").rglob("*") if p.is_file()]
    return Archive(
        root=root,
        hosts=[h.name for h in hosts],
        first_ts=first,
        last_ts=last,
        seconds=seconds,
        files=len(files),
        raw_bytes=sum(p.stat().st_size for p in files),
        kinds=sorted({p.name for p in files}),
    )


def measure_floor(
    archive: Archive, database: Path, reader: str
) -> tuple[float, list[tuple[str, int, float]]]:
    """What an analyst without our tool would do: `reader` over every file of a kind,
    materialised into a table of a fresh on-disk DuckDB (as ingest's are), with no
    validation and no flattening. A lower bound on reading these files, not a
    like-for-like load: read_json types what it finds, read_json_objects keeps each
    object as JSON text and types nothing."""
    import duckdb

    per_kind: list[tuple[str, int, float]] = []
    con = duckdb.connect(str(database))
    t0 = time.perf_counter()
    for i, kind in enumerate(archive.kinds):
        started = time.perf_counter()
        pattern = str(archive.root / "bundles" / "*" / "*" / kind)
        try:
            con.execute(f"CREATE TABLE t{i} AS SELECT * FROM {reader}(?, format='auto')", [pattern])
        except duckdb.Error:
            # The sampled files did not show every shape (a key only some bundles have):
            # what the analyst would try next, at the cost of reading every file's schema.
            con.execute(
                f"CREATE TABLE t{i} AS SELECT * FROM {reader}(?, format='auto', "
                "union_by_name=true)",
                [pattern],
            )
            kind += " (union_by_name)"
        found = con.execute(f"SELECT count(*) FROM t{i}").fetchone()
        per_kind.append((kind, found[0] if found else 0, time.perf_counter() - started))
    con.close()  # checkpoints, as ingest's close does: part of the cost of either
    return time.perf_counter() - t0, per_kind


def file_bytes(path: Path) -> int:
    # A database left unclosed would also have a .wal; after a clean close there is none.
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + ".wal")) if p.exists())


def bench(args: argparse.Namespace, scratch: Path) -> int:
    from evidence.analyze.baseline import baseline
    from evidence.analyze.classify import classify
    from evidence.analyze.ingest import DATABASE, connect, ingest
    from evidence.analyze.report import report
    from evidence.analyze.timeline import timeline
    from evidence.reports.html import report_page

    root = scratch / "archive"
    hosts = f"{args.hosts} host{'s' if args.hosts != 1 else ''}"
    print(header() + "\n", flush=True)  # flushed: the progress lines on stderr come after

    print(
        f"generating {args.bundles} bundles of {hosts} (window {args.window} s) in {root} ...",
        file=sys.stderr,
    )
    archive = generate(root, args.bundles, args.hosts, args.window)
    span_days = (archive.last_ts - archive.first_ts) / 86400
    n = args.bundles
    rows = [
        Row(
            f"0. generate {n} bundles ({archive.files} files, {span_days:.1f} days)",
            "(info)",
            fmt_s(archive.seconds),
        ),
        Row("   raw bundle bytes", "(info)", fmt_mb(archive.raw_bytes)),
    ]

    print("ingesting (in-process) ...", file=sys.stderr)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    summary = ingest(root)
    ingest_s, ingest_cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    if len(summary.ingested) != n:
        print(f"archive_bench: the archive did not ingest whole: {summary.line()}", file=sys.stderr)
        return 1

    print("reading the same files with read_json and read_json_objects ...", file=sys.stderr)
    floor_s, per_kind = measure_floor(archive, scratch / "read_json.duckdb", "read_json")
    raw_s, raw_kind = measure_floor(archive, scratch / "objects.duckdb", "read_json_objects")
    ratio = ingest_s / floor_s
    db_bytes = file_bytes(root / DATABASE)
    con = connect(root, read_only=True)
    try:
        counted = con.execute(
            "SELECT (SELECT count(*) FROM samples), (SELECT count(*) FROM processes)"
        ).fetchone()
        samples, processes = counted if counted else (0, 0)
    finally:
        con.close()
    rows += [
        Row(f"1. ingest {n} bundles, wall", "(info)", fmt_s(ingest_s)),
        Row("   ingest throughput", "(info)", f"{n / ingest_s:.1f} bundles/s"),
        Row("   ingest CPU, every thread of the process", "(info)", fmt_s(ingest_cpu)),
        Row("2. plain read_json of every file, wall", "(info)", fmt_s(floor_s)),
        Row(
            "   ingest wall / read_json wall",
            f"<= {GOAL_INGEST_RATIO:g}x",
            f"{ratio:.2f}x",
            verdict(ratio <= GOAL_INGEST_RATIO),
        ),
        Row("   read_json_objects of every file (untyped), wall", "(info)", fmt_s(raw_s)),
        Row("   ingest wall / read_json_objects wall", "(info)", f"{ingest_s / raw_s:.2f}x"),
        Row(
            f"3. evidence.duckdb size ({samples:,} samples, {processes:,} processes rows)",
            "(info)",
            fmt_mb(db_bytes),
        ),
        Row(
            "   evidence.duckdb / raw bundle bytes", "(info)", f"{db_bytes / archive.raw_bytes:.2f}"
        ),
        Row(
            "   read_json tables' database / raw bundle bytes",
            "(info)",
            f"{file_bytes(scratch / 'read_json.duckdb') / archive.raw_bytes:.2f}",
        ),
    ]

    print("baseline and timeline ...", file=sys.stderr)
    # `now` just after the last capture and `days` over all of it: each call reads the
    # host's whole history, the most a baseline of this archive can be asked to read.
    now = datetime.datetime.fromtimestamp(archive.last_ts + 3600, datetime.UTC)
    days = math.ceil(span_days) + 1
    since = datetime.datetime.fromtimestamp(archive.first_ts - 86400, datetime.UTC)
    con = connect(root, read_only=True)
    try:
        base: dict[str, tuple[float, dict[str, Any]]] = {}
        for host in archive.hosts:  # the first is on a connection just opened: cold
            t0 = time.perf_counter()
            result = baseline(con, host, days, now)
            base[host] = (time.perf_counter() - t0, result)
        t0 = time.perf_counter()
        baseline(con, archive.hosts[0], days, now)
        warm_s = time.perf_counter() - t0
        events: Counter[str] = Counter()
        line_s: list[float] = []
        for host in archive.hosts:
            t0 = time.perf_counter()
            found = timeline(con, host, since)
            line_s.append(time.perf_counter() - t0)
            events.update(e["kind"] for e in found)
        print(f"classify and report, {CLASSIFY_SAMPLE} bundles ...", file=sys.stderr)
        ids = [
            r[0]
            for r in con.execute("SELECT bundle_id FROM bundles ORDER BY started_at").fetchall()
        ]
        sample = ids[:: max(1, len(ids) // CLASSIFY_SAMPLE)][:CLASSIFY_SAMPLE]
        classify_s, report_s = [], []
        for bundle_id in sample:
            t0 = time.perf_counter()
            classify(con, bundle_id)
            classify_s.append(time.perf_counter() - t0)
        for bundle_id in sample[-REPORT_SAMPLE:]:
            t0 = time.perf_counter()
            report_page(report(con, bundle_id))
            report_s.append(time.perf_counter() - t0)
    finally:
        con.close()
    first_s, first = base[archive.hosts[0]]
    all_s = sum(s for s, _ in base.values())
    per_host = math.ceil(n / args.hosts)
    rows += [
        Row(
            f"4. baseline, one host ({per_host} bundles, {days} days), first call",
            f"<= {GOAL_BASELINE_S:g} s",
            fmt_s(first_s),
            verdict(first_s <= GOAL_BASELINE_S),
        ),
        Row("   baseline, the same host again", "(info)", fmt_s(warm_s)),
        Row(
            f"   baseline, all {hosts} ({n} bundles), total",
            f"<= {GOAL_BASELINE_S:g} s",
            fmt_s(all_s),
            verdict(all_s <= GOAL_BASELINE_S),
        ),
        Row(f"5. timeline, one host ({per_host} bundles)", "(info)", fmt_s(line_s[0])),
        Row(f"   timeline, all {hosts}, total", "(info)", fmt_s(sum(line_s))),
        Row(
            f"6. classify one bundle of {n}, median of {len(classify_s)}",
            "(info)",
            fmt_s(statistics.median(classify_s)),
        ),
        Row(f"   classify, max of {len(classify_s)}", "(info)", fmt_s(max(classify_s))),
        Row(
            f"7. report page (classify, compare with the past, graphs), median of {len(report_s)}",
            "(info)",
            fmt_s(statistics.median(report_s)),
        ),
    ]

    print(render(rows))
    print()
    print("by file kind (rows materialised; wall of read_json, of read_json_objects):")
    for (kind, count, seconds), (_, _, raw) in zip(per_kind, raw_kind, strict=True):
        print(f"  {kind:<26} {count:>9} rows {fmt_s(seconds):>10} {fmt_s(raw):>10}")
    print()
    print("what the analyst reads back:")
    for host, (_, result) in base.items():
        drift = result["drift_bytes"]
        drift_gib = "n/a" if drift is None else f"{drift / 2**30:+.1f} GiB"
        print(
            f"  baseline {host}: {result['verdict']}, drift {drift_gib}, "
            f"{result['points']} points over {len(result['daily'])} days"
        )
    print(
        "  timeline events, all hosts: " + ", ".join(f"{k} {v}" for k, v in sorted(events.items()))
    )
    print()
    notes = [
        "ingest is timed in-process (analyze.ingest.ingest), without the `evidence ingest` "
        "command's interpreter start-up and imports.",
        "read_json is timed after ingest over the same files, both from a warm page cache "
        "(generation has just written them).",
        "MB is 10^6 bytes. Timing rows are figures, not pass/fail tests.",
    ]
    if args.window != 30:
        notes.append(f"--window {args.window}: the goals are set for 30 one-second samples.")
    if args.keep is not None:
        notes.append(f"the archive is kept in {root}.")
    if first["verdict"] != "rising":
        notes.append(f"baseline of {archive.hosts[0]} (the leaking host) says {first['verdict']}.")
    for note in notes:
        print(f"note: {note}")
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bundles", type=int, default=2000, help="bundles in the archive (default 2000)"
    )
    parser.add_argument("--hosts", type=int, default=5, help="hosts they come from (default 5)")
    parser.add_argument(
        "--window",
        type=int,
        default=30,
        help="one-second samples per source in each bundle (default 30)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="build the archive in DIR/archive, the read_json databases beside it, and leave "
        "them there (DIR is created and must not exist yet)",
    )
    args = parser.parse_args(argv)
    if args.bundles < 1 or args.hosts < 1 or args.window < 0:
        parser.error("--bundles and --hosts must be at least 1, --window at least 0")
    if args.keep is not None and args.keep.exists():
        # Never generate into, or ingest, someone's existing archive.
        parser.error(f"--keep {args.keep}: already exists")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.keep is not None:
        args.keep.mkdir(parents=True)
        return bench(args, args.keep)
    scratch = Path(tempfile.mkdtemp(prefix="evidence-archive-bench-"))
    try:
        return bench(args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
