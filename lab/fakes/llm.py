"""A fake LLM server with real state: llama.cpp's llama-server or vLLM, slots, a queue and a
main loop, answering in the real formats (formats.md section 6 for llama-server, section
4 for vLLM; completions in the OpenAI shape evidence's completion check reads).

The engine: --parallel slots (llama-server's --parallel, vLLM's max_num_seqs); a request
beyond them waits in the queue, which is what llamacpp:requests_deferred and
vllm:num_requests_waiting count. One main-loop thread does what llama-server's
update_slots() does: each tick (one decode step, 1/--tok-s s) it serves the tasks posted
to it (metrics, slots), admits waiting requests into free slots, prefills prompts at
--pp-tok-s, decodes one token per busy slot, and ends a request at the model's natural
answer length (EOS: finish "stop"), at max_tokens or at the slot's context ("length").

Memory: the weights are held from load; each slot's KV cache is held as blocks of
--block-tokens tokens, grown with its context and cut back when a request ends (the slot
keeps its cache for reuse, as llama-server's cache_prompt does).

Faults (--fault), engaged once --fault-after requests have finished:
- device-hang: the main loop blocks mid-decode in a device call that never returns.
  llama-server serves /metrics and /slots through the main loop, so they hang while
  /health (answered by the HTTP thread) says ok; vLLM's API server publishes the engine
  core's last stats, so /metrics answers, frozen: busy, and no token ever again.
- reasoning-only: every token goes to reasoning_content; content stays empty and the
  finish reason is "stop" (the reasoning ate the answer).
"""

import argparse
import json
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lab.fakes import (
    JSON,
    MIB,
    App,
    Held,
    Request,
    Response,
    as_json,
    payloads,
    words,
    write_ready,
)

# formats.md 6.1: no labels; text/plain; C++ default stream formatting (6 significant digits).
LLAMACPP_METRICS_TYPE = "text/plain; version=0.0.4"
# formats.md 6.3: every route but /health's loading answer and the model lists, while loading.
LOADING = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
VLLM_VERSION = "0.33.0"  # formats.md 4.4 (GET /version)
# A real server's /slots (b1-0c1e570): a slot that never served a request, one that had.
REAL_SLOTS = json.loads(payloads.sample("llamacpp-slots-real-b1-0c1e570.json"))


@dataclass
class Task:
    id: int
    prompt: list[str]  # the prompt's tokens (one word, one token)
    max_tokens: int  # <= 0: no limit but the answer's natural length
    model: str
    arrived: float
    done: threading.Event = field(default_factory=threading.Event)
    prefilled: int = 0
    cached: int = 0  # prompt tokens reused from the slot's cache
    said: list[str] = field(default_factory=list)
    prompt_s: float = 0.0
    decode_s: float = 0.0
    finish: str = ""
    slot: int = -1

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt)

    @property
    def decoded(self) -> int:
        return len(self.said)


@dataclass
class Slot:
    id: int
    task: Task | None = None
    n_past: int = 0  # tokens in this slot's cache
    cache: list[str] = field(default_factory=list)  # what those tokens are
    last: Task | None = None  # the task it served last: /slots keeps showing it
    used_at: float = 0.0


