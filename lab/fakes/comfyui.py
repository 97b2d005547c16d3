"""A fake ComfyUI with real state: a prompt queue, one worker that runs prompts, a history
of what ran and what it wrote, and real output files (formats.md section 3, ComfyUI
v0.3.64 server.py / execution.py; every route also under /api, as ComfyUI serves them).

A prompt loads the checkpoint (real resident memory, kept loaded between prompts as
ComfyUI's smart memory does, unless --disable-smart-memory unloads it after each
prompt), samples for --steps x --step-s seconds holding its activations, writes a PNG
into --output-directory named as SaveImage names them, and enters the history with its
outputs and its status messages (timestamps in epoch milliseconds).
"""

import argparse
import json
import os
import struct
import sys
import threading
import time
import uuid
import zlib
from collections import deque
from pathlib import Path
from typing import Any

from lab.fakes import MIB, App, Held, Request, Response, as_json, now_ms, payloads, write_ready


def png(seed: int) -> bytes:
    """A real one-pixel PNG: what SaveImage wrote, small."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixel = zlib.compress(b"\x00" + bytes([seed % 256, 128, 64]))
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixel) + chunk(b"IEND", b"")
    )


def _meminfo() -> dict[str, int]:
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        out[key] = int(rest.split()[0]) * 1024
    return out


class Comfy:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.lock = threading.Condition()
        self.pending: deque[list[Any]] = deque()
        self.running: list[Any] | None = None
        self.history: dict[str, dict[str, Any]] = {}
        self.number = 0
        self.held = Held()
        self.outdir = Path(args.output_directory)
        self.outdir.mkdir(parents=True, exist_ok=True)

    def submit(self, graph: dict[str, Any], client_id: str | None) -> dict[str, Any]:
        outputs = [k for k, node in graph.items() if node.get("class_type") == "SaveImage"]
        prompt_id = str(uuid.uuid4())
        with self.lock:
            item = [self.number, prompt_id, graph, {"client_id": client_id}, outputs]
            self.number += 1
            self.pending.append(item)
            self.lock.notify()
        return {"prompt_id": prompt_id, "number": item[0], "node_errors": {}}

    def worker(self) -> None:
        while True:
            with self.lock:
                while not self.pending:
                    self.lock.wait()
                self.running = self.pending.popleft()
            self._execute(self.running)
            with self.lock:
                self.running = None

    def _execute(self, item: list[Any]) -> None:
        number, prompt_id, graph, _, outputs = item
        messages: list[list[Any]] = [
            ["execution_start", {"prompt_id": prompt_id, "timestamp": now_ms()}]
        ]
        loaders = [k for k, n in graph.items() if n.get("class_type") == "CheckpointLoaderSimple"]
        if self.held.total("model"):
            messages.append(
                [
                    "execution_cached",
                    {"nodes": loaders, "prompt_id": prompt_id, "timestamp": now_ms()},
                ]
            )
        else:
            self.held.hold("model", self.args.model_mib * MIB)  # the checkpoint, loaded
        self.held.hold("activations", self.args.activations_mib * MIB)
        time.sleep(self.args.steps * self.args.step_s)
        self.held.release("activations")
        ui: dict[str, Any] = {}
        for node_id in outputs:
            prefix = graph[node_id].get("inputs", {}).get("filename_prefix", "ComfyUI")
            name = self._next_name(prefix)
            (self.outdir / name).write_bytes(png(number))
            ui[node_id] = {"images": [{"filename": name, "subfolder": "", "type": "output"}]}
        messages.append(["execution_success", {"prompt_id": prompt_id, "timestamp": now_ms()}])
        entry = {
            "prompt": item,
            "outputs": ui,
            "status": {"status_str": "success", "completed": True, "messages": messages},
            "meta": {
                k: {"node_id": k, "display_node": k, "parent_node": None, "real_node_id": k}
                for k in outputs
            },
        }
        with self.lock:
            self.history[prompt_id] = entry
        if self.args.disable_smart_memory:
            self.held.release("model")  # unload_all_models() after the prompt

    def _next_name(self, prefix: str) -> str:
        """SaveImage's counter: one past the highest existing prefix_NNNNN_.png."""
        taken = [
            int(p.name[len(prefix) + 1 : len(prefix) + 6])
            for p in self.outdir.glob(f"{prefix}_?????_.png")
        ]
        return f"{prefix}_{max(taken, default=0) + 1:05d}_.png"

    def system_stats(self) -> dict[str, Any]:
        base = json.loads(payloads.sample("comfyui-system-stats.json"))  # formats.md 3.3
        mem = _meminfo()
        held = self.held.total()
        device = {
            **base["devices"][0],
            "name": "cuda:0 NVIDIA GB10 : cudaMallocAsync",
            "vram_total": mem["MemTotal"],  # one pool: CUDA's total is the machine's
            "vram_free": mem["MemAvailable"],
            "torch_vram_total": held,
            "torch_vram_free": 0,
        }
        system = {
            **base["system"],
            "ram_total": mem["MemTotal"],
            "ram_free": mem["MemAvailable"],
            "argv": sys.argv,
        }
        return {"system": system, "devices": [device]}


