"""The engines' periodic stats lines as readings, where nothing scraped the queue or cache.

The lines are the engines' own: vLLM v1 (formats.md 9.5 prefix), the v0 line an operator
pasted in vllm-project/vllm#1492 (cut where the stored copy was cut), SGLang's decode line.
"""

from pathlib import Path

import pytest
from test_classify import AT, GIB, TOTAL, answered_while_timed_out, base, scores, verdict

from evidence.analyze.statlines import Reading, loads, prompts, readings
from evidence.analyze.tags import tags_of
from lab.builder import Builder

V1 = (
    "(APIServer pid=4242) INFO 11-29 02:41:{s:02d} [loggers.py:127] Engine 000: Avg prompt "
    "throughput: 812.4 tokens/s, Avg generation throughput: 61.0 tokens/s, Running: {r} reqs, "
    "Waiting: {w} reqs, GPU KV cache usage: {kv}%, Prefix cache hit rate: 12.5%"
)
V0_CUT = (
    "INFO 10-27 20:44:35 llm_engine.py:624] Avg prompt throughput: 642.0 tokens/s, Avg "
    "generation throughput: 61.0 tokens/s, Running: 2 reqs, Swapped: 0 reqs, Pending: 20 reqs, "
    "GPU KV cache u"
)
SGLANG = (
    "[2026-11-29 05:55:30] Decode batch. #running-req: {r}, #token: 4439, token usage: {u}, "
    "cuda graph: True, gen throughput (token/s): 13.50, #queue-req: {w}, "
)


def test_each_engine_line_reads_as_running_waiting_and_cache():
    lines = [
        V1.format(s=0, r=8, w=5, kv="38.7"),
        V0_CUT,
        SGLANG.format(r=1, u="0.34", w=0),
        "INFO 11-29 02:41:00 [api_server.py:1] Started server process",
    ]
    assert readings(lines) == [
        Reading(8, 5, 0.387, 812.4 + 61.0),  # prompt and generated tokens per second
        Reading(2, 20, None, 642.0 + 61.0),  # the cache figure was cut off: unknown, not 0
        Reading(1, 0, 0.34, 13.5),
    ]
    assert all("engine-stats" in tags_of(line) for line in lines[:3])
    assert "engine-stats" not in tags_of(lines[3])


# vllm-project/vllm#2731, as the operator pasted it: the engine loop stopped with 35
# requests running and 116 pending while /health kept answering.
V0_WEDGED = [
    "INFO 02-01 06:36:05 llm_engine.py:921] Avg prompt throughput: 382.6 tokens/s, Avg "
    "generation throughput: 118.5 tokens/s, Max iteration time: 386.7 ms, Avg time/tok:149.4 "
    "ms, Running: 35 reqs, Swapped: 0 reqs, Pending: 115 reqs, GPU KV cache usage: 99.0%, CPU "
    "KV cache usage: 0.0%",
    'INFO:     10.244.5.235:41834 - "POST /v1/completions HTTP/1.1" 200 OK',
    "INFO 02-01 06:36:20 llm_engine.py:921] Avg prompt throughput: 0.0 tokens/s, Avg "
    "generation throughput: 0.0 tokens/s, Max iteration time: 0.0 ms, Avg time/tok:0.0 ms, "
    "Running: 35 reqs, Swapped: 0 reqs, Pending: 116 reqs, GPU KV cache usage: 99.0%, CPU KV "
    "cache usage: 0.0%",
    'INFO:     10.244.39.1:50926 - "GET /health HTTP/1.1" 200 OK',
]


def test_a_line_wrapped_before_its_counts_keeps_its_throughput():
    """A pasted v1 line broken before `Running:` (vllm-project/vllm#39863 as quoted)."""
    lines = [
        "INFO: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s",
        "Running: 0 reqs, Waiting: 3 reqs, GPU KV cache usage: 0.0%",
    ]
    assert readings(lines) == [Reading(0, 3, 0.0, 0.0)]
    assert readings(lines[1:]) == [Reading(0, 3, 0.0, None)]  # no throughput: unknown


