"""A bundle builder for the faults this machine cannot stage (no GPU, no engines, no
model weights): each method adds one source in the collector's exact record format, and
`write` seals the bundle with true checksums. The tests validate every built bundle
against schemas/, so the builder cannot drift from the collector. `make eval` renders
its generated scenarios with it too (lab/eval/harness.py).

    b = Builder("spark-1", at)
    b.memory([(t, used_bytes), ...])           # memory.json + memory.samples.jsonl
    b.engine("vllm-1", "vllm", {"vllm:kv_cache_usage_perc": [(t, 0.4), ...]})
    b.prometheus({"host_memory_available": [(t, bytes), ...]})
    bundle = b.write(archive)
"""

import hashlib
import re
from pathlib import Path
from typing import Any

import orjson

from evidence.archive.clock import iso, stamp
from evidence.capture.probes.prometheus import QUERIES

GIB = 1024**3
KB = 1024
Series = list[tuple[float, float]]
EXPRS = dict(QUERIES)


def _name_label(expr: str) -> dict[str, str]:
    first = expr.split(" or ")[0].strip()
    return {"__name__": first} if re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", first) else {}


class Builder:
    def __init__(
        self,
        host: str,
        at: float,
        total: int = 128 * GIB,
        boot_id: str = "boot-1",
        uptime_s: float = 86400.0,
        trigger: tuple[str, str | None] | tuple[str, str | None, str | None] = ("manual", None),
        window_s: float = 30.0,
    ):
        """trigger: (kind, name) or (kind, name, detail); window_s 0 is a cron baseline."""
        self.hostname, self.at, self.total, self.boot_id = host, at, total, boot_id
        self.uptime_s, self.trigger, self.window_s = uptime_s, trigger, window_s
        self.files: dict[str, bytes] = {}
        self.probes: dict[str, dict[str, Any]] = {}

    def _put(
        self,
        probe: str,
        record: dict[str, Any],
        lines: list[dict[str, Any]] = (),
        status: str = "ok",
        reason: str | None = None,
    ) -> None:
        name = f"{probe}.json"
        self.files[name] = orjson.dumps({"probe": probe, "collected_at": iso(self.at), **record})
        files = [name]
        entry: dict[str, Any] = {"status": status, "reason": reason, "duration_ms": 1.0}
        if lines:
            self.files[f"{probe}.samples.jsonl"] = b"".join(orjson.dumps(x) + b"\n" for x in lines)
            files.append(f"{probe}.samples.jsonl")
            entry["sampling"] = {"samples": len(lines), "gaps": 0, "errors": 0, "last_error": None}
        self.probes[probe] = {**entry, "files": files}

    def absent(self, probe: str, reason: str) -> "Builder":
        self.probes[probe] = {"status": "absent", "reason": reason, "duration_ms": 0.5, "files": []}
        return self

    def memory(
        self,
        used: Series,
        swap_used: int = 0,
        swap_total: int = 16 * GIB,
        swaps: list[int] | None = None,
    ) -> "Builder":
        """swaps: swap used at each reading of `used`, where it moved (else swap_used)."""
        swaps = swaps or [swap_used] * len(used)
        swap_used = swaps[0]

        def meminfo(u: float, swapped: int = swap_used) -> dict[str, int]:
            return self._meminfo(u, swapped, swap_total)

        first = meminfo(used[0][1])
        free = {
            "total": self.total,
            "used": int(used[0][1]),
            "free": first["MemFree"] * KB,
            "shared": 0,
            "buff_cache": 0,
            "available": first["MemAvailable"] * KB,
            "swap_total": swap_total,
            "swap_used": swap_used,
            "swap_free": swap_total - swap_used,
            "swap_devices": 1,
        }
        self._put(
            "memory",
            {"meminfo_kb": first, "swaps": [], "free": free},
            [
                {"t": iso(t), "meminfo_kb": meminfo(u, s)}
                for (t, u), s in zip(used[1:], swaps[1:], strict=True)
            ],
        )
        return self

    def _meminfo(self, used: float, swapped: int = 0, swap_total: int = 16 * GIB) -> dict[str, int]:
        available = int(self.total - used)
        return {
            "MemTotal": self.total // KB,
            "MemFree": available // (2 * KB),
            "MemAvailable": available // KB,
            "Buffers": 1024,
            "Cached": 4096,
            "SReclaimable": 1024,
            "Shmem": 1024,
            "SwapTotal": swap_total // KB,
            "SwapFree": (swap_total - swapped) // KB,
        }

    def recorder(self, used: Series) -> "Builder":
        """The resident recorder's hour before the capture: its memory readings, as
        memory.history.jsonl and recorder.json."""
        lines = [{"t": iso(t), "meminfo_kb": self._meminfo(u)} for t, u in used]
        self.files["memory.history.jsonl"] = b"".join(orjson.dumps(x) + b"\n" for x in lines)
        record = {
            "asked_from": iso(self.at - 3600),
            "from": lines[0]["t"],
            "to": lines[-1]["t"],
            "records": len(lines),
            "skipped": 0,
            "recorder": {"pid": 77, "started_at": lines[0]["t"], "ring_bytes": 2**26,
                         "oldest": lines[0]["t"]},
            "sources": {"memory": {"status": "ok", "reason": None, "interval_s": 1.0,
                                   "last": lines[-1]["t"]}},
            "files": ["memory.history.jsonl"],
        }  # fmt: skip
        self._put("recorder", record)
        self.probes["recorder"]["files"].append("memory.history.jsonl")
        return self

    def pressure(self, some: Series, full: Series | None = None) -> "Builder":
        def psi(s: float, f: float) -> dict[str, Any]:
            line = {"avg10": s, "avg60": s, "avg300": s, "total_us": int(s * 1e4)}
            return {"memory": {"some": line, "full": {**line, "avg10": f, "avg60": f, "avg300": f}}}

        fulls = dict(full or [])
        self._put(
            "pressure",
            {
                "system": psi(some[0][1], fulls.get(some[0][0], 0.0)),
                "unavailable": {},
                "cgroups": [],
            },
            [
                {"t": iso(t), "system": psi(s, fulls.get(t, 0.0)), "cgroups": []}
                for t, s in some[1:]
            ],
        )
        return self

    def vmstat(self, pswpout: Series, **others: list[float]) -> "Builder":
        """others: more counters by their /proc/vmstat name, one value per reading."""

        def at(i: int, v: float) -> dict[str, int]:
            return {"pswpout": int(v), "oom_kill": 0, **{k: int(x[i]) for k, x in others.items()}}

        self._put(
            "vmstat",
            {"counters": at(0, pswpout[0][1])},
            [{"t": iso(t), "counters": at(i, v)} for i, (t, v) in enumerate(pswpout) if i],
        )
        return self

    def processes(self, rows: list[dict[str, Any]]) -> "Builder":
        full = [
            {
                "ppid": 1,
                "pgid": r["pid"],
                "cmdline": [r["name"]],
                "user": "ai",
                "state": "sleeping",
                "swap_bytes": 0,
                "start_time": iso(self.at - 3600),
                "cgroup": "/",
                **r,
            }
            for r in rows
        ]
        self._put("processes", {"count": len(full), "unread": 0, "processes": full})
        return self

    def host(self) -> "Builder":
        self._put(
            "host",
            {
                "hostname": self.hostname,
                "boot_id": self.boot_id,
                "kernel": "6.8.0",
                "kernel_version": "#1",
                "machine": "aarch64",
                "os_release": None,
                "cpus": 20,
                "uptime_s": self.uptime_s,
                "loadavg": [1.0, 1.0, 1.0],
            },
        )
        return self

    def kernel(
        self, lines: list[str], ago_s: float = 30.0, times: list[float] | None = None
    ) -> "Builder":
        """Kernel lines logged ago_s seconds before the capture, or each at its unix time."""
        agos = [self.at - t for t in times] if times else [ago_s] * len(lines)
        self._put(
            "kernel",
            {
                "source": "/dev/kmsg",
                "records_read": len(lines),
                "lines": [
                    {
                        "seq": 100 + i,
                        "time": iso(self.at - ago),
                        "uptime_s": self.uptime_s - ago,
                        "level": 3,
                        "facility": 0,
                        "matched": True,
                        "text": text,
                    }
                    for i, (text, ago) in enumerate(zip(lines, agos, strict=True))
                ],
            },
        )
        return self

    def logs(self, lines: list[str], name: str = "engine") -> "Builder":
        self._put(
            "logs",
            {
                "sources": [
                    {
                        "name": name,
                        "kind": "file",
                        "target": "/var/log/x",
                        "status": "ok",
                        "size": 100,
                        "mtime": iso(self.at),
                        "bytes": 100,
                        "truncated": False,
                        "lines": lines,
                    }
                ]
            },
        )
        return self

    def gpu(
        self,
        name: str = "NVIDIA GB10",
        total: int | None = None,
        used: int | None = None,
        processes: list[tuple[int, str, int]] = (),
        unified: bool = True,
        busy_pct: int = 90,
    ) -> "Builder":
        unavailable = (
            {}
            if total is not None
            else {"memory": {"status": "unsupported", "reason": "Not Supported"}}
        )
        device = {
            "index": 0,
            "vendor": "nvidia",
            "name": name,
            "uuid": "GPU-1",
            "pci_bus_id": "0000000F:01:00.0",
            "memory_total_bytes": total,
            "memory_used_bytes": used,
            "memory_free_bytes": None,
            "memory_reserved_bytes": None,
            "memory_api": "v2" if total else None,
            "utilization_gpu_pct": busy_pct,
            "utilization_memory_pct": 10,
            "sm_clock_mhz": 2000,
            "sm_clock_max_mhz": 3000,
            "power_w": 50.0,
            "temperature_c": 60,
            "clock_event_reasons": [],
            "unified_memory": unified,
            "unified_memory_basis": "test",
            "unavailable": unavailable,
            "processes": [
                {"pid": pid, "type": "compute", "used_bytes": b, "name": n, "cmdline": [n]}
                for pid, n, b in processes
            ],
        }
        self._put(
            "gpu",
            {
                "nvidia": {
                    "backend": "nvml",
                    "driver_version": "580.95.05",
                    "cuda_driver_version": 13000,
                    "nvml_version": "13",
                    "devices": [device],
                    "status": "ok",
                    "reason": None,
                    "xid_events": None,
                },
                "amd": {"status": "absent", "reason": "none", "devices": []},
            },
        )
        return self

    def engines(
        self, engines: list[dict[str, Any]], samples: list[tuple[float, list]] = ()
    ) -> "Builder":
        """engines: records as the engines probe writes them; see `engine` for the common case."""
        self._put(
            "engines",
            {"source": "config", "engines": engines, "discovery": []},
            [{"t": iso(t), "engines": e} for t, e in samples],
        )
        return self

    def prometheus(self, queries: dict[str, Series], absent: tuple[str, ...] = ()) -> "Builder":
        """Answers to the probe's queries (by name): each with the probe's real expression,
        and, where that expression selects metrics without arithmetic, the `__name__` of its
        first metric, as Prometheus keeps it on a plain selector's series."""
        entries = [
            {
                "name": name,
                "expr": EXPRS.get(name, name),
                "status": "ok",
                "reason": None,
                "series": [
                    {
                        "metric": {"job": "test", **_name_label(EXPRS.get(name, name))},
                        "values": [[t, repr(float(v))] for t, v in points],
                    }
                ],
            }
            for name, points in queries.items()
        ]
        entries += [
            {
                "name": name,
                "expr": EXPRS.get(name, name),
                "status": "absent",
                "reason": "no series: nothing publishes this here",
                "series": [],
            }
            for name in absent
        ]
        start = min((p[0][0] for p in queries.values() if p), default=self.at - 86400)
        return self.history(entries, start, 300)

    def history(self, queries: list[dict[str, Any]], start: float, step_s: int) -> "Builder":
        """The prometheus probe's record from query entries already in its format (name,
        expr, status, reason, series), as a Prometheus answered them."""
        self._put(
            "prometheus",
            {
                "url": "http://127.0.0.1:9090",
                "version": "2.42.0",
                "start": iso(start),
                "end": iso(self.at),
                "step_s": step_s,
                "queries": queries,
            },
        )
        return self

    def checks(self, checks: list[dict[str, Any]]) -> "Builder":
        self._put(
            "health",
            {
                "checks": [
                    {
                        "target": "http://127.0.0.1:1",
                        "elapsed_ms": 10.0,
                        "timeout_s": 10,
                        "reason": None,
                        **c,
                    }
                    for c in checks
                ]
            },
        )
        return self

    def write(self, archive: Path) -> Path:
        kind, name, detail = (*self.trigger, None)[:3]
        bundle = archive / "bundles" / self.hostname / f"{stamp(self.at)}_{kind}"
        bundle.mkdir(parents=True)
        files = []
        for fname, data in sorted(self.files.items()):
            (bundle / fname).write_bytes(data)
            files.append(
                {
                    "name": fname,
                    "probe": fname.split(".")[0],
                    "bytes": len(data),
                    "sha256": hashlib.sha256(data).hexdigest(),
                }
            )
        digest = hashlib.sha256(self.hostname.encode()).hexdigest()
        manifest = {
            "schema_version": 1,
            "bundle_id": f"{stamp(self.at)}-{digest[:12]}",
            "host": {
                "hostname": self.hostname,
                "boot_id": self.boot_id,
                "kernel": "6.8.0",
                "uptime_s": self.uptime_s,
            },
            "trigger": {"kind": kind, "name": name, "detail": detail, "fired_at": iso(self.at)},
            "collector": {"version": "0.1.0", "pid": 1234},
            "config_source": None,
            "started_at": iso(self.at),
            "finished_at": iso(self.at + self.window_s),
            "window_s": self.window_s,
            "complete": True,
            "partial_reason": None,
            "probes": self.probes,
            "files": files,
            "dropped": [],
        }
        (bundle / "manifest.json").write_bytes(orjson.dumps(manifest))
        return bundle


def engine(
    name: str,
    kind: str,
    metrics: dict[str, float] | None = None,
    readings: dict[str, dict[str, Any]] | None = None,
    status: str = "ok",
    reason: str = "no answer within 1 s",
    url: str = "http://127.0.0.1:1",
) -> dict[str, Any]:
    """One engine record: /metrics readings from `metrics`, other endpoints from `readings`;
    `reason` is why it did not answer, where status is not ok."""
    endpoints: dict[str, Any] = {}
    if metrics is not None:
        endpoints["/metrics"] = {
            "status": "ok",
            "reason": None,
            "http_status": 200,
            "elapsed_ms": 2.0,
            "readings": {
                "metrics": {m: [{"labels": {}, "value": v}] for m, v in metrics.items()},
                "absent": [],
                "samples_total": len(metrics),
            },
        }
    for path, reading in (readings or {}).items():
        endpoints[path] = {
            "status": "ok",
            "reason": None,
            "http_status": 200,
            "elapsed_ms": 2.0,
            "readings": reading,
        }
    return {
        "name": name,
        "kind": kind,
        "url": url,
        "status": status,
        "reason": None if status == "ok" else reason,
        "endpoints": endpoints,
    }