def common_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class Engine:
    """The slots, the queue, the counters and the main loop; no HTTP here."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.lock = threading.Lock()
        self.slots = [Slot(i) for i in range(args.parallel)]
        self.waiting: deque[Task] = deque()
        self.posted: queue.SimpleQueue[tuple[Callable[[], Any], threading.Event, list]] = (
            queue.SimpleQueue()
        )
        self.held = Held()
        self.block_bytes = args.block_tokens * args.kv_kib_per_token * 1024
        self.next_id = 0
        self.finished = 0
        self.success = {"stop": 0, "length": 0}
        self.count = dict(
            prompt_tokens=0,
            prompt_s=0.0,
            prompt_cached=0,
            generated=0,  # per step, as vLLM counts
            predicted=0,  # per finished request, as llama-server counts (formats.md 6.1)
            predicted_s=0.0,
            n_decode=0,
            busy_per_decode=0,
            n_tokens_max=0,
        )
        self.bucket = dict(prompt_tokens=0, prompt_s=0.0, predicted=0, predicted_s=0.0)
        self.published: dict[str, Any] = {}
        self.hung = False
        self.loaded = threading.Event()
        self.started = time.time()

    # -- the API side ------------------------------------------------------------------

    def load(self) -> None:
        self.held.hold("weights", self.args.weights_mib * MIB)
        self._publish()
        self.loaded.set()

    def submit(self, prompt: list[str], max_tokens: int, model: str) -> Task:
        with self.lock:
            self.next_id += 1
            task = Task(self.next_id, prompt or ["<s>"], max_tokens, model, time.time())
            self.waiting.append(task)
        return task

    def post(self, fn: Callable[[], Any]) -> Any:
        """Run fn on the main loop and wait for it (llama-server's queue_tasks.post)."""
        done: threading.Event = threading.Event()
        out: list[Any] = []
        self.posted.put((fn, done, out))
        done.wait()
        return out[0]

    # -- the main loop -----------------------------------------------------------------

    def loop(self) -> None:
        tick = 1.0 / self.args.tok_s
        while True:
            began = time.monotonic()
            while not self.posted.empty():
                fn, done, out = self.posted.get()
                out.append(fn())
                done.set()
            with self.lock:
                self._step(tick)
            if self.hung:
                threading.Event().wait()  # the device call that never returns
            time.sleep(max(0.0, tick - (time.monotonic() - began)))

    def _step(self, tick: float) -> None:
        free = [s for s in self.slots if s.task is None]
        while free and self.waiting:
            # llama-server's slot choice: the most similar cached prompt, else the least
            # recently used; the common prefix is not processed again (cache_prompt).
            task = self.waiting.popleft()
            slot = max(free, key=lambda s: (common_prefix(s.cache, task.prompt), -s.used_at))
            free.remove(slot)
            reuse = min(common_prefix(slot.cache, task.prompt), task.prompt_tokens - 1)
            task.slot, task.prefilled, task.cached = slot.id, reuse, reuse
            slot.task, slot.last, slot.n_past = task, task, reuse
            slot.cache = task.prompt[:reuse]
            self.count["prompt_cached"] += reuse
        active = [s for s in self.slots if s.task is not None]
        decoding = [s for s in active if s.task and s.task.prefilled >= s.task.prompt_tokens]
        if self.args.fault == "device-hang" and self.finished >= self.args.fault_after and decoding:
            self.hung = True  # mid-decode: the stats published so far are the last ones
            return
        if not active:
            self._publish()
            return
        self.count["n_decode"] += 1
        self.count["busy_per_decode"] += len(active)
        per_tick = max(1, int(self.args.pp_tok_s * tick))
        for slot in active:
            task = slot.task
            assert task is not None
            if task.prefilled < task.prompt_tokens:
                n = min(per_tick, task.prompt_tokens - task.prefilled)
                seconds = n / self.args.pp_tok_s
                task.prefilled += n
                task.prompt_s += seconds
                slot.n_past += n
                self._add(prompt_tokens=n, prompt_s=seconds)
            else:
                task.said.append(words(1, task.id + task.decoded)[0])
                task.decode_s += tick
                slot.n_past += 1
                self.count["generated"] += 1
                limit = task.max_tokens if task.max_tokens > 0 else math.inf
                if task.decoded >= self.args.answer_tokens:
                    task.finish = "stop"  # the model's end of sequence
                elif task.decoded >= limit or slot.n_past >= self.args.ctx_size:
                    task.finish = "length"
            self.count["n_tokens_max"] = max(self.count["n_tokens_max"], slot.n_past)
            used = math.ceil(slot.n_past / self.args.block_tokens)
            if task.finish:
                slot.task, slot.used_at = None, time.monotonic()
                slot.cache = task.prompt + task.said
                self.finished += 1
                self.success[task.finish] += 1
                self._add(predicted=task.decoded, predicted_s=task.decode_s)
                self.held.blocks(f"kv{slot.id}", used, self.block_bytes)
                task.done.set()
            elif used > self.held.count(f"kv{slot.id}"):
                self.held.blocks(f"kv{slot.id}", used, self.block_bytes)
        self._publish()

    def _add(self, **amounts: float) -> None:
        for key, value in amounts.items():
            self.count[key] += value
            self.bucket[key] += value

    def _publish(self) -> None:
        """The engine core's stats as the API server last received them (vLLM's loggers)."""
        self.published = {
            "running": sum(s.task is not None for s in self.slots),
            "waiting": len(self.waiting),
            "kv_usage": sum(s.n_past for s in self.slots) / (self.args.ctx_size * len(self.slots)),
            "prompt_tokens": self.count["prompt_tokens"],
            "generation_tokens": self.count["generated"],
            "success": dict(self.success),
        }

    # -- what the main loop answers (llama-server) --------------------------------------

    def metrics_values(self) -> dict[str, float]:
        c, b = self.count, self.bucket
        values = {
            "llamacpp:prompt_tokens_total": c["prompt_tokens"],
            "llamacpp:prompt_tokens_cached_total": c["prompt_cached"],
            "llamacpp:prompt_seconds_total": c["prompt_s"],
            "llamacpp:tokens_predicted_total": c["predicted"],
            "llamacpp:tokens_predicted_seconds_total": c["predicted_s"],
            "llamacpp:n_decode_total": c["n_decode"],
            "llamacpp:n_tokens_max": c["n_tokens_max"],
            # No speculative decoding here; the real server publishes the families at 0.
            "llamacpp:spec_decode_num_draft_tokens_total": 0,
            "llamacpp:spec_decode_num_accepted_tokens_total": 0,
            "llamacpp:spec_decode_num_drafts_total": 0,
            "llamacpp:n_busy_slots_per_decode": c["busy_per_decode"] / max(1, c["n_decode"]),
            "llamacpp:prompt_tokens_seconds": b["prompt_tokens"] / b["prompt_s"]
            if b["prompt_s"]
            else 0.0,
            "llamacpp:predicted_tokens_seconds": b["predicted"] / b["predicted_s"]
            if b["predicted_s"]
            else 0.0,
            "llamacpp:requests_processing": sum(s.task is not None for s in self.slots),
            "llamacpp:requests_deferred": len(self.waiting),
        }
        self.bucket = dict.fromkeys(self.bucket, 0)  # llama-server resets its bucket per read
        return values

    def slots_answer(self) -> list[dict[str, Any]]:
        # formats.md 6.2 as a real server (b1-0c1e570) sends it: a slot that never served a
        # request carries four keys; one that has adds its task, params and a next_token
        # that is a list of one object.
        fresh, template = REAL_SLOTS
        out = []
        for slot in self.slots:
            task = slot.task or slot.last
            if task is None:
                out.append({**fresh, "id": slot.id, "n_ctx": self.args.ctx_size})
                continue
            limit = task.max_tokens if task.max_tokens > 0 else -1
            busy = slot.task is not None
            out.append(
                {
                    **template,
                    "id": slot.id,
                    "n_ctx": self.args.ctx_size,
                    "is_processing": busy,
                    "id_task": task.id,
                    "n_prompt_tokens": len(task.prompt),
                    "params": {**template["params"], "n_predict": limit, "max_tokens": limit},
                    "next_token": [
                        {
                            "has_next_token": busy,
                            "has_new_line": False,
                            "n_remain": limit - task.decoded if limit > 0 else -1,
                            "n_decoded": task.decoded,
                        }
                    ],
                }
            )
        return out


# -- answers shared by both kinds (OpenAI shape, as evidence's completion check reads) ----


def _prompt(body: dict[str, Any]) -> list[str]:
    """The prompt's tokens; a chat goes through a ChatML-like template, ending with the
    generation prompt, so a conversation's next prompt extends the cache of the last."""
    if "messages" in body:
        out: list[str] = []
        for m in body["messages"]:
            out += ["<|im_start|>", str(m.get("role")), *str(m.get("content") or "").split()]
            out.append("<|im_end|>")
        return [*out, "<|im_start|>", "assistant"]
    prompt = body.get("prompt", "")
    return (prompt if isinstance(prompt, str) else " ".join(map(str, prompt))).split()


def _texts(engine: Engine, task: Task) -> tuple[str, str]:
    """(content, reasoning) of a finished task."""
    said = " ".join(task.said)
    return ("", said) if engine.args.fault == "reasoning-only" else (said, "")


def _usage(task: Task) -> dict[str, int]:
    return {
        "prompt_tokens": task.prompt_tokens,
        "completion_tokens": task.decoded,
        "total_tokens": task.prompt_tokens + task.decoded,
    }


def _timings(task: Task) -> dict[str, float]:
    return {
        "prompt_n": task.prompt_tokens - task.cached,
        "prompt_ms": task.prompt_s * 1000,
        "predicted_n": task.decoded,
        "predicted_ms": task.decode_s * 1000,
        "predicted_per_second": task.decoded / task.decode_s if task.decode_s else 0.0,
    }


def _run(engine: Engine, body: dict[str, Any], default_model: str) -> Task:
    limit = body.get("max_tokens", body.get("max_completion_tokens", body.get("n_predict", -1)))
    task = engine.submit(_prompt(body), int(limit or -1), body.get("model", default_model))
    task.done.wait()  # as long as it takes: the client decides how long it waits
    return task


def chat_answer(engine: Engine, task: Task, extra: dict[str, Any]) -> Response:
    content, reasoning = _texts(engine, task)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning:
        message["reasoning_content"] = reasoning
    return as_json(
        {
            "id": f"chatcmpl-{task.id}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": task.model,
            "choices": [{"index": 0, "message": message, "finish_reason": task.finish}],
            "usage": _usage(task),
            **extra,
        }
    )


def text_answer(engine: Engine, task: Task) -> Response:
    content, _ = _texts(engine, task)
    return as_json(
        {
            "id": f"cmpl-{task.id}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": task.model,
            "choices": [
                {"index": 0, "text": content, "logprobs": None, "finish_reason": task.finish}
            ],
            "usage": _usage(task),
        }
    )


# -- llama-server ---------------------------------------------------------------------------


def _families(sample: str) -> list[tuple[str, str, str]]:
    """(name, HELP line, TYPE line) of each family of a sample exposition, in order."""
    lines = payloads.sample(sample).decode().splitlines()
    helps = {ln.split()[2]: ln for ln in lines if ln.startswith("# HELP ")}
    return [
        (ln.split()[2], helps.get(ln.split()[2], ""), ln)
        for ln in lines
        if ln.startswith("# TYPE ")
    ]


def llama_server(engine: Engine) -> App:
    args = engine.args
    app = App()
    families = _families("llamacpp-metrics-real-busy-b1-0c1e570.txt")
    build = payloads.LLAMACPP_PROPS["build_info"]

    def ready(fn: Callable[[Request], Response]) -> Callable[[Request], Response]:
        def guarded(req: Request) -> Response:
            return fn(req) if engine.loaded.is_set() else as_json(LOADING, 503)

        return guarded

    @app.route("GET", "/health")
    @app.route("GET", "/v1/health")
    @ready
    def health(req: Request) -> Response:
        return as_json({"status": "ok"})  # formats.md 6.3, answered by the HTTP thread

    @app.route("GET", "/slots")
    @ready
    def slots(req: Request) -> Response:
        return as_json(engine.post(engine.slots_answer))  # formats.md 6.2, via the main loop

    @app.route("GET", "/metrics")
    @ready
    def metrics(req: Request) -> Response:
        values = engine.post(engine.metrics_values)  # formats.md 6.1, via the main loop
        text = "".join(
            f"{help_}\n{type_}\n{name} {format(values[name], 'g')}\n"
            for name, help_, type_ in families
            if name in values
        )
        return Response(
            200,
            text.encode(),
            LLAMACPP_METRICS_TYPE,
            {"Process-Start-Time-Unix": str(int(engine.started))},
        )

    @app.route("GET", "/props")
    @ready
    def props(req: Request) -> Response:
        base = payloads.LLAMACPP_PROPS  # formats.md 6.4
        settings = {**base["default_generation_settings"], "n_ctx": args.ctx_size}
        return as_json(
            {
                **base,
                "default_generation_settings": settings,
                "total_slots": args.parallel,
                "model_path": args.model,
            }
        )

    @app.route("GET", "/v1/models")
    @app.route("GET", "/models")
    def models(req: Request) -> Response:
        return as_json(
            {
                "object": "list",
                "data": [{"id": args.model, "object": "model", "owned_by": "llamacpp"}],
            }
        )

    @app.route("POST", "/v1/chat/completions")
    @app.route("POST", "/chat/completions")
    @ready
    def chat(req: Request) -> Response:
        task = _run(engine, req.json(), args.model)
        return chat_answer(engine, task, {"system_fingerprint": build, "timings": _timings(task)})

    @app.route("POST", "/v1/completions")
    @ready
    def completions(req: Request) -> Response:
        return text_answer(engine, _run(engine, req.json(), args.model))

    @app.route("POST", "/completion")
    @app.route("POST", "/completions")
    @ready
    def completion(req: Request) -> Response:
        body = req.json()
        task = _run(engine, body, args.model)
        content, _ = _texts(engine, task)
        return as_json(
            {
                "index": 0,
                "content": content,
                "id_slot": task.slot,
                "stop": True,
                "model": args.model,
                "tokens_predicted": task.decoded,
                "tokens_evaluated": task.prompt_tokens,
                "has_new_line": False,
                "truncated": False,
                "stop_type": "eos" if task.finish == "stop" else "limit",
                "stopping_word": "",
                "tokens_cached": task.cached,
                "timings": _timings(task),
            }
        )

    return app


# -- vLLM -----------------------------------------------------------------------------------


def go_float(value: float) -> str:
    """prometheus_client's floatToGoString: Python's repr, Go's exponent switch (4.1)."""
    value = float(value)
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def vllm(engine: Engine) -> App:
    args = engine.args
    app = App()
    helps = {name: (h, t) for name, h, t in _families("vllm-metrics.txt")}
    created = engine.started

    @app.route("GET", "/metrics")
    def metrics(req: Request) -> Response:
        stats = engine.published  # the API server's copy: frozen when the core hangs
        labels = f'engine="0",model_name="{args.model}"'
        out: list[str] = []

        def family(name: str, rows: list[tuple[str, float]], created_too: bool = False) -> None:
            help_, type_ = helps[name]
            out.extend([help_, type_])
            out.extend(f"{name}{{{lab}}} {go_float(v)}" for lab, v in rows)
            if created_too:  # prometheus_client's _created gauge per counter (4.1)
                base = name.removesuffix("_total")
                out.extend([help_.replace(name, f"{base}_created"), f"# TYPE {base}_created gauge"])
                out.extend(f"{base}_created{{{lab}}} {go_float(created)}" for lab, _ in rows)

        # formats.md 4.2: the gauges and counters of vLLM 0.33 the collector reads.
        family("vllm:num_requests_running", [(labels, stats["running"])])
        family("vllm:num_requests_waiting", [(labels, stats["waiting"])])
        family(
            "vllm:num_requests_waiting_by_reason",
            [
                (f'{labels},reason="capacity"', stats["waiting"]),
                (f'{labels},reason="deferred"', 0),
            ],
        )
        family(
            "vllm:engine_sleep_state",
            [
                (f'{labels},sleep_state="awake"', 1),
                (f'{labels},sleep_state="weights_offloaded"', 0),
                (f'{labels},sleep_state="discard_all"', 0),
            ],
        )
        family("vllm:kv_cache_usage_perc", [(labels, stats["kv_usage"])])
        family("vllm:num_preemptions_total", [(labels, 0)])
        family("vllm:prompt_tokens_total", [(labels, stats["prompt_tokens"])], True)
        family("vllm:generation_tokens_total", [(labels, stats["generation_tokens"])], True)
        family(
            "vllm:request_success_total",
            [
                (f'{labels},finished_reason="{reason}"', stats["success"].get(reason, 0))
                for reason in ("stop", "length", "abort", "error", "repetition")
            ],
        )
        return Response(200, ("\n".join(out) + "\n").encode(), payloads.PROM)

    @app.route("GET", "/health")
    @app.route("GET", "/ping")
    def health(req: Request) -> Response:
        return Response(200, b"", JSON)  # formats.md 4.4: 200, empty, while the core is alive

    @app.route("GET", "/v1/models")
    def models(req: Request) -> Response:
        card = {**payloads.VLLM_MODELS["data"][0], "id": args.model, "root": args.model}
        return as_json({**payloads.VLLM_MODELS, "data": [{**card, "max_model_len": args.ctx_size}]})

    @app.route("GET", "/version")
    def version(req: Request) -> Response:
        return as_json({"version": VLLM_VERSION})

    @app.route("GET", "/load")
    def load(req: Request) -> Response:
        return as_json({"server_load": engine.published["running"] + engine.published["waiting"]})

    @app.route("POST", "/v1/chat/completions")
    def chat(req: Request) -> Response:
        return chat_answer(engine, _run(engine, req.json(), args.model), {})

    @app.route("POST", "/v1/completions")
    def completions(req: Request) -> Response:
        return text_answer(engine, _run(engine, req.json(), args.model))

    return app


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-m", "--model", default="/models/Qwen3-8B-Q4_K_M.gguf")
    parser.add_argument("-np", "--parallel", "--max-num-seqs", type=int, default=2)
    parser.add_argument("-c", "--ctx-size", "--max-model-len", type=int, default=16384)
    parser.add_argument("--tok-s", type=float, default=20.0, help="tokens per second per slot")
    parser.add_argument("--pp-tok-s", type=float, default=4000.0, help="prompt tokens per s")
    parser.add_argument("--answer-tokens", type=int, default=40, help="the model's EOS length")
    parser.add_argument("--weights-mib", type=int, default=1100)
    parser.add_argument("--kv-kib-per-token", type=int, default=16)
    parser.add_argument("--block-tokens", type=int, default=256)
    parser.add_argument("--fault", choices=("none", "device-hang", "reasoning-only"))
    parser.add_argument("--fault-after", type=int, default=0, help="finished requests first")


def main(args: argparse.Namespace) -> None:
    engine = Engine(args)
    app = llama_server(engine) if args.kind == "llama-server" else vllm(engine)
    if args.kind == "llama-server":  # listens at once and answers 503 while loading (6.3)
        server = app.serve(args.port)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        engine.load()
    else:  # vLLM's HTTP server comes up after the engine (4.4)
        engine.load()
        server = app.serve(args.port)
        threading.Thread(target=server.serve_forever, daemon=True).start()
    threading.Thread(target=engine.loop, daemon=True).start()
    write_ready(args.ready, port=server.server_address[1], kind=args.kind)
    threading.Event().wait()