def test_a_queue_behind_an_engine_that_did_nothing_for_its_interval_is_no_progress(tmp_path):
    """35 running, 116 waiting, 0.0 tokens/s: busy and nothing moved. The queue is not
    more callers (it read as concurrency-overload before the throughput was read)."""
    b = base(trigger=("healthcheck", "completion", "no answer within 60 s")).logs(V0_WEDGED)
    result = verdict(tmp_path, b)
    assert result["verdict"] in ("wedged-no-progress", "ambiguous"), scores(result)
    wedged = next(c for c in result["candidates"] if c["fault"] == "wedged-no-progress")
    assert wedged["score"] >= 4 and "0.0 tokens/s" in wedged["evidence_for"][0], wedged
    assert scores(result)["concurrency-overload"] < 3, scores(result)


def test_one_request_just_arrived_at_an_idle_engine_is_not_a_stop(tmp_path):
    """The look-alike: one line, one request running and none waiting at 0.0 tokens/s is a
    request whose first step had not come by the line; it says nothing of a stop."""
    line = V1.format(s=0, r=1, w=0, kv="0.4").replace("812.4", "0.0").replace("61.0", "0.0")
    b = base(trigger=("healthcheck", "completion", "no answer within 60 s")).logs([line])
    result = verdict(tmp_path, b)
    assert scores(result)["wedged-no-progress"] == 0, scores(result)


def test_the_periodic_cache_line_is_not_a_cache_error():
    assert "kv-cache" not in tags_of(V1.format(s=0, r=1, w=0, kv="99.0"))
    assert "kv-cache" in tags_of("ValueError: No available memory for the cache blocks.")


def test_a_queue_in_the_stats_lines_is_overload_when_a_check_timed_out(tmp_path):
    """No Prometheus: the check timed out, and the engine's own lines show every slot
    busy with requests waiting behind them."""
    lines = [V1.format(s=i, r=8, w=4 + i, kv="38.0") for i in range(12)]
    b = base(trigger=("healthcheck", "gateway", "no answer within 60 s")).logs(lines)
    result = verdict(tmp_path, b)
    assert result["verdict"] == "concurrency-overload", scores(result)
    assert "stats lines" in result["candidates"][0]["evidence_for"][0]


def test_waiting_now_and_then_on_a_quiet_day_is_not_a_fault(tmp_path):
    lines = [V1.format(s=i, r=2 + i % 3, w=1 if i == 5 else 0, kv="10.0") for i in range(12)]
    result = verdict(tmp_path, base(trigger=("cron", "baseline")).logs(lines))
    assert result["verdict"] == "no-fault", scores(result)


def test_a_queue_in_minutes_of_stats_lines_with_nothing_failed_is_a_note(tmp_path):
    """An always-busy agent box: its engine queues in most lines of the log's last minutes,
    and every check passed. A busy spell to mention, not an incident."""
    lines = [V1.format(s=i, r=1, w=3 + i % 5, kv="50.0") for i in range(48)]
    result = verdict(tmp_path, base(trigger=("cron", "baseline")).logs(lines))
    assert result["verdict"] == "no-fault", scores(result)
    assert any(
        f.startswith("noted, not a fault (concurrency-overload") and "nothing failed" in f
        for f in result["findings"]
    ), result["findings"]


def test_the_cache_per_request_rising_in_the_stats_lines_is_creep(tmp_path):
    """SGLang holding one request whose context grows until the check times out."""
    usage = [0.30, 0.32, 0.34, 0.40, 0.45, 0.52, 0.58, 0.63, 0.70]
    lines = [SGLANG.format(r=1, u=u, w=0) for u in usage]
    b = base(trigger=("healthcheck", "gateway", "no answer within 120 s")).logs(lines)
    result = verdict(tmp_path, b)
    assert result["verdict"] == "context-creep", scores(result)


def test_a_queue_behind_a_full_cache_held_by_one_request_is_the_context(tmp_path):
    """vLLM admits a request when its cache fits: one running request held 99 % of the
    KV cache while a dozen waited and the check timed out. More slots would not have let
    one more in; the context is what filled it."""
    lines = [V1.format(s=i, r=1, w=9 + i % 4, kv="99.1") for i in range(12)]
    b = base(trigger=("healthcheck", "gateway", "no answer within 60 s")).logs(lines)
    result = verdict(tmp_path, b)
    assert result["verdict"] == "context-creep", scores(result)
    assert "waited behind a full KV cache" in result["candidates"][0]["evidence_for"][0]
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    assert any("not more callers than slots" in e for e in queue["evidence_against"]), queue


