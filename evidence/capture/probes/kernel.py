"""The kernel ring buffer, read from /dev/kmsg directly (no fork of dmesg).

Keeps the last lines, plus every line of the look-back that names an OOM kill, an
NVIDIA driver event (NVRM, Xid, NV_ERR_NO_MEMORY) or a hung task: the lines the seeds
confirm a memory theory with. Formats: ../shared/reference/formats.md sections 9.1-9.2.
"""

import errno
import os
import re
import time
from typing import Any

from evidence.archive.clock import iso
from evidence.capture.probes import Probe, Reading, register, unreadable
from evidence.capture.procfs import parse_kmsg_record
from evidence.schemas import catalog

# The lines the analyst tags and marks for the kernel (evidence/schemas/lines.toml): one
# catalog, so a line the analyst reads is never one the collector dropped.
WORTH_KEEPING = re.compile(
    "|".join(f"(?:{t['pattern']})" for t in catalog("lines")["tag"] if t.get("kernel")),
    re.IGNORECASE,
)


@register
class Kernel(Probe):
    name = "kernel"
    order = 60
    priority = 400
    timeout_s = 1.5

    def freeze(self) -> Reading:
        try:
            fd = os.open(self.ctx.kmsg, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            reading = unreadable(exc, str(self.ctx.kmsg))
            if reading.status == "denied":
                reading.reason = (
                    f"{self.ctx.kmsg}: {exc.strerror} (kernel.dmesg_restrict=1; "
                    "run as root or with CAP_SYSLOG)"
                )
            return reading
        try:
            records = _drain(fd)
        finally:
            os.close(fd)
        return Reading(record=self._select(records))

    def _select(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        limits = self.ctx.config.limits
        now_wall, now_mono = time.time(), time.monotonic()
        oldest_kept = now_mono - limits.kernel_lookback_s
        tail_from = max(0, len(records) - limits.kernel_tail)
        lines = []
        for i, rec in enumerate(records):
            uptime_s = rec["ts_us"] / 1e6
            matched = bool(WORTH_KEEPING.search(rec["text"])) and uptime_s >= oldest_kept
            if matched or i >= tail_from:
                lines.append(
                    {
                        "seq": rec["seq"],
                        # printk stamps with the monotonic clock; the wall time is derived.
                        "time": iso(now_wall - (now_mono - uptime_s)),
                        "uptime_s": round(uptime_s, 6),
                        "level": rec["level"],
                        "facility": rec["facility"],
                        "matched": matched,
                        "text": rec["text"],
                    }
                )
        return {"source": str(self.ctx.kmsg), "records_read": len(records), "lines": lines}

    def headline(self, record: dict[str, Any]) -> str:
        matched = sum(line["matched"] for line in record["lines"])
        return f"{record['records_read']} records; {matched} OOM, NVRM/Xid or hung-task lines kept"


def _drain(fd: int) -> list[dict[str, Any]]:
    """Every record currently in the ring buffer; /dev/kmsg returns one record per read."""
    records = []
    while True:
        try:
            chunk = os.read(fd, 16384)
        except BlockingIOError:
            return records
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                continue  # the record was overwritten while we read; the next one follows
            raise
        if not chunk:
            return records
        parsed = parse_kmsg_record(chunk.decode("utf-8", "backslashreplace"))
        if parsed is not None:
            records.append(parsed)
