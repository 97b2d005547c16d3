"""Where the resident recorder keeps its ring and listens, and how a capture asks it for the
last hour: shared by the recorder (evidence.record) and the collector's probe, which may not
import each other.

The socket lives in the archive root, a 0700 directory: only its owner (root, for the
system's archive) can open it. One request per connection, one line of JSON:
{"since": UNIX_SECONDS}. The answer is one line of JSON, the head, then the files' bytes in
the order the head lists them ("files": [[name, bytes], ...]).
"""

import json
import socket
from pathlib import Path
from typing import Any

SOCKET = "recorder.sock"
RING = "recorder.ring"
# The history files a capture holds: one per source, each line as the source's samples line.
HISTORY_SUFFIX = ".history.jsonl"


def socket_path(root: Path) -> Path:
    return root / SOCKET


def send_head(conn: socket.socket, head: dict[str, Any], files: list[tuple[str, bytes]]) -> None:
    """The recorder's answer: the head, naming each file and its size, then the files."""
    head = {**head, "files": [[name, len(data)] for name, data in files]}
    conn.sendall(json.dumps(head).encode() + b"\n")
    for _, data in files:
        conn.sendall(data)


def read_answer(conn: socket.socket) -> tuple[dict[str, Any], list[tuple[str, bytes]]]:
    """The capture's side: the head and the files, whole. Raises OSError (the socket's
    timeout included) or ValueError for an answer cut short or not in this form."""
    stream = conn.makefile("rb")
    head = json.loads(stream.readline())
    files = []
    for name, size in head.pop("files"):
        data = stream.read(size)
        if len(data) != size:
            raise ValueError(f"the recorder's answer ended inside {name}")
        files.append((name, data))
    return head, files
