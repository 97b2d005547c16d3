"""Shared test helpers: the installed `evidence` command, integration gating, and this
tree's code where the unprivileged user nobody can run it.

Integration tests need something outside Python (root for a tmpfs mount, setpriv,
a package from apt). On a laptop without it they skip and say why; with
EVIDENCE_REQUIRE_INTEGRATION=1 (as CI sets) the same condition fails instead,
so a skip can never pass for a check in CI.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator

from evidence.schemas import schema_path

EVIDENCE = str(Path(sys.executable).parent / "evidence")
PROJECT = Path(__file__).resolve().parent.parent
REQUIRED = os.environ.get("EVIDENCE_REQUIRE_INTEGRATION") == "1"
DISTRIBUTION = "evidence-recorder"


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


def wait_answering(url: str, proc: subprocess.Popen, log: Path, what: str) -> None:
    """Poll a daemon the test started until `url` answers 200; fail with its log if it
    exits or takes past a minute (a 2-core CI box starts Prometheus slowly)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        assert proc.poll() is None, f"{what} exited: {log.read_text()[-2000:]}"
        assert time.monotonic() < deadline, f"{what} did not become ready"
        time.sleep(0.2)


def start_alertmanager(work: Path, config: dict, port: int) -> tuple[subprocess.Popen, Path]:
    """Debian's Alertmanager with `config` (JSON is YAML) on 127.0.0.1:port, no cluster;
    (the process, its log). Skips, or fails under EVIDENCE_REQUIRE_INTEGRATION=1, when it
    is not installed. The caller stops it, and waits for it to answer."""
    binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    need(
        binary is not None,
        "Debian's prometheus-alertmanager is not installed (apt-get install "
        "prometheus-alertmanager)",
    )
    (work / "alertmanager.yml").write_text(json.dumps(config))
    log = work / "alertmanager.log"
    proc = subprocess.Popen(
        [
            str(binary),
            f"--config.file={work / 'alertmanager.yml'}",
            f"--storage.path={work / 'am-data'}",
            "--cluster.listen-address=",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    return proc, log


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


def bundle_errors(bundle: Path, newer: tuple[str, ...] = ()) -> list[str]:
    """Every schema violation in a bundle, file by file and line by line; the files named
    in newer are a newer collector's, which no schema here describes."""
    problems = []
    for path in sorted(bundle.iterdir()):
        if path.name in newer:
            continue
        for i, record in enumerate(read_records(path)):
            problems += [f"line {i + 1}: {e}" for e in errors(path.name, record)]
    return problems


def as_nobody(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """Run argv as the unprivileged user nobody (uid and gid 65534, no other group)."""
    return subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=cwd,
    )


@dataclass(frozen=True)
class Unprivileged:
    """This tree's code as the user nobody can run it, wherever the clone lives."""

    python: str
    env: dict[str, str]
    place: Path  # readable by all: the copied code, and a working directory nobody may enter

    @property
    def evidence(self) -> list[str]:
        """The `evidence` command."""
        return [self.python, str(self.place / "evidence")]

    def run(self, argv: list[str], home: Path | None = None) -> subprocess.CompletedProcess:
        env = self.env if home is None else {**self.env, "HOME": str(home)}
        return as_nobody(argv, env, self.place)


@pytest.fixture
def world() -> Iterator[Path]:
    """A scratch directory an unprivileged user can reach (pytest's tmp_path is 0700)."""
    path = Path(tempfile.mkdtemp(prefix="evidence-nobody-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def nobody() -> Iterator[Unprivileged]:
    """This tree's packages and what they need, copied where the user nobody can read them.

    A clone under a 0700 directory (root's home, a mktemp -d) is out of nobody's reach, and
    so are its virtualenv and its editable install. Skips, saying why, when nobody can run
    no Python of this version.
    """
    need(
        os.geteuid() == 0 and shutil.which("setpriv") is not None,
        "running the code as another user needs root and setpriv (util-linux)",
    )
    place = Path(tempfile.mkdtemp(prefix="evidence-nobody-code-"))
    try:
        env = _copy_code(place)
        python, why = _python_for_nobody(env, place)
        need(python is not None, why)
        yield Unprivileged(python, env, place)
    finally:
        shutil.rmtree(place, ignore_errors=True)


def _copy_code(place: Path) -> dict[str, str]:
    """Copy the code into place; the environment that imports it from there."""
    site = place / "site"
    bytecode = shutil.ignore_patterns("__pycache__")
    for package in _own_packages():
        shutil.copytree(PROJECT / package, site / package, ignore=bytecode)
    for dist in runtime_distributions():
        copy_distribution(dist, site)
    (place / "evidence").write_text("from evidence.cli import run\n\nrun()\n")
    _open_to_all(place)
    return {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}


def _python_for_nobody(env: dict[str, str], place: Path) -> tuple[str | None, str]:
    """The first Python of this version that nobody can run and that imports the copy."""
    tried = []
    for python in _pythons():
        probe = as_nobody([python, "-c", "import evidence.cli"], env, place)
        if probe.returncode == 0:
            return python, ""
        tried.append(f"{python}: {(probe.stderr.strip().splitlines() or ['?'])[-1]}")
    return None, f"the user nobody can run no Python {sys.version.split()[0]}: {'; '.join(tried)}"


def _own_packages() -> list[str]:
    """The tree's packages, as pyproject.toml names them ("evidence*" -> evidence)."""
    pyproject = tomllib.loads((PROJECT / "pyproject.toml").read_text())
    return [p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]]


def runtime_distributions(extras: tuple[str, ...] = ("analyst",)) -> list[metadata.Distribution]:
    """What the installed `evidence` needs to run, all the way down, with these extras of
    its own; not `evidence` itself, whose code is the tree under test."""
    found: dict[str, metadata.Distribution] = {}
    todo = _requirements(metadata.distribution(DISTRIBUTION), extras)
    while todo:
        name = todo.pop().lower()
        if name in found:
            continue
        try:
            found[name] = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # another platform's (colorama on Windows)
        todo += _requirements(found[name])
    return list(found.values())


def _requirements(dist: metadata.Distribution, extras: tuple[str, ...] = ()) -> list[str]:
    """The distributions dist requires, and those of the named extras."""
    wanted = []
    for r in dist.requires or []:
        extra = re.search(r"\bextra\s*==\s*[\"']([^\"']+)", r)
        if extra is None or extra.group(1) in extras:
            wanted.append(re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0])
    return wanted


def copy_distribution(dist: metadata.Distribution, site: Path) -> None:
    for file in dist.files or []:
        source = Path(dist.locate_file(file))
        # Scripts (../../../bin) are not imported; bytecode is rebuilt.
        if ".." in file.parts or "__pycache__" in file.parts or not source.is_file():
            continue
        (site / file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, site / file)


def _open_to_all(top: Path) -> None:
    # Whatever the umask: a copy made under umask 077 would be root's alone.
    for folder, _, files in os.walk(top):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)


def _pythons() -> list[str]:
    """This Python version, bare first: a virtualenv in the clone is out of nobody's reach."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = shutil.which(version, path="/usr/local/bin:/usr/bin:/bin")
    found = [os.path.realpath(sys.executable), sys.executable, system]
    return list(dict.fromkeys(p for p in found if p))
