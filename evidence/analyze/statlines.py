"""The engines' own periodic stats lines, read as readings: the queue and the cache where
nothing scraped them (no Prometheus, an engine's /metrics not configured).

- vLLM logs every ten seconds while busy (formats.md 9.5 for the prefix; the same text in
  the incidents operators paste): v1 `Running: 8 reqs, Waiting: 5 reqs, GPU KV cache
  usage: 38.7%`, v0 `Running: 2 reqs, Swapped: 0 reqs, Pending: 20 reqs, GPU KV cache
  usage: 98.7%`. A pasted line may be cut before the cache figure: the counts still read.
  Both lead with the throughput since the previous line (`Avg prompt throughput: 0.0
  tokens/s, Avg generation throughput: 0.0 tokens/s`): 0.0 of both beside requests
  running or waiting is an engine that did nothing for its interval (10 s by default).
- SGLang's decode batch line: `#running-req: 1, #token: 4439, token usage: 0.34, ...,
  gen throughput (token/s): 13.50, #queue-req: 0`.
- llama-server's line for each request it starts: `new prompt, n_ctx_slot = 8192,
  n_keep = 0, task.n_tokens = 5403` (older builds: `n_prompt_tokens = 5403`): how long
  each prompt was against the slot's context. Builds of 2026 (b1-0c1e570, seen running)
  log that line at trace level only; at the default level they log the slot context once
  at start (`load_model: initializing, n_slots = 2, n_ctx_slot = 4096, ...`) and, as each
  request ends, the context it held (`slot release: id 1 | task 9 | stop processing:
  n_tokens = 511, truncated = 1`): prompt and answer together.
- Ollama's line for each load of a model (2024-2025 releases, as pasted in its issues):
  `msg="starting llama server" cmd="... --model /…/blobs/sha256-… --ctx-size 8192
  --batch-size 512 ... --parallel 4 --port 36611"`: the context it was loaded with, all
  sequences together (num_ctx times --parallel).

Invariants:
- One reading per line, in the log's order; a figure the line does not hold is absent,
  never 0. The cache share is a fraction (vLLM's percent divided by 100).
- Pure: text in, readings out.
"""

import re
from dataclasses import dataclass
from datetime import datetime

_LINES = (
    re.compile(
        r"Running: (?P<running>\d+) reqs,(?: Swapped: \d+ reqs,)? (?:Waiting|Pending): "
        r"(?P<waiting>\d+) reqs(?:, GPU KV cache usage: (?P<percent>[\d.]+)%)?"
    ),
    re.compile(
        r"#running-req: (?P<running>\d+),.*?token usage: (?P<share>[\d.]+),"
        r".*?#queue-req: (?P<waiting>\d+)"
    ),
)
# The throughput a stats line leads with; a pasted line may be wrapped before `Running:`,
# so a line of throughput alone gives it to the counts on the next.
_VLLM_RATE = re.compile(
    r"Avg prompt throughput: (?P<prompt>[\d.]+) tokens/s, "
    r"Avg generation throughput: (?P<generation>[\d.]+) tokens/s"
)
_SGLANG_RATE = re.compile(r"gen throughput \(token/s\): (?P<generation>[\d.]+)")
_PROMPT = re.compile(
    r"new prompt, n_ctx_slot = (?P<slot>\d+),"
    r".*?(?:task\.n_tokens|n_prompt_tokens) = (?P<tokens>\d+)"
)
_SLOT_CONTEXT = re.compile(r"initializing, n_slots = \d+, n_ctx_slot = (?P<slot>\d+)")
_RELEASE = re.compile(r"stop processing: n_tokens = (?P<tokens>\d+)")
# Every build's release line says whether the request outgrew its slot (the context was
# shifted or cut): `n_past` before 2026, `n_tokens` since.
_TRUNCATED = re.compile(r"stop processing: n_(?:past|tokens) = \d+, truncated = (?P<cut>[01])")
_LOAD = re.compile(
    r'starting llama server" cmd=".*?--model (?P<model>\S+).*?--ctx-size (?P<ctx>\d+)'
)
_PARALLEL = re.compile(r"--parallel (\d+)")
# Go's slog writes each line's time first (`time=2025-03-05T06:58:54.116Z level=INFO ...`).
_TIME = re.compile(r"\btime=(\S+)")
# The tag that keeps these lines at ingest (analyze/tags.py): the same words.
PATTERN = (
    r"Running: \d+ reqs, (?:Swapped: \d+ reqs, )?(?:Waiting|Pending): \d+|#running-req: \d+"
    r"|Avg prompt throughput: [\d.]+ tokens/s"
    r"|new prompt, n_ctx_slot = \d+|starting llama server\" cmd=.*--ctx-size \d+"
    r"|initializing, n_slots = \d+, n_ctx_slot = \d+|stop processing: n_(?:past|tokens) = \d+"
)


