"""The package as users install it: a real wheel, not the editable checkout."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_the_wheel_ships_every_package_and_every_schema(tmp_path):
    source = tmp_path / "src"  # build from a copy: setuptools leaves build/ where it runs
    shutil.copytree(
        ROOT,
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
            str(tmp_path),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    (wheel,) = tmp_path.glob("evidence-*.whl")
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
