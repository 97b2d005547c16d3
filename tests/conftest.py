"""Shared test helpers: the installed `evidence` command, and integration gating.

Integration tests need something outside Python (root for a tmpfs mount, setpriv,
a package from apt). On a laptop without it they skip and say why; with
EVIDENCE_REQUIRE_INTEGRATION=1 (as CI sets) the same condition fails instead,
so a skip can never pass for a check in CI.
"""

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

EVIDENCE = str(Path(sys.executable).parent / "evidence")
REQUIRED = os.environ.get("EVIDENCE_REQUIRE_INTEGRATION") == "1"


def need(condition: bool, reason: str) -> None:
    """Skip (or, under EVIDENCE_REQUIRE_INTEGRATION=1, fail) when condition is false."""
    if not condition:
        if REQUIRED:
            pytest.fail(f"integration prerequisite missing: {reason}")
        pytest.skip(reason)


def run_evidence(*args: str, timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [EVIDENCE, *args], capture_output=True, text=True, timeout=timeout, **kwargs
    )


def bundles(archive: Path, include_hidden: bool = False) -> list[Path]:
    root = archive / "bundles"
    if not root.exists():
        return []
    return sorted(
        p
        for host in root.iterdir()
        for p in host.iterdir()
        if p.is_dir() and (include_hidden or not p.name.startswith("."))
    )


def manifest(bundle: Path) -> dict:
    return orjson.loads((bundle / "manifest.json").read_bytes())


def write_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture
def small_disk(tmp_path):
    """A real, tiny tmpfs: the disk that fills up."""
    need(os.geteuid() == 0, "mounting a tmpfs to fill a disk needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    need(done.returncode == 0, f"this machine does not allow a tmpfs mount: {done.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)
