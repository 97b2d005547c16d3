"""The 19 real incidents of shared/incidents/real-incidents.json as bundles, each holding only
what its thread gives.

What goes in, and where:
- the `evidence_excerpts` lines, verbatim, in their natural home: kernel lines (dmesg, NVRM)
  in the kernel probe, dated where the excerpt dates them (a `dmesg -T` prefix is the
  record's time, not its text, so it is moved there); engine, journal and build output in
  the logs probe, one source per origin;
- client-visible answers the thread states (HTTP 500, a rejected or empty completion) as
  the health checks of an operator's `evidence check`, and the trigger an operator's setup
  would have fired (a health check when the service failed, `manual` when they were looking);
- measurements from `timeline` and `reported` where a probe records them (MemAvailable and
  MemTotal as a meminfo reading, a card's used and total memory as a GPU reading, a model
  manager's loaded set as an engine reading).

What never goes in: a line the thread does not quote (a kernel event it only describes is
left out, not written in the kernel's format), a history it did not measure (no Prometheus
anywhere), a process or a figure it does not name. Every probe the thread gives nothing for
is recorded `absent` with that reason, so the classifier sees a gap, not a quiet reading.
A field the contract requires that the thread does not give (a pid, a time of day when only
the date is known) gets a placeholder; each builder's docstring names them.
"""

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson

from evidence.archive.clock import iso
from evidence.capture.gpu import DEVICE_FIELDS
from lab.builder import Builder

# The shared folder beside the checkout, as lab/eval/peer.py finds the seeds.
SOURCE = Path(__file__).resolve().parents[2] / "shared" / "incidents" / "real-incidents.json"
# Absent from a checkout without the shared folder: the tests then say so (conftest.need).
INCIDENTS: list[dict[str, Any]] = json.loads(SOURCE.read_text()) if SOURCE.is_file() else []
_BY_ID = {i["id"]: i for i in INCIDENTS}

GIB = 1024**3
MIB = 1024**2
GB = 1000**3  # Ollama and Windows' Task Manager print decimal units
PROBES = (
    "host",
    "memory",
    "vmstat",
    "pressure",
    "processes",
    "gpu",
    "engines",
    "prometheus",
    "logs",
    "kernel",
    "health",
)
NOT_IN_THREAD = "not measured: the thread holds nothing from this source"
UNKNOWN = {"status": "absent", "reason": "not in the thread"}


def acceptable(incident_id: str) -> list[str]:
    return list(_BY_ID[incident_id]["ground_truth"]["acceptable_verdicts"])


def lines_of(incident_id: str, kind: str | None = None, index: int | None = None) -> list[str]:
    """The verbatim excerpt lines of one incident: of one kind, or of one block by index."""
    blocks = _BY_ID[incident_id]["evidence_excerpts"]
    if index is not None:
        return list(blocks[index]["lines"])
    return [line for b in blocks if kind is None or b["kind"] == kind for line in b["lines"]]


def at(
    year: int, month: int, day: int, hh: int = 12, mm: int = 0, ss: float = 0, utc_h: float = 0
) -> float:
    """Unix time of a wall-clock time at a UTC offset (hours). The threads often give only a
    date: noon UTC is then the placeholder."""
    zone = timezone(timedelta(hours=utc_h))
    whole = int(ss)
    micro = int(round((ss - whole) * 1e6))
    return datetime(year, month, day, hh, mm, whole, micro, tzinfo=zone).timestamp()


_DMESG_T = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\] (.*)$")


def dmesg_t(line: str) -> tuple[float, str]:
    """A `dmesg -T` line as the kernel record it prints: (time, text). dmesg -T prints local
    time without a zone; the threads do not say which, so it is read as UTC."""
    m = _DMESG_T.match(line)
    if not m:
        raise ValueError(f"not a dmesg -T line: {line!r}")
    when = datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y").replace(tzinfo=UTC)
    return when.timestamp(), m.group(2)