def app_for(comfy: Comfy) -> App:
    app = App()

    @app.route("POST", "/prompt")
    def prompt(req: Request) -> Response:
        body = req.json()
        return as_json(comfy.submit(body["prompt"], body.get("client_id")))

    @app.route("GET", "/prompt")
    def remaining(req: Request) -> Response:
        with comfy.lock:
            n = len(comfy.pending) + (comfy.running is not None)
        return as_json({"exec_info": {"queue_remaining": n}})

    @app.route("GET", "/queue")
    def queue(req: Request) -> Response:  # formats.md 3.2
        with comfy.lock:
            running = [comfy.running] if comfy.running is not None else []
            return as_json({"queue_running": running, "queue_pending": list(comfy.pending)})

    @app.route("GET", "/history")
    def history(req: Request) -> Response:  # formats.md 3.1: newest max_items
        with comfy.lock:
            items = list(comfy.history.items())
        if "max_items" in req.query:
            items = items[-int(req.query["max_items"][0]) :]
        return as_json(dict(items))

    @app.route("GET", "/history/")
    def one(req: Request) -> Response:
        prompt_id = req.path.removeprefix("/history/")
        with comfy.lock:
            entry = comfy.history.get(prompt_id)
        return as_json({prompt_id: entry} if entry else {})

    @app.route("GET", "/system_stats")
    def stats(req: Request) -> Response:
        return as_json(comfy.system_stats())

    @app.route("GET", "/view")
    def view(req: Request) -> Response:
        name = os.path.basename(req.query.get("filename", [""])[0])
        path = comfy.outdir / req.query.get("subfolder", [""])[0] / name
        if not name or not path.is_file():
            return Response(404, b"", "text/plain")
        return Response(200, path.read_bytes(), "image/png")

    def under_api(req: Request) -> Response:
        if req.path.startswith("/api/"):
            req.path = req.path.removeprefix("/api")
            return app.handle(req)
        return Response(404, b"404: Not Found", "text/plain")

    app.fallback = under_api
    return app


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output-directory", default="output")
    parser.add_argument("--model-mib", type=int, default=1200, help="the checkpoint, resident")
    parser.add_argument("--activations-mib", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--step-s", type=float, default=0.1)
    parser.add_argument("--disable-smart-memory", action="store_true")
    parser.add_argument("--preload", action="store_true", help="load the checkpoint at start")


def main(args: argparse.Namespace) -> None:
    comfy = Comfy(args)
    if args.preload:
        comfy.held.hold("model", args.model_mib * MIB)
    server = app_for(comfy).serve(args.port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    threading.Thread(target=comfy.worker, daemon=True).start()
    write_ready(args.ready, port=server.server_address[1], kind=args.kind)
    threading.Event().wait()
