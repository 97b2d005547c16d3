"""make bench: the collector's cost and the analyst's, from one run, one after the other.

The collector part (bench/capture_bench.py): freeze time, CPU and peak RSS against
sos report and a bare script, the freeze under the fault lab's memory-pressure stall
against the idle machine, and the seal of a windowed capture with every core saturated
(stress-ng, the collector at Nice=10) beside the idle one. The analyst part
(bench/archive_bench.py): ingest against plain DuckDB read_json, classify per bundle and
a report page at 2,000 bundles. The receiver (bench/serve_flood.py): `evidence serve`
under a flood of alerts, a trickling engine and a burst of connections. The recorder
(bench/record_bench.py): its cost over ten minutes at the default paces, and the freeze
of the last hour through it, idle and under memory pressure. Ratios and figures, never
pass/fail tests.

Run: .venv/bin/python bench/run.py [--quick]
"""

import argparse
import sys

import archive_bench
import capture_bench
import record_bench
import serve_flood


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="fewer runs and 300 bundles: a smoke run"
    )
    quick = parser.parse_args().quick
    collector = capture_bench.main(["--runs", "3", "--window", "5"] if quick else [])
    print("\n" + "=" * 100 + "\n", flush=True)
    analyst = archive_bench.main(["--bundles", "300"] if quick else [])
    print("\n" + "=" * 100 + "\n", flush=True)
    receiver = serve_flood.main(["--alerts", "2000", "--captures", "5"] if quick else [])
    print("\n" + "=" * 100 + "\n", flush=True)
    recorder = record_bench.main(["--seconds", "60", "--runs", "3"] if quick else [])
    return collector or analyst or receiver or recorder


if __name__ == "__main__":
    sys.exit(main())
