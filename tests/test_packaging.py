"""The package as users install it: a real wheel, not the editable checkout."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import DISTRIBUTION, copy_distribution, runtime_distributions

ROOT = Path(__file__).parent.parent


CORE_LIMIT = 10 * 2**20


def _wheel(project: Path, out: Path) -> Path:
    """pip wheel of project, offline (no build isolation: the test has no network)."""
    source = out / f"src-{project.name}"  # a copy: setuptools leaves build/ where it runs
    shutil.copytree(
        project,
        source,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "build", "*.egg-info", "__pycache__", "demo-archive", "bench-out"
        ),
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return max(out.glob("*.whl"), key=lambda w: w.stat().st_mtime)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return _wheel(ROOT, tmp_path_factory.mktemp("wheel"))


def test_the_wheel_ships_every_package_and_every_schema(wheel):
    assert wheel.name.startswith("evidence_recorder-")
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = {str(p.parent.relative_to(ROOT)) for p in (ROOT / "evidence").glob("**/__init__.py")}
    assert {"evidence/capture/probes", "evidence/analyze", "evidence/archive"} <= packages
    for package in packages:
        assert f"{package}/__init__.py" in names, package
    for schema in (ROOT / "evidence/schemas").glob("*.schema.json"):
        assert f"evidence/schemas/{schema.name}" in names, schema.name
    assert {n.split("/")[0] for n in names if not n.endswith((".dist-info", ".txt"))} <= {
        "evidence",
        *{n.split("/")[0] for n in names if ".dist-info/" in n},
    }


def _decoy(tmp_path: Path, name: str) -> Path:
    """An unrelated distribution that owns the top-level package `name`, as PyPI's do."""
    project = tmp_path / f"decoy-{name}"
    (project / name).mkdir(parents=True)
    (project / name / "__init__.py").write_text(f"OWNER = 'decoy-{name}'\n")
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "decoy-{name}"\nversion = "1.0"\n'
        f'[tool.setuptools]\npackages = ["{name}"]\n'
    )
    return _wheel(project, tmp_path)


def _site_size(site: Path) -> int:
    return sum(f.stat().st_size for f in site.rglob("*") if f.is_file())


def test_a_core_install_beside_packages_named_capture_and_reports(tmp_path, wheel):
    """The collector-only install into a venv that already holds `capture` and `reports`:
    neither is overwritten, it is under 10 MB with what it needs, and it captures."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    before = _site_size(site)
    decoys = [_decoy(tmp_path, name) for name in ("capture", "reports")]
    pip = [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
    subprocess.run([*pip, *map(str, decoys)], check=True, capture_output=True, timeout=120)
    # The core's requirements, copied from this environment (the test has no network).
    core = runtime_distributions(extras=())
    assert {d.metadata["Name"].lower() for d in core} == {"click", "orjson", "nvidia-ml-py"}
    for dist in core:
        copy_distribution(dist, site)
    subprocess.run([*pip, str(wheel)], check=True, capture_output=True, timeout=120)
    installed = _site_size(site) - before
    print(f"core install: {installed / 2**20:.1f} MiB")
    assert installed < CORE_LIMIT
    check = subprocess.run(
        [python, "-m", "pip", "check"], capture_output=True, text=True, timeout=120
    )
    assert check.returncode == 0, check.stdout
    owners = subprocess.run(
        [python, "-c", "import capture, reports; print(capture.OWNER, reports.OWNER)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert owners.stdout.split() == ["decoy-capture", "decoy-reports"]
    archive = tmp_path / "archive"
    evidence = venv / "bin" / "evidence"
    done = subprocess.run(
        [evidence, "capture", "--archive", str(archive), "--window", "0", "-q"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode in (0, 5), done.stderr  # 5: a probe this box cannot read
    assert list(archive.glob("bundles/*/*/manifest.json"))
    analyst = subprocess.run(
        [evidence, "classify", "latest", "--archive", str(archive)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert analyst.returncode == 2
    assert analyst.stderr.count("\n") == 1 and f"{DISTRIBUTION}[analyst]" in analyst.stderr
