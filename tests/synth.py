"""Synthetic bundles in the collector's exact format, for archives of many hosts and days.

The records follow schemas/ (the tests validate them), the manifest carries true
checksums, and the numbers tell a story the analyst should read back: a memory floor,
a daily rhythm, a leak, a reboot, an OOM kill, a model loaded. Used by the archive tests
and by `make bench` (2,000 bundles).
"""

import hashlib
import math
import os
import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from evidence.archive.clock import iso, stamp
from lab.builder import GIB, KB


@dataclass
class Host:
    name: str
    total_bytes: int = 128 * GIB
    floor_bytes: int = 40 * GIB
    leak_per_day: int = 0  # bytes the floor rises each day
    rhythm_bytes: int = 8 * GIB  # daytime load above the floor
    boot_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    booted_at: float = 0.0

    def used(self, ts: float, start: float, rng: random.Random) -> int:
        hour = datetime.fromtimestamp(ts, UTC).hour
        daytime = max(0.0, math.sin((hour - 6) / 24 * 2 * math.pi))  # busiest mid-afternoon
        drift = self.leak_per_day * (ts - start) / 86400
        noise = rng.uniform(-0.3, 0.3) * GIB
        return int(self.floor_bytes + drift + daytime * self.rhythm_bytes + noise)


def _meminfo(host: Host, used: int) -> dict[str, int]:
    available = host.total_bytes - used
    return {
        "MemTotal": host.total_bytes // KB,
        "MemFree": available // (2 * KB),
        "MemAvailable": available // KB,
        "Buffers": 1024,
        "Cached": available // (3 * KB),
        "SReclaimable": 20480,
        "Shmem": 4096,
        "SwapTotal": 16 * GIB // KB,
        "SwapFree": 16 * GIB // KB,
        "HugePages_Total": 0,
    }


def _vmstat(n: int) -> dict[str, int]:
    return {
        "pswpin": 10 * n,
        "pswpout": 12 * n,
        "pgmajfault": 100 + n,
        "oom_kill": 0,
        **{f"nr_counter_{i}": i * n for i in range(150)},
    }


