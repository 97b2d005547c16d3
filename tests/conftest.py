"""Shared test helpers: the installed `evidence` command, and integration gating.

Integration tests need something outside Python (root for a tmpfs mount, setpriv,
a package from apt). On a laptop without it they skip and say why; with
EVIDENCE_REQUIRE_INTEGRATION=1 (as CI sets) the same condition fails instead,
so a skip can never pass for a check in CI.
"""

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator

from schemas import schema_path

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


@cache
def validator(record_file: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_path(record_file).read_text()))


def errors(record_file: str, document: Any) -> list[str]:
    return [
        f"{record_file} {e.json_path}: {e.message}"
        for e in validator(record_file).iter_errors(document)
    ]


def read_records(path: Path) -> list[Any]:
    """A .json file is one record; a .jsonl file is one record per line."""
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines()]
    return [json.loads(path.read_text())]


def bundle_errors(bundle: Path) -> list[str]:
    """Every schema violation in a bundle, file by file and line by line."""
    problems = []
    for path in sorted(bundle.iterdir()):
        for i, record in enumerate(read_records(path)):
            problems += [f"line {i + 1}: {e}" for e in errors(path.name, record)]
    return problems