@pytest.mark.parametrize("kv", ["99.1", "30.0"], ids=["cache-full", "cache-with-room"])
def test_nothing_moving_behind_a_full_cache_is_how_the_context_ended(tmp_path, kv):
    """The engine's last stats line read and generated nothing with one request running
    and others waiting. With the cache full of that request, the context left no room to
    go on: the creep is why, the stop how it ended. With room in the cache nothing
    explains the stop: the engine is wedged."""
    lines = [V1.format(s=i, r=1, w=9 + i % 4, kv=kv) for i in range(12)]
    lines[-1] = lines[-1].replace("812.4", "0.0").replace("61.0", "0.0")
    b = base(trigger=("healthcheck", "gateway", "no answer within 60 s")).logs(lines)
    result = verdict(tmp_path, b)
    full = kv == "99.1"
    want = "context-creep" if full else "wedged-no-progress"
    assert result["verdict"] == want, scores(result)
    wedged = next(c for c in result["candidates"] if c["fault"] == "wedged-no-progress")
    assert any("no room left to go on" in e for e in wedged["evidence_against"]) == full, wedged


@pytest.mark.parametrize(
    ("kv", "want"), [("55.0", "context-creep"), ("20.0", "concurrency-overload")]
)
def test_a_queue_behind_one_request_holding_more_than_the_cache_has_left_is_the_context(
    tmp_path, kv, want
):
    """One request running while others waited, holding 55 % of vLLM's KV cache: the 45 %
    left cannot take another as long, so the cache, not a slot, held them back. Holding
    20 %, the cache had room for four more: the slots were the limit."""
    lines = [V1.format(s=i, r=1, w=2 + i % 3, kv=kv) for i in range(12)]
    b = base(trigger=("healthcheck", "gateway", "no answer within 60 s")).logs(lines)
    result = verdict(tmp_path, b)
    assert result["verdict"] == want, scores(result)


def _beside_a_deep_check_timed_out(tmp_path, lines: list[str]) -> tuple[str, list[str]]:
    """The verdict on vLLM's stats lines `lines` where its own endpoint answered and the
    gateway's completion check timed out, and what false-liveness says against itself."""
    b = base(trigger=("healthcheck", "gateway", "no answer within 60 s")).logs(lines)
    b.checks(answered_while_timed_out(("vllm", "http"), "gateway", "no answer within 60 s"))
    result = verdict(tmp_path, b)
    live = next(c for c in result["candidates"] if c["fault"] == "false-liveness")
    return result["verdict"], live["evidence_against"]


def test_each_request_filling_the_whole_cache_in_turn_is_the_context(tmp_path):
    """vLLM answering one request at a time, each filling its whole KV cache, idle between
    them, until the check timed out: conversations as long as the cache holds. Tokens were
    read and generated in every line: the engine worked, it did not hang."""
    lines = [V1.format(s=i, r=i % 2, w=0, kv="100.0" if i % 2 else "0.0") for i in range(12)]
    named, against = _beside_a_deep_check_timed_out(tmp_path, lines)
    assert named == "context-creep", against
    assert any("it was working, not stuck" in e for e in against), against


def test_a_shallow_check_answering_beside_that_stop_is_how_the_context_ended_too(tmp_path):
    """The same stop behind a cache full of one request, where the engine's own endpoint
    answered and the completion did not: the port up and nothing answering is how the
    creep looked from outside, not a layer that hung."""
    lines = [V1.format(s=i, r=1, w=9 + i % 4, kv="99.1") for i in range(12)]
    lines[-1] = lines[-1].replace("812.4", "0.0").replace("61.0", "0.0")
    named, against = _beside_a_deep_check_timed_out(tmp_path, lines)
    assert named == "context-creep", against
    assert any("no room left to go on" in e for e in against), against


def test_a_full_cache_shared_by_many_running_requests_is_still_overload(tmp_path):
    """The look-alike: the same full cache and the same queue, shared by 24 requests
    running at once: more callers than the engine can hold."""
    lines = [V1.format(s=i, r=24, w=9 + i % 4, kv="99.1") for i in range(12)]
    b = base(trigger=("healthcheck", "gateway", "no answer within 60 s")).logs(lines)
    result = verdict(tmp_path, b)
    assert result["verdict"] == "concurrency-overload", scores(result)


