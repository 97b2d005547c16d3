"""make lab: run every scenario this machine allows and print the pass rate.

python -m lab [NAME...] [--list] [--keep DIR] [--recorder]
"""

import argparse
import sys
from pathlib import Path

import lab.scenarios  # noqa: F401  (registers the scenarios)
from lab.core import REGISTRY, run, table


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m lab", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="scenarios to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument("--keep", type=Path, help="keep each scenario's archive under DIR")
    parser.add_argument(
        "--recorder",
        action="store_true",
        help="run `evidence record` from before each fault; the capture takes its history",
    )
    args = parser.parse_args()
    if args.list:
        for name, s in sorted(REGISTRY.items()):
            print(f"{name:24} expects {' or '.join(s.expect)}")
        return 0
    unknown = [n for n in args.names if n not in REGISTRY]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}")
    results = []
    for name in args.names or sorted(REGISTRY):
        print(f"lab: {name} ...", file=sys.stderr, flush=True)
        results.append(run(REGISTRY[name], args.keep, args.recorder))
    print(table(results))
    return 1 if any(r.status == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
