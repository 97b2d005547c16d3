"""Knowledge both sides need has one source, in evidence/schemas/*.toml, and each side
reads it from there: the engines, the log and kernel lines, the compilers, the floor."""

import ast
from pathlib import Path

import pytest

from evidence.analyze.recognise import belongs
from evidence.analyze.rules import COMPILERS, DESKTOP_APPS
from evidence.analyze.tags import tags_of
from evidence.capture.config import ENGINE_KINDS
from evidence.capture.engines import readers
from evidence.capture.probes.kernel import WORTH_KEEPING
from evidence.schemas import catalog, engine_kinds

ROOT = Path(__file__).resolve().parent.parent
KERNEL_TAGS = {t["name"] for t in catalog("lines")["tag"] if t.get("kernel")}
# Kernel lines in the kernel's own words (shared/reference/formats.md section 9), and lines
# that are not worth keeping beyond the tail.
KERNEL_LINES = [
    "python3 invoked oom-killer: gfp_mask=0x140dca(GFP_HIGHUSER_MOVABLE|__GFP_COMP|__GFP_ZERO), "
    "order=0, oom_score_adj=0",
    "Out of memory: Killed process 4321 (llama-server) total-vm:66093824kB, "
    "anon-rss:31245380kB, file-rss:4096kB, shmem-rss:0kB, UID:1000 pgtables:65288kB "
    "oom_score_adj:0",
    "Memory cgroup out of memory: Killed process 812 (python3) total-vm:9000kB",
    "oom_reaper: reaped process 4321 (llama-server), now anon-rss:0kB, file-rss:0kB",
    "Out of memory and no killable processes...",
    "NVRM: Xid (PCI:0000:01:00): 79, pid=1234, name=python3, GPU has fallen off the bus.",
    "NVRM: nvAssertFailedNoLog: Assertion failed: NV_ERR_NO_MEMORY",
    "NVRM: loading NVIDIA UNIX Open Kernel Module for aarch64  580.95.05",
    "INFO: task python3:2201 blocked for more than 122 seconds.",
    "amdgpu 0000:03:00.0: amdgpu: GPU reset begin!",
    "llama-server: page allocation failure: order:4, mode:0x40dc0",
    "usb 1-1: new high-speed USB device number 3 using xhci_hcd",
    "EXT4-fs (nvme0n1p2): re-mounted. Quota mode: none.",
    'audit: type=1400 audit(1764386000.123:42): apparmor="STATUS"',
]


def test_the_configuration_the_readers_and_the_catalog_name_the_same_engines():
    assert set(ENGINE_KINDS) == set(engine_kinds()) == set(readers())


@pytest.mark.parametrize("line", KERNEL_LINES)
def test_the_collector_keeps_exactly_the_kernel_lines_the_analyst_marks(line):
    assert bool(WORTH_KEEPING.search(line)) == bool(KERNEL_TAGS & set(tags_of(line))), line


def test_an_engine_is_recognised_by_the_catalogs_words():
    vllm = {"name": "python3", "cmdline": ["python3", "-m", "vllm.entrypoints.openai.api_server"]}
    child = {"name": "llama-server", "cmdline": ["/opt/llama-server", "--port", "5800"]}
    other = {"name": "python3", "cmdline": ["python3", "train.py"]}
    assert belongs(vllm, "vllm") and not belongs(vllm, "sglang")
    assert belongs(child, "llama-server") and belongs(child, "llama-swap")
    assert not any(belongs(other, kind) for kind in engine_kinds())
    assert set(COMPILERS) == set(catalog("engines")["build"]["compilers"])
    assert set(DESKTOP_APPS) == set(catalog("engines")["desktop"]["apps"])


def test_one_floor_quantile():
    """shapes.py holds the floor's quantile; no other analyst module sets its own."""
    setters = []
    for path in (ROOT / "evidence" / "analyze").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                setters += [(path.name, n) for n in names if n == "FLOOR_QUANTILE"]
    assert setters == [("shapes.py", "FLOOR_QUANTILE")]
