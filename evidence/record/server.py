"""The recorder's socket: a capture asks, the recorder answers with the last hour.

The socket is made in the archive root (0700) with mode 0600: only the archive's owner can
ask. One question per connection, answered on the server's one thread; an answer is a
matter of milliseconds, and a capture that asks at the same time waits that long.
"""

import contextlib
import json
import socket
import threading
from pathlib import Path

from evidence.archive.recorder import send_head, socket_path
from evidence.record.recorder import Recorder

REQUEST_LIMIT = 4096
CLIENT_TIMEOUT_S = 2.0


class RecorderBusy(Exception):
    """Another recorder already answers on this archive's socket."""


class Server:
    def __init__(self, recorder: Recorder, root: Path):
        self.recorder = recorder
        self.path = socket_path(root)
        self.sock = self._bind()
        self.thread = threading.Thread(target=self._serve, name="record-socket", daemon=True)

    def _bind(self) -> socket.socket:
        if self.path.exists():
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                try:
                    probe.connect(str(self.path))
                except OSError:
                    self.path.unlink()  # left by a recorder that died: nobody listens
                else:
                    raise RecorderBusy(f"another recorder already listens on {self.path}")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(self.path))
            self.path.chmod(0o600)
            sock.listen(8)
        except OSError:
            sock.close()
            raise
        return sock

    def start(self) -> None:
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed: the recorder is stopping
            with conn, contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                conn.settimeout(CLIENT_TIMEOUT_S)
                request = json.loads(conn.makefile("rb").readline(REQUEST_LIMIT))
                head, files = self.recorder.answer(float(request["since"]))
                send_head(conn, head, files)

    def close(self) -> None:
        self.sock.close()
        with contextlib.suppress(OSError):
            self.path.unlink()
