"""Probes against fixture /proc trees and odd kernels, and the runner's bounds on them."""

import os
import time
from pathlib import Path

import orjson
from conftest import bundles, manifest, need

from evidence.capture.config import Config, from_dict
from evidence.capture.probes import Context, Probe, Reading, ordered
from evidence.capture.probes.kernel import Kernel
from evidence.capture.probes.memory import Memory
from evidence.capture.probes.pressure import Pressure
from evidence.capture.probes.processes import Processes
from evidence.capture.procfs import parse_kmsg_record
from evidence.capture.runner import FREEZE_BUDGET_S, SEAL_MARGIN_S, Capture, Trigger

REF = Path(__file__).parent / "fixtures" / "reference"


def proc_tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "proc"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def ctx(**kwargs) -> Context:
    return Context(config=Config(), started=time.time(), **kwargs)


def test_registry_orders_what_vanishes_first():
    names = [cls.name for cls in ordered()]
    # health is no evidence of the machine: it holds the answers that started the capture;
    # the recorder's hour is asked for next, so that it ends where the capture begins.
    assert names[:5] == ["health", "recorder", "gpu", "processes", "engines"]
    assert names.index("memory") < names.index("kernel") < names.index("logs")
    assert names.index("vmstat") < names.index("kernel")
    assert names.index("pressure") < names.index("kernel")


def test_memory_from_a_fixture_tree_without_swap(tmp_path):
    root = proc_tree(tmp_path, {"meminfo": (REF / "proc-meminfo.txt").read_text()})
    reading = Memory(ctx(proc=root)).freeze()
    assert reading.status == "ok"
    assert reading.record["swaps"] is None  # no /proc/swaps: unknown, not an empty list
    assert reading.record["free"]["total"] == reading.record["meminfo_kb"]["MemTotal"] * 1024


def test_memory_absent_is_a_status_not_an_exception(tmp_path):
    reading = Memory(ctx(proc=tmp_path / "empty")).freeze()
    assert reading.status == "absent" and "meminfo" in reading.reason


def test_pressure_on_a_kernel_without_psi_is_absent_with_the_reason(tmp_path):
    root = proc_tree(tmp_path, {"meminfo": "MemTotal: 1 kB\n"})
    reading = Pressure(ctx(proc=root)).freeze()
    assert reading.status == "absent"
    assert "kernel without PSI" in reading.reason


def test_pressure_pre_5_13_cpu_and_a_cgroup_with_oom_kills(tmp_path):
    root = proc_tree(
        tmp_path,
        {
            "pressure/cpu": (REF / "proc-pressure-cpu-pre-5.13.txt").read_text(),
            "pressure/memory": (REF / "proc-pressure-memory.txt").read_text(),
            "pressure/io": (REF / "proc-pressure-io.txt").read_text(),
            "self/mountinfo": f"30 1 0:26 / {tmp_path}/cg rw,nosuid - cgroup2 cgroup2 rw\n",
        },
    )
    group = tmp_path / "cg" / "system.slice" / "llama.service"
    group.mkdir(parents=True)
    for leaf, sample in (
        ("memory.current", "cgroup-memory-current.txt"),
        ("memory.max", "cgroup-memory-max.txt"),
        ("memory.events", "cgroup-memory-events.txt"),
        ("memory.pressure", "cgroup-memory-pressure.txt"),
    ):
        (group / leaf).write_text((REF / sample).read_text())
    context = ctx(proc=root)
    context.shared["cgroups_of_interest"] = ["/system.slice/llama.service", "/"]
    reading = Pressure(context).freeze()
    assert reading.status == "ok"
    assert "full" not in reading.record["system"]["cpu"]
    assert "irq" not in reading.record["unavailable"]  # irq is optional on every kernel
    llama, root_cg = reading.record["cgroups"]
    assert llama["status"] == "ok" and llama["memory_events"]["oom_kill"] == 3
    assert isinstance(llama["memory_current"], int)
    assert root_cg["status"] == "absent" and "root cgroup" in root_cg["reason"]


def test_a_mount_point_that_is_not_utf8_costs_nothing(tmp_path):
    # A USB stick labelled in Latin-1 appears in mountinfo as raw bytes.
    root = tmp_path / "proc"
    (root / "pressure").mkdir(parents=True)
    (root / "pressure" / "memory").write_text((REF / "proc-pressure-memory.txt").read_text())
    (root / "self").mkdir()
    (root / "self" / "mountinfo").write_bytes(
        b"40 1 8:17 / /media/cl\xe9 rw - vfat /dev/sdb1 rw\n"
        + f"30 1 0:26 / {tmp_path}/cg rw - cgroup2 cgroup2 rw\n".encode()
    )
    (tmp_path / "cg" / "svc").mkdir(parents=True)
    (tmp_path / "cg" / "svc" / "memory.current").write_text("4096\n")
    context = ctx(proc=root)
    context.shared["cgroups_of_interest"] = ["/svc"]
    reading = Pressure(context).freeze()
    assert reading.status == "ok"
    assert reading.record["cgroups"][0]["memory_current"] == 4096


