"""The engine faults, brought about with stateful fake engines (lab/fakes: real processes
answering in the real formats, holding real memory) driven by a real load generator, on a
fake NVML driver (tests/fakenvml) whose per-process memory is each engine's resident set
at the moment of the capture, on a GB10-like unified-memory device
(tests/fixtures/nvml/gb10.scenario, formats.md 10.3).

Each scenario writes its config in start() (its ports are chosen then) and points the
capture at the fake NVML through the environment it inherits. Three scenarios are
captured by `evidence check` (Scenario.command = "check"): their evidence is a health
check's answer, and only `evidence check` runs the [[checks]] (trigger healthcheck:NAME).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from lab.core import Lab, Scenario, register

ROOT = Path(__file__).resolve().parent.parent.parent
NVML_SOURCE = ROOT / "tests" / "fakenvml" / "fakenvml.c"
GB10 = ROOT / "tests" / "fixtures" / "nvml" / "gb10.scenario"
READY_S = 30.0
# Every scenario of the lab reads the one kernel ring buffer of this machine: an OOM kill
# another scenario provoked minutes ago is not this reproduction's evidence (host-exhaustion
# counts kills of the last hour). Read only the last minute of it, and no unmatched tail.
LAB_CAPTURE = """
[capture]
kernel_lookback = "60s"
kernel_tail = 0
"""


@dataclass
class Fake:
    proc: subprocess.Popen
    pid: int
    url: str


def rss(pid: int) -> int:
    """A process's resident memory in bytes, as the kernel counts it."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise ProcessLookupError(pid)


def wait_for(what: str, test: Callable[[], Any], timeout_s: float = READY_S) -> Any:
    """Poll test() until it returns something true; fail the scenario saying what."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = test()
        if value:
            return value
        time.sleep(0.1)
    raise TimeoutError(f"{what}: not within {timeout_s:g} s")


def fetch(url: str, timeout_s: float = 2.0) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            return answer.read()
    except OSError:
        return None


def results(log: Path) -> list[dict[str, Any]]:
    """The load generator's finished requests so far."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


class EngineScenario(Scenario):
    """What the engine scenarios share: fakes, load, the fake GPU and the capture's env."""

    name = "engine-scenario"  # not registered
    expect = ()
    window_s = 20.0
    gpu_util: ClassVar[int] = 90  # the fake device's utilisation, in percent

    def unavailable(self) -> str | None:
        if not (shutil.which("cc") or shutil.which("gcc")):
            return "building the fake NVML library needs a C compiler (cc)"
        return None

    # -- processes -----------------------------------------------------------------------

    def fake(self, lab: Lab, kind: str, *args: str, label: str | None = None) -> Fake:
        """A fake engine of kind, as a real process; returns once it answers."""
        ready = lab.workdir / f"ready-{label or kind}.json"
        proc = lab.spawn(
            [sys.executable, "-m", "lab.fakes.engine", "--kind", kind, "--port", "0"]
            + ["--ready", str(ready), *args],
            cwd=ROOT,
        )
        info = self.ready(ready, proc)
        return Fake(proc, info["pid"], f"http://127.0.0.1:{info['port']}")

    @staticmethod
    def ready(path: Path, proc: subprocess.Popen | None = None) -> dict[str, Any]:
        def test() -> dict[str, Any] | None:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"{path.name}: the fake exited {proc.returncode}")
            return json.loads(path.read_text()) if path.exists() else None

        return wait_for(f"{path.name} (the fake engine's ready file)", test)

    @staticmethod
    def load(lab: Lab, url: str, *args: str, label: str = "load") -> Path:
        """The load generator as a real process; returns its log of finished requests."""
        log = lab.workdir / f"{label}.jsonl"
        lab.spawn(
            [sys.executable, "-m", "lab.fakes.load", "--url", url, "--log", str(log), *args],
            cwd=ROOT,
        )
        return log

    # -- the GPU and the capture's environment ------------------------------------------------

    def gpu(self, lab: Lab, holders: list[int]) -> None:
        """The fake NVML, built here, listing each holder with its resident memory now."""
        out = lab.workdir / "nvml"
        out.mkdir(exist_ok=True)
        compiler = shutil.which("cc") or shutil.which("gcc")
        subprocess.run(
            [str(compiler), "-shared", "-fPIC", "-O1", "-o", str(out / "libnvidia-ml.so.1")]
            + [str(NVML_SOURCE)],
            check=True,
            capture_output=True,
        )
        compute = ",".join(f"{pid}:{rss(pid)}" for pid in holders)
        text = GB10.read_text()
        text = re.sub(r"(?m)^d0\.compute=.*$", f"d0.compute={compute}", text)
        text = re.sub(r"(?m)^d0\.graphics=.*$", "d0.graphics=", text)
        text = re.sub(r"(?m)^d0\.util=.*$", f"d0.util={self.gpu_util},0", text)
        (out / "gpu.scenario").write_text(text)
        paths = [str(out), os.environ.get("LD_LIBRARY_PATH", "")]
        lab.env.update(
            LD_LIBRARY_PATH=":".join(p for p in paths if p),
            FAKE_NVML_SCENARIO=str(out / "gpu.scenario"),
        )

    def write(self, lab: Lab, **urls: Any) -> None:
        """The scenario's config with its URLs, and the lab's own capture settings."""
        lab.write_config(self.config.format(**urls) + LAB_CAPTURE)