@dataclass(frozen=True)
class Reading:
    running: int
    waiting: int
    cache: float | None  # share of the KV cache in use, 0..1
    # Tokens per second since the previous line, prompt and generated together (vLLM's
    # two, SGLang's generation); None where the line does not say.
    throughput: float | None = None


def _throughput(line: str) -> float | None:
    if m := _VLLM_RATE.search(line):
        return float(m["prompt"]) + float(m["generation"])
    if m := _SGLANG_RATE.search(line):
        return float(m["generation"])
    return None


def readings(lines: list[str]) -> list[Reading]:
    out = []
    wrapped: float | None = None  # a line of throughput alone, for the counts that follow
    for line in lines:
        rate = _throughput(line)
        m = next(filter(None, (pattern.search(line) for pattern in _LINES)), None)
        if m is None:
            wrapped = rate  # any other line ends what a wrapped one left
            continue
        rate, wrapped = (wrapped if rate is None else rate), None
        found = m.groupdict()
        cache = (
            float(found["percent"]) / 100
            if found.get("percent")
            else float(found["share"])
            if found.get("share")
            else None
        )
        out.append(Reading(int(found["running"]), int(found["waiting"]), cache, rate))
    return out


@dataclass(frozen=True)
class Prompt:
    slot_context: int  # the tokens one slot holds
    tokens: int  # this request's prompt, or (at_release) all it held: prompt and answer
    at_release: bool = False


def prompts(lines: list[str], slot: int | None = None) -> list[Prompt]:
    """Each request's length against its slot's context, in the log's order. A release
    line counts only where the slot's size is known: from the start line, else as given
    (the server's /props or command line)."""
    out = []
    for line in lines:
        if m := _PROMPT.search(line):
            out.append(Prompt(int(m["slot"]), int(m["tokens"])))
        elif m := _SLOT_CONTEXT.search(line):
            slot = int(m["slot"])
        elif (m := _RELEASE.search(line)) and slot:
            out.append(Prompt(slot, int(m["tokens"]), at_release=True))
    return out


def truncations(lines: list[str]) -> list[bool]:
    """Whether each request llama-server released had outgrown its slot, in the log's
    order."""
    found = (_TRUNCATED.search(line) for line in lines)
    return [m["cut"] == "1" for m in found if m]


@dataclass(frozen=True)
class Load:
    model: str  # the weights' path, as the load line names it
    context: int  # the tokens one sequence may hold (num_ctx)
    at: float | None = None  # unix seconds, where the line says when


def loads(lines: list[str]) -> list[Load]:
    """Each load of a model and the context it was given, in the log's order."""
    out = []
    for line in lines:
        m = _LOAD.search(line)
        if m:
            parallel = _PARALLEL.search(line)
            seqs = max(1, int(parallel.group(1))) if parallel else 1
            when = _TIME.search(line)
            out.append(Load(m["model"], int(m["ctx"]) // seqs, go_time(when and when[1])))
    return out


def go_time(text: str | None) -> float | None:
    """An RFC 3339 time as Go writes it (nanoseconds, a zone) in unix seconds."""
    if not text:
        return None
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?$", text)
    if not m:
        return None
    zone = "+00:00" if m.group(3) in (None, "Z") else m.group(3)
    base = datetime.fromisoformat(m.group(1) + zone).timestamp()
    return base + float(f"0.{m.group(2) or 0}")