def test_a_queue_beside_a_cache_with_room_waited_for_slots_not_context(tmp_path):
    """Eight running, the slot limit, hundreds waiting and the cache 10-60 % used: the
    cache per request drifting up is no creep, since nobody waited for the cache."""
    kv = [6.0, 8.0, 12.0, 11.0, 15.0, 11.0, 17.0, 12.0, 25.0, 24.0, 15.0, 50.0, 50.0, 60.0]
    lines = [V1.format(s=i, r=8 if i > 1 else 5, w=0 if i < 2 else 80 * i, kv=k)
             for i, k in enumerate(kv)]  # fmt: skip
    b = base(trigger=("healthcheck", "gateway", "no answer within 120 s")).logs(lines)
    result = verdict(tmp_path, b)
    assert result["verdict"] == "concurrency-overload", scores(result)
    creep = next(c for c in result["candidates"] if c["fault"] == "context-creep")
    assert creep["score"] == 0 and "waited for a slot" in creep["evidence_against"][0], creep


def test_a_queue_deepening_while_the_engine_took_more_in_is_overload(tmp_path):
    """vLLM's stats through a retry storm: one long request at first, then the engine
    filling its sixteen sequences while the queue went from dozens to hundreds; the
    ceiling of sixteen was reached only late, so few lines show it."""
    running = [1, 1, 1, 1, 6, 3, 5, 13, 14, 14, 16, 15, 16, 16, 15, 15, 15, 16, 15, 14]
    waiting = [41, 50, 51, 60, 47, 50, 53, 150, 216, 292, 368, 379, 382, 392, 396, 394, 375,
               377, 363, 380]  # fmt: skip
    kv = [77, 71, 74, 76, 100, 94, 99, 95, 98, 97, 98, 99, 94, 93, 97, 100, 98, 94, 93, 99]
    lines = [
        V1.format(s=i, r=r, w=w, kv=k)
        for i, (r, w, k) in enumerate(zip(running, waiting, kv, strict=True))
    ]
    b = base(trigger=("healthcheck", "gateway", "no answer within 90 s")).logs(lines)
    result = verdict(tmp_path, b)
    assert result["verdict"] == "concurrency-overload", scores(result)
    assert "queue deepening from" in result["candidates"][0]["evidence_for"][0]


def test_a_queue_deepening_as_each_request_holds_more_cache_is_not_more_callers(tmp_path):
    """The look-alike: the queue deepens and a few more run, but each running request
    holds more of the cache line after line: longer contexts, not more callers."""
    running = [2, 2, 2, 2, 2, 3, 3, 3, 3]
    waiting = [3, 4, 4, 6, 7, 9, 10, 12, 14]
    kv = [30, 34, 40, 50, 60, 96, 97, 98, 99]
    lines = [
        V1.format(s=i, r=r, w=w, kv=k)
        for i, (r, w, k) in enumerate(zip(running, waiting, kv, strict=True))
    ]
    b = base(trigger=("healthcheck", "gateway", "no answer within 90 s")).logs(lines)
    result = verdict(tmp_path, b)
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    assert not any("queue deepening" in e for e in queue["evidence_for"]), queue


LLAMA = (
    "slot update_slots: id  0 | task {k} | new prompt, n_ctx_slot = 16384, n_keep = 0, {key} = {n}"
)


def test_llama_servers_prompt_lines_read_in_both_wordings():
    lines = [
        LLAMA.format(k=1, key="task.n_tokens", n=5403),  # 2025 builds, at info level
        LLAMA.format(k=2, key="n_prompt_tokens", n=2015),  # older ones
    ]
    assert [(p.slot_context, p.tokens) for p in prompts(lines)] == [(16384, 5403), (16384, 2015)]
    assert all("engine-stats" in tags_of(line) for line in lines)


def test_prompts_growing_to_fill_the_slot_are_creep(tmp_path):
    sizes = [5000, 5600, 6300, 7100, 8000, 9000, 10100, 11300, 12600]
    lines = [LLAMA.format(k=k, key="task.n_tokens", n=n) for k, n in enumerate(sizes)]
    b = base(trigger=("healthcheck", "gateway", "no answer within 60 s")).logs(lines)
    result = verdict(tmp_path, b)
    assert result["verdict"] == "context-creep", scores(result)
    assert "prompts went from" in result["candidates"][0]["evidence_for"][0]


