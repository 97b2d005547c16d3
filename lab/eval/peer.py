"""The peer: the seed's diagnose-oom.py, read out of the seed document at run time (it is
a peer, not our code: never copied into the repository), run on the same history as the
analyst, its top-ranked fault mapped to the catalog's ids."""

import re
import subprocess
import sys
from pathlib import Path

SEEDS = Path(__file__).resolve().parents[3] / "shared" / "seeds"
# The seed's headings (by their start) -> the catalog's fault ids.
SEED_NAMES = {
    "Context creep": "context-creep",
    "Concurrency beyond": "concurrency-overload",
    "Fragmentation or a leak": "leak-ratchet",
    "A model swap": "swap-not-unloaded",
    "The machine ran out": "host-exhaustion",
    "Confirmed by the log": "accelerator-oom",
}
FAILED = "peer-failed"  # its verdict where the script itself did not finish


def seed_script(tmp: Path) -> Path:
    """diagnose-oom.py as printed in the seed document, written into tmp.

    Raises FileNotFoundError when no seed document holds it."""
    found = sorted(SEEDS.glob("*.txt")) if SEEDS.is_dir() else []
    text = next((p.read_text() for p in found if "diagnose-oom.py" in p.read_text()), None)
    if text is None:
        raise FileNotFoundError(f"the seed document with diagnose-oom.py is not at {SEEDS}")
    start = text.index('#!/usr/bin/env python3\n"""Read the night back')
    end = text.index('if __name__ == "__main__":\n    main()\n', start)
    path = tmp / "diagnose-oom.py"
    path.write_text(text[start:end] + 'if __name__ == "__main__":\n    main()\n')
    return path


def seed_answer(script: Path, url: str, tmp: Path) -> tuple[str, int]:
    """The script's top-ranked fault (a catalog id where it names one) and its score, asked
    of the Prometheus at url over the last day at a 5 minute step, as its usage says."""
    out = tmp / "seed-report.md"
    subprocess.run(
        [
            sys.executable,
            str(script),
            "--prometheus",
            url,
            "--since",
            "24h",
            "--step",
            "5m",
            "--output",
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    text = out.read_text().split("## Where to look first", 1)[1]
    found = re.search(r"### (.+)\n\nEvidence for it: (\w+)", text)
    if found is None:
        raise ValueError(f"no ranked fault in {out}")
    title, score = found.groups()
    fault = next((v for k, v in SEED_NAMES.items() if title.startswith(k)), title)
    return fault, 0 if score == "none" else int(score)


def verdict(script: Path, url: str, tmp: Path) -> tuple[str, int]:
    """The peer's answer as a verdict: its top fault, or no-fault where even the top one
    has no evidence (the only way it can say so), or FAILED where the script broke."""
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        fault, score = seed_answer(script, url, tmp)
    except (subprocess.SubprocessError, OSError, ValueError) as exc:
        (tmp / "seed-error.txt").write_text(f"{exc}\n{getattr(exc, 'stderr', '') or ''}")
        return FAILED, 0
    return (fault if score > 0 else "no-fault"), score