class Thread(Builder):
    """A Builder that writes only what it is given: the sources it adds carry null or
    `unavailable` for what the thread does not say (the lab Builder fills a quiet machine
    around a fault), and every probe not added is written `absent`."""

    def __init__(
        self,
        host: str,
        when: float,
        trigger: tuple[str, str | None] | tuple[str, str | None, str | None] = ("manual", None),
        boot_id: str = "boot-1",
    ):
        super().__init__(host, when, trigger=trigger, boot_id=boot_id)

    def meminfo(self, readings: list[tuple[float, int | None, int | None]]) -> "Thread":
        """(t, MemTotal, MemAvailable) readings in bytes; only the keys the thread gives."""

        def kb(total: int | None, available: int | None) -> dict[str, int]:
            keys = {"MemTotal": total, "MemAvailable": available}
            return {k: v // 1024 for k, v in keys.items() if v is not None}

        _, total, available = readings[0]
        used = total - available if total is not None and available is not None else None
        free = dict.fromkeys(
            ("free", "shared", "buff_cache", "swap_total", "swap_used", "swap_free"), None
        )
        self._put(
            "memory",
            {
                "meminfo_kb": kb(total, available),
                "swaps": None,
                "free": {
                    "total": total,
                    "used": used,
                    "available": available,
                    "swap_devices": None,
                    **free,
                },
            },
            [{"t": iso(t), "meminfo_kb": kb(tot, av)} for t, tot, av in readings[1:]],
        )
        return self

    def table(self, rows: list[dict[str, Any]]) -> "Thread":
        """Processes the thread names: pid, ppid, name, cmdline, rss_bytes as given; the
        contract's other fields as unknown as it allows."""
        full = [
            {
                "pgid": r["pid"],
                "user": None,
                "state": "unknown",
                "swap_bytes": None,
                "start_time": iso(self.at),
                "cgroup": None,
                **r,
            }
            for r in rows
        ]
        self._put("processes", {"count": len(full), "unread": 0, "processes": full})
        return self

    def tails(self, *sources: dict[str, Any]) -> "Thread":
        """The logs probe, one source each (see `journal`, `logfile`)."""
        self._put("logs", {"sources": list(sources)})
        return self

    def journal(self, unit: str, lines: list[str]) -> dict[str, Any]:
        return {
            "name": unit,
            "kind": "journald",
            "target": unit,
            "since": iso(self.at - 6 * 3600),  # the collector's default look-back
            **_tail(lines),
        }

    def logfile(self, name: str, path: str, lines: list[str]) -> dict[str, Any]:
        tail = _tail(lines)
        return {
            "name": name,
            "kind": "file",
            "target": path,
            "size": tail["bytes"],
            "mtime": iso(self.at),
            **tail,
        }

    def nvidia(self, devices: list[dict[str, Any]], driver: str | None = None) -> "Thread":
        """NVIDIA devices: each given field as given, every other field null and named
        `unavailable` (absent: not in the thread)."""
        self._put(
            "gpu",
            {
                "nvidia": {
                    "backend": None,
                    "driver_version": driver,
                    "cuda_driver_version": None,
                    "nvml_version": None,
                    "devices": [_nvidia_device(i, d) for i, d in enumerate(devices)],
                    "status": "ok",
                    "reason": None,
                    "xid_events": None,
                },
                "amd": {"status": "absent", "reason": NOT_IN_THREAD, "devices": []},
            },
        )
        return self

    def amd(self, devices: list[dict[str, Any]]) -> "Thread":
        nulls = (
            "name",
            "pci_bus_id",
            "vram_total_bytes",
            "vram_used_bytes",
            "vis_vram_total_bytes",
            "vis_vram_used_bytes",
            "gtt_total_bytes",
            "gtt_used_bytes",
            "busy_pct",
        )
        out = []
        for i, d in enumerate(devices):
            device = {"index": i, "vendor": "amd", "card": f"card{i}", **dict.fromkeys(nulls)}
            device.update(d)
            device["unavailable"] = {k: UNKNOWN for k in nulls if device[k] is None}
            out.append(device)
        self._put(
            "gpu",
            {
                "nvidia": {
                    "backend": None,
                    "driver_version": None,
                    "cuda_driver_version": None,
                    "nvml_version": None,
                    "devices": [],
                    "status": "absent",
                    "reason": "no NVIDIA device",
                    "xid_events": None,
                },
                "amd": {"status": "ok", "reason": None, "devices": out},
            },
        )
        return self

    def bundle(self, archive: Path) -> str:
        """Write the bundle, every probe not added marked absent; its bundle id."""
        for probe in PROBES:
            if probe not in self.probes:
                self.absent(probe, NOT_IN_THREAD)
        path = self.write(archive)
        return orjson.loads((path / "manifest.json").read_bytes())["bundle_id"]


def _tail(lines: list[str]) -> dict[str, Any]:
    size = sum(len(line.encode()) + 1 for line in lines)
    return {"status": "ok", "bytes": size, "truncated": False, "lines": list(lines)}


def _nvidia_device(index: int, given: dict[str, Any]) -> dict[str, Any]:
    device: dict[str, Any] = {
        "index": index,
        "vendor": "nvidia",
        **dict.fromkeys(DEVICE_FIELDS),
        "processes": [],
        **given,
    }
    unavailable = {k: UNKNOWN for k in DEVICE_FIELDS if device[k] is None}
    if "processes" not in given:
        # The lists were not read: empty, and said so (the contract's form).
        unavailable["processes"] = UNKNOWN
    device["unavailable"] = unavailable
    return device


def gpu_process(pid: int, name: str, used: int | None) -> dict[str, Any]:
    return {"pid": pid, "type": "compute", "used_bytes": used, "name": name, "cmdline": None}


def check(
    name: str, kind: str, target: str, status: str, reason: str | None, answer: dict[str, Any]
) -> dict[str, Any]:
    """One check of `evidence check` (elapsed time and timeout are the Builder's)."""
    return {
        "name": name,
        "kind": kind,
        "target": target,
        "ok": status == "ok",
        "status": status,
        "reason": reason,
        "answer": answer,
    }


# The completion check an operator's setup runs, as it reads when nothing answered.
TIMED_OUT = check(
    "completion",
    "completion",
    "http://127.0.0.1:8000/v1/completions",
    "timeout",
    "no answer within 60 s",
    {},
)


def ollama(name: str, models: list[dict[str, Any]] | None) -> dict[str, Any]:
    """An Ollama server as the engines probe records it: /api/ps when `models` is given,
    nothing answering when it is None."""
    if models is None:
        return {
            "name": name,
            "kind": "ollama",
            "url": "http://127.0.0.1:11434",
            "status": "absent",
            "reason": "connection refused: Ollama not running",
            "endpoints": {},
        }
    return {
        "name": name,
        "kind": "ollama",
        "url": "http://127.0.0.1:11434",
        "status": "ok",
        "reason": None,
        "endpoints": {
            "/api/ps": {
                "status": "ok",
                "reason": None,
                "http_status": 200,
                "elapsed_ms": 2.0,
                "readings": {"models": models},
            }
        },
    }


# -- the incidents ------------------------------------------------------------------------------

Build = Callable[[Path], str]
BUILDERS: dict[str, Build] = {}


def incident(incident_id: str) -> Callable[[Build], Build]:
    def register(fn: Build) -> Build:
        assert incident_id in _BY_ID or not INCIDENTS, incident_id  # a typo, not a gap
        BUILDERS[incident_id] = fn
        return fn

    return register


def build(incident_id: str, archive: Path) -> str:
    """Write the incident's bundles (earlier ones first) into archive; the id to classify."""
    return BUILDERS[incident_id](archive)


@incident("cc-koboldai-chat-grows-cuda-oom")
def _kobold(archive: Path) -> str:
    """logs: the two lines of KoboldAI's error as TavernAI showed it (engine-log).
    health: a completion failing (every generation failed), its reason the error's words.
    gpu: 14.76 GiB total and 9.88 MiB free, as the error states them; per-process use and
    everything else unknown. Left out: the chat history growing (no context or cache metric
    in the thread). Placeholders: the time of day, the host name."""
    lines = lines_of("cc-koboldai-chat-grows-cuda-oom")
    total = int(14.76 * GIB)
    free = int(9.88 * MIB)
    b = Thread("colab", at(2023, 1, 25), ("healthcheck", "generate", "KoboldAI ran out of memory"))
    b.tails(b.logfile("koboldai", "koboldai.log", lines))
    b.checks(
        [
            check(
                "generate",
                "completion",
                "http://127.0.0.1:5000/api/v1/generate",
                "failed",
                "KoboldAI ran out of memory: CUDA out of memory",
                {},
            )
        ]
    )
    b.nvidia(
        [
            {
                "memory_total_bytes": total,
                "memory_free_bytes": free,
                "memory_used_bytes": total - free,
            }
        ]
    )
    return b.bundle(archive)


@incident("co-vllm-saturated-a100-hang")
def _vllm_saturated(archive: Path) -> str:
    """logs: the vLLM stats line, kept as the two lines the stored copy cut it into.
    health: /v1/models answering 200 and a completion failing with HTTP 500 (the client's
    APIError line as its reason), as the report states. Left out: the 4x A100 retry (another
    machine). Placeholders: the year (the log prints none: the thread's), the host."""
    stats = lines_of("co-vllm-saturated-a100-hang", "engine-log")
    (client,) = lines_of("co-vllm-saturated-a100-hang", "client-error")
    b = Thread(
        "a100-1",
        at(2023, 10, 27, 20, 44, 40),
        ("healthcheck", "completion", "HTTP 500 Internal Server Error"),
    )
    b.tails(b.logfile("vllm", "vllm.log", stats))
    b.checks(
        [
            check(
                "models",
                "http",
                "http://127.0.0.1:8000/v1/models",
                "ok",
                None,
                {"http_status": 200},
            ),
            check(
                "completion",
                "completion",
                "http://127.0.0.1:8000/v1/completions",
                "failed",
                client,
                {"http_status": 500, "body": "Internal Server Error"},
            ),
        ]
    )
    return b.bundle(archive)


@incident("co-vllm-ttft-grows-with-request-rate")
def _vllm_ttft(archive: Path) -> str:
    """No excerpts. health: a completion check that got no first token within its 60 s
    (the thread: TTFT of the order of 434 s at request-rate 200; 60 s is an operator's
    timeout, a placeholder). Left out: the service rate (~2.3 req/s) and the benchmark's
    totals: no probe records a client benchmark's figures."""
    b = Thread(
        "rtx3090x2",
        at(2024, 3, 7),
        ("healthcheck", "completion", "no first token within 60 s"),
    )
    b.checks([TIMED_OUT])
    return b.bundle(archive)


@incident("lr-vllm-n-gt-1-seq-id-map")
def _vllm_seq_map(archive: Path) -> str:
    """No excerpts and no figures: the thread says host RAM grew with requests until the
    server ran out and the service stopped. trigger: the health check an operator would
    have had fire when it stopped; no check output is quoted, so health is absent. Left
    out: the growth itself (no reading of it in the thread)."""
    b = Thread("qwen2vl-1", at(2025, 3, 27), ("healthcheck", "vllm", "the service stopped"))
    return b.bundle(archive)


@incident("lr-ollama-rocm-unload-floor-300mb")
def _ollama_rocm_floor(archive: Path) -> str:
    """Seven manual bundles, one per reading of the timeline: dedicated GPU memory (an AMD
    card's VRAM used, 24 GiB total) at 2, 153, 453, 751, 1051, 3092 and 5835 MiB; Ollama
    not answering in the first (stopped), answering with nothing loaded in the others (the
    thread: memory held 'with no model loaded'). Placeholders: one minute between
    readings (the thread gives the cycle count, not its time), the host. Left out: the
    readings after unloads 4-9 and 11-19 (not in the thread)."""
    readings: list[tuple[str, int, list[dict[str, Any]] | None]] = [
        ("ollama stopped", 2, None),
        ("ollama started", 153, []),
        ("after unload 1", 453, []),
        ("after unload 2", 751, []),
        ("after unload 3", 1051, []),
        ("after unload 10", 3092, []),
        ("after unload 20", 5835, []),
    ]
    # The minute of each reading: unload k comes k cycles after the start.
    minutes = [0, 1, 2, 3, 4, 11, 21]
    start = at(2025, 5, 6)
    last = ""
    for minute, (what, used_mib, models) in zip(minutes, readings, strict=True):
        b = Thread("rx7900xtx", start + 60 * minute, ("manual", what))
        b.amd(
            [
                {
                    "name": "AMD Radeon RX 7900 XTX",
                    "vram_total_bytes": 24 * GIB,
                    "vram_used_bytes": used_mib * MIB,
                }
            ]
        )
        b.engines([ollama("ollama", models)])
        last = b.bundle(archive)
    return last


@incident("su-llamacpp-sleep-mtp-vram-kept")
def _llamacpp_sleep(archive: Path) -> str:
    """logs: the eight llama-server start-up lines (fit to device memory: 25610 MiB
    projected against 23403 MiB free). gpu: the card's 24126 MiB total from the breakdown
    line; its use at the crash is not in the thread. trigger: the health check that fires
    when the server crashed on wake; no check output is quoted. Left out: the sleep state
    and the VRAM kept during it (described, never measured in the thread)."""
    b = Thread(
        "rtx3090",
        at(2026, 5, 21),
        ("healthcheck", "llama-server", "crashed on wake from sleep"),
    )
    b.tails(
        b.logfile("llama-server", "llama-server.log", lines_of("su-llamacpp-sleep-mtp-vram-kept"))
    )
    b.nvidia([{"name": "NVIDIA GeForce RTX 3090", "memory_total_bytes": 24126 * MIB}])
    return b.bundle(archive)


@incident("su-ollama-stopping-vram-not-released")
def _ollama_stopping(archive: Path) -> str:
    """No excerpts. engines: Ollama's /api/ps at 12:33 holding the model at 6.4 GB with its
    expiry at 12:17, when `ollama stop` was issued (what `ollama ps` shows as
    'Stopping...'). Placeholders: the model's name (not given), the time zone (read as
    UTC), the host. Left out: the runaway generation (no counter in the thread), later
    models forced to CPU (no reading)."""
    stopped = at(2024, 11, 11, 12, 17)
    b = Thread("rx7800xt", at(2024, 11, 11, 12, 33))
    model = {
        "name": "model-not-named",
        "model": "model-not-named",
        "size": int(6.4 * GB),
        "expires_at": datetime.fromtimestamp(stopped, UTC).isoformat(),
    }
    b.engines([ollama("ollama", [model])])
    return b.bundle(archive)


@incident("he-gb10-weight-load-kills-lmcache")
def _gb10_lmcache(archive: Path) -> str:
    """kernel: the two dmesg lines, their `dmesg -T` stamp as the record's time (00:39:44).
    health: the request that hit the lost cache and never answered (a timeout). Placeholders:
    the capture five minutes after the kill, the check's 60 s timeout, the host. Left out:
    the weight load's memory (no reading), the smaller processes killed before (no lines)."""
    kernel = [dmesg_t(line) for line in lines_of("he-gb10-weight-load-kills-lmcache")]
    killed = kernel[-1][0]
    b = Thread(
        "spark-head",
        killed + 300,
        ("healthcheck", "completion", "no answer within 60 s"),
    )
    b.kernel([text for _, text in kernel], times=[t for t, _ in kernel])
    b.checks([TIMED_OUT])
    return b.bundle(archive)


@incident("he-llamaserver-prompt-cache-daily-global-oom")
def _llamaserver_prompt_cache(archive: Path) -> str:
    """No excerpts. processes: llama-server at ~11 GB resident (the thread's anon-rss),
    the only process it names with a size. trigger: the knowledge base wedged (a health
    check on it). Placeholders: llama-server's pid and ppid, the time of day, the host.
    Left out: the global OOM kills of postgres (described, no kernel line quoted), the
    host's 15 GB as a meminfo reading (no available memory beside it)."""
    b = Thread("appliance", at(2026, 7, 16), ("healthcheck", "kb", "knowledge base wedged"))
    b.table(
        [
            {
                "pid": 1001,
                "ppid": 1000,
                "name": "llama-server",
                "cmdline": ["llama-server", "-ngl", "99"],
                "rss_bytes": 11 * GB,
            }
        ]
    )
    return b.bundle(archive)


@incident("he-gb10-startup-pool-collapse-nvrm")
def _gb10_startup(archive: Path) -> str:
    """No excerpts. memory: MemTotal 121.7 GiB, MemAvailable 22.5 GiB (the KV/graph phase).
    gpu: the GB10's unified pool at 119.2 of 121.7 GiB, the reporter's physical-pool figure,
    as the device's used and total. trigger: the engine's start failing (systemd). Left
    out: the 75 NV_ERR_NO_MEMORY lines (counted in the thread, none quoted), the weights'
    76.96 GiB (a log figure, no line quoted). Placeholders: the time, the host."""
    when = at(2026, 9, 14)
    b = Thread("spark-1", when, ("systemd", "vllm.service", "engine start failed"))
    b.meminfo([(when, int(121.7 * GIB), int(22.5 * GIB))])
    b.nvidia(
        [
            {
                "name": "NVIDIA GB10",
                "memory_total_bytes": int(121.7 * GIB),
                "memory_used_bytes": int(119.2 * GIB),
                "unified_memory": True,
                "unified_memory_basis": "the reporter's physical pool figure",
            }
        ],
        driver="580.173.02",
    )
    return b.bundle(archive)


@incident("ao-ollama-gptoss-numctx-runner-oom")
def _ollama_numctx(archive: Path) -> str:
    """logs: the five journal lines of ollama.service (the runner's CUDA OOM, the scheduler
    reloading), verbatim in the short format they were pasted in. Manual: the user was
    looking into why the model was not unloaded. Placeholder: the capture three seconds
    after the last line."""
    b = Thread("AI-DEV-VM-Neptun", at(2025, 8, 21, 1, 4, 30, utc_h=2))
    b.tails(b.journal("ollama.service", lines_of("ao-ollama-gptoss-numctx-runner-oom")))
    return b.bundle(archive)


@incident("is-ollama-keepalive-holds-24gb")
def _ollama_keepalive(archive: Path) -> str:
    """No excerpts. gpu: the RTX 3090's 24 GB fully allocated at 0% utilisation. engines:
    Ollama with deepseek-r1:32b loaded (the maintainer: kept by keep_alive; its size is not
    given). Manual. Placeholders: the time, the host."""
    b = Thread("rtx3090-win", at(2025, 1, 29))
    b.nvidia(
        [
            {
                "name": "NVIDIA GeForce RTX 3090",
                "memory_total_bytes": 24 * GIB,
                "memory_used_bytes": 24 * GIB,
                "utilization_gpu_pct": 0,
            }
        ]
    )
    b.engines([ollama("ollama", [{"name": "deepseek-r1:32b", "model": "deepseek-r1:32b"}])])
    return b.bundle(archive)


@incident("og-vllm-sigkill-api-server-orphans")
def _vllm_orphans(archive: Path) -> str:
    """No excerpts. At +8 s after the API server's SIGKILL: processes VLLM::EngineCore and
    VLLM::Worker_TP0/1 alive, re-parented to the launching process (not init); engines: vLLM
    not answering (the port is free); gpu: two RTX 5060 Ti 16 GB still holding memory for
    the workers, how much not given. trigger: the health check on the port. Placeholders:
    every pid (the launcher's too), the time, the host."""
    killed = at(2026, 9, 5)
    b = Thread("wsl-5060ti", killed + 8, ("healthcheck", "vllm", "connection refused"))
    launcher = 1000
    names = ["VLLM::EngineCore", "VLLM::Worker_TP0", "VLLM::Worker_TP1"]
    b.table(
        [
            {"pid": 2001 + i, "ppid": launcher, "name": n, "cmdline": [n], "rss_bytes": 0}
            for i, n in enumerate(names)
        ]
    )
    b.nvidia(
        [
            {
                "name": "NVIDIA GeForce RTX 5060 Ti",
                "memory_total_bytes": 16 * GIB,
                "processes": [gpu_process(2002 + i, names[1 + i], None)],
            }
            for i in range(2)
        ]
    )
    b.engines(
        [
            {
                "name": "vllm",
                "kind": "vllm",
                "url": "http://127.0.0.1:8000",
                "status": "absent",
                "reason": "connection refused: nothing listening",
                "endpoints": {},
            }
        ]
    )
    b.checks(
        [
            check(
                "health",
                "http",
                "http://127.0.0.1:8000/health",
                "absent",
                "connection refused",
                {},
            )
        ]
    )
    return b.bundle(archive)


@incident("bs-vllm-source-build-j64-oom")
def _vllm_build(archive: Path) -> str:
    """logs: the build's CalledProcessError line (cmake --build -j=64). Manual: the user
    was building. Left out: the OOM kill of a compiler (stated, no kernel line quoted), the
    compilers' memory (no process table), the 128 GB (no available memory beside it)."""
    b = Thread("build-128g", at(2024, 9, 27))
    b.tails(b.logfile("pip-install", "build.log", lines_of("bs-vllm-source-build-j64-oom")))
    return b.bundle(archive)


@incident("ac-ollama-r1-70b-fp16-on-128g")
def _ollama_r1_fp16(archive: Path) -> str:
    """logs: `journalctl -u ollama.service` as pasted, oldest first: systemd's three lines
    (11:16, the unit OOM-killed at a 123.9G peak) then Ollama's offload line (15:36,
    required 136.3 GiB against 14.5 + 15.2 GiB of GPU). Manual: the capture at 15:37 PST,
    when the user was collecting logs (the 6 h look-back holds both). Left out: the desktop
    being killed (no line), the 128 GB as meminfo (no available memory beside it)."""
    systemd = lines_of("ac-ollama-r1-70b-fp16-on-128g", index=1)
    offload = lines_of("ac-ollama-r1-70b-fp16-on-128g", index=0)
    b = Thread("adl", at(2025, 2, 24, 15, 37, utc_h=-8))
    b.tails(b.journal("ollama.service", systemd + offload))
    return b.bundle(archive)


@incident("fl-ninfer-health-ok-while-rejecting")
def _ninfer(archive: Path) -> str:
    """No excerpts. health: /health ok, /v1/models ok, a completion rejected with
    service_unavailable, as the report states; the trigger is the completion check.
    Placeholders: the port, the time, the host."""
    b = Thread("ninfer-1", at(2026, 9, 1), ("healthcheck", "completion", "service_unavailable"))
    b.checks(
        [
            check(
                "health", "http", "http://127.0.0.1:8080/health", "ok", None, {"http_status": 200}
            ),
            check(
                "models",
                "http",
                "http://127.0.0.1:8080/v1/models",
                "ok",
                None,
                {"http_status": 200},
            ),
            check(
                "completion",
                "completion",
                "http://127.0.0.1:8080/v1/chat/completions",
                "failed",
                "rejected: service_unavailable",
                {"body": "service_unavailable"},
            ),
        ]
    )
    return b.bundle(archive)


@incident("se-ollama-think-never-closes")
def _ollama_think(archive: Path) -> str:
    """No excerpts. health: /api/chat with think=true answering done_reason stop and empty
    content (its thinking long; its length is not given). Placeholders: the time, the host."""
    b = Thread("ollama-1", at(2026, 8, 15), ("healthcheck", "chat", "the content is empty"))
    b.checks(
        [
            check(
                "chat",
                "completion",
                "http://127.0.0.1:11434/api/chat",
                "failed",
                "the content is empty",
                {"http_status": 200, "finish_reason": "stop", "content_chars": 0},
            )
        ]
    )
    return b.bundle(archive)


@incident("neg-vllm-preallocates-90pct-by-design")
def _vllm_prealloc(archive: Path) -> str:
    """No excerpts. gpu: the A100 80GB at ~73 GB used, the thread's figure for what vLLM
    takes, so held by the vLLM process. Manual: a user looking. Placeholders: the vLLM
    pid, the time, the host. Left out: 'flat thereafter' (one reading, no history)."""
    b = Thread("a100-80g", at(2023, 7, 23))
    b.nvidia(
        [
            {
                "name": "NVIDIA A100-SXM4-80GB",
                "memory_total_bytes": 80 * GIB,
                "memory_used_bytes": 73 * GB,
                "processes": [gpu_process(3001, "vllm", 73 * GB)],
            }
        ]
    )
    return b.bundle(archive)


@incident("neg-xid79-fixed-by-dedicated-circuit")
def _xid79(archive: Path) -> str:
    """kernel: the seven NVRM lines (no time in the excerpt: logged 30 s before the
    capture, the Builder's default). trigger: the health check that fires when the GPU
    died under the engine; no check output is quoted. Left out: the power draw (330-345 W,
    no reading), the reboot that followed (no second bundle: no boot id in the thread)."""
    b = Thread("rtx5090", at(2026, 5, 23), ("healthcheck", "engine", "the GPU fell off the bus"))
    b.kernel(lines_of("neg-xid79-fixed-by-dedicated-circuit"))
    return b.bundle(archive)
