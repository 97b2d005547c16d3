"""The package as users install it: a real wheel, not the editable checkout."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).parent.parent
PACKAGES = ("capture", "analyze", "reports", "schemas")


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
    packages = {
        str(p.parent.relative_to(ROOT))
        for top in PACKAGES
        for p in (ROOT / top).glob("**/__init__.py")
    }
    assert {"capture", "capture/probes", "capture/gpu", "capture/engines"} <= packages
    for package in packages:
        assert f"{package}/__init__.py" in names, package
    for schema in (ROOT / "schemas").glob("*.schema.json"):
        assert f"schemas/{schema.name}" in names, schema.name
