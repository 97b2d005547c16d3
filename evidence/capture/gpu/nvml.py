"""NVIDIA GPUs through NVML (the nvidia-ml-py binding, imported as pynvml).

Invariants:
- Every NVML call runs on one worker thread. A call that does not answer within
  CALL_TIMEOUT_S (a GPU that fell off the bus can block in the driver for minutes) is
  abandoned, the session is marked hung, and every later call fails at once: the
  capture pays one timeout, never one per call.
- Each field is read on its own: a NOT_SUPPORTED answer nulls that field and names
  why in `unavailable`; it never aborts the device, and it is never written as 0.
- pynvml is imported only after libnvidia-ml.so.1 is known to load, so a machine with
  no NVIDIA driver does not pay for the import.
Formats: ../shared/reference/formats.md section 10.
"""

import ctypes
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evidence.capture.gpu import GpuUnavailable, fill_unread, unavailable, unified_verdict
from evidence.capture.procfs import who

CALL_TIMEOUT_S = 1.0
LIBRARY = "libnvidia-ml.so.1"
XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError
ATS = 2  # NVML_DEVICE_ADDRESSING_MODE_ATS
MAX_EVENTS_PER_SAMPLE = 16
# NVML error codes (nvml.h) -> the bundle's statuses. Anything else is `error`.
_STATUS = {3: "unsupported", 13: "unsupported", 4: "denied", 10: "timeout"}
_ABSENT_AT_INIT = {9: "the NVIDIA kernel driver is not loaded", 12: "NVML library not found"}
_CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


class Hung(Exception):
    """An NVML call gave no answer within its timeout; NVML is not asked again."""


def library_loads() -> bool:
    """Whether the NVML shared library can be loaded at all (about a millisecond)."""
    try:
        ctypes.CDLL(LIBRARY)
    except OSError:
        return False
    return True


class _Worker:
    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self.deadline: float | None = None  # the probe's; no call waits past it
        self.hung: str | None = None
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        threading.Thread(target=self._loop, daemon=True, name="nvml").start()

    def _loop(self) -> None:
        while True:
            fn, args, kwargs, box, done = self._jobs.get()
            try:
                box["value"] = fn(*args, **kwargs)
            except Exception as exc:  # handed to the caller, who decides
                box["error"] = exc
            done.set()

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self.hung:
            raise Hung(self.hung)
        box: dict[str, Any] = {}
        done = threading.Event()
        wait = self.timeout_s
        if self.deadline is not None:
            wait = min(wait, max(0.0, self.deadline - time.monotonic()))
        self._jobs.put((fn, args, kwargs, box, done))
        if not done.wait(wait):
            self.hung = (
                f"{fn.__name__} gave no answer within {self.timeout_s:g} s"
                if wait >= self.timeout_s
                else f"{fn.__name__} was still running when the probe's time ran out"
            )
            raise Hung(self.hung)
        if "error" in box:
            raise box["error"]
        return box["value"]


