"""The resident recorder's last hour: asked for first, over its root-only socket.

The capture's own window starts at the trigger; the recorder (`evidence record`) has been
sampling all along. Its answer becomes one history file per source, each line in the form
of that source's samples, so the analyst reads the hour before and the window as one
series. No recorder running is a status (absent), and the capture goes on as without it.
"""

import socket
import time
from typing import Any

from evidence.archive.clock import iso
from evidence.archive.recorder import read_answer, socket_path
from evidence.capture.probes import Probe, Reading, register


@register
class Recorder(Probe):
    name = "recorder"
    order = 2  # before the other sources: the history should end where the capture begins
    # Below the kernel log and the capture's own readings: an hour of history is the
    # largest thing in a bundle and the first to give way on a full disk, before the logs.
    priority = 350
    timeout_s = 1.0

    def freeze(self) -> Reading:
        if self.ctx.root is None:
            return Reading("absent", "no archive given to find the recorder in")
        settings = self.ctx.config.recorder
        if self.ctx.trigger == "cron":
            # A baseline every few minutes would copy the same hour again and again; the
            # ring keeps it for the next incident.
            return Reading("skipped", "a cron baseline takes no history from the recorder")
        path = socket_path(self.ctx.root)
        if not path.exists():
            return Reading("absent", f"no recorder running (no socket at {path})")
        since = self.ctx.started - settings.history_s
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(max(0.05, self.deadline - time.monotonic()))
                conn.connect(str(path))
                conn.sendall(b'{"since": %.3f}\n' % since)
                head, files = read_answer(conn)
        except (ConnectionRefusedError, FileNotFoundError):
            return Reading("absent", f"no recorder running (nothing listens on {path})")
        except TimeoutError:
            return Reading("timeout", "the recorder did not answer in time")
        except (OSError, ValueError) as exc:
            return Reading("error", f"the recorder's answer could not be read: {exc}")
        record: dict[str, Any] = {
            "asked_from": iso(since),
            **head,
            "files": [name for name, _ in files],
        }
        return Reading(record=record, files=files)

    def headline(self, record: dict[str, Any]) -> str:
        if not record.get("records"):
            return "the recorder holds nothing for the last hour"
        return f"{record['records']} readings from {record['from']} to {record['to']}" + (
            f"; {record['skipped']} damaged records skipped" if record.get("skipped") else ""
        )