def test_short_prompts_of_a_steady_chat_are_not_creep(tmp_path):
    sizes = [900, 1400, 800, 1200, 1000, 1300, 950, 1250, 1100]
    lines = [LLAMA.format(k=k, key="task.n_tokens", n=n) for k, n in enumerate(sizes)]
    b = base(trigger=("healthcheck", "gateway", "no answer within 60 s")).logs(lines)
    result = verdict(tmp_path, b)
    creep = next(c for c in result["candidates"] if c["fault"] == "context-creep")
    assert creep["score"] == 0, scores(result)


def _full_slot_prompts(reason: str) -> Builder:
    """Every prompt of the log's tail fills nearly all of its 16384-token slot, not seen
    growing; the gateway's check failed for `reason`."""
    sizes = [15500, 15900, 15300, 16000, 15700, 15600, 15800, 15400, 15900]
    lines = [LLAMA.format(k=k, key="task.n_tokens", n=n) for k, n in enumerate(sizes)]
    return base(trigger=("healthcheck", "gateway", reason)).logs(lines)


def test_prompts_filling_the_slot_beside_a_check_that_timed_out_are_creep(tmp_path):
    result = verdict(tmp_path, _full_slot_prompts("no answer within 60 s"))
    assert result["verdict"] == "context-creep", scores(result)
    assert "the prompts nearly fill the slot" in result["candidates"][0]["evidence_for"][0]


@pytest.mark.parametrize("earlier", [13000.0, 16000.0], ids=["a-new-high", "as-high-all-day"])
def test_the_same_prompts_beside_a_high_water_that_did_not_tell_are_creep(tmp_path, earlier):
    """Prometheus has the context high-water: an agent box's contexts were long all day
    (13,000 tokens at most before), and tonight's 16,000 is a new high, if not a quarter
    past it. The log still says each prompt fills its slot, and the queue's rule defers to
    that. Where the high-water stood at 16,000 all day, prompts as long ran earlier too."""
    day = [AT - 86400 + 300 * i for i in range(288)]
    mark = [(t, 16000.0 if i >= 276 else earlier) for i, t in enumerate(day)]
    b = _full_slot_prompts("no answer within 60 s").prometheus({"context_high_water": mark})
    result = verdict(tmp_path, b)
    assert (result["verdict"] == "context-creep") == (earlier < 16000), scores(result)


def test_the_same_prompts_beside_a_check_refused_are_not_enough(tmp_path):
    result = verdict(tmp_path, _full_slot_prompts("HTTP 502"))
    assert result["verdict"] != "context-creep", scores(result)


# A real llama-server (b1-0c1e570, built here; tests/fixtures/engines/README.md) at its
# default log level: the slot context once at start, each request's context at its end.
REAL_LOG = Path(__file__).parent / "fixtures" / "engines" / "llamacpp-server-real-b1-0c1e570.log"
RELEASE = (
    "0.01.{k:03d}.219 I slot      release: id  1 | task {k} | stop processing: "
    "n_tokens = {n}, truncated = 0"
)


def test_a_real_servers_release_lines_read_against_its_slot_context():
    lines = REAL_LOG.read_text().splitlines()
    found = [(p.slot_context, p.tokens, p.at_release) for p in prompts(lines)]
    assert found == [(512, 32, True), (512, 511, True)]  # the second filled its slot
    kept = [line for line in lines if "engine-stats" in tags_of(line)]
    assert len(kept) == 3 and "n_ctx_slot = 512" in kept[0]


def test_requests_growing_to_fill_the_slot_at_release_are_creep(tmp_path):
    start = next(ln for ln in REAL_LOG.read_text().splitlines() if "n_ctx_slot" in ln)
    sizes = [110, 125, 150, 170, 200, 240, 290, 350, 420]
    lines = [start] + [RELEASE.format(k=k, n=n) for k, n in enumerate(sizes)]
    b = base(trigger=("healthcheck", "gateway", "no answer within 60 s")).logs(lines)
    result = verdict(tmp_path, b)
    assert result["verdict"] == "context-creep", scores(result)
    said = result["candidates"][0]["evidence_for"][0]
    assert "the context each request held went from" in said and "slot context of 512" in said


