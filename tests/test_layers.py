"""The layers of the `evidence` package, checked on the source (statically) and in a process
(at run time): the collector never reaches the analyst, DuckDB or Jinja2.

The layers (evidence/__init__.py): archive at the bottom, standard library only; schemas;
capture and analyze, each on those two only; reports on nothing of ours; cli on everything,
but the analyst and the renderers only inside its commands.
"""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ANALYST_ONLY = ("duckdb", "jinja2", "fastjsonschema")
ALLOWED = {
    "archive": {"archive"},
    "schemas": {"schemas"},
    "capture": {"capture", "archive", "schemas"},
    # The recorder runs the collector's own probes; the collector never imports it.
    "record": {"record", "capture", "archive", "schemas"},
    "analyze": {"analyze", "archive", "schemas"},
    "reports": {"reports"},
    "cli": {"cli", "archive", "schemas", "capture", "record", "analyze", "reports"},
}
# What evidence.cli may import only inside a command, never at the top of a module.
LAZY_IN_CLI = {"analyze", "reports"}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "evidence" else None


def _imports(path: Path, package: str) -> list[tuple[str, bool]]:
    """(module imported, whether at module level) for every import in the file."""
    tree = ast.parse(path.read_text(), str(path))
    top = set(map(id, tree.body))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.append((name, id(node) in top))
    return found


def violations(root: Path) -> list[str]:
    """Every import under root/evidence that crosses a layer, as 'file: what'."""
    out = []
    stdlib = sys.stdlib_module_names
    for path in sorted((root / "evidence").rglob("*.py")):
        rel = path.relative_to(root)
        module = ".".join(rel.with_suffix("").parts)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        package = package.removesuffix(".__init__")
        layer = _layer(module)
        if layer is None:
            continue  # evidence/__init__.py: the version and a docstring
        for name, at_top in _imports(path, package):
            first = name.split(".")[0]
            target = _layer(name)
            if first == "evidence":
                if target is not None and target not in ALLOWED[layer]:
                    out.append(f"{rel}: imports {name}")
                elif layer == "cli" and at_top and target in LAZY_IN_CLI:
                    out.append(f"{rel}: imports {name} at start, not inside a command")
            elif layer == "archive" and first not in stdlib:
                out.append(f"{rel}: imports {name}, not in the standard library")
            elif layer == "capture" and first in ANALYST_ONLY:
                out.append(f"{rel}: imports {name}, the analyst's")
    return out


def test_no_layer_is_crossed():
    assert violations(ROOT) == []


@pytest.mark.parametrize(
    ("where", "line", "said"),
    [
        ("evidence/capture/probes/memory.py", "from evidence.analyze import facts", "imports"),
        ("evidence/capture/runner.py", "import duckdb", "the analyst's"),
        ("evidence/archive/layout.py", "import orjson", "not in the standard library"),
        (
            "evidence/analyze/rules/leak_ratchet.py",
            "from evidence.capture import config",
            "imports",
        ),
        ("evidence/reports/html.py", "from evidence.analyze.facts import Facts", "imports"),
        ("evidence/cli/collector.py", "from evidence.analyze import ingest", "at start"),
        ("evidence/analyze/facts.py", "from ..capture import config", "imports"),
    ],
)
def test_a_wrong_import_is_caught(tmp_path, where, line, said):
    shutil.copytree(
        ROOT / "evidence", tmp_path / "evidence", ignore=shutil.ignore_patterns("__pycache__")
    )
    target = tmp_path / where
    target.write_text(target.read_text() + f"\n{line}\n")
    (found,) = violations(tmp_path)
    assert found.startswith(where) and said in found


def _without_analyst(*argv: str) -> subprocess.CompletedProcess:
    """`evidence ARGV` in a process where the analyst's libraries cannot be imported, as in
    a collector-only install."""
    code = (
        "import sys\n"
        f"for name in {ANALYST_ONLY!r}: sys.modules[name] = None  # import raises\n"
        f"sys.argv = ['evidence', *{list(argv)!r}]\n"
        "from evidence.cli import run\n"
        "try:\n"
        "    run()\n"
        "finally:\n"
        "    loaded = sorted(m for m in sys.modules if m.startswith(('evidence.analyze', "
        "'evidence.reports.render')))\n"
        "    print('LOADED', loaded, file=sys.stderr)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


def test_the_collector_runs_without_the_analyst(tmp_path):
    done = _without_analyst("capture", "--archive", str(tmp_path), "--window", "0", "-q")
    assert done.returncode in (0, 5), done.stderr  # 5: a probe this box lacks
    assert list((tmp_path / "bundles").glob("*/*/manifest.json"))
    assert "LOADED []" in done.stderr


def test_an_analyst_command_without_the_analyst_says_what_to_install(tmp_path):
    done = _without_analyst("ingest", "--archive", str(tmp_path))
    said = [line for line in done.stderr.splitlines() if not line.startswith("LOADED")]
    assert done.returncode == 2
    assert len(said) == 1 and "needs the analyst" in said[0]
    assert "pipx install 'evidence-recorder[analyst]'" in said[0]