def llm_metric(url: str, name: str) -> float | None:
    body = fetch(url + "/metrics", 1.0)
    for line in (body or b"").decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


# -- the render engine -----------------------------------------------------------------------


@register
class IdleSquatter(EngineScenario):
    """ComfyUI rendered one image for a client that fetched it and left; the queue is empty
    and the checkpoint stays loaded (smart memory) while a second tenant (a training job)
    shares the accelerator: an idle engine holding memory another job needs."""

    name = "idle-squatter"
    expect = ("idle-squatter",)
    gpu_util = 0
    config = """
[[engines]]
kind = "comfyui"
url = "{comfy}"
name = "comfy"
"""

    def start(self, lab: Lab) -> None:
        comfy = self.fake(lab, "comfyui", "--output-directory", str(lab.workdir / "output"))
        log = self.load(
            lab, comfy.url, "--api", "comfyui", "--requests", "1", "--timeout", "30",
            "--save-dir", str(lab.workdir / "delivered"),
        )  # fmt: skip
        fetched = lambda: any(r["outcome"] == "ok" for r in results(log))  # noqa: E731
        wait_for("the client fetching its image", fetched)
        tenant = lab.python("import time; time.sleep(600)")
        self.gpu(lab, [comfy.pid, tenant.pid])
        self.write(lab, comfy=comfy.url)


@register
class OrphanedResult(EngineScenario):
    """A submitter queued a render and gave up waiting before it finished (its own timeout);
    ComfyUI finished it and wrote the image, and nobody fetched it. The delivery check
    fails, `evidence check` captures (trigger healthcheck:render-delivered). ComfyUI runs
    with --disable-smart-memory, so the idle engine does not also hold the checkpoint."""

    name = "orphaned-result"
    expect = ("orphaned-result",)
    command = "check"
    window_s = 10.0
    gpu_util = 0
    config = """
[[engines]]
kind = "comfyui"
url = "{comfy}"
name = "comfy"

[[checks]]
name = "render-delivered"
kind = "command"
command = "sh -c 'ls {delivered}/*.png'"
timeout_s = 5
"""

    def start(self, lab: Lab) -> None:
        output, delivered = lab.workdir / "output", lab.workdir / "delivered"
        comfy = self.fake(
            lab, "comfyui", "--output-directory", str(output), "--disable-smart-memory",
            "--steps", "20", "--step-s", "0.15",
        )  # fmt: skip
        log = self.load(
            lab, comfy.url, "--api", "comfyui", "--requests", "1", "--timeout", "1.5",
            "--exit-on-timeout", "--save-dir", str(delivered),
        )  # fmt: skip
        wait_for("the submitter giving up", lambda: results(log))
        done = lambda: json.loads(fetch(comfy.url + "/history") or b"{}")  # noqa: E731
        wait_for("ComfyUI finishing the orphaned prompt", done)
        wait_for("the image on disk", lambda: list(output.glob("*.png")))
        self.gpu(lab, [comfy.pid])
        self.write(lab, comfy=comfy.url, delivered=delivered)


