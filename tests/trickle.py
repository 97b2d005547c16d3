"""A fake engine that trickles its answer: the headers at once, then one byte at a time.

Shared by tests/test_httpget.py and bench/serve_flood.py: the attack where the port
answers, the status is 200, and the body never quite arrives.
"""

import socket
import threading
import time
from typing import Any


class Trickle:
    """Answers every request with Content-Length `total` and then one byte every `every_s`;
    counts the connections it has open."""

    def __init__(self, every_s: float = 0.02, total: int = 1_000_000):
        self.every_s = every_s
        self.total = total
        self.open = 0
        self._count = threading.Lock()
        self._stop = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        with self._count:
            self.open += 1
        try:
            conn.recv(65536)  # the request head; its content does not matter
            head = f"HTTP/1.1 200 OK\r\nContent-Length: {self.total}\r\n\r\n"
            conn.sendall(head.encode())
            for _ in range(self.total):
                if self._stop.wait(self.every_s):
                    return
                conn.sendall(b"x")
        except OSError:
            pass  # the client gave up: what the collector is meant to do
        finally:
            with self._count:
                self.open -= 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self.sock.close()

    def __enter__(self) -> "Trickle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def wait_until(condition: Any, timeout_s: float, every_s: float = 0.05) -> bool:
    """Poll `condition` until it holds or timeout_s passes; whether it held."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(every_s)
    return True
