"""A fake llama-swap with real processes: it starts each model's `cmd` as a child, waits
for its health check, proxies requests by their `model` field, and swaps (stops the
running model, starts the asked one) when a request names another model, as the one
implicit swap+exclusive group does when no groups are configured (formats.md 1.5).

Stopping sends SIGTERM to the process llama-swap started and to nothing else, as the
router since v219 does (mostlygeek/llama-swap#804, "Commands that fork cannot be
stopped"): a `cmd` that is a wrapper forking the real server dies, and the server it
forked keeps running, holding its memory, while /running no longer lists it.

Answers: GET /running (formats.md 1.1, v186+ fields, current router: every process not
stopped, sorted by model), /health (1.4, text OK), /logs (1.3: `[LEVEL] <model> message`
lines; the two message texts here are the verbatim ones of the sample), /v1/models (1.4).

The config is JSON (the fake's own; llama-swap reads YAML with the same keys):
{"models": {"ID": {"cmd": "... ${PORT} ...", "proxy": "http://127.0.0.1:${PORT}",
"ttl": 0, "name": "", "description": "", "checkEndpoint": "/health"}},
"healthCheckTimeout": 60, "unloadTimeout": 10}.
"""

import argparse
import json
import shlex
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from lab.fakes import App, Request, Response, as_json, payloads, write_ready


class Process:
    def __init__(self, model: str, spec: dict[str, Any], port: int, log: "Log"):
        self.model, self.log = model, log
        expand = lambda s: str(s).replace("${PORT}", str(port))  # noqa: E731
        self.cmd = expand(spec["cmd"])
        self.proxy = expand(spec.get("proxy", "http://127.0.0.1:${PORT}"))
        self.check = spec.get("checkEndpoint", "/health")
        self.ttl = int(spec.get("ttl", 0))
        self.name = spec.get("name", "")
        self.description = spec.get("description", "")
        self.state = "stopped"
        self.popen: subprocess.Popen | None = None

    def start(self, timeout_s: float) -> None:
        self.state = "starting"
        self.popen = subprocess.Popen(
            shlex.split(self.cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout_s
        url = self.proxy + self.check
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=1) as answer:
                    if answer.status == 200:
                        self.log.info(f"<{self.model}> Health check passed on {url}")
                        self.state = "ready"
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        self.stop(0)
        raise RuntimeError(f"{self.model}: health check timed out")

    def stop(self, unload_timeout_s: float) -> None:
        if self.popen is None:
            return
        self.state = "stopping"
        self.popen.send_signal(signal.SIGTERM)  # the started process only (#804)
        try:
            self.popen.wait(unload_timeout_s)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        self.state = "stopped"

    def running(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "state": self.state,
            "cmd": self.cmd,
            "proxy": self.proxy,
            "ttl": self.ttl,
            "name": self.name,
            "description": self.description,
        }


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str) -> None:
        self.lines.append(f"[INFO] {message}")


def app_for(config: dict[str, Any], log: Log) -> App:
    app = App()
    processes = {
        model: Process(model, spec, payloads.closed_port(), log)
        for model, spec in config["models"].items()
    }
    swapping = threading.Lock()

    def ensure(model: str) -> Process:
        with swapping:
            process = processes[model]
            if process.state != "ready":
                for other in processes.values():
                    if other is not process and other.state != "stopped":
                        other.stop(float(config.get("unloadTimeout", 10)))
                process.start(float(config.get("healthCheckTimeout", 60)))
            return process

    def proxy(req: Request) -> Response:
        model = req.json().get("model", "")
        if model not in processes:
            return as_json(
                {
                    "src": "llama-swap",
                    "error": {
                        "message": "model not found",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": 404,
                    },
                },
                404,
            )
        process = ensure(model)
        upstream = urllib.request.Request(
            process.proxy + req.path,
            data=req.body,
            method="POST",
            headers={"Content-Type": req.headers.get("content-type", "application/json")},
        )
        began = time.monotonic()
        try:
            with urllib.request.urlopen(upstream, timeout=600) as answer:
                status, body = answer.status, answer.read()
                ctype = answer.headers.get("Content-Type", "application/json")
        except urllib.error.HTTPError as exc:
            status, body, ctype = exc.code, exc.read(), "application/json"
        log.info(
            f'Request 127.0.0.1 "POST {req.path} HTTP/1.1" {status} {len(body)} '
            f'"{req.headers.get("user-agent", "")}" {time.monotonic() - began:.3f}s'
        )
        return Response(status, body, ctype)

    for path in ("/v1/chat/completions", "/v1/completions", "/completion"):
        app.route("POST", path)(proxy)

    @app.route("GET", "/running")
    def running(req: Request) -> Response:
        listed = [p.running() for p in processes.values() if p.state not in ("stopped", "shutdown")]
        return as_json({"running": sorted(listed, key=lambda r: r["model"])})

    @app.route("GET", "/health")
    def health(req: Request) -> Response:
        return Response(200, b"OK", "text/plain")

    @app.route("GET", "/logs")
    def logs(req: Request) -> Response:
        return Response(200, "".join(f"{line}\n" for line in log.lines).encode(), "text/plain")

    @app.route("GET", "/v1/models")
    def models(req: Request) -> Response:
        data = [
            {"id": m, "object": "model", "created": 0, "owned_by": "llama-swap"}
            for m in sorted(processes)
        ]
        return as_json({"object": "list", "data": data})

    return app


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="the fake's JSON config (see the module docstring)")


def main(args: argparse.Namespace) -> None:
    config = json.loads(Path(args.config).read_text())
    app = app_for(config, Log())
    server = app.serve(args.port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    write_ready(args.ready, port=server.server_address[1], kind=args.kind)
    threading.Event().wait()