class Session:
    """One NVML session for one capture: open, snapshot, samples, close."""

    def __init__(self, proc: Path, timeout_s: float = CALL_TIMEOUT_S):
        self.proc = proc
        self.worker = _Worker(timeout_s)
        self.nv: Any = None
        self.handles: list[Any] = []
        self.devices: list[dict[str, Any]] = []
        self.events: Any = None

    def _status(self, exc: Exception) -> tuple[str, str]:
        if isinstance(exc, self.nv.NVMLError):
            return _STATUS.get(getattr(exc, "value", None), "error"), str(exc)
        return "error", f"{type(exc).__name__}: {exc}"

    def open(self) -> dict[str, Any]:
        """Initialise NVML; the system identity. Raises GpuUnavailable or Hung."""
        try:
            import pynvml
        except ImportError as exc:
            raise GpuUnavailable(
                "absent", f"pynvml (nvidia-ml-py) cannot be imported: {exc}"
            ) from None
        self.nv = pynvml
        try:
            self.worker.call(pynvml.nvmlInit)
        except pynvml.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code in _ABSENT_AT_INIT:
                raise GpuUnavailable("absent", f"NVML: {exc}") from None
            raise GpuUnavailable("error", f"NVML could not start: {exc}") from None
        system: dict[str, Any] = {}
        for key, fn in (
            ("driver_version", pynvml.nvmlSystemGetDriverVersion),
            ("cuda_driver_version", pynvml.nvmlSystemGetCudaDriverVersion),
            ("nvml_version", pynvml.nvmlSystemGetNVMLVersion),
        ):
            system[key] = self._get(system, key, fn)
        return system

    def _get(
        self, record: dict[str, Any], field: str, fn: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        """One NVML call for one field: its value, or None with the reason recorded."""
        try:
            return self.worker.call(fn, *args, **kwargs)
        except Hung:
            raise
        except Exception as exc:  # a binding or decoding surprise is this field's failure
            unavailable(record, field, *self._status(exc))
            return None

    def snapshot(self) -> list[dict[str, Any]]:
        """Every device, filled into self.devices as it goes so a hang keeps what was read.

        One device that fails (a GPU that fell off the bus answers GPU_IS_LOST) becomes a
        stub with the reason; the other devices are still read.
        """
        nv = self.nv
        count = self.worker.call(nv.nvmlDeviceGetCount)
        for index in range(count):
            device: dict[str, Any] = {"index": index, "vendor": "nvidia", "unavailable": {}}
            self.devices.append(device)
            try:
                handle = self.worker.call(nv.nvmlDeviceGetHandleByIndex, index)
            except Hung:
                raise
            except Exception as exc:
                self.handles.append(None)
                status, reason = self._status(exc)
                fill_unread(device, status, f"nvmlDeviceGetHandleByIndex({index}): {reason}")
                continue
            self.handles.append(handle)
            self._identity(device, handle)
            self._memory(device, handle)
            self._gauges(device, handle)
            device["processes"] = self._processes(device, handle)
            ats = self._get(device, "addressing_mode", nv.nvmlDeviceGetAddressingMode, handle)
            device["unified_memory"], device["unified_memory_basis"] = unified_verdict(
                device, None if ats is None else ats == ATS
            )
        return self.devices

    def _live(self) -> list[tuple[dict[str, Any], Any]]:
        return [(d, h) for d, h in zip(self.devices, self.handles, strict=True) if h is not None]

    def mark_unread(self, reason: str) -> None:
        """After a hang: every field not yet read is null, with the hang as its reason."""
        for device in self.devices:
            fill_unread(device, "timeout", reason)

    def _identity(self, device: dict[str, Any], handle: Any) -> None:
        nv = self.nv
        device["name"] = self._get(device, "name", nv.nvmlDeviceGetName, handle)
        device["uuid"] = self._get(device, "uuid", nv.nvmlDeviceGetUUID, handle)
        pci = self._get(device, "pci_bus_id", nv.nvmlDeviceGetPciInfo, handle)
        bus_id = getattr(pci, "busId", None)
        device["pci_bus_id"] = bus_id.decode() if isinstance(bus_id, bytes) else bus_id

    def _memory(self, device: dict[str, Any], handle: Any) -> None:
        """Total/used/free: the v2 call where the driver has it, else v1, else unknown."""
        nv = self.nv
        fields = (
            "memory_total_bytes",
            "memory_used_bytes",
            "memory_free_bytes",
            "memory_reserved_bytes",
        )
        device.update(dict.fromkeys(fields))
        device["memory_api"] = None
        try:
            mem = self.worker.call(nv.nvmlDeviceGetMemoryInfo, handle, version=nv.nvmlMemory_v2)
            device["memory_api"], device["memory_reserved_bytes"] = "v2", mem.reserved
        except nv.NVMLError:
            try:
                mem = self.worker.call(nv.nvmlDeviceGetMemoryInfo, handle)
                device["memory_api"] = "v1"
                unavailable(
                    device,
                    "memory_reserved_bytes",
                    "unsupported",
                    "only the v1 memory call answered, and it has no reserved figure",
                )
            except Hung:
                raise
            except Exception as exc:
                status, reason = self._status(exc)
                unavailable(
                    device, "memory", status, f"nvmlDeviceGetMemoryInfo (v2 and v1): {reason}"
                )
                return
        device["memory_total_bytes"] = mem.total
        device["memory_used_bytes"] = mem.used
        device["memory_free_bytes"] = mem.free

    def _gauges(self, device: dict[str, Any], handle: Any) -> None:
        nv = self.nv
        util = self._get(device, "utilization", nv.nvmlDeviceGetUtilizationRates, handle)
        device["utilization_gpu_pct"] = getattr(util, "gpu", None)
        device["utilization_memory_pct"] = getattr(util, "memory", None)
        device["sm_clock_mhz"] = self._get(
            device, "sm_clock_mhz", nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_SM
        )
        device["sm_clock_max_mhz"] = self._get(
            device, "sm_clock_max_mhz", nv.nvmlDeviceGetMaxClockInfo, handle, nv.NVML_CLOCK_SM
        )
        milliwatts = self._get(device, "power_w", nv.nvmlDeviceGetPowerUsage, handle)
        device["power_w"] = None if milliwatts is None else milliwatts / 1000
        device["temperature_c"] = self._get(
            device, "temperature_c", nv.nvmlDeviceGetTemperature, handle, nv.NVML_TEMPERATURE_GPU
        )
        try:
            reasons = self.worker.call(nv.nvmlDeviceGetCurrentClocksEventReasons, handle)
        except nv.NVMLError_FunctionNotFound:
            # Drivers before r535 know the same bits by their older name.
            reasons = self._get(
                device, "clock_event_reasons", nv.nvmlDeviceGetCurrentClocksThrottleReasons, handle
            )
        except Hung:
            raise
        except Exception as exc:
            unavailable(device, "clock_event_reasons", *self._status(exc))
            reasons = None
        device["clock_event_reasons"] = (
            None
            if reasons is None
            else [name for bit, name in _CLOCK_EVENT_REASONS.items() if reasons & bit]
        )

    def _processes(
        self, device: dict[str, Any], handle: Any, identify: bool = True
    ) -> list[dict[str, Any]] | None:
        """Compute and graphics processes with their GPU memory (None: not available).

        None when neither list could be read: unknown, not an empty card. `identify` adds
        each process's name and command line, for the snapshot only.
        """
        nv = self.nv
        rows: list[dict[str, Any]] = []
        failures = []
        for kind, fn in (
            ("compute", nv.nvmlDeviceGetComputeRunningProcesses),
            ("graphics", nv.nvmlDeviceGetGraphicsRunningProcesses),
        ):
            try:
                found = self.worker.call(fn, handle)
            except Hung:
                raise
            except Exception as exc:
                failures.append((kind, *self._status(exc)))
                continue
            for proc in found:
                row = {"pid": proc.pid, "type": kind, "used_bytes": proc.usedGpuMemory}
                rows.append({**row, **who(self.proc, proc.pid)} if identify else row)
        if len(failures) == 2:
            kind, status, reason = failures[0]
            unavailable(device, "processes", status, f"running-process lists: {reason}")
            return None
        if failures:
            kind, status, reason = failures[0]
            unavailable(device, f"processes_{kind}", status, reason)
        if any(r["used_bytes"] is None for r in rows):
            unavailable(
                device,
                "process_memory",
                "unsupported",
                "NVML reports per-process GPU memory as not available "
                "(NVML_VALUE_NOT_AVAILABLE), as on Windows WDDM",
            )
        return rows

    def watch_xid(self) -> dict[str, Any]:
        """Register for Xid events on every device that supports them."""
        nv = self.nv
        try:
            self.events = self.worker.call(nv.nvmlEventSetCreate)
        except nv.NVMLError as exc:
            status, reason = self._status(exc)
            return {"status": status, "reason": f"nvmlEventSetCreate: {reason}", "devices": []}
        registered, refused = [], []
        for device, handle in self._live():
            try:
                if not self.worker.call(nv.nvmlDeviceGetSupportedEventTypes, handle) & XID_CRITICAL:
                    raise nv.NVMLError(nv.NVML_ERROR_NOT_SUPPORTED)
                self.worker.call(nv.nvmlDeviceRegisterEvents, handle, XID_CRITICAL, self.events)
                registered.append(device["index"])
            except nv.NVMLError as exc:
                refused.append(f"device {device['index']}: {exc}")
        if registered:
            return {"status": "ok", "reason": "; ".join(refused) or None, "devices": registered}
        return {
            "status": "unsupported",
            "reason": "Xid events: " + "; ".join(refused),
            "devices": [],
        }

    def sample(self) -> dict[str, Any]:
        """The gauges that answered at the freeze, once more; what fails now says why."""
        nv = self.nv
        out = []
        for device, handle in self._live():
            skip = device["unavailable"]
            row: dict[str, Any] = {"index": device["index"]}
            if "utilization" not in skip:
                util = self._get(row, "utilization", nv.nvmlDeviceGetUtilizationRates, handle)
                row["utilization_gpu_pct"] = getattr(util, "gpu", None)
                row["utilization_memory_pct"] = getattr(util, "memory", None)
            if "sm_clock_mhz" not in skip:
                row["sm_clock_mhz"] = self._get(
                    row, "sm_clock_mhz", nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_SM
                )
            if "power_w" not in skip:
                mw = self._get(row, "power_w", nv.nvmlDeviceGetPowerUsage, handle)
                row["power_w"] = None if mw is None else mw / 1000
            if device["memory_api"]:
                version = nv.nvmlMemory_v2 if device["memory_api"] == "v2" else None
                mem = self._get(row, "memory", nv.nvmlDeviceGetMemoryInfo, handle, version=version)
                row["memory_used_bytes"] = getattr(mem, "used", None)
            if "processes" not in skip:
                row["processes"] = self._processes(row, handle, identify=False)
            out.append(row)
        return {"devices": out, "xid": self._drain_xid()}

    def _drain_xid(self) -> list[dict[str, Any]]:
        if self.events is None:
            return []
        nv = self.nv
        addresses = {ctypes.cast(h, ctypes.c_void_p).value: d["index"] for d, h in self._live()}
        events = []
        for _ in range(MAX_EVENTS_PER_SAMPLE):
            try:
                data = self.worker.call(nv.nvmlEventSetWait, self.events, 0)
            except nv.NVMLError:
                break  # NVML_ERROR_TIMEOUT: nothing more waiting
            events.append(
                {
                    "device": addresses.get(ctypes.cast(data.device, ctypes.c_void_p).value),
                    "xid": data.eventData,
                }
            )
        return events

    def close(self) -> None:
        if self.worker.hung or self.nv is None:
            return
        try:
            if self.events is not None:
                self.worker.call(self.nv.nvmlEventSetFree, self.events)
            self.worker.call(self.nv.nvmlShutdown)
        except (self.nv.NVMLError, Hung):
            pass  # leaving NVML initialised at exit costs nothing
