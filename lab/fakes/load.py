"""A load generator: concurrent HTTP clients as one real process.

python -m lab.fakes.load --url BASE --api chat|completion|comfyui --clients N
    [--requests R] [--prompt-tokens T] [--grow-tokens G] [--max-tokens M]
    [--spacing S] [--timeout S] [--model NAME] [--log FILE] [--save-dir DIR]

Each client is a thread making one request at a time, --spacing seconds apart, --requests
times (0: until stopped). chat posts /v1/chat/completions (a conversation when
--grow-tokens is set: each turn carries the whole history, answer included, plus a new
user message of G tokens, so the context grows as a real chat's does); completion posts
llama-server's /completion; comfyui posts a workflow to /prompt, polls /history/ID and
fetches the output through /view (into --save-dir), or gives up after --timeout, as a
watcher that went away does. One word is one token. Each finished request is one JSON
line in --log: client, n, started, ended, outcome, and what came back.
"""

import argparse
import json
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from lab.fakes import payloads, words

_log_lock = threading.Lock()


def post(url: str, body: dict[str, Any], timeout: float) -> tuple[int, Any]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "lab-load/1"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, None


def get(url: str, timeout: float) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def record(args: argparse.Namespace, **entry: Any) -> None:
    if not args.log:
        return
    with _log_lock, open(args.log, "a") as log:
        log.write(json.dumps(entry) + "\n")


def chat_turns(args: argparse.Namespace, client: int):
    """The messages of each request: a fresh prompt, or a conversation that grows."""
    history: list[dict[str, str]] = []
    n = 0
    while True:
        size = args.prompt_tokens if not history else args.grow_tokens
        ask = {"role": "user", "content": " ".join(words(size, client + n))}
        messages = [*history, ask] if args.grow_tokens else [ask]
        answer = yield messages
        if args.grow_tokens:
            history = [*messages, {"role": "assistant", "content": answer or ""}]
        n += 1


def llm_client(args: argparse.Namespace, client: int, stop: threading.Event) -> None:
    turns = chat_turns(args, client)
    messages = next(turns)
    n = 0
    while not stop.is_set() and (args.requests == 0 or n < args.requests):
        began = time.time()
        if args.api == "chat":
            body = {"model": args.model, "messages": messages, "stream": False}
            if args.max_tokens:
                body["max_tokens"] = args.max_tokens
            path = "/v1/chat/completions"
        else:
            body = {"prompt": " ".join(words(args.prompt_tokens, client + n))}
            body["n_predict"] = args.max_tokens or -1
            path = "/completion"
        content = None
        try:
            status, answer = post(args.url + path, body, args.timeout)
            outcome = "ok" if status == 200 else f"http {status}"
        except (TimeoutError, urllib.error.URLError, OSError) as exc:
            status, answer, outcome = None, None, f"gave up: {type(exc).__name__}"
        if isinstance(answer, dict) and "choices" in answer:
            choice = answer["choices"][0]
            content = (choice.get("message") or {}).get("content")
            finish = choice.get("finish_reason")
        else:
            content = (answer or {}).get("content") if isinstance(answer, dict) else None
            finish = (answer or {}).get("stop_type") if isinstance(answer, dict) else None
        record(
            args,
            client=client,
            n=n,
            started=began,
            ended=time.time(),
            outcome=outcome,
            prompt_tokens=sum(len(m["content"].split()) for m in messages)
            if args.api == "chat"
            else args.prompt_tokens,
            content_chars=len(content or ""),
            finish=finish,
        )
        if outcome.startswith("gave up") and args.exit_on_timeout:
            return
        messages = turns.send(content)
        n += 1
        stop.wait(args.spacing)


def comfy_client(args: argparse.Namespace, client: int, stop: threading.Event) -> None:
    template = json.loads(payloads.sample("comfyui-history.json"))  # formats.md 3.1
    graph = next(iter(template.values()))["prompt"][2]
    n = 0
    while not stop.is_set() and (args.requests == 0 or n < args.requests):
        began = time.time()
        workflow = json.loads(json.dumps(graph))
        workflow["3"]["inputs"]["seed"] = random.randrange(2**32)
        _, queued = post(
            args.url + "/prompt", {"prompt": workflow, "client_id": uuid.uuid4().hex}, 10
        )
        prompt_id = queued["prompt_id"]
        outcome, files = "gave up: no result within the timeout", []
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline and not stop.is_set():
            _, body = get(f"{args.url}/history/{prompt_id}", 10)
            entry = json.loads(body or b"{}").get(prompt_id)
            if entry:
                for ui in entry["outputs"].values():
                    for image in ui.get("images", []):
                        query = urllib.parse.urlencode(image)
                        status, data = get(f"{args.url}/view?{query}", 10)
                        if status == 200 and args.save_dir:
                            Path(args.save_dir).mkdir(parents=True, exist_ok=True)
                            (Path(args.save_dir) / image["filename"]).write_bytes(data)
                        files.append(image["filename"])
                outcome = "ok"
                break
            time.sleep(0.25)
        record(
            args,
            client=client,
            n=n,
            started=began,
            ended=time.time(),
            outcome=outcome,
            prompt_id=prompt_id,
            files=files,
        )
        if outcome != "ok" and args.exit_on_timeout:
            return
        n += 1
        stop.wait(args.spacing)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.fakes.load", description=__doc__)
    parser.add_argument("--url", required=True, help="the engine's base URL")
    parser.add_argument("--api", choices=("chat", "completion", "comfyui"), default="chat")
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--requests", type=int, default=0, help="per client; 0: until stopped")
    parser.add_argument("--prompt-tokens", type=int, default=200)
    parser.add_argument("--grow-tokens", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, default=0)
    parser.add_argument("--spacing", type=float, default=0.0)
    parser.add_argument("--stagger", type=float, default=0.0, help="seconds between clients")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--exit-on-timeout", action="store_true")
    parser.add_argument("--model", default="default")
    parser.add_argument("--log")
    parser.add_argument("--save-dir")
    args = parser.parse_args(argv)
    stop = threading.Event()
    client = comfy_client if args.api == "comfyui" else llm_client
    threads = []
    for i in range(args.clients):
        threads.append(threading.Thread(target=client, args=(args, i, stop), daemon=True))
        threads[-1].start()
        time.sleep(args.stagger)
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    main()
