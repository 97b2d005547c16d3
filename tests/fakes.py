"""Fake engines for the tests: small HTTP servers on loopback answering in each engine's
real format. Engines cannot run here (no GPU, no weights); their answers can.

Every payload is either a copy of shared/reference/samples (tests/fixtures/engines/,
composed from each project's source, see shared/reference/formats.md) or, where no
sample exists, composed here from the section of formats.md named beside it. Each
server records the method and path of every request, so a test can show the collector
only ever sent GET.
"""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SAMPLES = Path(__file__).parent / "fixtures" / "engines"
JSON = "application/json"
PROM = "text/plain; version=0.0.4; charset=utf-8"  # vLLM / prometheus_client (formats.md 4.1)

Route = tuple[int, str, bytes]


def sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes()


def as_json(value: Any) -> bytes:
    return json.dumps(value).encode()


# formats.md 6.4: GET /props of llama-server.
LLAMACPP_PROPS = {
    "default_generation_settings": {
        "id": 0,
        "id_task": -1,
        "n_ctx": 16384,
        "speculative": False,
        "is_processing": False,
        "params": {"n_predict": -1},
    },
    "total_slots": 2,
    "model_path": "/models/Qwen3-8B-Q4_K_M.gguf",
    "chat_template": "...",
    "modalities": {"vision": False},
    "build_info": "b6710-3df2244d",
    "is_sleeping": False,
}
# formats.md 4.4: vLLM /v1/models and /version.
VLLM_MODELS = {
    "object": "list",
    "data": [
        {
            "id": "Qwen/Qwen3-8B",
            "object": "model",
            "created": 1764449000,
            "owned_by": "vllm",
            "root": "Qwen/Qwen3-8B",
            "parent": None,
            "max_model_len": 32768,
            "permission": [],
        }
    ],
}
# A1111 modules/api/models.py ProgressResponse: progress, eta_relative, state (shared.state
# dict), current_image, textinfo.
A1111_PROGRESS = {
    "progress": 0.4,
    "eta_relative": 12.5,
    "state": {
        "skipped": False,
        "interrupted": False,
        "job": "txt2img",
        "job_count": 1,
        "job_timestamp": "20261129031200",
        "job_no": 0,
        "sampling_step": 8,
        "sampling_steps": 20,
    },
    "current_image": None,
    "textinfo": None,
}

ENGINES: dict[str, dict[str, Route]] = {
    "llama-swap": {
        "/running": (200, JSON, sample("llama-swap-running.json")),
        "/health": (200, "text/plain", b"OK"),
        "/logs": (200, "text/plain", sample("llama-swap-logs.txt")),
    },
    "ollama": {
        "/api/ps": (200, JSON, sample("ollama-api-ps.json")),
        "/api/version": (200, JSON, sample("ollama-api-version.json")),
    },
    "comfyui": {
        "/queue": (200, JSON, sample("comfyui-queue.json")),
        "/history": (200, JSON, sample("comfyui-history.json")),
        "/system_stats": (200, JSON, sample("comfyui-system-stats.json")),
    },
    "a1111": {
        "/sdapi/v1/memory": (200, JSON, sample("a1111-memory.json")),
        "/sdapi/v1/progress": (200, JSON, as_json(A1111_PROGRESS)),
    },
    "vllm": {
        "/metrics": (200, PROM, sample("vllm-metrics.txt")),
        "/health": (200, JSON, b""),
        "/v1/models": (200, JSON, as_json(VLLM_MODELS)),
        "/version": (200, JSON, b'{"version":"0.33.0"}'),
    },
    "sglang": {
        "/health": (200, JSON, b""),
        "/metrics": (200, PROM, sample("sglang-metrics.txt")),
        "/v1/models": (
            200,
            JSON,
            as_json(
                {
                    **VLLM_MODELS,
                    "data": [{"id": "Qwen/Qwen3-8B", "object": "model", "owned_by": "sglang"}],
                }
            ),
        ),
        "/get_server_info": (200, JSON, sample("sglang-server-info.json")),
    },
    "llama-server": {
        "/health": (200, JSON, sample("llamacpp-health-ok.json")),
        "/slots": (200, JSON, sample("llamacpp-slots-real-busy-b1-0c1e570.json")),
        "/metrics": (200, PROM, sample("llamacpp-metrics-real-busy-b1-0c1e570.txt")),
        "/props": (200, JSON, as_json(LLAMACPP_PROPS)),
        "/v1/models": (
            200,
            JSON,
            as_json(
                {
                    "object": "list",
                    "data": [{"id": "qwen3-8b", "object": "model", "owned_by": "llamacpp"}],
                }
            ),
        ),
    },
}


class FakeServer:
    """An HTTP server on 127.0.0.1 answering fixed routes; records every request. A path in
    `stalls` answers only after that many seconds, as a busy engine's event loop does."""

    def __init__(
        self,
        routes: dict[str, Route],
        default: Route = (404, "text/plain", b"not found"),
        stalls: dict[str, float] | None = None,
    ):
        self.routes = dict(routes)
        self.stalls = stalls or {}
        self.requests: list[tuple[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                outer.requests.append((self.command, self.path))
                time.sleep(outer.stalls.get(self.path.split("?")[0], 0))
                status, ctype, body = outer.routes.get(self.path.split("?")[0], default)
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class BlackHole:
    """Accepts connections and never answers: the port accepts, the application is dead."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.held: list[socket.socket] = []
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self._stop = True
        self.sock.close()
        for conn in self.held:
            conn.close()


def closed_port() -> int:
    """A loopback port with nothing listening on it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