# -- the model manager -----------------------------------------------------------------------

# A `cmd` wrapper that forks the server instead of exec'ing it (mostlygeek/llama-swap#804).
WRAPPER = '#!/bin/sh\n# starts the model server; forks it, does not exec it\n"$@"\nexit $?\n'


def model_cmd(lab: Lab, model: str, path: str, weights_mib: int, wrapper: Path | None) -> str:
    argv = [sys.executable, "-m", "lab.fakes.engine", "--kind", "llama-server"]
    argv += ["--port", "${PORT}", "--ready", str(lab.workdir / f"ready-{model}.json")]
    argv += ["-m", path, "--parallel", "2", "--weights-mib", str(weights_mib)]
    return " ".join(([str(wrapper)] if wrapper else []) + argv)


def swap_config(lab: Lab, models: dict[str, str]) -> Path:
    path = lab.workdir / "llama-swap.json"
    specs = {
        m: {"cmd": cmd, "proxy": "http://127.0.0.1:${PORT}", "ttl": 0, "checkEndpoint": "/health"}
        for m, cmd in models.items()
    }
    path.write_text(json.dumps({"models": specs, "healthCheckTimeout": 60, "unloadTimeout": 10}))
    return path


@register
class SwapNotUnloaded(EngineScenario):
    """llama-swap runs each model through a wrapper that forks the server. A client asks for
    qwen3-8b, then for qwen3-30b: llama-swap stops qwen3-8b by signalling the wrapper, which
    dies while the server it forked keeps its memory; /running lists only qwen3-30b while
    the accelerator holds memory for both servers."""

    name = "swap-not-unloaded"
    expect = ("swap-not-unloaded",)
    gpu_util = 60
    config = """
[[engines]]
kind = "llama-swap"
url = "{swap}"
name = "swap"
"""

    def start(self, lab: Lab) -> None:
        wrapper = lab.workdir / "run-model.sh"
        wrapper.write_text(WRAPPER)
        wrapper.chmod(0o755)
        config = swap_config(
            lab,
            {
                "qwen3-8b": model_cmd(
                    lab, "qwen3-8b", "/models/Qwen3-8B-Q4_K_M.gguf", 1100, wrapper
                ),
                "qwen3-30b": model_cmd(
                    lab, "qwen3-30b", "/models/Qwen3-30B-A3B-Q4_K_M.gguf", 1300, wrapper
                ),
            },
        )
        swap = self.fake(lab, "llama-swap", "--config", str(config))
        first = self.load(lab, swap.url, "--model", "qwen3-8b", "--requests", "2", label="load-8b")
        wait_for("two answers from qwen3-8b", lambda: len(results(first)) >= 2, 60)
        old = self.ready(lab.workdir / "ready-qwen3-8b.json")
        second = self.load(
            lab, swap.url, "--model", "qwen3-30b", "--spacing", "1", label="load-30b"
        )
        wait_for("an answer from qwen3-30b", lambda: results(second), 60)
        new = self.ready(lab.workdir / "ready-qwen3-30b.json")
        if not Path(f"/proc/{old['pid']}").exists():
            raise RuntimeError("llama-swap did stop qwen3-8b: the swap unloaded, no fault here")
        self.gpu(lab, [old["pid"], new["pid"]])
        self.write(lab, swap=swap.url)


