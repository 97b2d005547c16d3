"""GPUs, read before anything else: on a card about to be freed or restarted, the
per-process memory is the evidence that disappears first.

NVIDIA through NVML (nvidia-smi where pynvml cannot be imported), AMD through the
amdgpu sysfs files. A machine with neither gets `absent` with the reason; a driver
that answers NOT_SUPPORTED gets null fields with the reason, never 0; a driver that
hangs costs one call timeout and the probe reports `timeout` with what it had read.
"""

import shutil
import time
from typing import Any

from evidence.capture.gpu import GpuUnavailable, amdgpu, nvml, smi
from evidence.capture.probes import Context, Probe, Reading, human_bytes, register

SMI_TIMEOUT_S = 0.8
MARGIN_S = 0.1  # NVML gives up this long before the runner would abandon the probe


@register
class Gpu(Probe):
    name = "gpu"
    order = 5
    priority = 900
    timeout_s = 1.5
    samples = True
    essential = True

    def __init__(self, ctx: Context):
        super().__init__(ctx)
        self.session: nvml.Session | None = None
        self.amd = False

    def freeze(self) -> Reading:
        nvidia = self._nvidia()
        amd_devices = amdgpu.snapshot(self.ctx.sys)
        self.amd = bool(amd_devices)
        amd = (
            {"status": "ok", "reason": None, "devices": amd_devices}
            if amd_devices
            else {
                "status": "absent",
                "reason": "no amdgpu card under /sys/class/drm",
                "devices": [],
            }
        )
        record = {"nvidia": nvidia, "amd": amd}
        if nvidia["status"] == "timeout":
            return Reading("timeout", nvidia["reason"], record)
        if nvidia["devices"] or amd_devices:
            return Reading("ok", None, record)
        if nvidia["status"] == "error":
            return Reading("error", nvidia["reason"], record)
        return Reading("absent", f"{nvidia['reason']}; {amd['reason']}", record)

    def _nvidia(self) -> dict[str, Any]:
        base: dict[str, Any] = {
            "backend": None,
            "driver_version": None,
            "cuda_driver_version": None,
            "nvml_version": None,
            "devices": [],
        }
        if nvml.library_loads():
            session = nvml.Session(self.ctx.proc)
            session.worker.deadline = (
                self.deadline or time.monotonic() + self.timeout_s
            ) - MARGIN_S
            try:
                system = session.open()
                base.update(backend="nvml", **system)
                base["devices"] = session.snapshot()
                if not base["devices"]:
                    return {
                        **base,
                        "status": "absent",
                        "reason": "NVML reports no devices",
                        "xid_events": None,
                    }
                xid = session.watch_xid()
                self.session = session
                return {**base, "status": "ok", "reason": None, "xid_events": xid}
            except nvml.Hung as exc:
                # Keep what was read before the driver stopped answering.
                session.mark_unread(f"NVML stopped answering: {exc}")
                return {
                    **base,
                    "devices": session.devices,
                    "status": "timeout",
                    "reason": f"NVML: {exc}",
                    "xid_events": None,
                }
            except GpuUnavailable as exc:
                if exc.status == "error" or shutil.which("nvidia-smi") is None:
                    return {**base, "status": exc.status, "reason": exc.reason, "xid_events": None}
            except Exception as exc:  # NVML failed outside any one device: keep what was read
                session.mark_unread(f"NVML failed: {type(exc).__name__}: {exc}")
                return {
                    **base,
                    "devices": session.devices,
                    "status": "error",
                    "reason": f"NVML: {type(exc).__name__}: {exc}",
                    "xid_events": None,
                }
        elif shutil.which("nvidia-smi") is None:
            return {
                **base,
                "status": "absent",
                "xid_events": None,
                "reason": f"no NVIDIA driver ({nvml.LIBRARY} cannot be loaded)",
            }
        try:
            found = smi.snapshot(self.ctx.proc, SMI_TIMEOUT_S)
        except GpuUnavailable as exc:
            return {
                **base,
                "backend": "nvidia-smi",
                "status": exc.status,
                "reason": exc.reason,
                "xid_events": None,
            }
        status = "ok" if found["devices"] else "absent"
        return {
            **base,
            **found,
            "backend": "nvidia-smi",
            "status": status,
            "reason": None if found["devices"] else "nvidia-smi lists no devices",
            "xid_events": {
                "status": "unsupported",
                "devices": [],
                "reason": "nvidia-smi cannot deliver Xid events; read kernel.json",
            },
        }

    def sample(self) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        if self.session is not None:
            self.session.worker.deadline = time.monotonic() + self.sample_timeout_s - MARGIN_S
            out["nvidia"] = self.session.sample()
        if self.amd:
            out["amd"] = amdgpu.sample(self.ctx.sys)
        return out or None  # nvidia-smi alone is not re-run each second

    def close(self) -> None:
        if self.session is not None:
            self.session.close()

    def headline(self, record: dict[str, Any]) -> str:
        parts = []
        for vendor in ("nvidia", "amd"):
            for d in record[vendor]["devices"]:
                if d.get("memory_total_bytes") is not None:
                    memory = (
                        f"{human_bytes(d['memory_used_bytes'])} of "
                        f"{human_bytes(d['memory_total_bytes'])} used"
                    )
                elif vendor == "amd":
                    gtt = human_bytes(d["gtt_used_bytes"]), human_bytes(d["gtt_total_bytes"])
                    memory = f"GTT {gtt[0]} of {gtt[1]}"
                else:
                    memory = "aggregate memory unknown"
                unified = "; unified memory" if d.get("unified_memory") else ""
                procs = (
                    f"; {len(d['processes'])} processes" if d.get("processes") is not None else ""
                )
                parts.append(f"{d.get('name') or vendor} ({memory}{unified}{procs})")
        return "; ".join(parts) or "no GPU"