def write_bundle(
    archive: Path,
    host: Host,
    ts: float,
    rng: random.Random,
    *,
    start: float,
    window: int = 0,
    trigger: tuple[str, str | None] = ("cron", "baseline"),
    kernel_lines: list[str] = (),
    models: list[str] | None = None,
    failed_check: str | None = None,
    processes: int = 40,
) -> Path:
    """One bundle of `host` captured at `ts`, with `window` one-second samples per source."""
    name = f"{stamp(ts)}_{trigger[0]}-{trigger[1]}" if trigger[1] else f"{stamp(ts)}_{trigger[0]}"
    bundle = archive / "bundles" / host.name / name
    bundle.mkdir(parents=True)
    records: dict[str, bytes] = {}

    def put(fname: str, record: Any) -> None:
        records[fname] = orjson.dumps(record)

    def put_lines(fname: str, lines: list[Any]) -> None:
        records[fname] = b"".join(orjson.dumps(x) + b"\n" for x in lines)

    at = iso(ts)
    used = host.used(ts, start, rng)
    meminfo = _meminfo(host, used)
    free = {
        k: meminfo[m] * KB
        for k, m in (
            ("total", "MemTotal"),
            ("free", "MemFree"),
            ("available", "MemAvailable"),
            ("shared", "Shmem"),
        )
    }
    put(
        "memory.json",
        {
            "probe": "memory",
            "collected_at": at,
            "meminfo_kb": meminfo,
            "swaps": [],
            "free": {
                **free,
                "used": used,
                "buff_cache": 0,
                "swap_total": 16 * GIB,
                "swap_used": 0,
                "swap_free": 16 * GIB,
                "swap_devices": 0,
            },
        },
    )
    put("vmstat.json", {"probe": "vmstat", "collected_at": at, "counters": _vmstat(0)})
    rows = [
        {
            "pid": 1000 + i,
            "ppid": 1,
            "pgid": 1000 + i,
            "name": f"worker{i}",
            "cmdline": [f"/usr/bin/worker{i}", "--serve"],
            "user": "ai",
            "state": "sleeping",
            "rss_bytes": rng.randint(10, 2000) * 2**20,
            "swap_bytes": 0,
            "start_time": at,
            "cgroup": "/system.slice/ai.service",
        }
        for i in range(processes)
    ]
    put(
        "processes.json",
        {
            "probe": "processes",
            "collected_at": at,
            "count": len(rows),
            "unread": 0,
            "processes": rows,
        },
    )
    put(
        "host.json",
        {
            "probe": "host",
            "collected_at": at,
            "hostname": host.name,
            "boot_id": host.boot_id,
            "kernel": "6.8.0-49-generic",
            "kernel_version": "#49-Ubuntu SMP",
            "machine": "aarch64",
            "os_release": "Ubuntu 24.04.1 LTS",
            "cpus": 20,
            "uptime_s": ts - host.booted_at,
            "loadavg": [1.0, 1.2, 1.1],
        },
    )
    klines = [
        {
            "seq": 1000 + i,
            "time": at,
            "uptime_s": ts - host.booted_at - 60 + i,
            "level": 3,
            "facility": 0,
            "matched": True,
            "text": text,
        }
        for i, text in enumerate(kernel_lines)
    ]
    put(
        "kernel.json",
        {
            "probe": "kernel",
            "collected_at": at,
            "source": "/dev/kmsg",
            "records_read": len(klines),
            "lines": klines,
        },
    )
    probes = {
        n: {"status": "ok", "reason": None, "duration_ms": 1.0, "files": [f"{n}.json"]}
        for n in ("memory", "vmstat", "processes", "host", "kernel")
    }
    if models is not None:
        put(
            "engines.json",
            {
                "probe": "engines",
                "collected_at": at,
                "source": "config",
                "discovery": [],
                "engines": [
                    {
                        "name": "swap",
                        "kind": "llama-swap",
                        "url": "http://127.0.0.1:8080",
                        "status": "ok",
                        "reason": None,
                        "endpoints": {
                            "/running": {
                                "url": "http://127.0.0.1:8080/running",
                                "status": "ok",
                                "reason": None,
                                "http_status": 200,
                                "elapsed_ms": 2.0,
                                "bytes": 100,
                                "truncated": False,
                                "content_type": "application/json",
                                "body": "{}",
                                "readings": {
                                    "models": [{"model": m, "state": "ready"} for m in models],
                                    "loaded": models,
                                },
                            }
                        },
                    }
                ],
            },
        )
        probes["engines"] = {
            "status": "ok",
            "reason": None,
            "duration_ms": 3.0,
            "files": ["engines.json"],
        }
    if failed_check:
        put(
            "health.json",
            {
                "probe": "health",
                "collected_at": at,
                "checks": [
                    {
                        "name": failed_check,
                        "kind": "completion",
                        "target": "http://127.0.0.1:9292",
                        "ok": False,
                        "status": "failed",
                        "reason": "the content is empty",
                        "elapsed_ms": 900.0,
                        "timeout_s": 60,
                        "answer": {"http_status": 200},
                    }
                ],
            },
        )
        probes["health"] = {
            "status": "ok",
            "reason": None,
            "duration_ms": 0.1,
            "files": ["health.json"],
        }
    if window:
        mem_lines, vm_lines, top_lines = [], [], []
        for s in range(window):
            t = iso(ts + 0.2 + s)
            mem_lines.append({"t": t, "meminfo_kb": _meminfo(host, host.used(ts + s, start, rng))})
            vm_lines.append({"t": t, "counters": _vmstat(s + 1)})
            top_lines.append(
                {
                    "t": t,
                    "processes": len(rows),
                    "top": [
                        {"pid": r["pid"], "name": r["name"], "rss_bytes": r["rss_bytes"]}
                        for r in rows[:20]
                    ],
                }
            )
        put_lines("memory.samples.jsonl", mem_lines)
        put_lines("vmstat.samples.jsonl", vm_lines)
        put_lines("processes.samples.jsonl", top_lines)
        for probe in ("memory", "vmstat", "processes"):
            probes[probe]["files"].append(f"{probe}.samples.jsonl")
            probes[probe]["sampling"] = {
                "samples": window,
                "gaps": 0,
                "errors": 0,
                "last_error": None,
            }
    files = []
    for fname, data in sorted(records.items()):
        path = bundle / fname
        path.write_bytes(data)
        os.chmod(path, 0o600)
        files.append(
            {
                "name": fname,
                "probe": fname.split(".")[0],
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
    manifest = {
        "schema_version": 1,
        "bundle_id": f"{stamp(ts)}-{rng.getrandbits(48):012x}",
        "host": {
            "hostname": host.name,
            "boot_id": host.boot_id,
            "kernel": "6.8.0-49-generic",
            "uptime_s": ts - host.booted_at,
        },
        "trigger": {"kind": trigger[0], "name": trigger[1], "detail": None, "fired_at": at},
        "collector": {"version": "0.1.0", "pid": 4242},
        "config_source": None,
        "started_at": at,
        "finished_at": iso(ts + window + 0.3),
        "window_s": float(window),
        "complete": True,
        "partial_reason": None,
        "probes": probes,
        "files": files,
        "dropped": [],
    }
    (bundle / "manifest.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    return bundle
