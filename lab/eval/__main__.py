"""make eval: the classifier (and the seed's diagnose-oom.py) on generated histories.

python -m lab.eval [--seed N] [--count N] [--real N] [--no-peer] [--json FILE] [--misses]
python -m lab.eval --rejudge DIR [--misses]   (the histories a --keep DIR run left, classified
                                               again by the analyst as it is now)

Exit status 0 when the bars hold over the generated suite (at least 95 % right, no healthy
box called a fault, no failed one called no-fault), 1 when they do not. The real-Prometheus
sample is reported beside them with its own matrix, not held to them: its capture reads
this machine's logs and processes, not the scenario's.
"""

import argparse
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import orjson

from lab.eval import harness
from lab.eval.generate import suite
from lab.eval.peer import seed_script
from lab.eval.world import TRUTHS, Scenario
from lab.promserver import missing

# Through a real Prometheus a scenario takes seconds, not milliseconds: a sample, with a
# matrix of its own (the judged histories are read this way), not the whole suite.
REAL_SAMPLE = 4 * len(TRUTHS)


def _handful(scenarios: list[Scenario], n: int) -> list[Scenario]:
    """n scenarios with Prometheus history, taking the truths in turn."""
    by_truth = {t: [s for s in scenarios if s.truth == t and s.prometheus] for t in TRUTHS}
    picked: list[Scenario] = []
    while len(picked) < n and any(by_truth.values()):
        for pool in by_truth.values():
            if pool and len(picked) < n:
                picked.append(pool.pop(0))
    return picked


def _real_report(real: list[harness.Row], fake: dict[str, harness.Row]) -> str:
    """The real sample's own matrix and figures, and where its verdict is not the loader's.
    The real capture reads this machine's logs, kernel log, process table and engines,
    not the scenario's: only its Prometheus history is the scenario's own."""
    differ = [r for r in real if r.ours != fake[r.id].ours]
    out = [
        f"the same histories through a real Prometheus and the real `evidence capture`, "
        f"{len(real)} scenarios (only the Prometheus history is the scenario's: the logs, "
        "process table and engines read are this machine's)",
        harness.matrix(real),
        harness.summary(harness.figures(real)),
    ]
    asked = [r for r in real if r.peer is not None]
    if asked:
        out.append(f"the seed's diagnose-oom.py: {harness.summary(harness.figures(asked, 'peer'))}")
    out.append(f"verdicts not the loader's: {len(differ)} of {len(real)}")
    out += [
        f"  {r.id:<40} {r.truth:<22} real {r.ours:<22} loader {fake[r.id].ours}" for r in differ
    ]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.eval", description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, help="the suite's seed (default: from the clock)")
    parser.add_argument("--count", type=int, default=300, help="scenarios (default 300)")
    parser.add_argument(
        "--real",
        type=int,
        help=f"scenarios also run through a real Prometheus (default {REAL_SAMPLE} where "
        "installed: four of each truth)",
    )
    parser.add_argument("--no-peer", action="store_true", help="do not run the seed's script")
    parser.add_argument("--jobs", type=int, default=2, help="seed scripts at once (default 2)")
    parser.add_argument("--json", type=Path, help="write every row here as JSON")
    parser.add_argument("--misses", action="store_true", help="list our misses")
    parser.add_argument("--keep", type=Path, help="keep the archive and scratch under DIR")
    parser.add_argument(
        "--rejudge",
        type=Path,
        metavar="DIR",
        help="classify again what a --keep DIR run rendered (no render, no peer)",
    )
    args = parser.parse_args()
    if args.count < 1:
        parser.error("--count must be at least 1")
    if args.rejudge:
        try:
            rows = harness.rejudge(args.rejudge / "suite")
        except ValueError as exc:
            parser.error(str(exc))
        print(harness.report(rows, misses=args.misses))
        return 0 if harness.figures(rows).holds else 1
    seed = args.seed if args.seed is not None else int(time.time()) % 1_000_000
    print(f"seed {seed}: repeat with python -m lab.eval --seed {seed} --count {args.count}")
    progress = (
        (lambda text: print(f"eval: {text}", file=sys.stderr)) if sys.stderr.isatty() else None
    )
    why_not_real = missing()
    count_real = args.real if args.real is not None else (0 if why_not_real else REAL_SAMPLE)

    with tempfile.TemporaryDirectory(prefix="evidence-eval-") as scratch:
        work = args.keep or Path(scratch)
        peer = not args.no_peer
        if peer:
            try:
                seed_script(Path(scratch))
            except FileNotFoundError as absent:
                print(f"the seed's diagnose-oom.py is not run: {absent}")
                peer = False
        if progress:
            progress(f"generating {args.count} scenarios")
        scenarios = suite(seed, args.count, harness.SUITE_END)
        timing: dict[str, float] = {}
        rows = harness.evaluate(
            scenarios,
            work / "suite",
            peer=peer,
            jobs=args.jobs,
            progress=progress,
            timing=timing,
        )
        print(harness.report(rows, misses=args.misses))
        if progress:
            progress(", ".join(f"{k} {v:.1f}" for k, v in timing.items()))
        real: list[harness.Row] = []
        if count_real:
            result = harness.real(_handful(scenarios, count_real), work / "real", progress)
            if isinstance(result, str):
                print(f"\nthe real-Prometheus sample is skipped: {result}")
            else:
                real = result
                print("\n" + _real_report(real, {r.id: r for r in rows}))
        elif why_not_real and args.real is None:
            print(f"\nthe real-Prometheus sample is skipped: {why_not_real}")
    if args.json:
        args.json.write_bytes(
            orjson.dumps(
                {
                    "seed": seed,
                    "count": args.count,
                    "timing_s": timing,
                    "rows": [asdict(r) for r in rows],
                    "real": [asdict(r) for r in real],
                },
                option=orjson.OPT_INDENT_2,
            )
        )
    return 0 if harness.figures(rows).holds else 1


if __name__ == "__main__":
    sys.exit(main())