def _llama_server(context: int, slots: int) -> dict:
    return {
        "pid": 4242,
        "name": "llama-server",
        "cmdline": [
            "/usr/local/bin/llama-server",
            "-m",
            "/m.gguf",
            "-c",
            str(context),
            "-np",
            str(slots),
        ],  # fmt: skip
        "rss_bytes": 2 << 30,
    }


def test_release_lines_read_against_the_slot_the_command_line_gives(tmp_path):
    """The server started days ago: its start line is older than the log kept. Its
    command line splits -c over --parallel (8192 over 2: 4096 tokens a slot)."""
    sizes = [900, 1000, 1200, 1500, 1900, 2400, 2900, 3400, 3900]
    b = base(trigger=("healthcheck", "gateway", "no answer within 60 s"))
    b.processes([_llama_server(8192, 2)])
    result = verdict(tmp_path, b.logs([RELEASE.format(k=k, n=n) for k, n in enumerate(sizes)]))
    assert result["verdict"] == "context-creep", scores(result)
    assert "slot context of 4096" in result["candidates"][0]["evidence_for"][0]


def _died_filling_its_slot(sizes: list[int], seen_before: bool) -> list[Builder]:
    """llama-server aborted on a CUDA allocation; the capture no longer finds it running,
    and its log's tail holds only release lines. With `seen_before`, the half-hourly cron
    bundle before found it running with -c 16384 -np 1."""
    at = AT - 1800
    earlier = Builder("spark-1", at, total=TOTAL, trigger=("cron", "baseline"), window_s=0)
    earlier.memory([(at, 40 * GIB)]).pressure([(at, 0.0)]).host().kernel([]).logs([])
    earlier.processes([_llama_server(16384, 1)] if seen_before else [])
    lines = [RELEASE.format(k=k, n=n) for k, n in enumerate(sizes)]
    now = base(trigger=("healthcheck", "gateway", "HTTP 502")).processes([])
    return [earlier, now.logs([*lines, "CUDA error: out of memory"])]


FULL_SLOT = [15500, 15900, 15300, 16000, 15700, 15600, 15800, 15400, 15900]


def test_a_dead_servers_slot_is_the_one_its_last_command_line_gave(tmp_path):
    """Every request the server released filled nearly all of its slot, then an allocation
    on the card failed: the conversations took the card, the allocation failure is how it
    ended. The slot's size comes from the bundle before, where the server still ran."""
    result = verdict(tmp_path, *_died_filling_its_slot(FULL_SLOT, seen_before=True))
    assert result["verdict"] == "context-creep", scores(result)
    said = result["candidates"][0]["evidence_for"][0]
    assert "slot context of 16384: the prompts nearly fill the slot" in said


def test_the_same_lines_with_no_slot_size_anywhere_are_only_how_it_ended(tmp_path):
    result = verdict(tmp_path, *_died_filling_its_slot(FULL_SLOT, seen_before=False))
    assert result["verdict"] == "accelerator-oom", scores(result)


def test_short_requests_before_the_allocation_failed_are_no_creep(tmp_path):
    short = [2100, 1800, 2500, 1900, 2300, 2000, 2200, 1700, 2400]
    result = verdict(tmp_path, *_died_filling_its_slot(short, seen_before=True))
    creep = next(c for c in result["candidates"] if c["fault"] == "context-creep")
    assert creep["score"] == 0 and "slot context of 16384" in creep["evidence_against"][0]


CUT = (
    "0.02.{k:03d}.219 I slot      release: id  0 | task {k} | stop processing: "
    "n_past = {n}, truncated = {cut}"
)


def _released(cuts: list[int]) -> list[str]:
    # n_past (builds before 2026): the flag reads in either wording, the length does not.
    return [CUT.format(k=k, n=4000 + 100 * k, cut=c) for k, c in enumerate(cuts)]


def test_requests_that_start_to_outgrow_their_slot_are_creep(tmp_path):
    cuts = [0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1]
    b = base(trigger=("healthcheck", "gateway", "no answer within 60 s")).logs(_released(cuts))
    result = verdict(tmp_path, b)
    creep = next(c for c in result["candidates"] if c["fault"] == "context-creep")
    assert any("3 of its last 4 requests outgrew their slot" in e for e in creep["evidence_for"])
    assert creep["score"] >= 3, scores(result)


