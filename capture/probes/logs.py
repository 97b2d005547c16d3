"""Log tails: configured files, journald units, docker/podman containers.

Each source is bounded by bytes, by lines and by the probe's deadline; a source that
hangs (a wedged docker daemon) costs its share of the time and is recorded as
`timeout`, the others are still kept. Carriage returns become line breaks, because
progress bars (tqdm) rewrite one line with \\r and a tail would show only the last
frame. Bytes that are not UTF-8 are kept as backslash escapes, never dropped.
"""

import contextlib
import os
import re
import shutil
import signal
import stat
import subprocess
import time
from typing import Any

from capture.clock import iso
from capture.config import RUNTIMES, LogSource
from capture.probes import Probe, Reading, register, unreadable

_BREAK = re.compile(r"\r\n|\r|\n")
_MARGIN_S = 0.2  # the probe returns what it has this long before the runner gives up on it


@register
class Logs(Probe):
    name = "logs"
    order = 70
    priority = 100
    timeout_s = 2.5

    def freeze(self) -> Reading:
        sources = self.ctx.config.log_sources()
        if not sources:
            return Reading(
                "skipped",
                "no logs configured ([[logs]], or unit/container of an [[engines]] entry)",
                {"sources": []},
            )
        # Stop a little before the runner would abandon the probe, to keep what was read.
        self.stop_at = (self.deadline or time.monotonic() + self.timeout_s) - _MARGIN_S
        results = [self._one(source) for source in sources]
        ok = [r for r in results if r["status"] == "ok"]
        status = "ok" if ok else results[0]["status"]
        reason = None if ok else "no log source could be read"
        return Reading(status, reason, {"sources": results})

    def headline(self, record: dict[str, Any]) -> str:
        return "; ".join(
            f"{s['name']}: {s['status']}"
            + (f" ({len(s['lines'])} lines)" if s["status"] == "ok" else "")
            for s in record["sources"]
        )

    def _one(self, source: LogSource) -> dict[str, Any]:
        since = time.time() - self.ctx.config.limits.log_since_s
        if source.path:
            entry = {"name": source.name, "kind": "file", "target": source.path}
            return {**entry, **self._file(source.path)}
        if source.unit:
            entry = {
                "name": source.name,
                "kind": "journald",
                "target": source.unit,
                "since": iso(since),
            }
            if shutil.which("journalctl") is None:
                return {**entry, "status": "absent", "reason": "journalctl is not installed"}
            cmd = [
                "journalctl",
                "-u",
                source.unit,
                "--since",
                f"@{int(since)}",
                "--no-pager",
                "-q",
                "-o",
                "short-iso-precise",
                "-n",
                str(self.ctx.config.limits.log_lines),
            ]
            return {**entry, **self._command(cmd)}
        entry = {
            "name": source.name,
            "kind": "container",
            "target": source.container,
            "since": iso(since),
        }
        runtimes = [source.runtime] if source.runtime else list(RUNTIMES)
        runtime = next((r for r in runtimes if shutil.which(r)), None)
        if runtime is None:
            return {
                **entry,
                "status": "absent",
                "reason": f"{' or '.join(runtimes)} is not installed",
            }
        cmd = [
            runtime,
            "logs",
            "--since",
            str(int(since)),
            "--timestamps",
            "--tail",
            str(self.ctx.config.limits.log_lines),
            str(source.container),
        ]
        return {**entry, "runtime": runtime, **self._command(cmd)}

    def _file(self, path: str) -> dict[str, Any]:
        cap = self.ctx.config.limits.log_bytes
        try:
            # O_NONBLOCK: a FIFO named by mistake must not block the open.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            reading = unreadable(exc, path)
            return {"status": reading.status, "reason": reading.reason}
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return {"status": "error", "reason": f"{path}: not a regular file"}
            start = max(0, info.st_size - cap)
            data = os.pread(fd, cap, start)
        except OSError as exc:
            return {"status": "error", "reason": f"{path}: {exc.strerror}"}
        finally:
            os.close(fd)
        if start:
            # The cut fell inside a line: drop the fragment rather than keep half a line.
            data = data[data.find(b"\n") + 1 :] if b"\n" in data else data
        return {
            "status": "ok",
            "size": info.st_size,
            "mtime": iso(info.st_mtime),
            **self._lines(data, truncated=start > 0),
        }

    def _command(self, cmd: list[str]) -> dict[str, Any]:
        budget = self.stop_at - time.monotonic()
        if budget <= 0:
            return {"status": "timeout", "reason": "no time left in the logs probe's budget"}
        try:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                close_fds=True,
                start_new_session=True,  # its own group, so a stuck grandchild goes with it
            )
        except OSError as exc:
            return {"status": "error", "reason": f"{cmd[0]}: {exc.strerror}"}
        try:
            out, _ = proc.communicate(timeout=budget)
        except subprocess.TimeoutExpired:
            # Our own child's group (journalctl, the docker client), never the service it reads.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=0.2)
            return {
                "status": "timeout",
                "reason": f"{' '.join(cmd[:2])} gave no answer within {budget:.1f} s",
            }
        if proc.returncode != 0:
            head = out[:300].decode("utf-8", "backslashreplace").strip()
            return {"status": "error", "reason": f"{cmd[0]} exited {proc.returncode}: {head}"}
        cap = self.ctx.config.limits.log_bytes
        truncated = len(out) > cap
        if truncated:
            out = out[-cap:]
            out = out[out.find(b"\n") + 1 :] if b"\n" in out else out
        return {"status": "ok", **self._lines(out, truncated)}

    def _lines(self, data: bytes, truncated: bool) -> dict[str, Any]:
        lines = _BREAK.split(data.decode("utf-8", "backslashreplace"))
        if lines and lines[-1] == "":
            lines.pop()
        keep = self.ctx.config.limits.log_lines
        return {
            "bytes": len(data),
            "truncated": truncated or len(lines) > keep,
            "lines": lines[-keep:],
        }
