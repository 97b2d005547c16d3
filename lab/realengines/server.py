"""Real engines on loopback, started on a free port and driven the way callers drive them:
generations that hold slots, requests that wait for one, a stop (SIGSTOP) that leaves the
port accepting while the application answers nothing.

The driver POSTs, as clients do; the collector under test only ever GETs.
"""

import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from lab.realengines import build, model


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return answer.read()


def plain_values(text: str) -> dict[str, float]:
    """An exposition without labels (llama.cpp's) as name -> value, read apart from the
    collector's own parser."""
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def labelled_values(text: str, name: str) -> list[float]:
    """Each labelled series of one family in an exposition (vLLM's), in the page's order."""
    return [float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if ln.startswith(name + "{")]


class Served:
    """One engine process: started, waited for until healthy, stopped and resumed, closed."""

    name: str

    def __init__(self, argv: list[str], start_s: float, log: Path | None, env: dict | None = None):
        self._log = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            argv, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            self._wait_healthy(start_s)
        except BaseException:
            self.close()
            raise

    def healthy(self) -> bool:
        raise NotImplementedError

    def _wait_healthy(self, limit_s: float) -> None:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}")
            try:
                if self.healthy():
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} not healthy after {limit_s:.0f} s")

    def post(self, path: str, body: dict[str, Any]) -> None:
        """A request in the background, as a caller sends it; its answer is not needed."""
        data = json.dumps(body).encode()

        def send() -> None:
            request = urllib.request.Request(
                self.url + path, data, {"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=600) as answer:
                    answer.read()
            except OSError:
                pass  # the server was stopped or closed under it: the test is over

        threading.Thread(target=send, daemon=True).start()

    def until(self, ready: Callable[[Self], bool], limit_s: float = 30.0) -> None:
        deadline = time.monotonic() + limit_s
        while not ready(self):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} did not reach the state in {limit_s:.0f} s")
            time.sleep(0.05)

    def freeze(self) -> None:
        """SIGSTOP: the kernel still accepts connections on the port; nothing answers."""
        os.kill(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.thaw()
            os.killpg(self.proc.pid, signal.SIGTERM)  # vLLM's engine core is a child
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self._log is not subprocess.DEVNULL:
            self._log.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LlamaServer(Served):
    """llama-server serving a generated GGUF with `slots` parallel slots on one thread."""

    name = "llama-server"

    def __init__(
        self,
        shape: model.Shape = model.BUSY,
        slots: int = 2,
        context: int = 8192,
        log: Path | None = None,
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.alias = shape.name
        self.model = build.model_file(shape)
        argv = [
            str(build.server_binary()),
            "-m", str(self.model), "-a", self.alias,
            "--host", "127.0.0.1", "--port", str(self.port),
            "-np", str(slots), "-c", str(context), "-t", "1",
            "--metrics", "--seed", "42",
        ]  # fmt: skip
        super().__init__(argv, 60.0, log)

    def healthy(self) -> bool:
        return json.loads(get(f"{self.url}/health", 1.0)).get("status") == "ok"

    def metrics(self) -> dict[str, float]:
        """The exposition as the server printed it: name -> value (llama.cpp has no labels)."""
        return plain_values(get(f"{self.url}/metrics").decode())

    def generate(self, tokens: int, prompt: str = "the memory of the night") -> None:
        """A generation that holds a slot for `tokens` tokens (or waits for one): noise
        that never stops early (ignore_eos)."""
        self.post("/completion", {"prompt": prompt, "n_predict": tokens, "ignore_eos": True})


class VllmServer(Served):
    """vLLM's OpenAI server on CPU serving the generated Hugging Face model, one sequence at
    a time, so a second request waits."""

    name = "vllm"

    def __init__(self, log: Path | None = None, max_num_seqs: int = 1):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.model = str(build.vllm_model())
        argv = [
            str(build.vllm_python()), "-m", "vllm.entrypoints.openai.api_server",
            "--model", self.model, "--host", "127.0.0.1", "--port", str(self.port),
            "--enforce-eager", "--dtype", "float32", "--max-model-len", "512",
            "--max-num-seqs", str(max_num_seqs),
        ]  # fmt: skip
        env = {
            **os.environ,
            # 1 GiB of KV cache: the CPU backend's default is sized for real models.
            "VLLM_CPU_KVCACHE_SPACE": "1",
            # By default the CPU backend pins its worker's threads to one core; busy, they
            # starve any process the kernel places there (a collector started beside it
            # took 10-37 s to import). A GPU deployment has no such worker: not pinned.
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        }
        super().__init__(argv, 240.0, log, env)
        # The first request after start stalls the whole machine for 10-16 s on 2 cores (a
        # collector started then took 16 s to import): served once, it is a warm server.
        body = json.dumps({"model": self.model, "prompt": "the", "max_tokens": 4}).encode()
        request = urllib.request.Request(
            f"{self.url}/v1/completions", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as answer:
            answer.read()

    def healthy(self) -> bool:
        with urllib.request.urlopen(f"{self.url}/health", timeout=1.0) as answer:
            return answer.status == 200

    def generate(self, tokens: int, prompt: str = "the memory of the night") -> None:
        self.post(
            "/v1/completions",
            {"model": self.model, "prompt": prompt, "max_tokens": tokens, "ignore_eos": True},
        )

    def gauge(self, name: str) -> float:
        """One gauge of /metrics, summed over its series."""
        return sum(labelled_values(get(f"{self.url}/metrics").decode(), name))