# -- one llama-server (or vLLM) under load ---------------------------------------------------

LLAMA = """
[[engines]]
kind = "llama-server"
url = "{llama}"
name = "chat"
"""


@register
class ContextCreep(EngineScenario):
    """The same two callers, each in a conversation that carries its whole history: every
    turn's prompt is the last one plus the answer plus a new message. Requests running
    stay at two, the context high-water (llamacpp:n_tokens_max) climbs, and so does the
    KV cache each slot holds. The window is longer than the others: see the report."""

    name = "context-creep"
    expect = ("context-creep",)
    window_s = 36.0
    config = LLAMA

    def start(self, lab: Lab) -> None:
        llama = self.fake(
            lab, "llama-server", "-m", "/models/Qwen3-8B-Q4_K_M.gguf", "--parallel", "2",
            "-c", "32768", "--tok-s", "30", "--answer-tokens", "30", "--kv-kib-per-token", "32",
        )  # fmt: skip
        log = self.load(
            lab, llama.url, "--clients", "2", "--prompt-tokens", "300", "--grow-tokens", "250",
            "--spacing", "0.1",
        )  # fmt: skip
        wait_for("the first turns", lambda: len(results(log)) >= 2)
        self.gpu(lab, [llama.pid])
        self.write(lab, llama=llama.url)


@register
class ConcurrencyOverload(EngineScenario):
    """Six callers on a server started with --parallel 2: four requests always wait for a
    slot (llamacpp:requests_deferred), with prompts of one length. 21 s, not 20: the
    engines are read every 5 s, and 21 s is the shortest window giving the six readings a
    sustained shape needs (see the report)."""

    name = "concurrency-overload"
    expect = ("concurrency-overload",)
    window_s = 21.0
    config = LLAMA

    def start(self, lab: Lab) -> None:
        llama = self.fake(lab, "llama-server", "--parallel", "2", "--answer-tokens", "40")
        self.load(lab, llama.url, "--clients", "6", "--prompt-tokens", "300", "--spacing", "0.2")
        wait_for(
            "requests deferred",
            lambda: (llm_metric(llama.url, "llamacpp:requests_deferred") or 0) > 0,
        )
        self.gpu(lab, [llama.pid])
        self.write(lab, llama=llama.url)


@register
class WedgedNoProgress(EngineScenario):
    """vLLM with three callers: after a few answers the engine core hangs mid-decode. The
    API server still answers /metrics with the core's last stats: three requests running,
    and no token generated again."""

    name = "wedged-no-progress"
    expect = ("wedged-no-progress",)
    gpu_util = 100
    config = """
[[engines]]
kind = "vllm"
url = "{vllm}"
name = "vllm"
"""

    def start(self, lab: Lab) -> None:
        vllm = self.fake(
            lab, "vllm", "-m", "Qwen/Qwen3-8B", "--max-num-seqs", "4", "--max-model-len", "32768",
            "--fault", "device-hang", "--fault-after", "4",
        )  # fmt: skip
        log = self.load(lab, vllm.url, "--clients", "3", "--prompt-tokens", "300")
        wait_for("four answers", lambda: len(results(log)) >= 4)
        tokens = lambda: llm_metric(vllm.url, "vllm:generation_tokens_total")  # noqa: E731
        seen = tokens()
        time.sleep(1.0)
        if tokens() != seen:
            raise RuntimeError("the engine is still generating: the hang did not happen")
        self.gpu(lab, [vllm.pid])
        self.write(lab, vllm=vllm.url)


