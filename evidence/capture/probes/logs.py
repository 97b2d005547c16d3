"""Log tails: configured files, journald units, docker/podman containers.

Each source is bounded by bytes, by lines and by the probe's deadline; a source that
hangs (a wedged docker daemon) costs its share of the time and is recorded as
`timeout`, the others are still kept. Carriage returns become line breaks, because
progress bars (tqdm) rewrite one line with \\r and a tail would show only the last
frame. Bytes that are not UTF-8 are kept as backslash escapes, never dropped.

Runs of NUL bytes are skipped and counted (`nul_bytes`): after a `copytruncate` the
engine goes on writing at its old offset, and the file is a hole of NULs followed by
the lines that matter (`CUDA out of memory`). A NUL ends a line, as a newline does.

Only regular files outside the kernel's pseudo-filesystems are opened: opening a device
can act (a watchdog, a tape), and reading /proc/kmsg consumes the kernel's messages.
The collector changes nothing on the machine.
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

from evidence.archive.clock import iso
from evidence.capture.config import RUNTIMES, LogSource
from evidence.capture.probes import Probe, Reading, register, unreadable
from evidence.capture.redact import redact_key_blocks

_BREAK = re.compile(r"\r\n|\r|\n")
_NULS = re.compile(rb"\x00+")
_LINE_END = re.compile(rb"[\r\n\x00]")
_PSEUDO_ROOTS = ("/proc", "/sys")  # a device under /dev is not a regular file
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
            named = os.stat(path)
        except OSError as exc:
            reading = unreadable(exc, path)
            return {"status": reading.status, "reason": reading.reason}
        refusal = _refusal(path, named)
        if refusal:
            return {"status": "error", "reason": refusal}
        try:
            # O_NONBLOCK: a file swapped for a FIFO since the stat must not block the open.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            reading = unreadable(exc, path)
            return {"status": reading.status, "reason": reading.reason}
        try:
            info = os.fstat(fd)
            if (info.st_dev, info.st_ino) != (named.st_dev, named.st_ino):
                return {"status": "error", "reason": f"{path}: replaced while being opened"}
            start = max(0, info.st_size - cap)
            # One byte before the cut says whether it fell inside a line.
            data = os.pread(fd, cap + bool(start), start - bool(start))
        except OSError as exc:
            return {"status": "error", "reason": f"{path}: {exc.strerror}"}
        finally:
            os.close(fd)
        if start:
            data = _without_fragment(data)
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
            out = _without_fragment(out[-cap - 1 :])
        return {"status": "ok", **self._lines(out, truncated)}

    def _lines(self, data: bytes, truncated: bool) -> dict[str, Any]:
        text = _NULS.sub(b"\n", data).decode("utf-8", "backslashreplace")
        # A private key spans lines: redacted whole here, or each base64 line would pass.
        lines = _BREAK.split(redact_key_blocks(text))
        if lines and lines[-1] == "":
            lines.pop()
        keep = self.ctx.config.limits.log_lines
        nuls = data.count(0)
        return {
            "bytes": len(data),
            "truncated": truncated or len(lines) > keep,
            # A NUL run next to a newline leaves an empty line that was never written.
            "lines": [line for line in lines[-keep:] if line or not nuls],
            **({"nul_bytes": nuls} if nuls else {}),
        }


def _refusal(path: str, info: os.stat_result) -> str | None:
    """Why a configured log is not read, if it is not an ordinary file."""
    if not stat.S_ISREG(info.st_mode):
        return f"{path}: not a regular file"
    real = os.path.realpath(path)
    if any(real == root or real.startswith(root + "/") for root in _PSEUDO_ROOTS):
        return (
            f"{path}: a kernel file ({real}), not a log: reading it may consume what it "
            "holds, as /proc/kmsg does; the kernel probe reads /dev/kmsg, which does not"
        )
    return None


def _without_fragment(data: bytes) -> bytes:
    """Drop the part line the cut fell inside, given the byte before the cut first. A cut
    just after a line's end (or a NUL) drops nothing; a tail with no end in it is one
    line, all of it kept."""
    before, data = data[:1], data[1:]
    if before in (b"\n", b"\r", b"\x00"):
        return data
    end = _LINE_END.search(data)
    return data[end.end() :] if end else data