def test_processes_snapshot_and_top_by_rss_sample():
    context = ctx()
    probe = Processes(context)
    reading = probe.freeze()
    me = next(p for p in reading.record["processes"] if p["pid"] == os.getpid())
    assert me["rss_bytes"] > 0 and me["cmdline"] and me["start_time"].endswith("Z")
    assert me["ppid"] == os.getppid() and me["pgid"] == os.getpgid(0)
    sample = probe.sample()
    sizes = [p["rss_bytes"] for p in sample["top"]]
    assert sizes == sorted(sizes, reverse=True) and len(sizes) <= context.config.limits.top_n
    # Each largest process with the unit or container it runs in, as the snapshot read it.
    cgroups = {p["pid"]: p["cgroup"] for p in reading.record["processes"]}
    for top in sample["top"]:
        if top["pid"] in cgroups:
            assert top["cgroup"] == cgroups[top["pid"]]
    assert any(top["cgroup"] for top in sample["top"]) == any(cgroups.values())


def kmsg_records(name: str) -> list[dict]:
    """The reference dmesg text as the records /dev/kmsg would hand out."""
    out = []
    for seq, line in enumerate((REF / name).read_text().splitlines()):
        if line.startswith("["):
            stamp, text = line[1:].split("] ", 1)
            out.append(parse_kmsg_record(f"6,{seq},{int(float(stamp) * 1e6)},-;{text}"))
    return out


def test_kernel_keeps_oom_and_nvrm_lines_beyond_the_tail():
    config = from_dict({"capture": {"kernel_tail": 2, "kernel_lookback": "3650d"}})
    probe = Kernel(Context(config=config, started=time.time()))
    records = kmsg_records("dmesg-oom-killer.txt") + kmsg_records("dmesg-nvrm.txt")
    kept = probe._select(records)["lines"]
    texts = [k["text"] for k in kept if k["matched"]]
    assert any("invoked oom-killer" in t for t in texts)
    assert any("Killed process 412733 (python3)" in t for t in texts)
    assert any("NV_ERR_NO_MEMORY" in t for t in texts)
    assert any("Xid" in t for t in texts)
    assert not any("dump_stack_lvl" in k["text"] for k in kept)  # stack glue is not kept
    assert sum(not k["matched"] for k in kept) <= 2


def test_kernel_absent_without_kmsg(tmp_path):
    assert Kernel(ctx(kmsg=tmp_path / "kmsg")).freeze().status == "absent"


def test_kernel_denied_for_an_unprivileged_user(nobody):
    restrict = Path("/proc/sys/kernel/dmesg_restrict")
    need(
        restrict.exists() and restrict.read_text().strip() == "1",
        "kernel.dmesg_restrict is 0 here, so an unprivileged reader is not denied",
    )
    code = (
        "import time; from evidence.capture.config import Config;"
        "from evidence.capture.probes import Context;"
        "from evidence.capture.probes.kernel import Kernel;"
        "r = Kernel(Context(config=Config(), started=time.time())).freeze();"
        "print(r.status, r.reason)"
    )
    out = nobody.run([nobody.python, "-c", code])
    assert out.stdout.startswith("denied "), out.stderr
    assert "dmesg_restrict" in out.stdout


class BlockedProbe(Probe):
    """Opens a FIFO nobody writes to: a read that blocks in the kernel, like a dead NFS."""

    name = "blocked"
    order = 15
    priority = 500
    timeout_s = 1.0
    samples = False
    fifo: Path

    def freeze(self) -> Reading:
        with open(self.fifo) as f:  # blocks until a writer appears: never
            return Reading(record={"text": f.read()})


def test_a_probe_that_blocks_is_abandoned_and_the_bundle_sealed(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    BlockedProbe.fifo = fifo
    probes = [cls for cls in ordered() if cls.name != "logs"]
    probes.insert(1, BlockedProbe)
    start = time.monotonic()
    outcome = Capture(Config(), Trigger(), 2, tmp_path / "a", probes=probes).run()
    elapsed = time.monotonic() - start
    assert elapsed < 2 + SEAL_MARGIN_S
    m = manifest(outcome.path)
    assert m["complete"] is True
    assert m["probes"]["blocked"]["status"] == "timeout"
    assert m["probes"]["blocked"]["duration_ms"] >= 990
    assert m["probes"]["memory"]["status"] == "ok"  # the probes after it still ran
    assert m["probes"]["memory"]["sampling"]["samples"] >= 1
    assert not (outcome.path / "blocked.json").exists()
    assert bundles(tmp_path / "a") == [outcome.path]


class SlowProbe(BlockedProbe):
    name = "slow"
    timeout_s = 5.0


def test_the_freeze_budget_skips_what_it_cannot_reach(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    SlowProbe.fifo = fifo
    probes = [Processes, SlowProbe, Pressure]
    start = time.monotonic()
    outcome = Capture(Config(), Trigger(), 0, tmp_path / "a", probes=probes).run()
    assert time.monotonic() - start < FREEZE_BUDGET_S + 1
    m = orjson.loads((outcome.path / "manifest.json").read_bytes())
    assert m["probes"]["slow"]["status"] == "timeout"
    # Not read for lack of time is a timeout with the reason, and the bundle says it is
    # not complete (the exit status 5).
    assert m["probes"]["pressure"]["status"] == "timeout"
    assert "ran out of time" in m["probes"]["pressure"]["reason"]
    assert m["complete"] is False and "pressure" in m["partial_reason"]