@register
class FalseLiveness(EngineScenario):
    """llama-server's main loop hangs in a device call after a few answers: /health (the
    HTTP thread) still says ok, a completion never returns (nor do /slots and /metrics,
    which go through the main loop). `evidence check` runs both checks."""

    name = "false-liveness"
    expect = ("false-liveness",)
    command = "check"
    window_s = 10.0
    gpu_util = 100
    config = (
        LLAMA
        + """
[[checks]]
name = "health"
kind = "http"
url = "{llama}/health"
timeout_s = 2

[[checks]]
name = "chat"
kind = "completion"
url = "{llama}/v1/chat/completions"
model = "qwen3-8b"
timeout_s = 3
"""
    )

    def start(self, lab: Lab) -> None:
        llama = self.fake(
            lab, "llama-server", "--parallel", "2", "--fault", "device-hang", "--fault-after", "3"
        )  # fmt: skip
        log = self.load(lab, llama.url, "--clients", "2", "--prompt-tokens", "300")
        wait_for("three answers", lambda: len(results(log)) >= 3)
        wait_for("/slots hanging", lambda: fetch(llama.url + "/slots", 0.5) is None)
        self.gpu(lab, [llama.pid])
        self.write(lab, llama=llama.url)


@register
class SilentEmptyResult(EngineScenario):
    """A reasoning model whose every answer is spent in reasoning_content: HTTP 200, finish
    "stop", empty content, for the callers and for evidence's completion check."""

    name = "silent-empty-result"
    expect = ("silent-empty-result",)
    command = "check"
    window_s = 10.0
    config = (
        LLAMA
        + """
[[checks]]
name = "chat"
kind = "completion"
url = "{llama}/v1/chat/completions"
model = "qwen3-8b"
timeout_s = 15
"""
    )

    def start(self, lab: Lab) -> None:
        llama = self.fake(lab, "llama-server", "--parallel", "2", "--fault", "reasoning-only")
        log = self.load(
            lab, llama.url, "--clients", "1", "--prompt-tokens", "300", "--spacing", "0.5"
        )
        wait_for("an (empty) answer", lambda: results(log))
        self.gpu(lab, [llama.pid])
        self.write(lab, llama=llama.url)


# -- the same engines, healthy ---------------------------------------------------------------


@register
class HealthyEngines(EngineScenario):
    """llama-swap with one model (its cmd runs the server itself), two callers within the
    slots, and ComfyUI rendering for a client that fetches every image: ordinary load."""

    name = "healthy-engines"
    expect = ("no-fault",)
    config = """
[[engines]]
kind = "llama-swap"
url = "{swap}"
name = "swap"

[[engines]]
kind = "llama-server"
url = "{llama}"
name = "chat"

[[engines]]
kind = "comfyui"
url = "{comfy}"
name = "comfy"
"""

    def start(self, lab: Lab) -> None:
        cmd = model_cmd(lab, "qwen3-8b", "/models/Qwen3-8B-Q4_K_M.gguf", 1100, None)
        config = swap_config(lab, {"qwen3-8b": cmd})
        swap = self.fake(lab, "llama-swap", "--config", str(config))
        comfy = self.fake(
            lab, "comfyui", "--output-directory", str(lab.workdir / "output"), "--step-s", "0.1"
        )  # fmt: skip
        chat = self.load(
            lab, swap.url, "--model", "qwen3-8b", "--clients", "2", "--prompt-tokens", "200",
            "--spacing", "0.5", "--stagger", "0.7", label="chat",
        )  # fmt: skip
        renders = self.load(
            lab, comfy.url, "--api", "comfyui", "--spacing", "1", "--timeout", "60",
            "--save-dir", str(lab.workdir / "delivered"), label="renders",
        )  # fmt: skip
        wait_for("answers", lambda: len(results(chat)) >= 2, 60)
        wait_for("an image fetched", lambda: results(renders), 60)
        model = self.ready(lab.workdir / "ready-qwen3-8b.json")
        self.gpu(lab, [model["pid"], comfy.pid])
        llama = f"http://127.0.0.1:{model['port']}"
        self.write(lab, swap=swap.url, llama=llama, comfy=comfy.url)
