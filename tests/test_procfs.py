"""The kernel-text parsers, fed the reference samples (formats.md section 8)."""

from pathlib import Path

from evidence.capture.procfs import (
    free_view,
    parse_flat_keyed,
    parse_kmsg_record,
    parse_meminfo,
    parse_pressure,
    parse_swaps,
)

REF = Path(__file__).parent / "fixtures" / "reference"


def text(name: str) -> str:
    return (REF / name).read_text()


def test_meminfo_keeps_every_key_in_kb_and_hugepage_counts():
    info = parse_meminfo(text("proc-meminfo.txt"))
    assert info["MemTotal"] > info["MemAvailable"] > 0
    assert "Active(anon)" in info and "HugePages_Total" in info
    # every line of the sample is a key: nothing silently skipped
    assert len(info) == len([ln for ln in text("proc-meminfo.txt").splitlines() if ":" in ln])


def test_free_view_matches_procps_4_and_keeps_unknown_as_none():
    view = free_view(
        {
            "MemTotal": 1000,
            "MemFree": 100,
            "MemAvailable": 600,
            "Buffers": 10,
            "Cached": 200,
            "SReclaimable": 40,
            "Shmem": 5,
            "SwapTotal": 50,
            "SwapFree": 20,
        }
    )
    assert view["used"] == 400 * 1024  # total - available, as free(1) of procps-ng 4 prints
    assert view["buff_cache"] == 250 * 1024
    assert view["swap_used"] == 30 * 1024
    old_kernel = free_view({"MemTotal": 1000, "MemFree": 100})
    assert old_kernel["available"] is None and old_kernel["used"] is None  # unknown, not 0


def test_pressure_some_and_full_with_microsecond_totals():
    memory = parse_pressure(text("proc-pressure-memory.txt"))
    assert set(memory) == {"some", "full"}
    assert isinstance(memory["some"]["total_us"], int)
    assert memory["some"]["avg10"] >= memory["full"]["avg10"]


def test_pressure_cpu_before_5_13_has_no_full_line():
    assert set(parse_pressure(text("proc-pressure-cpu-pre-5.13.txt"))) == {"some"}


def test_swaps_rows_and_octal_escapes():
    rows = parse_swaps(text("proc-swaps.txt"))
    assert [r["filename"] for r in rows] == ["/dev/nvme0n1p3", "/dev/zram0"]
    assert rows[0]["used_kb"] == 8268272 and rows[0]["priority"] == -2
    escaped = "Filename\tType\tSize\tUsed\tPriority\n/swap\\040file  file\t\t100\t\t0\t\t-2\n"
    assert parse_swaps(escaped)[0]["filename"] == "/swap file"


def test_flat_keyed_vmstat_and_memory_events():
    vm = parse_flat_keyed(text("proc-vmstat-excerpt.txt"))
    assert {"pswpin", "pswpout", "pgmajfault", "oom_kill"} <= set(vm)
    events = parse_flat_keyed(text("cgroup-memory-events.txt"))
    assert events["oom_kill"] == 3 and events["max"] == 2041


def test_kmsg_record_level_facility_and_continuations():
    rec = parse_kmsg_record(
        "3,1024,183422419355,-;Out of memory: Killed process 412733 (python3)\n SUBSYSTEM=memory\n"
    )
    assert rec == {
        "level": 3,
        "facility": 0,
        "seq": 1024,
        "ts_us": 183422419355,
        "text": "Out of memory: Killed process 412733 (python3)",
    }
    assert parse_kmsg_record("12,5,100,-;systemd[1]: hello")["facility"] == 1
    assert parse_kmsg_record("not a record") is None