def test_requests_that_always_outgrew_their_slot_are_how_it_is_used(tmp_path):
    cuts = [1, 0, 0, 1, 0, 0, 1, 0, 1, 1, 0, 1]
    b = base(trigger=("healthcheck", "gateway", "no answer within 60 s")).logs(_released(cuts))
    creep = next(c for c in verdict(tmp_path, b)["candidates"] if c["fault"] == "context-creep")
    assert not any("outgrew" in e for e in creep["evidence_for"])


def test_release_lines_without_the_start_line_are_not_read():
    # The slot's size is unknown: a length alone says nothing about filling it.
    assert prompts([RELEASE.format(k=1, n=500)]) == []


# Ollama's load line as its users paste it (ollama/ollama#8098, #9509; 2024-2025 releases).
OLLAMA_LOAD = (
    'time=2026-11-29T0{h}:00:00.907Z level=INFO source=server.go:376 msg="starting llama '
    'server" cmd="/usr/lib/ollama/runners/cuda_v12_avx/ollama_llama_server runner --model '
    "/root/.ollama/models/blobs/sha256-{blob} --ctx-size {ctx} --batch-size 512 --n-gpu-layers "
    '29 --threads 104 --parallel 4 --port 38609"'
)
OLLAMA_FAILED = (
    'time=2026-11-29T05:00:09.112Z level=ERROR source=sched.go:476 msg="error loading llama '
    'server" error="llama runner process has terminated: cudaMalloc failed: out of memory"'
)


def test_ollamas_load_line_reads_as_the_context_per_sequence():
    line = OLLAMA_LOAD.format(h=1, blob="dde5", ctx=8192)
    assert [(x.model, x.context) for x in loads([line])] == [
        ("/root/.ollama/models/blobs/sha256-dde5", 2048)  # --ctx-size is all four together
    ]
    assert "engine-stats" in tags_of(line)


def test_a_model_reloaded_with_ever_more_context_before_a_failed_load_is_creep(tmp_path):
    lines = [OLLAMA_LOAD.format(h=h, blob="dde5", ctx=c) for h, c in ((1, 8192), (2, 16384))]
    lines += [OLLAMA_LOAD.format(h=4, blob="dde5", ctx=32768), OLLAMA_FAILED]
    b = base(trigger=("healthcheck", "ollama", "HTTP 500")).logs(lines)
    result = verdict(tmp_path, b)
    assert result["verdict"] == "context-creep", scores(result)
    assert "reloaded with longer contexts (2048 -> 4096 -> 8192" in str(result["candidates"][0])


def test_reloads_at_the_same_context_and_another_model_are_not_creep(tmp_path):
    lines = [OLLAMA_LOAD.format(h=h, blob="dde5", ctx=8192) for h in (1, 2, 3)]
    lines += [OLLAMA_LOAD.format(h=4, blob="77aa", ctx=32768), OLLAMA_FAILED]
    b = base(trigger=("healthcheck", "ollama", "HTTP 500")).logs(lines)
    result = verdict(tmp_path, b)
    assert result["verdict"] == "accelerator-oom", scores(result)
    creep = next(c for c in result["candidates"] if c["fault"] == "context-creep")
    assert creep["score"] == 0


def test_a_shallow_check_answering_beside_the_queue_is_no_rival_to_it(tmp_path):
    """The engine's /health answered and the gateway's completion timed out: that contrast
    is the queue the stats lines show, not a layer that stopped answering."""
    lines = [V1.format(s=i, r=8, w=60 + 10 * i, kv="4.0") for i in range(12)]
    b = base(trigger=("healthcheck", "gateway", "no answer within 90 s")).logs(lines)
    b.checks(answered_while_timed_out(("vllm", "http"), "gateway", "no answer within 90 s"))
    result = verdict(tmp_path, b)
    assert result["verdict"] == "concurrency-overload", scores(result)
    liveness = next(c for c in result["candidates"] if c["fault"] == "false-liveness")
    assert liveness["score"] <= 1 and "the timeout is the queue" in str(liveness)
