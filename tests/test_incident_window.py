"""The incident window: a failure in evidence is never healthy, each shape is read over the
hours before the failure against the machine's own earlier hours, and the archive is a
history where there is no Prometheus.
"""

import re
from collections.abc import Callable

import pytest
from test_classify import (
    AT,
    DAY,
    GIB,
    TOTAL,
    WINDOW,
    answered_while_timed_out,
    available,
    base,
    healthy_bursts,
    noisy,
    scores,
    verdict,
)
from test_statlines import OLLAMA_FAILED, OLLAMA_LOAD, REAL_LOG, V1

from lab.builder import Builder, engine, iso


def up(job: str, values: list[float]) -> dict:
    return {"metric": {"__name__": "up", "job": job, "instance": f"127.0.0.1:{9000 + len(job)}"},
            "values": [[t, repr(v)] for t, v in zip(DAY, values, strict=True)]}  # fmt: skip


def history(b: Builder, named: dict[str, list[dict]]) -> Builder:
    """Query answers as Prometheus gives them, each series with its own labels."""
    return b.history(
        [
            {"name": name, "expr": name, "status": "ok", "reason": None, "series": series}
            for name, series in named.items()
        ],
        start=DAY[0],
        step_s=300,
    )


def plain(metric: str, values: list[float]) -> list[dict]:
    return [
        {
            "metric": {"__name__": metric, "job": "node", "instance": "box:9100"},
            "values": [[t, repr(v)] for t, v in zip(DAY, values, strict=True)],
        }
    ]


def test_a_gateway_that_went_down_is_never_called_healthy(tmp_path):
    n = len(DAY)
    gateway = [1.0] * (n - 6) + [0.0] * 6  # down for the last half hour
    b = history(
        base(trigger=("alert", "GatewayDown")),
        {
            "targets_up": [up("gateway", gateway)],
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [TOTAL - u for u in healthy_bursts()]
            ),
        },
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "insufficient-evidence", scores(result)
    said = " ".join(result["findings"])
    assert "gateway/127.0.0.1:9007 went down" in said
    assert "what would have told" in said
    assert result["context"]["failed_at"] == DAY[n - 6]


def test_a_target_that_never_ran_is_not_an_outage(tmp_path):
    b = history(
        base(trigger=("cron", "baseline")),
        {
            "targets_up": [up("gateway", [1.0] * len(DAY)), up("sglang", [0.0] * len(DAY))],
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [TOTAL - u for u in healthy_bursts()]
            ),
        },
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "no-fault", scores(result)
    assert result["context"]["failure"] is None


def seen(job: str, port: int, values: list[float | None]) -> dict:
    """An `up` series Prometheus has only where the target was scraped (None: no series)."""
    return {
        "metric": {"__name__": "up", "job": job, "instance": f"127.0.0.1:{port}"},
        "values": [[t, repr(v)] for t, v in zip(DAY, values, strict=True) if v is not None],
    }


def test_a_hand_over_earlier_in_the_day_is_not_an_outage(tmp_path):
    """llama-swap stopped the day's model for another and back at 02:00; the first model's
    server was restarted later on. The second's server went down as the first came back:
    a swap that worked, whatever the first did after."""
    n = len(DAY)
    first = [1.0] * 20 + [0.0] * 5 + [1.0] * 40 + [0.0] + [1.0] * (n - 66)
    second = [None] * 20 + [1.0] * 5 + [0.0] * (n - 25)
    b = history(
        base(trigger=("cron", "baseline")),
        {
            "targets_up": [
                up("gateway", [1.0] * n),
                seen("llama-server", 5806, first),
                seen("llama-server", 5807, second),
            ],
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [TOTAL - u for u in healthy_bursts()]
            ),
        },
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "no-fault", scores(result)
    assert result["context"]["failure"] is None


def test_a_queue_all_day_on_a_box_where_nothing_failed_is_how_it_runs(tmp_path):
    """Always-on agents keep a queue from the second hour of the look-back on: no hours
    before it to stand out from, and nothing failed."""
    n = len(DAY)
    waiting = [0.0] * 24 + [6.0] * (n - 24)
    b = base(trigger=("cron", "baseline")).prometheus(
        {
            "host_memory_available": available(healthy_bursts()),
            "requests_running": [(t, 2.0) for t in DAY],
            "requests_waiting": list(zip(DAY, waiting, strict=True)),
        }
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "no-fault", scores(result)
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    assert any("this machine's normal" in e for e in queue["evidence_against"])


def _nightly_batch(trigger: tuple[str, ...]) -> Builder:
    """vLLM idle all day; three hours before the capture a batch submitted hundreds of
    requests at once, far more than its 12 slots. The look-back does not reach last
    night's run, so nothing earlier in it queued."""
    n = len(DAY)
    batch = range(n - 36, n)
    waiting = [400.0 if i in batch else 0.0 for i in range(n)]
    running = [12.0 if i in batch else 0.0 for i in range(n)]
    return base(trigger=trigger).prometheus(
        {
            "host_memory_available": available(healthy_bursts()),
            "requests_running": list(zip(DAY, running, strict=True)),
            "requests_waiting": list(zip(DAY, waiting, strict=True)),
        }
    )


def test_a_nightly_batch_queueing_on_a_routine_snapshot_is_a_note(tmp_path):
    result = verdict(tmp_path, _nightly_batch(("cron", "baseline")))
    assert result["verdict"] == "no-fault", scores(result)
    assert any("requests waited for a slot" in n and "nothing failed" in n
               for n in result["findings"]), result["findings"]  # fmt: skip


def test_the_same_batch_behind_a_check_that_timed_out_is_overload(tmp_path):
    result = verdict(tmp_path, _nightly_batch(("healthcheck", "gateway", "no answer within 60 s")))
    assert result["verdict"] == "concurrency-overload", scores(result)
    assert "through the incident" in result["candidates"][0]["evidence_for"][0]


def _batch_sharing_the_cache(trigger: tuple[str, ...]) -> Builder:
    """vLLM serving one chat all day; the last three hours a batch ran 19 sequences at
    once. Each held a little more cache than the chat's (4 % against 2.8 %), but every
    hour sent six prompt tokens per generated token, the batch's as the chat's."""
    n = len(DAY)
    batch = [i >= n - 36 for i in range(n)]
    running = [19.0 if b else 1.0 for b in batch]
    cache = [19 * 0.04 if b else 0.028 for b in batch]
    generated, total = [], 0.0
    for b in batch:
        total += 1600.0 if b else 100.0  # tokens per five minutes
        generated.append(total)
    return base(trigger=trigger).prometheus(
        {
            "host_memory_available": available(healthy_bursts()),
            "requests_running": list(zip(DAY, running, strict=True)),
            "requests_waiting": [(t, 0.0) for t in DAY],
            "kv_cache_usage": list(zip(DAY, cache, strict=True)),
            "tokens_generated": list(zip(DAY, generated, strict=True)),
            "tokens_prompt": [(t, 6 * g) for t, g in zip(DAY, generated, strict=True)],
        }
    )


def _cache_filled_by_longer_chats() -> Builder:
    """SGLang running four chats at once through office hours every day, each holding a
    tenth of the KV cache. The last three hours the conversations grew: one sequence
    filled the cache, the others queued behind free slots, and a check timed out. The
    callers were as many as ever; each prompt carried far more per answer."""
    n = len(DAY)
    office = [100 <= i < 200 for i in range(n)]
    grown = [i >= n - 36 for i in range(n)]
    running = [1.0 if g else 4.0 if o else 0.0 for g, o in zip(grown, office, strict=True)]
    waiting = [6.0 if g else 0.0 for g in grown]
    cache = [0.98 if g else 0.1 * r for g, r in zip(grown, running, strict=True)]
    steps = [100.0 if g else 400.0 if o else 0.0 for g, o in zip(grown, office, strict=True)]
    return base(trigger=("healthcheck", "gateway", "no answer within 120 s")).prometheus(
        {
            "host_memory_available": available(healthy_bursts()),
            "requests_running": list(zip(DAY, running, strict=True)),
            "requests_waiting": list(zip(DAY, waiting, strict=True)),
            "kv_cache_usage": list(zip(DAY, cache, strict=True)),
            **_token_counters(steps, [60 if g else 6 for g in grown]),
        }
    )


def _token_counters(generated: list[float], per_answer: list[float]) -> dict[str, list]:
    """The generated and prompt token counters of a day: `generated` tokens in each five
    minutes, each with `per_answer` prompt tokens."""
    gen = prompt = 0.0
    counters: dict[str, list] = {"tokens_generated": [], "tokens_prompt": []}
    for t, step, ratio in zip(DAY, generated, per_answer, strict=True):
        gen, prompt = gen + step, prompt + step * ratio
        counters["tokens_generated"].append((t, gen))
        counters["tokens_prompt"].append((t, prompt))
    return counters


def test_a_queue_behind_free_slots_while_the_cache_filled_is_a_creep(tmp_path):
    result = verdict(tmp_path, _cache_filled_by_longer_chats())
    assert result["verdict"] == "context-creep", scores(result)
    creep = result["candidates"][0]
    assert not any("more callers" in e for e in creep["evidence_against"]), creep
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    assert not any("held" in e for e in queue["evidence_for"]), queue


def test_more_sequences_each_as_long_with_nothing_failed_is_no_creep(tmp_path):
    result = verdict(tmp_path, _batch_sharing_the_cache(("manual", None)))
    assert result["verdict"] == "no-fault", scores(result)
    creep = next(c for c in result["candidates"] if c["fault"] == "context-creep")
    assert any("more requests ran, each as long" in e for e in creep["evidence_for"]), creep


def test_a_second_engine_started_beside_the_first_then_the_kill_is_a_model_kept(tmp_path):
    """SGLang holds most of a GB10's pool all day; a llama-server for a second model came up
    two hours before the failure beside it. The full pool let the line rise only 5 GiB (less
    than a model's size), then the kernel killed SGLang: the coincidence is the evidence."""
    n = len(DAY)
    kill = (
        "Out of memory: Killed process 57698 (sglang::schedul) total-vm:93759998kB, "
        "anon-rss:11417203kB, file-rss:42177424kB, shmem-rss:0kB, UID:1000 pgtables:22954kB "
        "oom_score_adj:0"
    )
    used = noisy([114 * GIB] * (n - 26) + [119 * GIB] * 24 + [60 * GIB] * 2, 0.2 * GIB)
    b = history(
        base(trigger=("healthcheck", "gateway", "HTTP 502")).kernel([kill], ago_s=600),
        {
            "targets_up": [
                up("gateway", [1.0] * n),
                seen("sglang", 30000, [1.0] * n),
                seen("llama-server", 5809, [None] * (n - 26) + [1.0] * 24 + [0.0] * 2),
            ],
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [TOTAL - u for u in used]
            ),
        },
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "swap-not-unloaded", scores(result)
    said = result["candidates"][0]["evidence_for"][0]
    assert "llama-server/127.0.0.1:5809 came up" in said and "beside sglang" in said, said


def test_longer_prompts_from_a_second_models_callers_are_not_the_creep(tmp_path):
    """make eval 3434 through a real Prometheus (swap-not-unloaded-71543975012773): on a
    GB10, llama-swap started a second llama-server 3.5 h before the failure beside the
    first and the pool stepped 38 GiB and stayed until it ran low. Its callers' prompts,
    counted with the first's, were longer, and the high-water climbed all day as a
    high-water does: read as the conversations growing (context-creep 7 against 3), as
    the second server came up half an hour before the incident window."""
    n = len(DAY)
    came = n - 42
    used = [70 * GIB if i < came else 108 * GIB if i < n - 6 else 123 * GIB for i in range(n)]
    counters = _token_counters([50.0 * 300] * n, [9.0 if i < came else 13.4 for i in range(n)])
    generated, prompt = ([v for _, v in counters[k]] for k in ("tokens_generated", "tokens_prompt"))
    second = [0.0] * came + [1.0] * (n - came)
    servers = [seen("llama-server", 5801, [1.0] * n), seen("llama-server", 5802, second)]
    b = history(
        base(trigger=("healthcheck", "gateway", "HTTP 502")),
        {
            "targets_up": [up("gateway", [1.0] * n), *servers],
            "engine_up": servers,
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [TOTAL - u for u in noisy(used, 0.2 * GIB)]
            ),
            "context_high_water": plain(
                "llamacpp:n_tokens_max", [2000.0 + 20 * i for i in range(n)]
            ),
            "tokens_generated": plain("llamacpp:tokens_predicted_total", generated),
            "tokens_prompt": plain("llamacpp:prompt_tokens_total", prompt),
        },
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "swap-not-unloaded", scores(result)
    creep = next(c for c in result["candidates"] if c["fault"] == "context-creep")
    assert any("another workload" in e for e in creep["evidence_for"]), creep


def _second_server(trigger: tuple, second: list[float | None], card: list[float]) -> Builder:
    """llama-swap's first llama-server up all day on a 24 GiB card; a second one, for
    another model, where `second` says; the card's line from DCGM."""
    n = len(DAY)
    servers = [seen("llama-server", 5800, [1.0] * n), seen("llama-server", 5801, second)]
    return history(
        base(trigger=trigger),
        {
            "targets_up": [up("gateway", [1.0] * n), *servers],
            "engine_up": servers,
            "accelerator_memory_used": _series("dcgm", noisy(card, 0.05 * GIB)),
            "accelerator_memory_total": _series("dcgm", [24.0 * GIB] * n),
        },
    )


def _second_model_while_the_host_ran_out(card_full: bool) -> Builder:
    """A 24 GiB card in a 192 GiB host: seven hours before the end llama-swap's second
    server came up and the card stepped 12 GiB, the host's line barely moving with it (a
    card of its own); in the last hour a data job took the host's memory from 100 GiB
    to all of it, the kernel killed, and the second server's target went down. Where
    `card_full`, the step left the card full and its allocation failed."""
    n, total = len(DAY), 192 * GIB
    second = [0.0] * (n - 84) + [1.0] * 82 + [0.0] * 2
    kept = (22.8 if card_full else 13.0) * GIB
    card = [1.3 * GIB] * (n - 84) + [kept] * 82 + [1.3 * GIB] * 2
    host = [100 * GIB + (GIB if i >= n - 84 else 0) for i in range(n - 12)]
    host += [101 * GIB + 90 * GIB * (k + 1) / 10 for k in range(10)] + [188 * GIB] * 2
    servers = [seen("llama-server", 5800, [1.0] * n), seen("llama-server", 5801, second)]
    b = history(
        base(trigger=("alert", "EngineDown")),
        {
            "targets_up": [up("gateway", [1.0] * n), *servers],
            "engine_up": servers,
            "accelerator_memory_used": _series("dcgm", noisy(card, 0.05 * GIB)),
            "accelerator_memory_total": _series("dcgm", [24.0 * GIB] * n),
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [total - u for u in noisy(host, 0.05 * GIB)]
            ),
            "host_memory_total": plain("node_memory_MemTotal_bytes", [total] * n),
            "host_oom_kills": plain("node_vmstat_oom_kill", [0.0] * (n - 2) + [1.0] * 2),
        },
    )
    return b.logs(["CUDA error: out of memory"]) if card_full else b


def _killed_behind_a_gateway(answer: str, used: list[float], total: float) -> Builder:
    """A box of `total` behind a gateway whose check failed with `answer`, its memory in use
    `used` through the day, the kernel's kill counter rising at the last two readings;
    nothing of the engines scraped and no log read."""
    n = len(DAY)
    return history(
        base(trigger=("healthcheck", "gateway", answer)),
        {
            "targets_up": [up("gateway", [1.0] * n)],
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [total - u for u in noisy(used, 0.1 * GIB)]
            ),
            "host_memory_total": plain("node_memory_MemTotal_bytes", [total] * n),
            "host_oom_kills": plain("node_vmstat_oom_kill", [0.0] * (n - 2) + [1.0] * 2),
        },
    ).absent(*NO_LOGS)


def _grew_to_a_kill_behind_a_gateway(answer: str) -> Builder:
    """Ollama behind a gateway on a 120 GiB unified box, nothing of it scraped: 30 GiB in
    use between its loads all day; from six hours before the failed check the floor rose
    busy spell by busy spell to all of the machine, the kernel's kill counter rose and the
    line came back to 30 GiB. The gateway's check failed with `answer`."""
    n, total = len(DAY), 120 * GIB
    start = n - 72
    used = _floors(
        [(0, 30 * GIB)] + [(start + 12 * k, (30 + 15 * k) * GIB) for k in range(1, 6)], 8 * GIB
    )
    used[-12:-2] = [110 * GIB + GIB * k for k in range(10)]
    used[-2:] = [30 * GIB] * 2
    return _killed_behind_a_gateway(answer, used, total)


def _stepped_to_a_kill_behind_a_gateway(answer: str) -> Builder:
    """A 120 GiB shared-pool box behind LiteLLM, 88 GiB in use all day; four hours before
    the failure its use stepped up 26 GiB in a quarter hour, to within 2 GiB of the top,
    and stayed until the kernel's kill counter rose and the line came back to 88 GiB.
    Nothing came up beside the step. The gateway's check failed with `answer`."""
    n, total = len(DAY), 120 * GIB
    used = _floors([(0, 88 * GIB), (n - 48, 114 * GIB), (n - 2, 88 * GIB)], 3 * GIB)
    used[-48:-45] = [94 * GIB, 102 * GIB, 110 * GIB]
    used = [min(u, 118 * GIB) for u in used]
    return _killed_behind_a_gateway(answer, used, total)


@pytest.mark.parametrize(
    ("answer", "late"),
    [("no answer within 30 s", True), ("HTTP 500", False)],
    ids=["late", "error"],
)
@pytest.mark.parametrize(
    ("grew", "fault"),
    [
        (_grew_to_a_kill_behind_a_gateway, "leak-ratchet"),
        (_stepped_to_a_kill_behind_a_gateway, "swap-not-unloaded"),
    ],
    ids=["rise", "step"],
)
def test_what_the_kill_gave_back_while_the_engines_answered_late_was_not_theirs(
    tmp_path, grew, fault, answer, late
):
    """Fresh seeds through a real Prometheus, host-exhaustion read as the engines' own:
    3434 s61, 3838 s75, 3939 s26 (a browser or a container filling an Ollama box until
    the kernel killed it: leak-ratchet 4 against 2, the floor rising to the kill) and
    4040 s89 (a notebook on a DGX Spark behind LiteLLM took 25 GiB in half an hour and
    held it to the kill: swap-not-unloaded 4 against 2, a step that stayed). The kill gave
    it all back while the check only timed out: the engines lived through it, and what it
    freed was its victim's. The look-alike: the check answered with an error, as Ollama
    does when the kernel took its runner."""
    result = verdict(tmp_path, grew(answer))
    theirs = next(c for c in result["candidates"] if c["fault"] == fault)
    freed = any("answered late" in e for e in theirs["evidence_against"])
    assert freed is late, theirs
    assert (result["verdict"] == "host-exhaustion") is late, scores(result)


def _second_server_queued_its_own(queue_on_first: bool) -> Builder:
    """Two llama-servers behind llama-swap on a 24 GiB card (DCGM read): the day's model's
    server (5804) serves all day; 74 minutes before the end a second model's server (5805)
    comes up, the card steps from 12 to 21.7 GiB with it and stays, and its callers wait
    behind its two slots (three waiting) until it falls (an EngineDown alert), the first
    serving on. Or (`queue_on_first`) the same, with the first server's callers waiting
    as much from two and a half hours before."""
    n = len(DAY)
    second = [None] * (n - 16) + [1.0] * 14 + [0.0] * 2
    card = [12 * GIB] * (n - 16) + [21.7 * GIB] * 14 + [12 * GIB] * 2
    first_waiting = [3.0 if queue_on_first and i >= n - 30 and i % 3 else 0.0 for i in range(n)]
    second_waiting = [3.0 if i % 3 else 2.0 for i in range(14)]

    def deferred(port: int, at: list[float], values: list[float]) -> dict:
        return {
            "metric": {
                "__name__": "llamacpp:requests_deferred",
                "job": "llama-server",
                "instance": f"127.0.0.1:{port}",
            },
            "values": [[t, repr(v)] for t, v in zip(at, values, strict=True)],
        }

    servers = [seen("llama-server", 5804, [1.0] * n), seen("llama-server", 5805, second)]
    return history(
        base(trigger=("alert", "EngineDown", "up == 0 for 1m")),
        {
            "targets_up": [up("gateway", [1.0] * n), *servers],
            "engine_up": servers,
            "requests_waiting": [
                deferred(5804, DAY, first_waiting),
                deferred(5805, DAY[n - 16 : n - 2], second_waiting),
            ],
            "accelerator_memory_used": _series("dcgm", noisy(card, 0.02 * GIB)),
            "accelerator_memory_total": _series("dcgm", [24.0 * GIB] * n),
        },
    ).absent(*NO_LOGS)


@pytest.mark.parametrize("queue_on_first", [False, True], ids=["newcomers-queue", "both-queued"])
def test_a_queue_only_on_a_server_just_started_beside_another_is_not_more_callers(
    tmp_path, queue_on_first
):
    """Fresh seeds 3737, 3535, 4040 through a real Prometheus (swap-not-unloaded s74, s11,
    s25; s11): a second model's server came up beside the first, its callers queued behind
    its slots from its first minute, and it died of the card it could not get:
    concurrency-overload 4 against swap-not-unloaded 3, ambiguous, the queue read from the
    servers' sum as a day's new load. A server started in the incident window has no plan
    of its own to be overloaded against. The look-alike: the first server's callers
    queued as much from before the second came."""
    result = verdict(tmp_path, _second_server_queued_its_own(queue_on_first))
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    newcomer = any("a server that came up" in e for e in queue["evidence_against"])
    assert newcomer is not queue_on_first, queue
    if not queue_on_first:
        assert result["verdict"] == "swap-not-unloaded", scores(result)


def _card_grew_on_a_full_host(card_total: float) -> Builder:
    """A host that lives at 1.2 GiB available (the model, its cache and the desktop take
    the rest); the card's line 12 GiB above its day in the last 75 minutes, then the kernel
    killed llama-server and the memory came back. `card_total`: a Strix Halo's GTT, the
    host's own memory, or a discrete card of its own."""
    n = len(DAY)
    held = 104 * GIB if card_total > 64 * GIB else 10 * GIB
    card = [held] * (n - 17) + [held + 12 * GIB] * 15 + [0.8 * GIB] * 2
    used = [TOTAL - 1.2 * GIB] * (n - 2) + [TOTAL - 100 * GIB] * 2
    server = [1.0] * (n - 2) + [0.0] * 2
    return history(
        base(trigger=("alert", "EngineDown")),
        {
            "targets_up": [up("gateway", [1.0] * n), seen("llama-server", 8080, server)],
            "accelerator_memory_used": _series("amdgpu", noisy(card, 0.05 * GIB)),
            "accelerator_memory_total": _series("amdgpu", [card_total] * n),
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [TOTAL - u for u in noisy(used, 0.1 * GIB)]
            ),
            "host_oom_kills": plain("node_vmstat_oom_kill", [0.0] * (n - 2) + [1.0] * 2),
        },
    )


@pytest.mark.parametrize("shared", [True, False], ids=["gtt", "a-card-of-its-own"])
def test_a_shared_pool_that_grew_past_the_hosts_room_ran_it_out_itself(tmp_path, shared):
    """make eval 3434 through a real Prometheus (context-creep-54176914596446): on a Strix
    Halo living at 1 GiB available, llama-server's conversations grew its GTT 12 GiB in the
    last hour and the kernel killed it; with no engine metrics, host-exhaustion was named
    (5), as if another process had eaten the machine. 12 GiB is under CULPRIT_SHARE of the
    machine, but far past the room it had: what the card's line grew by ran it out, and
    host-exhaustion is that growth's ending, not the verdict. A discrete card's growth is
    none of the host's memory."""
    result = verdict(tmp_path, _card_grew_on_a_full_host((120 if shared else 24) * GIB))
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    if shared:
        assert result["verdict"] != "host-exhaustion", scores(result)
        assert any("the engines' own growth" in e for e in host["evidence_against"]), host
    else:
        assert result["verdict"] == "host-exhaustion", scores(result)


@pytest.mark.parametrize("card_full", [False, True])
def test_a_second_model_on_a_card_with_room_did_not_run_the_host_out(tmp_path, card_full):
    """make eval 2424 through a real Prometheus (host-exhaustion-247430324080000): a build
    ran a 189 GiB host out and the kernel killed llama-server; seven hours before,
    llama-swap had swapped to another model and back, and the RTX 3090 stepped 12 GiB as
    a server came up, keeping half its room. Swap-not-unloaded took the host's running
    out as its ending (4 against 2). A discrete card's model sits in a pool of its own:
    what ran out was the host. The look-alike: the step left the card full and its
    allocation failed."""
    result = verdict(tmp_path, _second_model_while_the_host_ran_out(card_full))
    want = "swap-not-unloaded" if card_full else "host-exhaustion"
    assert result["verdict"] == want, scores(result)


def test_the_second_server_that_came_up_and_then_died_came_with_the_step(tmp_path):
    """The model kept is often the new server's undoing: it came up two hours before the
    failure with a 10 GiB step on a 24 GiB card and is the target that went down. It came
    up all the same (blind history sw01: it read as 'no server came up')."""
    n = len(DAY)
    second = [0.0] * (n - 24) + [1.0] * 22 + [0.0] * 2
    card = [11.5 * GIB] * (n - 24) + [22.0 * GIB] * 22 + [11.5 * GIB] * 2
    b = _second_server(("healthcheck", "gateway", "no answer within 10 s"), second, card)
    result = verdict(tmp_path, b)
    assert result["verdict"] == "swap-not-unloaded", scores(result)
    said = result["candidates"][0]["evidence_for"][0]
    assert "llama-server/127.0.0.1:5801 came up, and stayed" in said, said


def _died_minutes_after_it_came_up() -> Builder:
    """A 24 GiB card read every two minutes for twelve hours: llama-swap's first server up
    throughout, the card at 11.5 GiB; a second server first scraped 26 minutes before the
    end with the card stepping to 22 GiB, its target down 18 minutes later and the card
    back where it was; the gateway's check got HTTP 502."""
    step = 120
    grid = [AT - step * (360 - i) for i in range(360)]
    n, came, died = len(grid), len(grid) - 13, len(grid) - 4

    def line(labels: dict, values: list[float | None]) -> dict:
        pairs = zip(grid, values, strict=True)
        return {"metric": labels, "values": [[t, repr(v)] for t, v in pairs if v is not None]}

    def target(port: int, values: list[float | None]) -> dict:
        labels = {"__name__": "up", "job": "llama-server", "instance": f"127.0.0.1:{port}"}
        return line(labels, values)

    second = [None] * came + [1.0] * (died - came) + [0.0] * (n - died)
    servers = [target(5800, [1.0] * n), target(5801, second)]
    card = [(22.0 if came <= i < died else 11.5) * GIB for i in range(n)]
    named = {
        "targets_up": servers,
        "engine_up": servers,
        "accelerator_memory_used": [line({"job": "dcgm", "device": "card1"}, card)],
        "accelerator_memory_total": [line({"job": "dcgm", "device": "card1"}, [24.0 * GIB] * n)],
    }
    return base(trigger=("healthcheck", "gateway", "HTTP 502")).history(
        [
            {"name": k, "expr": k, "status": "ok", "reason": None, "series": v}
            for k, v in named.items()
        ],
        start=grid[0],
        step_s=step,
    )


def test_a_second_server_that_died_minutes_after_it_came_up_came_with_the_step(tmp_path):
    """Real-path seed 4040 s25 (a second model's llama-server came up on a DGX Spark and
    the kernel killed it 18 minutes later): its own fall, within the minutes a hand-over
    takes, read as another server going down as it came up, a model swapped, not added;
    host-exhaustion. A server's own death is no hand-over."""
    result = verdict(tmp_path, _died_minutes_after_it_came_up())
    assert result["verdict"] == "swap-not-unloaded", scores(result)
    said = result["candidates"][0]["evidence_for"][0]
    assert "as llama-server/127.0.0.1:5801 came up" in said, said


def _second_model_behind(job: str) -> Builder:
    """Ollama (it publishes no metrics) behind a reverse proxy scraped as `job`, on a 128
    GiB unified box whose card line reads 52 GiB all day; three hours before the check
    got HTTP 500 the card stepped up 55.5 GiB and held to the end, the host's available
    memory falling from 60 to 6 GiB with it."""
    n = len(DAY)
    card = [(107.5 if i >= n - 36 else 52.0) * GIB for i in range(n)]
    available = [(6.0 if i >= n - 36 else 60.0) * GIB for i in range(n)]
    return history(
        base(trigger=("healthcheck", "gateway", "HTTP 500")),
        {
            "targets_up": [seen(job, 9113, [1.0] * n), seen("node", 9100, [1.0] * n)],
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", noisy(available, 0.1 * GIB)
            ),
            "host_memory_total": plain("node_memory_MemTotal_bytes", [TOTAL] * n),
            "accelerator_memory_used": _series("local-llm", noisy(card, 0.05 * GIB)),
            "accelerator_memory_total": _series("local-llm", [114.0 * GIB] * n),
        },
    ).absent(*NO_LOGS)


@pytest.mark.parametrize("job", ["gateway", "nginx", "caddy", "traefik"])
def test_a_reverse_proxy_is_a_gateway_whatever_its_job_is_called(tmp_path, job):
    """Fresh seed 4242 through a real Prometheus, its jobs renamed as operators name them
    (s18: Ollama behind nginx, a second model kept): scraped as "nginx", the proxy read as
    the one engine's server, and one server loads no second model: swap-not-unloaded 3
    -> insufficient-evidence. A reverse proxy in front of the engines is a gateway: what
    loads models behind it is unknown, not one engine."""
    result = verdict(tmp_path, _second_model_behind(job))
    assert result["verdict"] == "swap-not-unloaded", scores(result)


def _queue_read_at(shift: float) -> Builder:
    """llama-server read every two minutes for a day, the capture `shift` seconds after the
    small hours' AT: eight slots, forty minutes of callers queued every four hours on
    the hour before it, then the last ninety minutes queued through to the check that
    timed out. The same history, whenever it was read."""
    at, step = AT + shift, 120
    grid = [at - 86400 + step * i for i in range(720)]
    waiting = [12.0 if i >= 675 else 6.0 if i % 120 < 20 else 0.0 for i in range(720)]
    running = [8.0 if w else 3.0 for w in waiting]

    def line(metric: str, values: list[float]) -> list[dict]:
        labels = {"__name__": metric, "job": "llama-server", "instance": "127.0.0.1:8080"}
        return [
            {"metric": labels, "values": [[t, repr(v)] for t, v in zip(grid, values, strict=True)]}
        ]

    b = Builder(
        "spark-1", at, total=TOTAL, trigger=("healthcheck", "gateway", "no answer within 60 s")
    )
    b.memory([(at + i, 40 * GIB) for i in range(30)]).pressure([(at + i, 0.0) for i in range(30)])
    b.processes([]).host().kernel([]).logs([])
    named = {
        "targets_up": line("up", [1.0] * 720),
        "requests_waiting": line("llamacpp:requests_deferred", waiting),
        "requests_running": line("llamacpp:requests_processing", running),
    }
    return b.history(
        [
            {"name": k, "expr": k, "status": "ok", "reason": None, "series": v}
            for k, v in named.items()
        ],
        start=grid[0],
        step_s=step,
    )


def test_the_busiest_hour_before_is_the_same_whenever_the_history_is_read(tmp_path):
    """Fresh seed 4242 s44, captured twice minutes apart: the busiest hour before the queue
    read 55 % of it queued once and 48 % the other, and the verdict went with it. Hours on
    the clock split a burst where they fall; hours counted back from the readings do not."""
    said = []
    for shift in (0.0, 1800.0):
        result = verdict(tmp_path / str(shift), _queue_read_at(shift))
        queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
        words = [e for e in queue["evidence_for"] + queue["evidence_against"] if "busiest" in e]
        said.append((result["verdict"], words))
    assert said[0] == said[1], said


def test_a_box_at_its_ceiling_all_day_did_not_fall_there_at_the_kill(tmp_path):
    """Real-path seeds 3737 s52 and 3838 s17 (a DGX Spark whose engine preallocates the
    pool: 1.2 GiB available all day): host-exhaustion said "available memory fell to 1.2
    GiB, against at least 1.2 GiB earlier in the day". It fell nowhere; only the kill is
    news, and the shortage it always had weighs a point, not two."""
    n = len(DAY)
    available = noisy([1.4 * GIB] * n, 0.1 * GIB)
    b = _killed_behind_a_gateway("HTTP 500", [TOTAL - a for a in available], TOTAL)
    result = verdict(tmp_path, b)
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    said = [e for e in host["evidence_for"] if e.startswith("available memory")]
    assert said and "as low as earlier in the day" in said[0] and "fell" not in said[0], host


def _swapped_all_day_then_kept(last_hours: list[float]) -> Builder:
    """llama-swap swapping two models (9.9 and 11.1 GiB) on a 24 GiB card all day; three
    hours and a half before the failure a second server came up and the card read 20.7
    GiB to the end. Before it, `last_hours` is the card through the three hours from the
    last swap (11.1 GiB at each reading: the other model, held)."""
    n = len(DAY)

    def card(i: int) -> float:
        h = (n - i) / 12
        if h <= 3.5:
            return 20.7 * GIB
        if h <= 6.5:
            return last_hours[min(len(last_hours) - 1, int((6.5 - h) * 12))]
        return (11.1 if 12 < h <= 15 or h > 20.5 else 9.9) * GIB

    second = [0.0] * (n - 42) + [1.0] * 42
    trigger = ("healthcheck", "gateway", "no answer within 30 s")
    return _second_server(trigger, second, [card(i) for i in range(n)])


def test_a_model_held_for_hours_then_a_second_beside_it_is_a_step_not_a_climb(tmp_path):
    """Blind round 4 r4sw1: the card held the smaller model for three hours after a swap,
    then jumped to both models at once as a second server came up. The rise was timed
    from the last reading at the larger model's level, read 'rose 10.7 GiB over 3.1 h: a
    climb, not a model loaded at once', and nothing was named."""
    result = verdict(tmp_path, _swapped_all_day_then_kept([11.1 * GIB]))
    assert result["verdict"] == "swap-not-unloaded", scores(result)


def test_the_same_rise_passing_through_the_levels_between_is_a_climb(tmp_path):
    climbing = [(11.1 + 9.6 * k / 36) * GIB for k in range(36)]
    result = verdict(tmp_path, _swapped_all_day_then_kept(climbing))
    swap = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert any("a climb, not a model loaded at once" in e for e in swap["evidence_against"])


def test_a_second_model_beside_the_first_with_room_left_on_a_quiet_day_is_no_fault(tmp_path):
    """Two models side by side by design: the second came up at nine and both served all
    day, the card at 16 of 24 GiB, nothing failed (blind history h15: named a fault)."""
    n = len(DAY)
    second = [0.0] * (n // 3) + [1.0] * (n - n // 3)
    card = [9 * GIB] * (n // 3) + [16 * GIB] * (n - n // 3)
    result = verdict(tmp_path, _second_server(("cron", "baseline"), second, card))
    assert result["verdict"] == "no-fault", scores(result)
    snu = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert any("with room to spare" in e for e in snu["evidence_for"]), snu


def _stall_beside_a_queue(
    stall_from: int, queue_from: int, lulls: bool = False, usual: float = 0.002
) -> Builder:
    """vLLM with four slots, the same callers all day; tasks stall on memory (40 % of the
    time) for the last `stall_from` readings, `usual` before, and requests wait for the last
    `queue_from` (`lulls`: the queue empties at every third reading, the last among them),
    until the PSI alert fires. Counters as node-exporter and vLLM publish them."""
    n = len(DAY)

    def counter(rates: list[float]) -> list[float]:
        total, out = 0.0, []
        for rate in rates:
            total += rate * 300
            out.append(total)
        return out

    stall = counter([usual] * (n - stall_from) + [0.4] * stall_from)
    waiting = [0.0] * (n - queue_from) + [30.0] * queue_from
    if lulls:
        waiting = [0.0 if (n - i) % 3 == 1 else w for i, w in enumerate(waiting)]
    running = [2.0 + 2 * (i % 12 > 5) for i in range(n - queue_from)] + [4.0] * queue_from
    return history(
        base(trigger=("alert", "MemoryPressure", "node PSI memory some > 20% for 10m")),
        {
            "host_psi_memory_some_seconds": plain(
                "node_pressure_memory_waiting_seconds_total", stall
            ),
            "requests_waiting": plain("vllm:num_requests_waiting", waiting),
            "requests_running": plain("vllm:num_requests_running", running),
            "tokens_generated": plain("vllm:generation_tokens_total", counter([250.0] * n)),
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [TOTAL - u for u in healthy_bursts()]
            ),
        },
    )


def _mild_stall(
    share: float,
    readings: int,
    trigger: tuple,
    available_at: float,
    swap: float = 8 * GIB,
    faults: tuple[float, float] = (5.0, 5.0),
    psi: bool = True,
    filled: float = 5 * GIB,
) -> Builder:
    """A 32 GiB box with a job that outgrew it for the last `readings`: tasks stall on
    memory `share` of the time (node-exporter publishes no stall counters where not
    `psi`), `filled` of its `swap` fill through it (none without), pages are read back
    from disk at `faults` per second (before, through it), and available memory sits at
    `available_at` of the machine; nothing is killed. Counters as node-exporter's."""
    n, total = len(DAY), 32 * GIB
    stalled, out = 0.0, []
    for i in range(n):
        stalled += (share if i >= n - readings else 0.0005) * 300
        out.append(stalled)
    late = [i >= n - readings for i in range(n)]
    filled = filled if swap else 0.0
    swap_free = [swap - filled * (i - (n - readings)) / readings if x else swap
                 for i, x in enumerate(late)]  # fmt: skip
    available = [available_at * total if x else 20 * GIB for x in late]
    faulted, read_back = 0.0, []
    for x in late:
        faulted += faults[x] * 300
        read_back.append(faulted)
    stall = {
        "host_psi_memory_some_seconds": plain("node_pressure_memory_waiting_seconds_total", out)
    }
    return _node_memory(
        trigger, total, available, (swap, swap_free), read_back, stall if psi else {}
    )


def _node_memory(
    trigger: tuple,
    total: float,
    available: list[float],
    swap: tuple[float, list[float]],
    read_back: list[float],
    more: dict[str, list[dict]],
) -> Builder:
    """node-exporter's memory of a `total` box through the day: available memory, swap (its
    size, what is free) and the major-fault counter, beside `more` queries."""
    n = len(DAY)
    return history(
        base(trigger=trigger),
        {
            **more,
            "host_memory_available": plain("node_memory_MemAvailable_bytes", available),
            "host_memory_total": plain("node_memory_MemTotal_bytes", [total] * n),
            "host_swap_total": plain("node_memory_SwapTotal_bytes", [swap[0]] * n),
            "host_swap_free": plain("node_memory_SwapFree_bytes", swap[1]),
            "host_major_faults": plain("node_vmstat_pgmajfault", read_back),
        },
    )


PSI_ALERT = ("alert", "MemoryPressure", "node PSI memory some > 5% for 15m")


def _vm_beside_the_engine(rise_over: int, crept: float = 0.0) -> Builder:
    """Blind round 4 r4ps2: a box holding 68 GiB all day; a VM takes 48 GiB more, its
    rise taking `rise_over` readings up to the fourth of a two-hour stretch (whose floor
    reads part of the rise), after the floor `crept` up through the ten hours before.
    Tasks stall on memory 22 % of the three hours since, the PSI alert fires; nothing is
    killed and the engine stays up."""
    n, began = len(DAY), len(DAY) - 33 - rise_over
    used = [
        68 * GIB
        + crept * min(1.0, max(0, i - began + 120) / 120)
        + 48 * GIB * min(1.0, max(0, i - began) / rise_over)
        for i in range(n)
    ]
    stalled, out = 0.0, []
    for i in range(n):
        stalled += (0.22 if i >= n - 36 else 0.0005) * 300
        out.append(stalled)
    return history(
        base(trigger=PSI_ALERT),
        {
            "targets_up": [seen("llama-server", 8080, [1.0] * n)],
            "host_psi_memory_some_seconds": plain(
                "node_pressure_memory_waiting_seconds_total", out
            ),
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [TOTAL - u for u in noisy(used, 0.2 * GIB)]
            ),
        },
    )


def _working_set_past_memory(killed: bool) -> Builder:
    """A 128 GiB Linux box without PSI, its floor creeping 3 GiB through the day (100 to 103
    GiB, bursts of 4 GiB every two hours); three hours before the end a job's working set
    took 9 GiB more in ninety minutes, and 7.7 of 16 GiB swap filled through the three,
    pages read back from disk; the gateway's check timed out with nothing killed
    (`killed`: the kernel's kill counter rose at the end)."""
    n = len(DAY)
    used = [u + 3 * GIB * i / n for i, u in enumerate(_floors([(0, 100 * GIB)], 4 * GIB))]
    used = [u + 9 * GIB * min(1.0, max(0, i - (n - 37)) / 18) for i, u in enumerate(used)]
    available = [max(TOTAL - u, 1 * GIB) for u in used]
    swap_free = [16 * GIB - 7.7 * GIB * min(1.0, max(0, i - (n - 37)) / 36) for i in range(n)]
    faulted, read_back = 0.0, []
    for i in range(n):
        faulted += (2000.0 if i >= n - 36 else 5.0) * 300
        read_back.append(faulted)
    kills = [0.0] * (n - 1) + [1.0 if killed else 0.0]
    more = {
        "targets_up": [seen("llama-server", 8080, [1.0] * n)],
        "host_oom_kills": plain("node_vmstat_oom_kill", kills),
    }
    timed_out = ("healthcheck", "gateway", "no answer within 60 s")
    return _node_memory(timed_out, TOTAL, available, (16 * GIB, swap_free), read_back, more)


@pytest.mark.parametrize("killed", [False, True], ids=["nothing-killed", "killed"])
def test_a_floor_that_rose_past_a_leaks_only_as_swap_filled_is_the_working_set(tmp_path, killed):
    """Real-path seed 3939 s62 (llama-server on a Mac, a data job's working set outgrew
    RAM in the last hours): the floor crept 3 GiB through the day and took 8 GiB more in
    the incident window as swap filled, nothing killed; the floors' rise read as a leak
    against the stall, ambiguous. A leak takes hours to show and runs memory out. The
    look-alike: with the kernel's kill at the end it is not said."""
    result = verdict(tmp_path, _working_set_past_memory(killed))
    lr = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    said = any("the working set outgrowing memory" in e for e in lr["evidence_against"])
    assert said is not killed, lr
    if not killed:
        assert result["verdict"] == "memory-pressure-stall", scores(result)


def test_a_step_that_fell_at_a_stretchs_start_is_one_step_not_a_ratchet(tmp_path):
    """The VM's 48 GiB came in a quarter hour, split by the two-hour grid into two jumps
    between floors, neither most of the rise (r4ps2: 31 and 17 GiB): read as floors
    ratcheting over 15 h (leak 4, then 5 against the stall's 2)."""
    result = verdict(tmp_path, _vm_beside_the_engine(rise_over=4))
    assert result["verdict"] == "memory-pressure-stall", scores(result)
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert any("a step, not a ratchet" in e for e in leak["evidence_against"]), leak


@pytest.mark.parametrize(
    ("rise_over", "crept"),
    [
        (48, 0.0),  # the same rise over four hours
        # Fresh seed 8080 leak-ratchet-247558564942882: a leak whose floors had crept up
        # for hours, then rose 12 of its 16 GiB in its busiest twenty minutes.
        (4, 16 * GIB),
    ],
)
def test_a_rise_that_climbed_is_not_read_as_one_step(tmp_path, rise_over, crept):
    result = verdict(tmp_path, _vm_beside_the_engine(rise_over, crept))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert not any("one jump" in e for e in leak["evidence_against"]), leak


def test_a_stall_of_ten_hours_at_eight_percent_is_read_from_before_it_began(tmp_path):
    """Blind round 3 r3ps2: 8 % for ten hours at a 60 s scrape, read as 'against 8 % at
    worst earlier': the stall's own hours counted as the machine's usual, as they were
    under the 10 % bar that marked where a stall begins."""
    result = verdict(tmp_path, _mild_stall(0.08, 120, PSI_ALERT, 0.3))
    assert result["verdict"] == "memory-pressure-stall", scores(result)


def test_a_mild_stall_far_past_the_usual_is_the_failure_the_alert_fired_for(tmp_path):
    """Blind round 3 r3ps5: 6 % for the last hour against nothing before, the operator's
    PSI alert firing: under the 10 % bar, so 'no fault had enough evidence'."""
    result = verdict(tmp_path, _mild_stall(0.06, 14, PSI_ALERT, 0.3))
    assert result["verdict"] == "memory-pressure-stall", scores(result)


NO_ANSWER = ("healthcheck", "gateway", "no answer within 10 s")


def test_a_box_without_swap_is_not_held_to_swap_filling(tmp_path):
    """Blind round 5 r5ps1: no swap at all, so none could fill; 'swap did not fill: the
    working set still fit' took a point from the stall."""
    result = verdict(tmp_path, _mild_stall(0.12, 24, NO_ANSWER, 0.1, swap=0.0))
    stall = next(c for c in result["candidates"] if c["fault"] == "memory-pressure-stall")
    assert not any("swap did not fill" in e for e in stall["evidence_against"]), stall
    assert stall["score"] >= 3, stall


@pytest.mark.parametrize(("before", "said"), [(5.0, True), (3000.0, False)])
def test_pages_read_back_from_disk_past_any_hour_are_the_stalls(tmp_path, before, said):
    """r5ps1: without swap, the model's mapped weights were evicted and read back from disk
    (3000 major faults a second, against 5 before). The look-alike: a box that always
    reads that much."""
    result = verdict(tmp_path, _mild_stall(0.12, 24, NO_ANSWER, 0.1, 0.0, (before, 3000.0)))
    stall = next(c for c in result["candidates"] if c["fault"] == "memory-pressure-stall")
    assert any("read back from disk" in e for e in stall["evidence_for"]) is said, stall


@pytest.mark.parametrize(("filled", "stall"), [(5 * GIB, True), (0.0, False)])
def test_without_stall_counters_pages_read_back_while_swap_filled_are_the_stall(
    tmp_path, filled, stall
):
    """make eval 2424 through a real Prometheus: a node-exporter without PSI (7 % of the
    generated Linux boxes), swap filling 8.7 GiB and 1400 major faults a second where the
    day had none, the check timing out with nothing killed. With no stall counters the
    rule had nothing to read and context-creep took it (memory-pressure-stall-
    225658060134434; seven more read as ambiguous, leak-ratchet or host-exhaustion). The
    look-alike: pages read back while swap stood still, a page cache evicted by anything."""
    thrash = _mild_stall(0.0, 24, NO_ANSWER, 0.1, faults=(5.0, 3000.0), psi=False, filled=filled)
    result = verdict(tmp_path, thrash)
    found = next(c for c in result["candidates"] if c["fault"] == "memory-pressure-stall")
    assert (result["verdict"] == "memory-pressure-stall") is stall, scores(result)
    said = [e for e in found["evidence_for"] if "no stall counters" in e]
    assert bool(said) is stall, found
    if not stall:
        assert any("swap did not move" in e for e in found["evidence_against"]), found


def test_pages_read_back_more_each_hour_for_five_hours_are_still_the_stall(tmp_path):
    """make eval 3434 through a real Prometheus (memory-pressure-stall-74740725096731): a
    notebook's working set outgrew a box whose node-exporter has no stall counters; pages
    were read back more each hour for five hours, swap filled 9 GiB in the last 40 minutes,
    the check timed out. The hours before the incident window held the stall's own start
    (400 major faults a second), and 1500 in the last hour was not ten times that: read
    as host-exhaustion. PSI's hours are read past the stall's own; so are these."""
    n, total, swap = len(DAY), 32 * GIB, 10 * GIB
    faulted, read_back = 0.0, []
    for i in range(n):
        faulted += max(0.05, 1500.0 * (i - (n - 60)) / 60) * 300
        read_back.append(faulted)
    swap_free = [swap - 9 * GIB * max(0, i - (n - 8)) / 8 for i in range(n)]
    available = [0.06 * total if i >= n - 12 else 20 * GIB for i in range(n)]
    b = _node_memory(NO_ANSWER, total, available, (swap, swap_free), read_back, {})
    result = verdict(tmp_path, b)
    assert result["verdict"] == "memory-pressure-stall", scores(result)


def test_the_same_mild_stall_on_a_routine_snapshot_is_no_fault(tmp_path):
    result = verdict(tmp_path, _mild_stall(0.06, 14, ("cron", "baseline"), 0.3))
    assert scores(result)["memory-pressure-stall"] < 3, scores(result)


def test_a_box_short_of_memory_and_stalled_in_its_history_is_the_stall(tmp_path):
    """Blind round 3 r3ps1: stalled 24 % through the hour before, available down to 4 %,
    nothing killed and the check only timed out. The live PSI of the capture read low, so
    the shortage weighed for host-exhaustion (4 against 5: ambiguous)."""
    trigger = ("healthcheck", "gateway", "no answer within 10 s")
    result = verdict(tmp_path, _mild_stall(0.24, 14, trigger, 0.04))
    assert result["verdict"] == "memory-pressure-stall", scores(result)
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    assert host["score"] <= 1, host


def test_a_queue_that_formed_behind_a_memory_stall_is_the_stall(tmp_path):
    """The seeds' question, did the load change: the same callers, the machine stalling on
    memory for half an hour before anything waited. The queue is the slowdown's (blind
    histories ps01, ps03: read as concurrency-overload, 5 against 2)."""
    result = verdict(tmp_path, _stall_beside_a_queue(stall_from=30, queue_from=18))
    assert result["verdict"] == "memory-pressure-stall", scores(result)
    overload = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    assert any("formed behind the stall" in e for e in overload["evidence_against"]), overload


@pytest.mark.parametrize(("queue_from", "stall"), [(18, True), (36, False)])
def test_a_queue_with_lulls_is_dated_from_when_it_first_held(tmp_path, queue_from, stall):
    """Blind round 5 r5ps1: a queue that empties now and then between bursts, its last
    reading among the lulls, was dated from nothing, so the stall twenty minutes ahead of
    it did not say it formed behind the stall. The look-alike: the queue held first."""
    result = verdict(tmp_path, _stall_beside_a_queue(30, queue_from, lulls=True))
    overload = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    behind = any("formed behind the stall" in e for e in overload["evidence_against"])
    assert behind is stall, overload


@pytest.mark.parametrize(("usual", "behind"), [(0.38, False), (0.25, True)])
def test_a_stall_the_box_ran_at_all_day_is_not_what_the_queue_formed_behind(
    tmp_path, usual, behind
):
    """Seed 9090's concurrency-overload-33119033061360: a GB10 at 1 % available stalled 18 %
    of every hour of the day; a new caller's queue of the last two hours was read as
    "formed behind the stall" (dated from the history's first reading) and the overload
    lost to the kill. A stall at the box's usual level slowed nothing tonight; one that
    deepened past it (leak-ratchet-107921676511074: 12 % -> 18 %) still did."""
    result = verdict(tmp_path, _stall_beside_a_queue(30, 18, usual=usual))
    overload = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    said = any("formed behind the stall" in e for e in overload["evidence_against"])
    assert said is behind, overload


def test_a_stall_of_six_hours_is_read_against_the_hours_before_it_began(tmp_path):
    """Blind histories nps2, nps4: stalled 12-18 % for 4.5-6 h, read as 'against 12 % at
    worst earlier': the stall's own first hours were taken for the machine's usual."""
    result = verdict(tmp_path, _stall_beside_a_queue(stall_from=72, queue_from=0))
    assert result["verdict"] == "memory-pressure-stall", scores(result)


def _killed_with_available_at_11_percent(swap_free_at_end: float) -> Builder:
    """A 32 GiB box: available falls through the last two hours to 3.5 GiB (11 %), the
    kernel's OOM-kill counter rises by one, the engine's target goes down; swap (4 GiB)
    ends with `swap_free_at_end` free."""
    n, total = len(DAY), 32 * GIB
    available = [28 * GIB] * (n - 24) + [28 * GIB - 24.5 * GIB * (k + 1) / 22 for k in range(22)]
    available += [20 * GIB] * 2
    swap = [4 * GIB] * (n - 24) + [4 * GIB - (4 * GIB - swap_free_at_end) * (k + 1) / 22
                                   for k in range(22)] + [swap_free_at_end] * 2  # fmt: skip
    return history(
        base(trigger=("alert", "EngineDown")),
        {
            "targets_up": [seen("llama-server", 8080, [1.0] * (n - 2) + [0.0] * 2)],
            "host_memory_available": plain("node_memory_MemAvailable_bytes", available),
            "host_memory_total": plain("node_memory_MemTotal_bytes", [total] * n),
            "host_swap_total": plain("node_memory_SwapTotal_bytes", [4 * GIB] * n),
            "host_swap_free": plain("node_memory_SwapFree_bytes", swap),
            "host_oom_kills": plain("node_vmstat_oom_kill", [0.0] * (n - 2) + [1.0] * 2),
        },
    )


def test_a_kill_with_swap_used_up_is_the_machine_out_though_available_read_11_percent(
    tmp_path,
):
    """Blind round 2 nhx5: 'available memory stayed comfortable: lowest 3.4 GiB' of 32
    beside an OOM kill and 3.9 of 4 GiB of swap used."""
    result = verdict(tmp_path, _killed_with_available_at_11_percent(0.1 * GIB))
    assert result["verdict"] == "host-exhaustion", scores(result)
    assert any("with swap" in e for e in result["candidates"][0]["evidence_for"])


def test_the_same_kill_with_swap_to_spare_is_not_read_as_the_machine_out(tmp_path):
    result = verdict(tmp_path, _killed_with_available_at_11_percent(3 * GIB))
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    assert not any("with swap" in e for e in host["evidence_for"]), host


def _ratchet_then_the_kill(held_after: float) -> Builder:
    """A 32 GiB box with an engine of 6 GiB: a burst every two hours, each leaving the floor
    1.5 GiB higher through the last twelve hours, then the last hour filling the machine;
    the kernel kills, the engine's target goes down, and for the fifteen minutes after the
    machine holds `held_after`."""
    n, dead = len(DAY), len(DAY) - 4
    used = []
    for i in range(dead):
        clicks = max(0, (i - (n - 144) - 13) // 24 + 1) if i >= n - 144 else 0
        burst = 8 * GIB if (i % 24) in (10, 11, 12) else 0
        used.append(8 * GIB + clicks * 1.5 * GIB + burst)
    used[-12:] = [used[-13] + (31.6 * GIB - used[-13]) * (k + 1) / 12 for k in range(12)]
    used = noisy(used, 0.1 * GIB) + [held_after] * 4
    oom_kills = plain("node_vmstat_oom_kill", [0.0] * dead + [1.0] * 4)
    return _engine_fell_on_32_gib(used, 4, host_oom_kills=oom_kills)


def _engine_fell_on_32_gib(used: list[float], down: int, **series: list[dict]) -> Builder:
    """A 32 GiB box whose memory in use is `used`; llama-server's target went down for the
    last `down` readings and the EngineDown alert fired. `series` are more of its history."""
    n, total = len(DAY), 32 * GIB
    return history(
        base(trigger=("alert", "EngineDown")),
        {
            "targets_up": [seen("llama-server", 8080, [1.0] * (n - down) + [0.0] * down)],
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [total - u for u in used]
            ),
            "host_memory_total": plain("node_memory_MemTotal_bytes", [total] * n),
            **series,
        },
    )


def test_a_rise_the_machine_still_held_after_the_engine_died_is_not_its_leak(tmp_path):
    """Blind round 2 nhx1, nhx2: a build (a dataset job) grew until the kernel killed the
    engine, and the kill gave back only the engine's own 6 GiB. Leak-ratchet read the
    floors (5 against host-exhaustion's 3); a leaker's death gives its leak back."""
    result = verdict(tmp_path, _ratchet_then_the_kill(held_after=25 * GIB))
    assert result["verdict"] == "host-exhaustion", scores(result)
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert any("the rise outlived the engine" in e for e in leak["evidence_against"]), leak


def test_the_same_rise_given_back_by_the_engines_death_is_its_leak(tmp_path):
    result = verdict(tmp_path, _ratchet_then_the_kill(held_after=2 * GIB))
    assert result["verdict"] == "leak-ratchet", scores(result)


def _leaked_into_swap(swap_after: float) -> Builder:
    """A 32 GiB box at its ceiling all day (1 GiB available): from eight hours before, the
    engine's busy spells each leave 2 GiB more in swap (16 GiB of it), from 2 GiB to 10;
    the kernel kills llama-server, the host's 14 GiB come back, and swap holds
    `swap_after`."""
    n, kill = len(DAY), len(DAY) - 3
    used = noisy([31 * GIB] * kill, 0.1 * GIB) + [17 * GIB] * 3
    swap = [
        2 * GIB + 2 * GIB * max(0, (i - (n - 96)) // 24 + 1) * (i >= n - 96) for i in range(kill)
    ]
    swap = noisy(swap, 0.05 * GIB) + [swap_after] * 3
    killed = (
        "Out of memory: Killed process 4242 (llama-server) total-vm:19413308kB, "
        "anon-rss:14753634kB, file-rss:519743kB, shmem-rss:0kB, UID:1000 pgtables:7627kB "
        "oom_score_adj:0"
    )
    return _engine_fell_on_32_gib(
        used,
        3,
        host_swap_total=plain("node_memory_SwapTotal_bytes", [16 * GIB] * n),
        host_swap_free=plain("node_memory_SwapFree_bytes", [16 * GIB - s for s in swap]),
    ).kernel([killed], ago_s=15 * 60)


def test_a_leak_on_a_machine_at_its_ceiling_is_read_in_memory_with_swap(tmp_path):
    """Seed 202's leak-ratchet-197839312378863 (and 4242's -203444445114381): available
    memory sat at 1 GiB all day, so the leak went to swap (29 GiB in 7 h) and the kill
    gave most of it back; the memory line alone could not rise, and host-exhaustion won."""
    result = verdict(tmp_path, _leaked_into_swap(swap_after=3 * GIB))
    assert result["verdict"] == "leak-ratchet", scores(result)
    said = result["candidates"][0]["evidence_for"][0]
    assert said.startswith("the memory with swap floor rose"), said


def test_swap_the_kill_did_not_give_back_is_not_read_as_the_victims(tmp_path):
    result = verdict(tmp_path, _leaked_into_swap(swap_after=10 * GIB))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert not any("memory with swap" in e for e in leak["evidence_for"]), leak
    assert result["verdict"] != "leak-ratchet", scores(result)


def _preallocated_card_crept_up(reason: str, running_late: float) -> Builder:
    """vLLM holding 71.7 GiB of an 80 GiB card by design, four requests running from the
    morning on without a pause (`running_late` in the last three hours); for the last ten
    hours each busy minute left a little on the card, to 79.5 GiB, until the gateway's
    check failed with `reason`. The engine is still up."""
    n = len(DAY)
    card = [71.7 * GIB + 7.8 * GIB * max(0, i - (n - 120)) / 120 for i in range(n)]
    running = [0.0] * (n - 130) + [4.0] * 94 + [running_late] * 36
    return history(
        base(trigger=("healthcheck", "gateway", reason)),
        {
            "targets_up": [seen("vllm", 8000, [1.0] * n)],
            "accelerator_memory_used": _series("dcgm", noisy(card, 0.02 * GIB)),
            "accelerator_memory_total": _series("dcgm", [80.0 * GIB] * n),
            "requests_running": plain("vllm:num_requests_running", running),
        },
    )


CUDA_500 = "HTTP 500 from upstream vllm: CUDA error: out of memory"


def test_a_card_that_crept_up_for_ten_hours_to_the_engines_oom_is_a_leak(tmp_path):
    """Blind round 3 r3lk1: busy all day, the card left no quiet floors in the ten hours it
    crept (71.7 -> 79.5 GiB); no three hours of it climbed 5 % of the card, and the
    engine's own words came only in the error the gateway relayed. Read: 'no evidence'."""
    result = verdict(tmp_path, _preallocated_card_crept_up(CUDA_500, 4.0))
    assert result["verdict"] == "leak-ratchet", scores(result)
    said = result["candidates"][0]["evidence_for"][0]
    assert "climbed through the hours before the engine's allocation failed" in said, said


def test_the_same_creep_under_twice_the_callers_is_not_read_as_a_leak(tmp_path):
    result = verdict(tmp_path, _preallocated_card_crept_up(CUDA_500, 8.0))
    assert scores(result)["leak-ratchet"] < 3, scores(result)


def test_a_check_that_failed_without_the_cards_words_does_not_say_it_ran_out(tmp_path):
    result = verdict(tmp_path, _preallocated_card_crept_up("HTTP 500", 4.0))
    assert scores(result)["leak-ratchet"] < 3, scores(result)


def _climbed(card_by_day: list[float]) -> list[float]:
    """The card's line as `card_by_day`, then 4 GiB more through the last two and a half
    hours, and what the engine held given back by its going down."""
    n = len(DAY)
    card = [*card_by_day[: n - 32], *(card_by_day[n - 33] + 4 * GIB * k / 30 for k in range(30))]
    return noisy([*card, 0.4 * GIB, 0.4 * GIB], 0.02 * GIB)


def _under_steady_load(card: dict[str, list[dict]], running_late: float) -> Builder:
    """llama-server under office load without a pause (two requests running all day,
    `running_late` in the last three hours) whose target went down at the end, with the
    card's series `card`. No kill, no log line."""
    n = len(DAY)
    running = [2.0] * (n - 36) + [running_late] * 36
    return history(
        base(trigger=("alert", "EngineDown")),
        {
            "targets_up": [seen("llama-server", 8080, [1.0] * (n - 2) + [0.0] * 2)],
            **card,
            "requests_running": plain("llamacpp:requests_processing", running),
        },
    )


def _card_climbed_under_steady_load(card_by_day: list[float], running_late: float) -> Builder:
    """The climb on a 24 GiB card scraped by DCGM."""
    card = {
        "accelerator_memory_used": _series("dcgm", _climbed(card_by_day)),
        "accelerator_memory_total": _series("dcgm", [24.0 * GIB] * len(DAY)),
    }
    return _under_steady_load(card, running_late)


def test_a_card_that_climbed_under_steady_load_after_a_level_day_is_a_leak(tmp_path):
    """Blind round 2 nlk3, nlk5: the card held 14.1 GiB for 21 h and climbed to 17.7 GiB
    through the last hours of office load, then the engine went down. Busy without a
    pause, it left no quiet floors: read as 'flat between bursts', insufficient-evidence."""
    result = verdict(tmp_path, _card_climbed_under_steady_load([14 * GIB] * len(DAY), 2.0))
    assert result["verdict"] == "leak-ratchet", scores(result)
    assert any("after a day held level" in e for e in result["candidates"][0]["evidence_for"])


def test_the_same_climb_on_a_card_that_swung_all_day_is_not_read_as_a_leak(tmp_path):
    swinging = [(14 + 3 * (i % 48 >= 24)) * GIB for i in range(len(DAY))]
    result = verdict(tmp_path, _card_climbed_under_steady_load(swinging, 2.0))
    assert scores(result)["leak-ratchet"] < 3, scores(result)


def test_the_same_climb_under_twice_the_load_is_not_read_as_a_leak(tmp_path):
    result = verdict(tmp_path, _card_climbed_under_steady_load([14 * GIB] * len(DAY), 5.0))
    assert scores(result)["leak-ratchet"] < 3, scores(result)


def _two_cards(one: list[float], other: list[float]) -> Builder:
    """Two 24 GiB cards scraped by DCGM, a llama-server on each: card 1 as `one`, card 0 as
    `other`; card 1's server went down at the end and its card was released."""
    n = len(DAY)

    def card(gpu: str, values: list[float]) -> dict:
        return {"metric": {"gpu": gpu, "UUID": f"GPU-{gpu}", "job": "dcgm", "instance": "box:9400"},
                "values": [[t, repr(v)] for t, v in zip(DAY, values, strict=True)]}  # fmt: skip

    return history(
        base(trigger=("alert", "EngineDown")),
        {
            "targets_up": [
                seen("llama-server", 8080, [1.0] * n),
                seen("llama-server", 8081, [1.0] * (n - 2) + [0.0] * 2),
            ],
            "accelerator_memory_used": [card("0", other), card("1", one)],
            "accelerator_memory_total": [card("0", [24 * GIB] * n), card("1", [24 * GIB] * n)],
        },
    )


def _card_one_ratchets() -> list[float]:
    """Card 1 level at 21.6 GiB, then through the last sixteen hours each two-hourly burst
    leaves its floor 0.25 GiB higher, to 23.6 GiB (the two cards' sum rises 4 % of their
    48 GiB, this card 8 % of its own); released at the end."""
    n = len(DAY)
    clicks = [max(0, (i - (n - 192)) // 24 + 1) if i >= n - 192 else 0 for i in range(n - 2)]
    used = [21.6 * GIB + 0.25 * GIB * c + GIB * (i % 24 in (20, 21)) for i, c in enumerate(clicks)]
    return noisy(used, 0.02 * GIB) + [0.4 * GIB] * 2


def test_one_card_of_two_leaking_to_full_is_a_leak(tmp_path):
    """Blind round 5 r5lk2: two 3090s, the server on card 1 leaked until its card was full
    and its allocation failed. The two cards' sum climbed half as steeply on twice the
    pool: 'flat between bursts', and no fault had any evidence."""
    result = verdict(
        tmp_path, _two_cards(_card_one_ratchets(), noisy([12.6 * GIB] * len(DAY), 0.02 * GIB))
    )
    assert result["verdict"] == "leak-ratchet", scores(result)
    assert any("card 1 memory floor rose" in e for e in result["candidates"][0]["evidence_for"])


def test_the_same_rise_that_card_0_gave_back_moved_between_cards(tmp_path):
    """The look-alike: card 0 gave back what card 1 took (a split moved between them)."""
    one = _card_one_ratchets()
    other = [12.6 * GIB - max(0.0, v - 21.6 * GIB) for v in one[:-2]] + [12.6 * GIB] * 2
    result = verdict(tmp_path, _two_cards(one, other))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert leak["score"] < 3 and any(
        "moved between cards" in e for e in leak["evidence_against"]
    ), leak


def _drm(metric: str, values: list[float]) -> list[dict]:
    """One amdgpu card as node-exporter's drm collector publishes it (drm_linux.go)."""
    return [
        {
            "metric": {"__name__": metric, "card": "card1", "job": "node", "instance": "box:9100"},
            "values": [[t, repr(v)] for t, v in zip(DAY, values, strict=True)],
        }
    ]


def _amd_card_climbed(vram_size: float, vram_used: float, gtt_size: float) -> Builder:
    """The steady-load climb above on an AMD card seen through node-exporter's drm
    collector: its VRAM flat at `vram_used` of `vram_size`, its GTT (`gtt_size`) holding
    14 GiB all day and then climbing 4 GiB to the engine going down."""
    n = len(DAY)
    card = {
        "accelerator_memory_used": _drm("node_drm_memory_vram_used_bytes", [vram_used] * n),
        "accelerator_memory_total": _drm("node_drm_memory_vram_size_bytes", [vram_size] * n),
        "accelerator_gtt_used": _drm("node_drm_memory_gtt_used_bytes", _climbed([14 * GIB] * n)),
        "accelerator_gtt_total": _drm("node_drm_memory_gtt_size_bytes", [gtt_size] * n),
    }
    return _under_steady_load(card, 2.0)


def test_an_apus_leak_into_gtt_is_read_on_the_card(tmp_path):
    """Blind round 4 r4lk4: a Strix Halo with the 512 MiB carve-out keeps the engine's
    buffers in GTT. The card line read VRAM alone, a flat 0.3 GiB, and the leak had no
    evidence at all."""
    result = verdict(tmp_path, _amd_card_climbed(0.5 * GIB, 0.3 * GIB, 62.0 * GIB))
    assert result["verdict"] == "leak-ratchet", scores(result)


def test_a_discrete_cards_gtt_spill_is_not_its_memory(tmp_path):
    """The look-alike: a 16 GiB card's VRAM flat, its GTT (the driver's window onto host
    memory, half the host's 32 GiB) rising: the card did not climb."""
    result = verdict(tmp_path, _amd_card_climbed(16.0 * GIB, 10.0 * GIB, 16.0 * GIB))
    assert scores(result)["leak-ratchet"] < 3, scores(result)


def test_a_queue_that_came_before_the_stall_is_still_more_callers(tmp_path):
    """The look-alike: requests queued for two and a half hours and the stall came only in
    the last fifty minutes: the stall came after the queue, it did not make it."""
    result = verdict(tmp_path, _stall_beside_a_queue(stall_from=10, queue_from=30))
    assert result["verdict"] == "concurrency-overload", scores(result)


def _prompts_since(hours: int, after: Callable[[float], float], trigger: tuple) -> Builder:
    """vLLM answering the same callers all day (250 generated tokens a second), the
    conversations resending ten prompt tokens per answer token until `hours` before the
    end, then `after(x)` of them, x running from 0 there to 1 at the end; the engine's
    target falls at the end unless by cron."""
    n = len(DAY)
    start = n - hours * 12
    ratio = [10.0 if i < start else after((i - start) / (n - start)) for i in range(n)]
    counters = _token_counters([250.0 * 300] * n, ratio)
    generated, prompt = ([v for _, v in counters[k]] for k in ("tokens_generated", "tokens_prompt"))
    return history(
        base(trigger=trigger),
        {
            "targets_up": [seen("vllm", 8000, [1.0] * (n - 1) + [float(trigger[0] == "cron")])],
            "tokens_generated": plain("vllm:generation_tokens_total", generated),
            "tokens_prompt": plain("vllm:prompt_tokens_total", prompt),
        },
    )


# How conversations grew before the incident window: (hours before the end, the prompt
# tokens per answer token from then on, and the words the creep is told in).
PROMPTS_GREW = [
    # Blind histories cc02, cc05 (insufficient-evidence): a climb from sixteen hours
    # before, to seventy; every hour of the day before the window had crept already.
    pytest.param(16, lambda x: 10.0 + 60.0 * x, "climbing through the last", id="climbed"),
    # Seed 202's context-creep-66283068749640: a jump to a hundred an hour before the
    # window, easing towards fifty; the jump's hour counted as usual, no climb was seen,
    # and the CUDA OOM that ended it read as the cause.
    pytest.param(4, lambda x: 100.0 - 50.0 * x, "in every busy hour of the last", id="jumped"),
]


@pytest.mark.parametrize(("hours", "after", "words"), PROMPTS_GREW)
def test_prompts_grown_since_before_the_window_are_read_from_before_they_grew(
    tmp_path, hours, after, words
):
    """Against the hours of the incident window's day the last hour is nothing new;
    against the hours before the prompts grew it is five to seven times as long."""
    result = verdict(tmp_path, _prompts_since(hours, after, ("alert", "EngineDown")))
    assert result["verdict"] == "context-creep", scores(result)
    said = " ".join(result["candidates"][0]["evidence_for"])
    assert words in said, said


@pytest.mark.parametrize(("hours", "after", "words"), PROMPTS_GREW)
def test_the_same_growth_with_nothing_failed_is_only_a_note(tmp_path, hours, after, words):
    result = verdict(tmp_path, _prompts_since(hours, after, ("cron", "baseline")))
    assert scores(result)["context-creep"] < 3, scores(result)


def test_a_queue_through_the_ninety_minutes_before_the_failure_is_sustained(tmp_path):
    # 18 of 288 readings (6% of the day) waited: all in the 90 minutes before the fall.
    n = len(DAY)
    waiting = [0.0] * (n - 20) + [3.0] * 18 + [0.0] * 2
    gateway = [1.0] * (n - 2) + [0.0] * 2
    b = base(trigger=("healthcheck", "gateway")).prometheus(
        {
            "host_memory_available": available(healthy_bursts()),
            "requests_running": [(t, 4.0 if i >= n - 20 else 1.0) for i, t in enumerate(DAY)],
            "requests_waiting": list(zip(DAY, waiting, strict=True)),
            "gateway_up": list(zip(DAY, gateway, strict=True)),
        }
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "concurrency-overload", scores(result)
    queue = result["candidates"][0]
    assert any("through the incident" in e for e in queue["evidence_for"])


def _office_queue(per_answer_tonight: float, preempted_tonight: float = 0.0) -> Builder:
    """vLLM with four slots through office hours every day; the last three hours every slot
    was held and three requests waited, until a check timed out. Each hour (a little traffic
    at night) sent six prompt tokens per generated token, tonight `per_answer_tonight`."""
    n = len(DAY)
    office = [100 <= i < 200 for i in range(n)]
    tonight = [i > n - 36 for i in range(n)]
    running = [4.0 if t else 2.0 if o else 0.0 for t, o in zip(tonight, office, strict=True)]
    waiting = [3.0 if t else 0.0 for t in tonight]
    steps = [300.0 if t or o else 50.0 for t, o in zip(tonight, office, strict=True)]
    return base(trigger=("healthcheck", "gateway", "no answer within 60 s")).prometheus(
        {
            "host_memory_available": available(healthy_bursts()),
            "requests_running": list(zip(DAY, running, strict=True)),
            "requests_waiting": list(zip(DAY, waiting, strict=True)),
            **_token_counters(steps, [per_answer_tonight if t else 6 for t in tonight]),
            "preemptions": [
                (t, preempted_tonight * max(0, i - (n - 36))) for i, t in enumerate(DAY)
            ],
        }
    )


def test_a_queue_behind_prompts_grown_five_times_longer_is_the_creeps(tmp_path):
    result = verdict(tmp_path, _office_queue(per_answer_tonight=30))
    assert result["verdict"] == "context-creep", scores(result)
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    assert any("the queue is the longer context's" in e for e in queue["evidence_against"])


def test_the_same_queue_with_the_prompts_as_long_as_ever_is_overload(tmp_path):
    result = verdict(tmp_path, _office_queue(per_answer_tonight=6))
    assert result["verdict"] == "concurrency-overload", scores(result)


def test_preemptions_beside_more_callers_with_prompts_as_long_are_the_load(tmp_path):
    result = verdict(tmp_path, _office_queue(per_answer_tonight=6, preempted_tonight=1))
    assert result["verdict"] == "concurrency-overload", scores(result)
    creep = next(c for c in result["candidates"] if c["fault"] == "context-creep")
    assert any("preempted" in e for e in creep["evidence_for"]) and creep["score"] < 3, creep


def _batch_tonight(per_answer: float, batch: float, last_hour: float) -> Builder:
    """llama-server with two slots, a chat's few answers all day at `per_answer` prompt
    tokens each (one hour a single long prompt at forty), then the look-back's only busy
    spell: a batch the last three hours, both slots held and three waiting until a check
    timed out, at `batch` prompt tokens per answer and `last_hour` in its final hour."""
    n = len(DAY)
    tonight = [i >= n - 36 for i in range(n)]
    ratio = [
        (last_hour if i >= n - 12 else batch) if t else 40.0 if 100 <= i < 112 else per_answer
        for i, t in enumerate(tonight)
    ]
    return base(trigger=("healthcheck", "gateway", "no answer within 60 s")).prometheus(
        {
            "host_memory_available": available(healthy_bursts()),
            "requests_running": [(t, 2.0 if b else 0.0) for t, b in zip(DAY, tonight, strict=True)],
            "requests_waiting": [(t, 3.0 if b else 0.0) for t, b in zip(DAY, tonight, strict=True)],
            **_token_counters([2000.0 if b else 20.0 for b in tonight], ratio),
        }
    )


# (the chat's prompt tokens per answer, the batch's, the batch's last hour, the verdict)
BATCH_TONIGHT = [
    # Seed 1212's context-creep-87325300770643: the batch's prompts doubled in its last hour;
    # against the chat's one long prompt (forty) that was nothing, and it read as overload.
    pytest.param(6.0, 6.0, 12.0, "context-creep", id="prompts-doubled"),
    pytest.param(6.0, 6.0, 6.0, "concurrency-overload", id="prompts-as-long"),
    # Seed 7070's concurrency-overload-252792919617125: a new caller's short prompts (a
    # ninth of the day's) weighed more in the last hour; that is a new kind of request.
    pytest.param(30.0, 3.0, 4.0, "concurrency-overload", id="new-caller-shorter"),
]


@pytest.mark.parametrize(("per_answer", "batch", "last_hour", "expected"), BATCH_TONIGHT)
def test_a_batch_held_once_is_read_against_its_own_busy_hours(
    tmp_path, per_answer, batch, last_hour, expected
):
    result = verdict(tmp_path, _batch_tonight(per_answer, batch, last_hour))
    assert result["verdict"] == expected, scores(result)


def _swinging_chat(swing: float) -> Builder:
    """llama-server answering all day at 6 prompt tokens per answer, give or take `swing`
    hour by hour, three times busier the last three hours at 5.5 and then 7.5 in the last
    one (past 1.25 times its busy hours before); then a check timed out."""
    hour = [(len(DAY) - 1 - i) // 12 for i in range(len(DAY))]
    ratio = [7.5 if h == 0 else 5.5 if h < 3 else 6.0 + swing * (-1) ** h for h in hour]
    return base(trigger=("healthcheck", "gateway", "no answer within 60 s")).prometheus(
        {
            "host_memory_available": available(healthy_bursts()),
            "requests_running": [(t, 1.0) for t in DAY],
            "requests_waiting": [(t, 0.0) for t in DAY],
            **_token_counters([300.0 if h < 3 else 100.0 for h in hour], ratio),
        }
    )


@pytest.mark.parametrize(("swing", "creep"), [(0.5, True), (3.0, False)])
def test_prompts_that_stray_no_further_than_the_days_hours_did_are_chance(tmp_path, swing, creep):
    # Blind round 5's r5ps1: a stall's last hour at 5.9 prompt tokens per answer against
    # 4.0 and 4.5 in its busy hours before, on a day whose hours ran from 1.2 to 18.
    result = verdict(tmp_path, _swinging_chat(swing))
    assert (result["verdict"] == "context-creep") is creep, scores(result)
    if not creep:
        candidate = next(c for c in result["candidates"] if c["fault"] == "context-creep")
        assert any("did not grow" in e for e in candidate["evidence_against"]), candidate


def _agents_day(
    last_hour: float, cache: float | None = None, busy_every: int = 1, running: float = 1.0
) -> Builder:
    """Agents at 45 prompt tokens per answer all day, give or take 3 hour by hour, and one
    hour of few answers at 62 (the day's highest), then conversations growing through the
    incident window: 60 in its first two hours, `last_hour` in the last; a check timed out.
    `cache`: the KV cache's use while a request runs, where the engine reports it; one
    runs at every `busy_every`-th reading, the cache empty between; `running` of them at
    once in the last hour."""
    hour = [(len(DAY) - 1 - i) // 12 for i in range(len(DAY))]
    ratio = [
        last_hour if h == 0 else 60.0 if h < 3 else 62.0 if h == 9 else 45.0 + 3 * (-1) ** h
        for h in hour
    ]
    return base(trigger=("healthcheck", "gateway", "no answer within 60 s")).prometheus(
        {
            "host_memory_available": available(healthy_bursts()),
            "requests_running": [
                (t, (running if h == 0 else 1.0) * (i % busy_every == 0))
                for i, (t, h) in enumerate(zip(DAY, hour, strict=True))
            ],
            "requests_waiting": [(t, 0.0) for t in DAY],
            **_token_counters([20.0 if h == 9 else 100.0 for h in hour], ratio),
            **(
                {"kv_cache_usage": [(t, cache * (i % busy_every == 0)) for i, t in enumerate(DAY)]}
                if cache is not None
                else {}
            ),
        }
    )


AGENTS_DAY = [
    # Seed 1313's context-creep-205326952480912, read as accelerator-oom: 77.6 prompt
    # tokens per answer in the last hour against 62.7 in an hour of a third the answers,
    # 43.7 for the day run together.
    pytest.param(70.0, None, 1, True, 1.0, id="half-as-long-again"),
    pytest.param(64.0, None, 1, False, 1.0, id="less"),
    pytest.param(70.0, 0.95, 1, True, 1.0, id="with-the-cache-full"),
    # Seed 7070's leak-ratchet-22404895675424: the prompts grew while the cache stood at
    # 15%; the leak's floor rose all day beside them.
    pytest.param(70.0, 0.15, 1, False, 1.0, id="with-room-in-the-cache"),
    # Seed 1313's context-creep-165655887033098: a household's engine idle most of each
    # hour, its cache empty then and full while it worked (32 requests preempted).
    pytest.param(70.0, 0.95, 10, True, 1.0, id="full-while-it-worked"),
    # Blind round 4's r4co4: a new caller's longer requests queued three at a time where
    # one had run; the day's mix changed, not the conversations.
    pytest.param(70.0, None, 1, False, 3.0, id="with-more-callers"),
]


@pytest.mark.parametrize(("last_hour", "cache", "busy_every", "creep", "running"), AGENTS_DAY)
def test_prompts_half_as_long_again_as_the_days_run_together_grew(
    tmp_path, last_hour, cache, busy_every, creep, running
):
    result = verdict(tmp_path, _agents_day(last_hour, cache, busy_every, running))
    assert (result["verdict"] == "context-creep") is creep, scores(result)


def _deep_check_timed_out(generated: list[float]) -> Builder:
    """vLLM's /health answered and the gateway's completion timed out at the capture; the
    engine's own /metrics answered too. `generated`: its generated-token counter."""
    reason = "no answer within 60 s"
    return (
        base(trigger=("healthcheck", "gateway", reason))
        .checks(answered_while_timed_out(("vllm", "http"), "gateway", reason))
        .engines([engine("qwen3-8b", "vllm", {"vllm:num_requests_running": 1.0})])
        .prometheus(
            {
                "host_memory_available": available(healthy_bursts()),
                "tokens_generated": list(zip(DAY, generated, strict=True)),
            }
        )
    )


def test_a_deep_check_that_timed_out_while_the_engine_generated_to_the_end_is_no_hang(tmp_path):
    result = verdict(tmp_path, _deep_check_timed_out([150.0 * i for i in range(len(DAY))]))
    assert result["verdict"] != "false-liveness", scores(result)
    liveness = next(c for c in result["candidates"] if c["fault"] == "false-liveness")
    assert any("it was working, not stuck" in e for e in liveness["evidence_against"])


def test_the_same_timeout_with_the_counter_stopped_an_hour_before_is_a_hang(tmp_path):
    stopped = len(DAY) - 12
    counter = [150.0 * min(i, stopped) for i in range(len(DAY))]
    result = verdict(tmp_path, _deep_check_timed_out(counter))
    assert result["verdict"] == "false-liveness", scores(result)


def test_the_usual_evening_queue_is_not_tonights_fault(tmp_path):
    # Every evening from 18 to 21 h requests queue; the capture is at 20 h, nothing failed.
    at = AT + 17 * 3600  # 20:00 UTC
    day = [at - 86400 + i * 300 for i in range(288)]
    evening = [3.0 if 18 <= (t % 86400) / 3600 < 21 else 0.0 for t in day]
    b = Builder("spark-1", at, total=TOTAL, trigger=("cron", "baseline"))
    b.memory([(at + i, 40 * GIB) for i in range(30)]).pressure([(at + i, 0.0) for i in range(30)])
    b.processes([{"pid": 100, "name": "worker", "rss_bytes": GIB}]).host().kernel([]).logs([])
    b.prometheus(
        {
            "requests_waiting": list(zip(day, evening, strict=True)),
            "requests_running": [(t, 4.0) for t in day],
            "host_memory_available": [(t, TOTAL - 40 * GIB) for t in day],
        }
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "no-fault", scores(result)
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    assert any("as much earlier in the day" in e for e in queue["evidence_against"])


def test_an_engine_that_died_released_its_memory_and_that_is_not_the_shape(tmp_path):
    # A model step hours ago would be a swap; here memory was flat until the engine died
    # and its 30 GiB came back: the drop is the aftermath, cut at the fall.
    n = len(DAY)
    used = [60 * GIB] * (n - 4) + [30 * GIB] * 4
    engine = [1.0] * (n - 4) + [0.0] * 4
    b = base(trigger=("alert", "EngineDown")).prometheus(
        {
            "host_memory_available": available(used),
            "engine_up": list(zip(DAY, engine, strict=True)),
        }
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] != "no-fault"
    for fault in ("swap-not-unloaded", "leak-ratchet", "host-exhaustion"):
        assert scores(result)[fault] < 3, scores(result)


def test_a_process_leaking_across_the_baselines_is_named_before_anything_fails(tmp_path):
    started = iso(AT - 6 * 3600)
    builders = []
    for k, rss in enumerate([0.16, 0.4, 0.7, 1.0, 1.3, 1.6]):
        at = AT - (5 - k) * 3600
        b = Builder("box-7", at, total=32 * GIB, trigger=("cron", "baseline"), window_s=0)
        b.memory([(at, 10 * GIB + rss * GIB)]).pressure([(at, 0.0)]).host().kernel([]).logs([])
        b.processes([{"pid": 4242, "name": "agent", "rss_bytes": int(rss * GIB),
                      "start_time": started}])  # fmt: skip
        builders.append(b)
    now = Builder("box-7", AT + 600, total=32 * GIB, trigger=("manual", None))
    now.memory([(AT + 600 + i, 12 * GIB) for i in range(30)])
    now.pressure([(AT + 600 + i, 0.0) for i in range(30)]).host().kernel([]).logs([])
    now.processes([{"pid": 4242, "name": "agent", "rss_bytes": int(1.9 * GIB),
                    "start_time": started}])  # fmt: skip
    result = verdict(tmp_path, *builders, now)
    assert result["verdict"] == "leak-ratchet", scores(result)
    leak = result["candidates"][0]
    assert "4242 agent grew from 0.2 GiB to 1.9 GiB" in leak["evidence_for"][0]
    assert "archive" in result["context"]["series"]["memory_used"]["origin"]


def _grew_across_the_baselines(name: str, total_gib: float, failed: bool) -> list[Builder]:
    """No Prometheus: six hourly cron bundles and a capture, in which one process `name`
    grows from 0.6 to 3.4 GiB, its floor above the last at every bundle. The capture is a
    cron snapshot on a machine with room, or a failed check with the machine out of memory
    (`failed`)."""
    started = iso(AT - 30 * 86400)
    total = total_gib * GIB
    builders = []
    for k, rss in enumerate([0.6, 1.1, 1.6, 2.1, 2.6, 3.0]):
        at = AT - (5 - k) * 3600
        b = Builder("box-8", at, total=total, trigger=("cron", "baseline"), window_s=0)
        b.memory([(at, total * 0.4 + rss * GIB)]).pressure([(at, 0.0)]).host().kernel([]).logs([])
        b.processes([{"pid": 709, "name": name, "rss_bytes": int(rss * GIB),
                      "start_time": started}])  # fmt: skip
        builders.append(b)
    trigger = ("healthcheck", "gateway", "HTTP 502") if failed else ("cron", "baseline")
    now = Builder("box-8", AT + 600, total=total, trigger=trigger)
    used = total - 0.2 * GIB if failed else total * 0.4 + 3.4 * GIB
    now.memory([(AT + 600 + i, used) for i in range(30)])
    now.pressure([(AT + 600 + i, 0.0) for i in range(30)]).host().kernel([]).logs([])
    now.processes([{"pid": 709, "name": name, "rss_bytes": int(3.4 * GIB),
                    "start_time": started}])  # fmt: skip
    return [*builders, now]


@pytest.mark.parametrize("app", ["firefox", "WindowServer", "Google Chrome Helper (Renderer)"])
def test_a_browser_growing_through_its_users_day_is_no_leak(tmp_path, app):
    # A Mac's session is its window server and its browser's renderers.
    result = verdict(tmp_path, *_grew_across_the_baselines(app, 64, failed=False))
    assert result["verdict"] == "no-fault", scores(result)
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert any("a desktop app growing with its user's day" in e
               for e in leak["evidence_against"]), leak  # fmt: skip


def test_a_service_growing_the_same_way_is_a_leak(tmp_path):
    result = verdict(tmp_path, *_grew_across_the_baselines("litellm", 64, failed=False))
    assert result["verdict"] == "leak-ratchet", scores(result)


def test_a_process_that_grew_until_the_small_machine_ran_out_is_what_it_ran_out_for(tmp_path):
    result = verdict(tmp_path, *_grew_across_the_baselines("litellm", 8, failed=True))
    assert result["verdict"] == "host-exhaustion", scores(result)
    host = result["candidates"][0]
    assert any("709 litellm grew from" in e and "not an engine" in e
               for e in host["evidence_for"]), host  # fmt: skip
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert leak["score"] < 3, leak


def _grew_then_the_kernel_killed(scope: str) -> list[Builder]:
    """litellm growing bundle after bundle on the 8 GiB box, and the kernel taking
    llama-server three minutes before the failed check, for the whole machine or inside a
    cgroup's limit (`scope`); the capture's own readings, after the kill, show room."""
    *before, now = _grew_across_the_baselines("litellm", 8, failed=True)
    now.memory([(AT + 600 + i, 4.8 * GIB) for i in range(30)])
    kill = (
        "Killed process 4242 (llama-server) total-vm:9413308kB, anon-rss:2753634kB, "
        "file-rss:519743kB, shmem-rss:0kB, UID:1000 pgtables:7627kB oom_score_adj:0"
    )
    prefix = "Out of memory" if scope == "machine" else "Memory cgroup out of memory"
    return [*before, now.kernel([f"{prefix}: {kill}"], ago_s=3 * 60)]


def test_a_process_that_grew_until_the_kernel_killed_for_the_machine_ran_it_out(tmp_path):
    """A coarse reading can miss the lowest point; a kill for the whole machine cannot."""
    result = verdict(tmp_path, *_grew_then_the_kernel_killed("machine"))
    assert result["verdict"] == "host-exhaustion", scores(result)
    assert any("709 litellm grew from" in e for e in result["candidates"][0]["evidence_for"])


def test_the_same_growth_beside_a_kill_inside_a_limit_is_not_the_machine_running_out(tmp_path):
    result = verdict(tmp_path, *_grew_then_the_kernel_killed("cgroup"))
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    assert not any("709 litellm grew from" in e for e in host["evidence_for"]), host


def _climbed_in_the_baselines(used_gib: list[float]) -> list[Builder]:
    """No Prometheus: the host's half-hourly cron bundles through the day, memory used 40
    GiB of 64 until the last of them read `used_gib`, then the kernel killing vLLM's
    engine three minutes before a failed check."""
    total = 64 * GIB
    readings = [40.0] * (48 - len(used_gib)) + used_gib
    builders = []
    for k, used in enumerate(readings):
        at = AT - (48 - k) * 1800
        b = Builder("box-9", at, total=total, trigger=("cron", "baseline"), window_s=0)
        b.memory([(at, used * GIB)]).pressure([(at, 0.0)]).host().kernel([]).logs([])
        builders.append(b.processes([{"pid": 300, "name": "sshd", "rss_bytes": GIB // 64}]))
    now = Builder("box-9", AT, total=total, trigger=("healthcheck", "gateway", "HTTP 502"))
    now.memory([(t, 12 * GIB) for t in WINDOW]).pressure([(t, 0.0) for t in WINDOW]).host()
    now.kernel([VLLM_KILL], times=[AT - 180]).logs([])
    return [*builders, now.processes([{"pid": 300, "name": "sshd", "rss_bytes": GIB // 64}])]


def test_a_climb_the_half_hourly_baselines_saw_up_to_the_kill_is_a_leak(tmp_path):
    result = verdict(tmp_path, *_climbed_in_the_baselines([44.0, 48.5, 52.0, 56.5, 60.0, 62.5]))
    assert result["verdict"] == "leak-ratchet", scores(result)
    leak = result["candidates"][0]
    assert any("climbed through the hours before" in e for e in leak["evidence_for"]), leak


def test_one_jump_in_the_half_hourly_baselines_before_the_kill_is_no_climb(tmp_path):
    result = verdict(tmp_path, *_climbed_in_the_baselines([40.0, 40.5, 61.0, 61.5, 62.0, 62.5]))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert not any("climbed through the hours before" in e for e in leak["evidence_for"]), leak


def _loaded_between_two_baselines(seconds: int) -> list[Builder]:
    """No Prometheus: a Strix Halo's half-hourly cron bundles, each of `seconds` readings a
    second apart, and the capture of thirty (the collector's window). Ollama's box stood at
    83 GiB of 123 through the day until, between two bundles two hours before the failure,
    34 GiB more and no way back: a second model kept. Ollama's next load failed."""
    total = 123 * GIB
    readings = [83.0 + 0.05 * k for k in range(20)] + [118.0] * 4
    ps = {"/api/ps": {"models": [], "loaded": [], "size_total": 0, "size_vram_total": 0}}
    builders = []
    for k, used in enumerate([*readings, 118.0]):
        at = AT - (len(readings) - k) * 1800
        now = k == len(readings)
        trigger = ("healthcheck", "ollama", "HTTP 500") if now else ("cron", "baseline")
        b = Builder("evo-x2", at, total=total, trigger=trigger, window_s=30 if now else seconds)
        times = [at + i for i in range(30 if now else seconds)]
        b.memory([(t, used * GIB) for t in times]).pressure([(t, 0.0) for t in times])
        b.host().kernel([]).logs([OLLAMA_FAILED] if now else [])
        b.processes([{"pid": 7001, "name": "ollama", "rss_bytes": GIB}])
        builders.append(b.engines([engine("ollama", "ollama", readings=ps)]))
    return builders


@pytest.mark.parametrize("seconds", [1, 30], ids=["baselines-of-one-reading", "of-thirty"])
def test_a_jump_between_two_baselines_is_a_model_kept_whatever_each_bundle_holds(tmp_path, seconds):
    """Each bundle is one reading at the archive's pace: the capture's thirty seconds (and
    a baseline's) do not make the half-hours between bundles gaps, which left the jump
    unread and the floors' rise to the leak."""
    result = verdict(tmp_path, *_loaded_between_two_baselines(seconds))
    assert result["verdict"] == "swap-not-unloaded", scores(result)
    assert any("the size of a model" in e for e in result["candidates"][0]["evidence_for"])
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert any("a step, not a ratchet" in e for e in leak["evidence_against"]), leak


def test_the_card_read_by_nvml_in_each_baseline_is_its_history(tmp_path):
    """No Prometheus, no DCGM: a 24 GiB card under llama-server, read by the gpu probe in
    each half-hourly cron bundle. 16.9 GiB through the day, then five hours of climbing
    to 23 GiB; the allocation failed and the engine died, its memory released. The
    baselines are the card's history, and the report says they are."""
    total, pid = 24 * GIB, 4242
    card = [16.9] * 38 + [17.2, 17.4, 17.5, 17.9, 18.4, 19.4, 20.6, 21.5, 22.5, 23.0]
    builders = []
    for k, used in enumerate(card):
        at = AT - (48 - k) * 1800
        b = Builder("rig-2", at, total=64 * GIB, trigger=("cron", "baseline"), window_s=0)
        b.memory([(at, 20 * GIB)]).pressure([(at, 0.0)]).host().kernel([]).logs([])
        b.processes([{"pid": pid, "name": "llama-server", "rss_bytes": 2 * GIB}])
        b.gpu("NVIDIA GeForce RTX 4090", int(total), int(used * GIB),
              [(pid, "llama-server", int((used - 0.4) * GIB))], unified=False)  # fmt: skip
        builders.append(b)
    now = Builder("rig-2", AT, total=64 * GIB, trigger=("healthcheck", "gateway", "HTTP 502"))
    now.memory([(t, 18 * GIB) for t in WINDOW]).pressure([(t, 0.0) for t in WINDOW]).host()
    now.kernel([]).logs(["CUDA error: out of memory"]).processes([])
    now.gpu("NVIDIA GeForce RTX 4090", int(total), int(0.4 * GIB), [], unified=False)
    result = verdict(tmp_path, *builders, now)
    assert result["verdict"] == "leak-ratchet", scores(result)
    assert "accelerator memory" in result["candidates"][0]["evidence_for"][0]
    assert "archive" in result["context"]["series"]["accelerator_used"]["origin"]


def test_a_kill_inside_another_cgroup_beside_healthy_engines_is_context(tmp_path):
    from lab.builder import engine

    kill = (
        "Memory cgroup out of memory: Killed process 16168 (pytest) total-vm:400000kB, "
        "anon-rss:262144kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:692kB oom_score_adj:0"
    )
    b = base().kernel([kill], ago_s=600)
    b.engines([engine("chat", "llama-server", {"llamacpp:requests_processing": 0.0})])
    result = verdict(tmp_path, b)
    assert result["verdict"] == "no-fault", scores(result)
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    assert host["score"] == 1 and "context only" in host["evidence_for"][0]


def test_a_live_hang_outranks_an_oom_line_from_twenty_minutes_before(tmp_path):
    kill = (
        "Out of memory: Killed process 4321 (llama-server) total-vm:66093824kB, "
        "anon-rss:60124kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:692kB oom_score_adj:0"
    )
    b = base(trigger=("healthcheck", "chat")).kernel([kill], ago_s=20 * 60)
    b.checks(answered_while_timed_out(("port", "tcp"), "chat", "no answer within 60 s"))
    result = verdict(tmp_path, b)
    assert result["verdict"] == "false-liveness", scores(result)
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    assert any("fault of the moment" in e for e in host["evidence_against"])


def _leaking_until(died_at: int) -> list[float]:
    """A card's memory: a model's 20 GiB, bursts of cache, and a floor that climbs 0.5 GiB
    an hour; from reading `died_at` on the engine is dead and the card holds 1 GiB."""
    out = []
    for i in range(len(DAY)):
        busy = 4 * GIB if (i // 6) % 4 == 0 else 0.0
        out.append(1.0 * GIB if i >= died_at else 20 * GIB + i * GIB / 24 + busy)
    return out


def _died_leaking() -> Builder:
    """The leaking card of a 48 GiB DCGM GPU whose engine died an hour before the
    systemd trigger."""
    used = _leaking_until(len(DAY) - 12)
    dcgm = [{"metric": {"job": "dcgm", "gpu": "0"},
             "values": [[t, repr(v)] for t, v in zip(DAY, used, strict=True)]}]  # fmt: skip
    total = [{"metric": {"job": "dcgm", "gpu": "0"},
              "values": [[t, repr(48.0 * GIB)] for t in DAY]}]  # fmt: skip
    return history(
        base(trigger=("systemd", "llama-server.service", "result=core-dump")),
        {"accelerator_memory_used": dcgm, "accelerator_memory_total": total},
    )


def test_a_death_releases_the_leak_and_does_not_end_it(tmp_path):
    """The engine died an hour before the systemd trigger: its memory was given back, the
    series dropped and stayed down. The floors up to the death are the leak."""
    b = _died_leaking()
    result = verdict(tmp_path, b)
    assert result["verdict"] == "leak-ratchet", scores(result)
    assert "never came back" in result["candidates"][0]["evidence_for"][0]


def _series(job: str, values: list[float]) -> list[dict]:
    return [{"metric": {"job": job, "device": "card1"},
             "values": [[t, repr(v)] for t, v in zip(DAY, values, strict=True)]}]  # fmt: skip


def _shared_pool_run_out(vm_bytes: float, card: list[float]) -> Builder:
    """A shared pool (GTT on a Strix Halo): the engine killed by the kernel, available
    memory nearly gone, a VM holding more than the engine ever did."""
    n = len(DAY)
    kill = (
        "Out of memory: Killed process 4321 (llama-server) total-vm:66093824kB, "
        "anon-rss:9874660kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:692kB"
    )
    used = [TOTAL - 2 * GIB if i >= n - 4 else 30 * GIB + card[i] for i in range(n)]
    b = history(
        base(trigger=("systemd", "llama-server.service", "result=oom-kill")),
        {
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [TOTAL - u for u in used]
            ),
            "accelerator_memory_used": _series("local-llm", card),
            "accelerator_memory_total": _series("local-llm", [TOTAL] * n),
        },
    ).kernel([kill], ago_s=5 * 60)
    return b.processes(
        [
            {"pid": 955, "name": "qemu-system-x86", "rss_bytes": vm_bytes},
            {"pid": 4400, "name": "worker", "rss_bytes": GIB},
        ]  # fmt: skip
    )


def test_an_engine_that_grew_on_a_shared_pool_ran_it_out_though_a_vm_holds_more(tmp_path):
    n = len(DAY)
    # The engine's allocations: 20 GiB all day, then 60 GiB more in the last three hours.
    card = [20 * GIB + (60 * GIB * (i - (n - 36)) / 36 if i >= n - 36 else 0) for i in range(n)]
    result = verdict(tmp_path, _shared_pool_run_out(40 * GIB, card))
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    assert any("engines' own growth ran the machine out" in e for e in host["evidence_against"])
    assert not any("line stayed flat" in e for e in host["evidence_for"]), host


def test_a_vm_holding_more_while_the_engine_kept_its_size_is_what_the_host_ran_out_for(
    tmp_path,
):
    card = [20 * GIB] * len(DAY)
    result = verdict(tmp_path, _shared_pool_run_out(40 * GIB, card))
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    assert result["verdict"] == "host-exhaustion", scores(result)
    assert any("not an engine" in e for e in host["evidence_for"]), host


def _ollama_stepped_up(lines: list[str], back: int = 12, ramp: int = 1) -> Builder:
    """A card that stepped up 30 GiB `back` readings (an hour) before Ollama failed to
    load a model, climbing over `ramp` readings of five minutes."""
    n = len(DAY)
    card = [20 * GIB + 30 * GIB * min(1.0, max(0, i - (n - back) + 1) / ramp) for i in range(n)]
    b = history(
        base(trigger=("healthcheck", "ollama", "HTTP 500")),
        {
            "accelerator_memory_used": _series("dcgm", card),
            "accelerator_memory_total": _series("dcgm", [80.0 * GIB] * n),
        },
    )
    ps = {"/api/ps": {"models": [], "loaded": [], "size_total": 0, "size_vram_total": 0}}
    return b.engines([engine("ollama", "ollama", readings=ps)]).logs(lines)


def test_a_step_that_is_the_same_model_reloaded_bigger_is_not_a_second_model(tmp_path):
    lines = [OLLAMA_LOAD.format(h=h, blob="dde5", ctx=c) for h, c in ((1, 8192), (2, 65536))]
    result = verdict(tmp_path, _ollama_stepped_up([*lines, OLLAMA_FAILED]))
    assert result["verdict"] == "context-creep", scores(result)
    snu = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert any("reloaded with a longer context" in e for e in snu["evidence_against"]), snu


def test_a_step_beside_loads_that_kept_their_context_is_still_a_model_kept(tmp_path):
    lines = [OLLAMA_LOAD.format(h=h, blob="dde5", ctx=8192) for h in (1, 2)]
    result = verdict(tmp_path, _ollama_stepped_up([*lines, OLLAMA_FAILED]))
    snu = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert any("the size of a model" in e for e in snu["evidence_for"]), snu


def _card_stepped_up_and_nothing_said_what(
    before: float, after: float, total: float, wobbles: bool = False
) -> Builder:
    """make eval 3434 through a real Prometheus: Ollama's check answered HTTP 500 100
    minutes after the card stepped from `before` to `after`, and nothing but DCGM and the
    gateway's `up` was read (no manager's list, no process on the card, no log). With
    `wobbles`, every fifth reading of the three hours before the step 0.3 GiB higher."""
    n = len(DAY)

    def card(i: int) -> float:
        if i >= n - 20:
            return after
        return before + 0.3 * GIB * (wobbles and i >= n - 56 and i % 5 == 0)

    card = [card(i) for i in range(n)]
    return history(
        base(trigger=("healthcheck", "ollama", "HTTP 500")),
        {
            "accelerator_memory_used": _series("dcgm", card),
            "accelerator_memory_total": _series("dcgm", [total] * n),
            "targets_up": [up("gateway", [1.0] * n)],
        },
    )


def test_a_model_step_that_left_less_room_than_a_model_is_a_model_kept(tmp_path):
    """swap-not-unloaded-13935215051941: a second model of 16.4 GiB beside the first on a
    48 GiB card left 5 GiB, under a tenth, yet 42.7 GiB is not 90 % of 48: the next model's
    load failed in Ollama's log, unread, and the verdict was insufficient-evidence."""
    b = _card_stepped_up_and_nothing_said_what(26.3 * GIB, 42.7 * GIB, 48 * GIB)
    result = verdict(tmp_path, b)
    assert result["verdict"] == "swap-not-unloaded", scores(result)


def test_a_step_from_an_empty_card_is_the_first_model_not_one_kept(tmp_path):
    """make eval 3434 (context-creep-188470388374061): Ollama unloads its model when idle;
    it loaded it again, with a longer context, from an empty card to all of it, and the
    next load failed. The step was the size of a model and stayed to the failure, but no
    model was resident before it to be kept: read as swap-not-unloaded (3)."""
    b = _card_stepped_up_and_nothing_said_what(0.0, 23.7 * GIB, 24 * GIB)
    result = verdict(tmp_path, b)
    snu = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert snu["score"] < 3, scores(result)
    assert any("a card holding no model" in e for e in snu["evidence_against"]), snu


def test_a_step_after_hours_of_wobbles_is_timed_by_its_jump(tmp_path):
    """swap-not-unloaded-111557002754740: a 24 GiB card at 15.8 GiB, now and then 16.0, for
    hours, then 7.8 GiB more in one scrape. The day-long look split the line in the wobbles
    and timed the load at 50 minutes, no model's; the shorter looks found the same step to
    the same level, in one scrape."""
    b = _card_stepped_up_and_nothing_said_what(15.8 * GIB, 23.7 * GIB, 24 * GIB, wobbles=True)
    result = verdict(tmp_path, b)
    assert result["verdict"] == "swap-not-unloaded", scores(result)


def test_a_model_step_on_gtt_that_left_the_host_short_is_a_model_kept(tmp_path):
    """make eval 3535 (swap-not-unloaded-135323952441970): on a Strix Halo Ollama loaded a
    70B model beside the 14B one it kept; the GTT pool of 120 GiB stepped 51.5 GiB to 68,
    room left on the card's own reckoning, but GTT is the host's memory and the host was
    left 4.5 GiB; the next load failed. Read as host-exhaustion, then (its ending capped)
    insufficient-evidence."""
    n = len(DAY)
    card = [68 * GIB if i >= n - 14 else 16.5 * GIB for i in range(n)]
    used = [c + 55.5 * GIB for c in card]
    b = history(
        base(trigger=("healthcheck", "ollama", "HTTP 500")),
        {
            "accelerator_memory_used": _series("amdgpu", card),
            "accelerator_memory_total": _series("amdgpu", [120 * GIB] * n),
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [TOTAL - u for u in noisy(used, 0.1 * GIB)]
            ),
            "targets_up": [up("gateway", [1.0] * n)],
        },
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "swap-not-unloaded", scores(result)


def _pool_stepped_up(yesterday: float) -> Builder:
    """A GB10 read by node-exporter alone: 41 GiB in use since the evening, `yesterday`
    through yesterday's working hours, then 62 GiB more (gpt-oss-120b) 1.8 h before the
    kernel killed Ollama and its check answered HTTP 500."""
    n = len(DAY)
    used = [
        yesterday if i < n - 120 else 103.5 * GIB if i >= n - 22 else 41 * GIB for i in range(n)
    ]
    return history(
        base(trigger=("healthcheck", "ollama", "HTTP 500")),
        {"host_memory_available": plain("node_memory_MemAvailable_bytes",
                                        [TOTAL - u for u in used]),
         "targets_up": [up("gateway", [1.0] * n)]},
    )  # fmt: skip


@pytest.mark.parametrize("stood", [True, False], ids=["held-yesterday", "never-that-high"])
def test_a_pool_back_at_yesterdays_level_had_room_for_what_it_held(tmp_path, stood):
    """make eval 3232 (context-creep-88154166163172): Ollama loaded its 62 GiB model in
    the morning as it had the day before, leaving less room than the model; the pool had
    stood as high all of yesterday with nothing failing, so that room was enough, and no
    second model is read into the step. Where the pool never stood that high, it is."""
    result = verdict(tmp_path, _pool_stepped_up((104 if stood else 41) * GIB))
    snu = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert (snu["score"] < 3) == stood, scores(result)


def _model_loaded_two_hours_before(
    trigger: tuple[str, ...], kill: list[str], size: float = 20 * GIB
) -> Builder:
    """A GB10 (one 128 GiB pool, the host's line): 60 GiB in use all day, then two hours
    before the failure Ollama loaded gemma3:27b, `size`, and kept it. At the capture its
    /api/ps lists that one model and one runner holds the card."""
    n = len(DAY)
    used = [60 * GIB + size if i >= n - 24 else 60 * GIB for i in range(n)]
    b = history(base(trigger=trigger), {"host_memory_available": plain(
        "node_memory_MemAvailable_bytes", [TOTAL - u for u in used])})  # fmt: skip
    ps = {"/api/ps": {"models": [{"name": "gemma3:27b", "size": 20 * GIB, "size_vram": 20 * GIB}]}}
    b.engines([engine("ollama", "ollama", readings=ps)])
    b.processes([{"pid": 7001, "name": "ollama", "rss_bytes": GIB,
                  "cmdline": ["/usr/local/bin/ollama", "runner"]}])  # fmt: skip
    return b.gpu(processes=[(7001, "ollama", 20 * GIB)]).kernel(kill, times=[AT - 180] * len(kill))


@pytest.mark.parametrize("size", [20 * GIB, 8 * GIB], ids=["a-tenth-of-the-pool", "less"])
def test_a_model_step_where_the_manager_lists_that_one_model_alone_is_its_load(tmp_path, size):
    """The gateway's check timed out: the engine lived through it, so what Ollama lists at
    the capture is what it held in the hours before. One model, alone on the card: the step
    is that model loaded when callers asked for it, nothing kept beside it, whatever its
    size."""
    timed_out = ("healthcheck", "gateway", "no answer within 90 s")
    b = _model_loaded_two_hours_before(timed_out, [], size)
    result = verdict(tmp_path, b)
    snu = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert snu["score"] < 3, scores(result)
    assert any("that model loaded on demand" in e for e in snu["evidence_against"]), snu


def test_the_same_step_before_the_kernel_killed_ollama_is_still_a_model_kept(tmp_path):
    """The kernel killed Ollama: what it lists at the capture is after its restart, not the
    set it held when the memory ran out."""
    kill = ["Out of memory: Killed process 7002 (ollama) total-vm:90000000kB, "
            "anon-rss:7000000kB, file-rss:20000000kB, shmem-rss:0kB, UID:998 pgtables:9000kB "
            "oom_score_adj:0"]  # fmt: skip
    b = _model_loaded_two_hours_before(("healthcheck", "gateway", "HTTP 502"), kill)
    result = verdict(tmp_path, b)
    snu = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert any("the size of a model" in e for e in snu["evidence_for"]), snu


@pytest.mark.parametrize("rest", [True, False], ids=["rested-half-way", "at-once"])
def test_a_rise_that_rested_half_way_is_no_model_loaded(tmp_path, rest):
    """Ollama's card rose 40 GiB over an hour and a half, held there 100 minutes, and a load
    failed, nothing in its log loading beside it. Resting 40 minutes at a quarter of the
    way is a ratchet's clicks (a leak in the allocator); in one jump, the size of a model,
    it is one kept."""
    n = len(DAY)
    climb = [18 * GIB] * 8 + [18 * GIB + 30 * GIB * (k + 1) / 10 for k in range(10)]
    card = [8 * GIB] * (n - 38) + (climb if rest else [48 * GIB] * 18) + [48 * GIB] * 20
    b = history(
        base(trigger=("healthcheck", "ollama", "HTTP 500")),
        {
            "accelerator_memory_used": _series("dcgm", card),
            "accelerator_memory_total": _series("dcgm", [80.0 * GIB] * n),
        },
    )
    ps = {"/api/ps": {"models": [{"name": "qwen2.5-coder:7b", "size": 5 * GIB}]}}
    b.engines([engine("ollama", "ollama", readings=ps)]).logs([OLLAMA_FAILED])
    result = verdict(tmp_path, b)
    snu = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert any("resting half-way" in e for e in snu["evidence_against"]) == rest, snu
    assert (result["verdict"] == "swap-not-unloaded") != rest, scores(result)


def _stepped_as_a_runner_started(lines: list[str]) -> Builder:
    """A GB10 (one pool, the host's line): 110 GiB in use all day; half an hour before the
    kernel killed Ollama the line stepped up 8 GiB (a sixteenth of the pool: no bigger than
    a model of 14B) and stayed. At the capture, after its restart, Ollama lists one model
    and one process holds the card; `lines`: its log."""
    n = len(DAY)
    used = [118 * GIB if i >= n - 6 else 110 * GIB for i in range(n)]
    b = history(
        base(trigger=("healthcheck", "gateway", "HTTP 502")),
        {"host_memory_available": plain("node_memory_MemAvailable_bytes",
                                        [TOTAL - u for u in noisy(used, 0.1 * GIB)])},
    )  # fmt: skip
    ps = {"/api/ps": {"models": [{"name": "gemma3:27b", "size": 20 * GIB, "size_vram": 20 * GIB}]}}
    b.engines([engine("ollama", "ollama", readings=ps)]).logs(lines)
    b.processes([{"pid": 7001, "name": "ollama", "rss_bytes": GIB,
                  "cmdline": ["/usr/local/bin/ollama", "serve"]}])  # fmt: skip
    kill = ["Out of memory: Killed process 7002 (ollama) total-vm:90000000kB, "
            "anon-rss:7000000kB, file-rss:20000000kB, shmem-rss:0kB, UID:998 pgtables:9000kB "
            "oom_score_adj:0"]  # fmt: skip
    return b.gpu(processes=[(7001, "ollama", 20 * GIB)]).kernel(kill, times=[AT - 180])


def _runner_started(blob: str, at: float) -> str:
    """Ollama's load line for `blob`, written `at` as Go's slog writes its time."""
    line = OLLAMA_LOAD.format(h=0, blob=blob, ctx=8192)
    return re.sub(r"time=\S+", f"time={iso(at)}", line)


@pytest.mark.parametrize(
    ("lines", "kept"),
    [
        ([], False),
        ([_runner_started("a1b2", AT - 1800)], True),
        # The same weights loaded that morning too: unloaded when idle, loaded again.
        ([_runner_started("a1b2", AT - 8 * 3600), _runner_started("a1b2", AT - 1800)], False),
    ],
    ids=["no-load-in-the-log", "a-new-model-loaded", "the-same-model-again"],
)
def test_a_small_step_is_a_model_kept_where_the_log_loads_a_new_one_with_it(tmp_path, lines, kept):
    """No target says a server came up (Ollama starts its runners itself), but its log says
    when it loaded which weights: the step that came with a model it had not loaded before
    is a second model kept, however small beside the pool."""
    result = verdict(tmp_path, _stepped_as_a_runner_started(lines))
    assert (result["verdict"] == "swap-not-unloaded") == kept, scores(result)


def _loaded_on_a_shared_pool(blobs: tuple[str, ...], failed: bool = False) -> Builder:
    """The same step on a GB10 whose NVML lists no process (a shared pool): only Ollama's
    log says what it loaded over the day, one load line per blob; `failed`: and then a
    load that failed to allocate."""
    n = len(DAY)
    used = [80 * GIB if i >= n - 24 else 60 * GIB for i in range(n)]
    b = history(
        base(trigger=("healthcheck", "gateway", "no answer within 90 s")),
        {"host_memory_available": plain("node_memory_MemAvailable_bytes",
                                        [TOTAL - u for u in used]),
         "targets_up": [up("gateway", [1.0] * n)]},
    )  # fmt: skip
    ps = {"/api/ps": {"models": [{"name": "gemma3:27b", "size": 20 * GIB, "size_vram": 20 * GIB}]}}
    lines = [OLLAMA_LOAD.format(h=h, blob=blob, ctx=8192) for h, blob in enumerate(blobs, 1)]
    lines += [OLLAMA_FAILED] if failed else []
    return b.engines([engine("ollama", "ollama", readings=ps)]).logs(lines)


def test_where_the_card_lists_nobody_the_log_loading_one_model_again_is_its_load(tmp_path):
    """Ollama's log loads the one model three times (unloaded when idle, loaded when asked)
    and lists only it: a second model kept beside it would have a load line of its own."""
    result = verdict(tmp_path, _loaded_on_a_shared_pool(("dde5", "dde5", "dde5")))
    snu = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert snu["score"] < 3, scores(result)
    said = "the engine's log loads only sha256-dde5 (3 times)"
    assert any(said in e and "loaded on demand" in e for e in snu["evidence_against"]), snu


def test_where_the_log_loads_a_second_model_the_step_is_still_a_model_kept(tmp_path):
    result = verdict(tmp_path, _loaded_on_a_shared_pool(("a1b2", "dde5", "dde5")))
    snu = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert any("the size of a model" in e for e in snu["evidence_for"]), snu


@pytest.mark.parametrize("failed", [False, True], ids=["answer-too-late", "load-failed"])
def test_a_model_kept_is_the_fault_only_where_the_next_found_no_room(tmp_path, failed):
    """The check timed out both times; only where a load then failed to allocate did the
    model kept take the room. An answer too late with nothing running out is the load's
    or a stall's, whatever loaded two hours before."""
    result = verdict(tmp_path, _loaded_on_a_shared_pool(("a1b2", "dde5", "dde5"), failed))
    snu = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert (snu["score"] >= 3) == failed, scores(result)
    late = any("an answer too late with nothing running out" in e for e in snu["evidence_for"])
    assert late != failed, snu


def _loaded_on_demand(last: float, host: bool = False, between: float = 2 * GIB) -> Builder:
    """Ollama loads its model when callers come and unloads it when idle: the card stood at
    32 GiB through two spells of the day, `between` otherwise; an hour before the failed
    load it stepped to `last`. `host`: a shared pool (Strix Halo), the host's line holding
    the card's above 10 GiB of its own."""
    n = len(DAY)
    spells = [range(70, 110), range(150, 200)]
    card = [
        (last if i >= n - 12 else 32 * GIB if any(i in s for s in spells) else between)
        for i in range(n)
    ]
    b = history(
        base(trigger=("healthcheck", "ollama", "HTTP 500")),
        {
            "accelerator_memory_used": _series("dcgm", card),
            "accelerator_memory_total": _series("dcgm", [80.0 * GIB] * n),
            **(
                {
                    "host_memory_available": plain(
                        "node_memory_MemAvailable_bytes", [TOTAL - 10 * GIB - c for c in card]
                    )
                }
                if host
                else {}
            ),
        },
    )
    ps = {"/api/ps": {"models": [], "loaded": [], "size_total": 0, "size_vram_total": 0}}
    lines = [OLLAMA_LOAD.format(h=h, blob="dde5", ctx=8192) for h in (1, 2)]
    return b.engines([engine("ollama", "ollama", readings=ps)]).logs([*lines, OLLAMA_FAILED])


@pytest.mark.parametrize("host", [False, True])
def test_a_step_back_to_where_the_model_stood_that_day_is_no_second_model(tmp_path, host):
    # With the host's line too (seed 1313's concurrency-overload-133063396939823 and 5150's
    # -132812790301883, Ollama on a Strix Halo, ambiguous beside swap-not-unloaded), the
    # host's step is the card's load seen again, no second model.
    result = verdict(tmp_path, _loaded_on_demand(32 * GIB, host))
    assert result["verdict"] != "swap-not-unloaded", scores(result)
    snu = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert snu["score"] < 2, snu
    assert any("loaded on demand again" in e for e in snu["evidence_against"]), snu
    assert any("as the accelerator's did" in e for e in snu["evidence_against"]) is host, snu


def test_a_step_a_model_above_anything_that_day_is_a_model_kept(tmp_path):
    # The model resident all day (32 GiB, kept alive), then 20 GiB more beside it. From a
    # card holding no model the step is one load (test_a_step_from_an_empty_card_...).
    result = verdict(tmp_path, _loaded_on_demand(52 * GIB, between=32 * GIB))
    snu = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert any("the size of a model" in e for e in snu["evidence_for"]), snu


def test_a_host_line_that_stood_there_earlier_may_have_held_anything_else(tmp_path):
    """No card line: the host's memory stood at 60 GiB for a spell that morning (a build,
    a browser: anything), and stepped there again an hour before Ollama's load failed. The
    host's earlier level says nothing of a model."""
    n = len(DAY)
    used = [60 * GIB if 70 <= i < 110 or i >= n - 12 else 30 * GIB for i in range(n)]
    ps = {"/api/ps": {"models": [], "loaded": [], "size_total": 0, "size_vram_total": 0}}
    lines = [OLLAMA_LOAD.format(h=h, blob="dde5", ctx=8192) for h in (1, 2)]
    b = base(trigger=("healthcheck", "ollama", "HTTP 500")).prometheus(
        {"host_memory_available": available(used)}
    )
    b.engines([engine("ollama", "ollama", readings=ps)]).logs([*lines, OLLAMA_FAILED])
    snu = next(c for c in verdict(tmp_path, b)["candidates"] if c["fault"] == "swap-not-unloaded")
    assert not any("loaded on demand again" in e for e in snu["evidence_against"]), snu
    assert any("stepped up" in e for e in snu["evidence_for"]), snu


def test_a_load_that_ran_out_beside_a_runner_still_holding_another_model_is_a_model_kept(
    tmp_path,
):
    """No history: Ollama's log loads model 9c01, the card runs out, and at the capture the
    runner of model 3bbe still holds 16.8 GiB of the 24 GiB card. The failed allocation is
    how it ended; the model not unloaded for the next is why."""
    runner = ["/usr/local/bin/ollama", "runner", "--ollama-engine", "--model",
              "/root/.ollama/models/blobs/sha256-3bbe", "--port", "41931"]  # fmt: skip
    ps = {"/api/ps": {"models": [], "loaded": ["gemma3:27b"], "size_total": 0,
                      "size_vram_total": 0}}  # fmt: skip
    b = base(trigger=("healthcheck", "ollama", "HTTP 500"))
    b.gpu("NVIDIA GeForce RTX 3090", total=24 * GIB, used=17 * GIB, unified=False,
          processes=[(58531, "ollama", int(16.8 * GIB))])  # fmt: skip
    b.processes(
        [
            {"pid": 58531, "ppid": 1090, "name": "ollama", "rss_bytes": GIB, "cmdline": runner},
            {
                "pid": 1090,
                "ppid": 1,
                "name": "ollama",
                "rss_bytes": GIB // 8,
                "cmdline": ["/usr/local/bin/ollama", "serve"],
            },
        ]  # fmt: skip
    )
    b.engines([engine("ollama", "ollama", readings=ps)])
    result = verdict(tmp_path, b.logs([OLLAMA_LOAD.format(h=5, blob="9c01", ctx=8192),
                                       OLLAMA_FAILED]))  # fmt: skip
    assert result["verdict"] == "swap-not-unloaded", scores(result)
    assert "still held 16.8 GiB for sha256-3bbe" in result["candidates"][0]["evidence_for"][0]


def test_a_model_loaded_hours_before_the_window_and_kept_to_the_failure_is_the_cause(tmp_path):
    """Loaded in five minutes four hours before the failed load, and never unloaded: the
    allocation failure is how it ended, the model kept is why."""
    lines = [OLLAMA_LOAD.format(h=h, blob=blob, ctx=8192) for h, blob in ((1, "dde5"), (2, "a1b2"))]
    result = verdict(tmp_path, _ollama_stepped_up([*lines, OLLAMA_FAILED], back=50))
    assert result["verdict"] == "swap-not-unloaded", scores(result)
    said = result["candidates"][0]["evidence_for"][0]
    assert "min before the failure" in said and "stayed until" in said, said


def test_an_hour_long_climb_hours_before_the_window_is_no_model_loaded(tmp_path):
    """The same rise over seventy minutes, four hours back: a climb a step only
    approximates, too far back and too slow to be the model this failure came from."""
    lines = [OLLAMA_LOAD.format(h=h, blob=blob, ctx=8192) for h, blob in ((1, "dde5"), (2, "a1b2"))]
    result = verdict(tmp_path, _ollama_stepped_up([*lines, OLLAMA_FAILED], back=50, ramp=14))
    assert result["verdict"] != "swap-not-unloaded", scores(result)
    snu = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert snu["score"] < 3 and not any("stayed until" in e for e in snu["evidence_for"]), snu


# The machine's OOM killer taking a small process, not an engine.
MACHINE_KILL = (
    "Out of memory: Killed process 4321 (python3) total-vm:66093824kB, "
    "anon-rss:60124kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:692kB oom_score_adj:0"
)


def _stalled(kill: str, ago_s: float) -> Builder:
    """A machine stalled on memory at the capture, the kernel's OOM-kill counter one
    higher than three hours before, and one kill line in the kernel log."""
    n = len(DAY)
    b = history(
        base(trigger=("healthcheck", "chat", "no answer within 60 s")),
        {"host_oom_kills": plain("node_vmstat_oom_kill", [0.0] * (n - 10) + [1.0] * 10)},
    )
    b.pressure([(t, 45.0) for t in WINDOW], [(t, 15.0) for t in WINDOW])
    b.vmstat([(t, 1000 + i * 500) for i, t in enumerate(WINDOW)])
    b.memory([(t, 120 * GIB) for t in WINDOW], swap_used=16 * GIB - GIB)
    return b.kernel([kill], ago_s=ago_s)


def test_a_kill_inside_another_groups_limit_does_not_make_a_stall_a_prelude(tmp_path):
    kill = (
        "Memory cgroup out of memory: Killed process 706987 (python3) total-vm:4702984kB, "
        "anon-rss:2034237kB, file-rss:8192kB, shmem-rss:0kB, UID:0 pgtables:4188kB"
    )
    result = verdict(tmp_path, _stalled(kill, 100 * 60))
    assert result["verdict"] == "memory-pressure-stall", scores(result)
    stall = result["candidates"][0]
    assert not any("prelude" in e for e in stall["evidence_against"]), stall


def test_a_stall_that_ended_in_the_machines_oom_kill_was_its_prelude(tmp_path):
    result = verdict(tmp_path, _stalled(MACHINE_KILL, 100 * 60))
    stall = next(c for c in result["candidates"] if c["fault"] == "memory-pressure-stall")
    assert any("prelude" in e for e in stall["evidence_against"]), stall


def _scrapes_stopped_before(waiting: int, gone: int = 18) -> Builder:
    """vLLM scraped all day with nothing waiting, until its scrapes stopped `gone` readings
    (five minutes each: 90 minutes) before the gateway's check timed out (an engine too
    busy to answer them); its own stats lines, every ten seconds, say `waiting` requests
    waited with 8 running."""
    n = len(DAY)
    kept = [0.0] * (n - gone) + [None] * gone
    b = history(
        base(trigger=("healthcheck", "gateway", "no answer within 90 s")),
        {
            "requests_waiting": plain("vllm:num_requests_waiting", kept),
            "requests_running": plain("vllm:num_requests_running", [1.0 if v == 0.0 else None
                                                                    for v in kept]),
        },
    )  # fmt: skip
    return b.logs([V1.format(s=k, r=8, w=waiting, kv="61.0") for k in range(12)])


def test_a_queue_the_engine_logged_after_its_scrapes_stopped_is_overload(tmp_path):
    result = verdict(tmp_path, _scrapes_stopped_before(waiting=390))
    assert result["verdict"] == "concurrency-overload", scores(result)
    assert "the engine's stats lines" in result["candidates"][0]["evidence_for"][0]


def test_scrapes_that_stopped_forty_minutes_before_did_not_see_the_queue(tmp_path):
    """The hour before the failure holds readings, but only its first twenty minutes:
    nothing waited then. The engine's own lines say what waited at the end."""
    result = verdict(tmp_path, _scrapes_stopped_before(waiting=390, gone=8))
    assert result["verdict"] == "concurrency-overload", scores(result)
    said = result["candidates"][0]["evidence_for"][0]
    assert "the engine's stats lines" in said and "(the scrapes stopped 4" in said, said


def test_the_same_gap_with_nothing_waiting_in_its_log_is_no_overload(tmp_path):
    result = verdict(tmp_path, _scrapes_stopped_before(waiting=0))
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    assert queue["score"] == 0, queue


def _tight_day_beside_a_fenced_kill(counted: float) -> Builder:
    """A GB10 running vLLM at 5 % available all day, a routine snapshot; a node process
    killed inside its own container's limit 54 minutes before, and the kernel's OOM-kill
    counter `counted` higher than three hours before."""
    n = len(DAY)
    fenced = (
        "Memory cgroup out of memory: Killed process 598958 (node) total-vm:1426934kB, "
        "anon-rss:508559kB, file-rss:8192kB, shmem-rss:0kB, UID:0 pgtables:1137kB"
    )
    b = history(
        base(trigger=("cron", "baseline")),
        {
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [0.05 * TOTAL] * n
            ),  # fmt: skip
            "host_oom_kills": plain("node_vmstat_oom_kill", [0.0] * (n - 10) + [counted] * 10),
            "targets_up": [up("vllm", [1.0] * n)],
        },
    )
    return b.kernel([fenced], ago_s=54 * 60)


def test_a_kill_inside_a_containers_limit_counted_by_the_kernel_is_no_exhaustion(tmp_path):
    """The counter counts the container's kill the log already shows: the machine, as
    tight as all day, ran out of nothing."""
    result = verdict(tmp_path, _tight_day_beside_a_fenced_kill(1.0))
    assert result["verdict"] == "no-fault", scores(result)
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    assert not any("counter rose" in e for e in host["evidence_for"]), host


def test_a_counter_rising_past_the_kills_the_log_shows_is_the_machine_running_out(tmp_path):
    result = verdict(tmp_path, _tight_day_beside_a_fenced_kill(2.0))
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    assert any("counter rose by 1" in e for e in host["evidence_for"]), host


def test_a_high_water_climbing_all_day_while_the_prompts_kept_their_length_is_a_note(
    tmp_path,
):
    """llamacpp:n_tokens_max only rises until a restart: a day of it climbs by nature. The
    prompt and generated counters, read hour by hour, say the prompts did not grow."""
    n = len(DAY)
    high_water = [2000.0 + 60.0 * i for i in range(n)]
    generated = [5000.0 * i for i in range(n)]
    prompt = [6.0 * g for g in generated]
    b = history(
        base(trigger=("systemd", "llama-server.service", "result=oom-kill")),
        {
            "context_high_water": plain("llamacpp:n_tokens_max", high_water),
            "tokens_generated": plain("llamacpp:tokens_predicted_total", generated),
            "tokens_prompt": plain("llamacpp:prompt_tokens_total", prompt),
            "requests_running": plain("llamacpp:requests_processing", [2.0] * n),
        },
    )
    result = verdict(tmp_path, b)
    creep = next(c for c in result["candidates"] if c["fault"] == "context-creep")
    assert any("rises by nature" in e for e in creep["evidence_for"]), creep
    # A note stays a note beside a failure: the same load confirms a creep, not a note
    # (blind round 3 r3lk2: the note and the load made 2, and a leak's 3 read ambiguous).
    assert creep["score"] == 1, creep
    assert not any("the same load" in e for e in creep["evidence_for"]), creep


def test_a_high_water_raised_by_more_callers_is_not_a_creep(tmp_path):
    """A retry storm in the last two hours: four times the requests running, a queue, and
    a health check that timed out. llamacpp:n_tokens_max doubled (the longest of many more
    requests), while the prompt and generated counters say each prompt kept its length."""
    n = len(DAY)
    storm = [i >= n - 24 for i in range(n)]
    generated = [5000.0 * i for i in range(n)]
    b = history(
        base(trigger=("healthcheck", "gateway", "no answer within 120 s")),
        {
            "context_high_water": plain(
                "llamacpp:n_tokens_max", [8000.0 if s else 4000.0 for s in storm]
            ),
            "tokens_generated": plain("llamacpp:tokens_predicted_total", generated),
            "tokens_prompt": plain("llamacpp:prompt_tokens_total", [6.0 * g for g in generated]),
            "requests_running": plain(
                "llamacpp:requests_processing", [8.0 if s else 2.0 for s in storm]
            ),
            "requests_waiting": plain(
                "llamacpp:requests_deferred", [20.0 if s else 0.0 for s in storm]
            ),
        },
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "concurrency-overload", scores(result)
    creep = next(c for c in result["candidates"] if c["fault"] == "context-creep")
    assert creep["score"] < 3, creep
    assert any("more requests ran, each as long" in e for e in creep["evidence_for"]), creep


def test_a_stall_beside_a_service_that_failed_outright_yields_to_what_filled_memory(tmp_path):
    """The leak's card filled the machine, which stalled; the engine then aborted on an
    allocation failure. The stall came with the leak: it is how it ended, not why."""
    b = _died_leaking()
    b.pressure([(t, 45.0) for t in WINDOW], [(t, 15.0) for t in WINDOW])
    b.vmstat([(t, 1000 + i * 500) for i, t in enumerate(WINDOW)])
    result = verdict(tmp_path, b)
    assert result["verdict"] == "leak-ratchet", scores(result)
    stall = next(c for c in result["candidates"] if c["fault"] == "memory-pressure-stall")
    assert any("how the failure ended" in e for e in stall["evidence_against"]), stall


VLLM_KILL = (
    "Out of memory: Killed process 38705 (VLLM::EngineCor) total-vm:152538098kB, "
    "anon-rss:42720873kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:85561kB"
)


def _killed_after(used: list[float], kill: str = VLLM_KILL, **series: list[dict]) -> Builder:
    """A failed check, the host's memory `used` through the day (and any other series by
    query name), and the kernel's kill line three minutes before the capture."""
    b = history(
        base(trigger=("healthcheck", "gateway", "HTTP 502")),
        {
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [TOTAL - u for u in used]
            ),
            **series,
        },
    )
    return b.kernel([kill], ago_s=3 * 60)


def _killed_by_its_own_limit(up_from: int) -> Builder:
    """A box near full all day (its page cache and a VM: 118 of 120 GiB in use), vLLM's
    engine up from reading `up_from` of the day and killed inside its container's memory
    limit three minutes before the failed check: its growth hides in the box's lines."""
    n = len(DAY)
    used = noisy([TOTAL - 1.5 * GIB] * n, 0.2 * GIB)
    up = [None if i < up_from else 1.0 for i in range(n - 1)] + [0.0]
    kill = "Memory cgroup out of memory: " + VLLM_KILL.split(": ", 1)[1]
    node = seen("node", 9100, [1.0] * n)
    return _killed_after(used, kill, targets_up=[node, seen("vllm", 8000, up)])


@pytest.mark.parametrize(("up_from", "leak"), [(0, True), (len(DAY) - 4, False)])
def test_an_engine_its_own_limit_killed_hours_after_it_loaded_outgrew_it(tmp_path, up_from, leak):
    # Seed 6060's leak-ratchet-247176998316982, read as host-exhaustion: the kill, inside the
    # engine's own limit, is no machine running out; a full box hides the growth. Killed
    # twenty minutes after it came up, it died loading: nothing grew.
    result = verdict(tmp_path, _killed_by_its_own_limit(up_from))
    assert (result["verdict"] == "leak-ratchet") is leak, scores(result)
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    assert any("own cgroup limit" in e for e in host["evidence_against"]), host


def _ratchet_beside_a_high_water(grew: bool, jumped: bool = False) -> Builder:
    """llama-server's host floor ratcheting up 30 GiB through the day to the kill, its
    context high-water climbing all day as a high-water does (or, `jumped`, level at 9900
    until one request of 12840 tokens in the last hour), and the prompts, read from its
    counters, ten tokens per answer token all day (or, `grew`, ever longer)."""
    n = len(DAY)
    used = _floors([(k * 24, 40 * GIB + k * 2.5 * GIB) for k in range(12)], 6 * GIB)
    ratio = [10.0 + (30.0 * i / n if grew else 0.0) for i in range(n)]
    counters = _token_counters([50.0 * 300] * n, ratio)
    generated, prompt = ([v for _, v in counters[k]] for k in ("tokens_generated", "tokens_prompt"))
    mark = [(12840.0 if i >= n - 12 else 9900.0) if jumped else 2000.0 + 20 * i for i in range(n)]
    return _killed_after(
        used,
        context_high_water=plain("llamacpp:n_tokens_max", mark),
        tokens_generated=plain("llamacpp:tokens_predicted_total", generated),
        tokens_prompt=plain("llamacpp:prompt_tokens_total", prompt),
    )


def test_a_high_water_climbing_by_nature_beside_prompts_of_one_length_is_no_creep(tmp_path):
    """Blind history lk01: the leak and the creep tied 2-2 (insufficient-evidence) because
    the rise 'tracked' a high-water that climbs whatever the conversations do."""
    result = verdict(tmp_path, _ratchet_beside_a_high_water(grew=False))
    assert result["verdict"] == "leak-ratchet", scores(result)


def test_a_high_water_one_long_request_moved_beside_prompts_of_one_length_is_no_creep(tmp_path):
    # Seed 1212's leak-ratchet-58298506429648, read as context-creep: the high-water 12840
    # in the last hour against 9926 all day, the prompts per answer at 26 against 32.
    result = verdict(tmp_path, _ratchet_beside_a_high_water(grew=False, jumped=True))
    assert result["verdict"] == "leak-ratchet", scores(result)
    creep = next(c for c in result["candidates"] if c["fault"] == "context-creep")
    assert any("one long request moves it" in e for e in creep["evidence_for"]), creep


def _stepped_with_the_longest_conversation(
    moved: bool, swapped: bool = False, busier: bool = False
) -> Builder:
    """A GB10's llama-server: the host's floor creeping up from 80 GiB through the day (half a
    GiB a stretch), its context high-water at 14748 tokens until one request of 16141 tokens
    3.5 h before the kill; the line jumped 30 GiB at that very reading (or, not `moved`, an
    hour later); the prompts per answer token as long as ever. `swapped`: half an hour
    before, llama-swap had swapped to a smaller model (its mark lower) and back. `busier`:
    its requests processing, one all day, eight through the last hour."""
    n = len(DAY)
    mark = n - 42
    jump = mark if moved else mark + 12
    levels = [(k * 24, 80 * GIB + k * 0.5 * GIB) for k in range(12)]
    used = [u + (30 * GIB if i >= jump else 0.0) for i, u in enumerate(_floors(levels, 4 * GIB))]
    counters = _token_counters([50.0 * 300] * n, [10.0] * n)
    generated, prompt = ([v for _, v in counters[k]] for k in ("tokens_generated", "tokens_prompt"))
    high_water = [14748.0 if i < mark else 16141.0 for i in range(n)]
    if swapped:
        high_water[mark - 6 : mark] = [9000.0] * 6
    kill = (
        "Out of memory: Killed process 51631 (llama-server) total-vm:41308202kB, "
        "anon-rss:8363680kB, file-rss:11693703kB, shmem-rss:0kB, UID:1000 pgtables:16847kB"
    )
    running = [8.0 if busier and i >= n - 12 else 1.0 for i in range(n)]
    return _killed_after(
        used,
        kill,
        context_high_water=plain("llamacpp:n_tokens_max", high_water),
        tokens_generated=plain("llamacpp:tokens_predicted_total", generated),
        tokens_prompt=plain("llamacpp:prompt_tokens_total", prompt),
        **({"requests_running": plain("llamacpp:requests_processing", running)} if busier else {}),
    )


@pytest.mark.parametrize(("moved", "swapped"), [(True, False), (False, False), (True, True)])
def test_memory_that_jumped_as_the_longest_conversation_arrived_is_the_context(
    tmp_path, moved, swapped
):
    # Seed 1212's context-creep-12789016794209 and 6060's context-creep-203085360555570, read
    # as leak-ratchet: the line's jump came at the very reading the high-water set its
    # record. An hour apart, the two say nothing of each other; a model swapped back in
    # loads as its first requests come (7070's leak-ratchet-115266972098934).
    result = verdict(tmp_path, _stepped_with_the_longest_conversation(moved, swapped))
    moved = moved and not swapped
    creep = next(c for c in result["candidates"] if c["fault"] == "context-creep")
    followed = any("followed the conversations' length" in e for e in creep["evidence_for"])
    assert followed is moved, creep
    assert (result["verdict"] == "context-creep") is moved, scores(result)
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert any("the rise is the context's" in e for e in leak["evidence_against"]) is moved, leak


def test_memory_that_followed_the_record_while_more_callers_came_is_their_note(tmp_path):
    """Real-path seed 4040 s23 (a retry storm on llama-server, a 4090): the card stepped at
    the readings the high-water set records while requests running rose to the slot
    ceiling and the prompts, read directly, kept their length: context-creep 3 against
    concurrency-overload 4, ambiguous. Where more callers came with prompts of the same
    length, the memory followed their requests reaching further: a note."""
    result = verdict(tmp_path, _stepped_with_the_longest_conversation(moved=True, busier=True))
    creep = next(c for c in result["candidates"] if c["fault"] == "context-creep")
    assert any("followed the conversations' length" in e for e in creep["evidence_for"]), creep
    assert creep["score"] <= 1 and result["verdict"] != "context-creep", scores(result)


def _prompts_longer_beside_a_floor(rising_from: int, second: bool = False) -> Builder:
    """llama-server's host floor level at 40 GiB, then from stretch `rising_from` of the
    day's twelve two-hour stretches on rising 3 GiB a stretch to the kill; the prompts ten
    tokens per answer token all day, fourteen in the last hour. `second`: a second
    llama-server first scraped two hours before the kill, beside the first."""
    n = len(DAY)
    levels = [(k * 24, 40 * GIB + max(0, k - rising_from) * 3 * GIB) for k in range(12)]
    ratio = [14.0 if i >= n - 12 else 10.0 for i in range(n)]
    counters = _token_counters([50.0 * 300] * n, ratio)
    generated, prompt = ([v for _, v in counters[k]] for k in ("tokens_generated", "tokens_prompt"))
    servers = [seen("llama-server", 5801, [1.0] * n)]
    if second:
        servers.append(seen("llama-server", 5802, [None] * (n - 24) + [1.0] * 24))
    return _killed_after(
        _floors(levels, 6 * GIB),
        tokens_generated=plain("llamacpp:tokens_predicted_total", generated),
        tokens_prompt=plain("llamacpp:prompt_tokens_total", prompt),
        targets_up=servers,
    )


@pytest.mark.parametrize(("rising_from", "creep"), [(0, False), (9, True)])
def test_prompts_that_grew_beside_a_floor_rising_for_hours_are_no_creep(
    tmp_path, rising_from, creep
):
    # Seed 202's leak-ratchet-56449380212045 and 1212's leak-ratchet-12998259394154, read as
    # ambiguous beside context-creep: the prompts per answer grew in the last busy hour by
    # chance while the card's floor had been ratcheting for 9 to 15 hours. A creep begins in
    # the hours before the failure: a floor that began rising in them is the prompts'.
    result = verdict(tmp_path, _prompts_longer_beside_a_floor(rising_from))
    grew = next(c for c in result["candidates"] if c["fault"] == "context-creep")
    beside = [e for e in grew["evidence_for"] if "floor had been rising for" in e]
    assert bool(beside) is not creep, grew
    assert result["verdict"] == ("context-creep" if creep else "leak-ratchet"), scores(result)


def test_prompts_that_grew_as_a_second_model_came_to_serve_are_its_callers(tmp_path):
    # Seed 1616's swap-not-unloaded-155787094186699, read as context-creep: the prompts per
    # answer, counted across both engines, grew from 6.8 to 9.1 as a second llama-server
    # came up beside the first and stayed.
    result = verdict(tmp_path, _prompts_longer_beside_a_floor(9, second=True))
    assert result["verdict"] != "context-creep", scores(result)
    grew = next(c for c in result["candidates"] if c["fault"] == "context-creep")
    assert any("came up" in e and "beside" in e for e in grew["evidence_for"]), grew


def test_an_engine_climbing_without_a_pause_to_its_kill_is_a_fast_leak(tmp_path):
    """No quiet stretch to read a floor in: the last two hours climb 40 GiB to the kill."""
    n = len(DAY)
    used = [60 * GIB + (40 * GIB * (i - (n - 24)) / 24 if i >= n - 24 else 0) for i in range(n)]
    result = verdict(tmp_path, _killed_after(noisy(used, 0.1 * GIB)))
    assert result["verdict"] == "leak-ratchet", scores(result)
    assert "climbed through the hours before the kernel took" in str(result["candidates"][0])


def test_one_jump_before_the_kill_is_no_fast_leak(tmp_path):
    n = len(DAY)
    used = [60 * GIB + (40 * GIB if i >= n - 6 else 0) for i in range(n)]
    result = verdict(tmp_path, _killed_after(noisy(used, 0.1 * GIB)))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert not any("climbed through the hours" in e for e in leak["evidence_for"]), leak


def _floors(
    levels: list[tuple[int, float]], bursts: float, noise: float = 0.1 * GIB
) -> list[float]:
    """Memory with a burst every two hours; from each (reading, level) on, the floor is
    that level (the latest to begin)."""
    out = []
    for i in range(len(DAY)):
        floor = [level for start, level in levels if i >= start][-1:] or [0.0]
        out.append(floor[0] + (bursts if i % 24 in (10, 11) else 0.0))
    return noisy(out, noise) if noise else out


def _reloaded_to_where_it_was() -> Builder:
    """A household's Ollama box: 12.7 GiB in use through the small hours, its model
    unloaded (4.3 GiB) in the morning, then each evening session loaded a little more
    until the floor was back at 12.7 GiB at the capture; nothing failed."""
    total = 32 * GIB
    used = _floors([(0, 12.7 * GIB), (60, 4.3 * GIB), (120, 6.4 * GIB), (168, 8.5 * GIB),
                    (216, 10.6 * GIB), (264, 12.7 * GIB)], 2 * GIB)  # fmt: skip
    b = Builder("mac-1", AT, total=total, trigger=("cron", "baseline"))
    b.memory([(t, 12.7 * GIB) for t in WINDOW]).pressure([(t, 0.0) for t in WINDOW])
    b.processes([{"pid": 100, "name": "ollama", "rss_bytes": 8 * GIB}]).host().kernel([])
    return history(
        b.logs([]),
        {"host_memory_available": plain("node_memory_MemAvailable_bytes",
                                        [total - u for u in used])},
    )  # fmt: skip


def test_a_floor_that_climbed_back_to_where_it_was_that_morning_is_no_leak(tmp_path):
    result = verdict(tmp_path, _reloaded_to_where_it_was())
    assert result["verdict"] == "no-fault", scores(result)
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert leak["score"] == 0, leak
    assert any("climbed back from 4.2 GiB to where it was" in e
               for e in leak["evidence_against"]), leak  # fmt: skip


def _host_jump_beside_a_flat_card(swapped: bool = False) -> Builder:
    """llama-server on a discrete 24 GiB card, the host at 68 GiB of 128 through the day.
    One busy evening, five hours before the kill, its host memory jumped 46 GiB within
    the hour and never came back, while the card's floor stayed at 16.5 GiB; the kernel
    then took llama-server with nothing else holding much. `swapped`: llama-swap swapped
    to another model and back just then, the server coming up again (its `up` 0 -> 1)."""
    n = len(DAY)
    up = [1.0] * n
    if swapped:
        up[n - 66 : n - 64] = [0.0, 0.0]
    used = _floors([(0, 68 * GIB), (n - 64, 114 * GIB), (n - 12, 116 * GIB)], 3 * GIB)
    kill = (
        "Out of memory: Killed process 59724 (llama-server) total-vm:212391593kB, "
        "anon-rss:89511768kB, file-rss:6707927kB, shmem-rss:0kB, UID:1000 pgtables:179143kB "
        "oom_score_adj:0"
    )
    return _killed_after(
        used,
        kill,
        accelerator_memory_used=_series("dcgm", noisy([16.5 * GIB] * n, 0.05 * GIB)),
        accelerator_memory_total=_series("dcgm", [24 * GIB] * n),
        targets_up=[seen("llama-server", 8080, up)],
    )


@pytest.mark.parametrize("swapped", [False, True], ids=["alone", "swapped-and-back"])
def test_a_host_jump_the_card_never_saw_is_the_engines_own_memory(tmp_path, swapped):
    """Swapped or not, nothing landed on the card: the jump is no model loaded."""
    result = verdict(tmp_path, _host_jump_beside_a_flat_card(swapped))
    assert result["verdict"] == "leak-ratchet", scores(result)
    leak = result["candidates"][0]
    assert "floor rose in the quiet hours" in leak["evidence_for"][0], leak
    assert not any("a step, not a ratchet" in e for e in leak["evidence_against"]), leak


def _second_model_on_one_pool() -> Builder:
    """A Strix Halo (one pool; the card's GTT use is in the host's line): llama-server holds
    69.6 GiB on the card all day, the host's own memory drifting up 3.5 GiB. Two hours and
    twenty minutes before the failure a second server came up, early in a two-hour
    stretch: the card stepped 26.4 GiB, the host 35 GiB, at the same reading, and the next
    model's allocation failed at the end."""
    n, k = len(DAY), len(DAY) - 28
    own = _floors([(0, 12.0 * GIB), (96, 13.2 * GIB), (192, 14.4 * GIB), (240, 15.5 * GIB)],
                  1.5 * GIB)  # fmt: skip
    card = [(69.6 + (26.4 if i >= k else 0)) * GIB for i in range(n)]
    used = [o + (69.6 + (35 if i >= k else 0)) * GIB for i, o in enumerate(own)]
    second = [None if i < k else 1.0 for i in range(n)]
    b = history(
        base(trigger=("healthcheck", "gateway", "HTTP 502")),
        {
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [TOTAL - u for u in used]
            ),
            "accelerator_memory_used": _series("local-llm", card),
            "accelerator_memory_total": _series("local-llm", [96.0 * GIB] * n),
            "targets_up": [
                seen("llama-server", 8080, [1.0] * n),
                seen("llama-server", 5803, second),
            ],
        },
    )
    return b.logs(
        [
            "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 38203.30 MiB on device 0: "
            "cudaMalloc failed: out of memory"
        ]
    )


def test_a_host_step_early_in_its_stretch_with_the_cards_is_the_model_loaded(tmp_path):
    """The card's line is read either side of the host's own step, not by the stretches
    the floors fell in: the card's median over the stretch holding the step is already
    the new level, as if the card had stayed while the host jumped."""
    result = verdict(tmp_path, _second_model_on_one_pool())
    assert result["verdict"] == "swap-not-unloaded", scores(result)
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert leak["score"] < 3, leak
    assert any("as a server came up: a step, not a ratchet" in e
               for e in leak["evidence_against"]), leak  # fmt: skip


def _beside_a_vm(vm_from: int) -> Builder:
    """A 128 GiB box: a VM of 30 GiB and llama-server, whose host memory climbs 3.5 GiB
    over the last three hours until the kernel takes it. The VM came up at reading
    `vm_from`: at the start of the day (4 GiB usually free beside it) or with the climb."""
    n = len(DAY)
    used = [
        94 * GIB + (30 * GIB if i >= vm_from else 0.0) + 3.5 * GIB * max(0, i - (n - 36)) / 36
        for i in range(n)
    ]
    kill = (
        "Out of memory: Killed process 52769 (llama-server) total-vm:32413308kB, "
        "anon-rss:8753634kB, file-rss:4519743kB, shmem-rss:0kB, UID:1000 pgtables:17627kB "
        "oom_score_adj:500"
    )
    b = _killed_after(noisy(used, 0.1 * GIB), kill)
    return b.processes([{"pid": 736, "name": "qemu-system-x86", "rss_bytes": 30 * GIB}])


def test_a_vm_that_held_its_share_all_day_is_not_what_ran_the_box_out(tmp_path):
    result = verdict(tmp_path, _beside_a_vm(0))
    assert result["verdict"] == "leak-ratchet", scores(result)
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    assert not any("qemu-system-x86) holds" in e for e in host["evidence_for"]), host
    assert any("qemu-system-x86, the largest other, is no culprit" in e
               for e in host["evidence_against"]), host  # fmt: skip


def test_the_same_vm_started_with_the_climb_is_what_ran_the_box_out(tmp_path):
    result = verdict(tmp_path, _beside_a_vm(len(DAY) - 36))
    assert result["verdict"] == "host-exhaustion", scores(result)
    host = result["candidates"][0]
    assert any(
        "pid 736 (qemu-system-x86)" in e and "holds 30.0 GiB" in e for e in host["evidence_for"]
    )


def _roomy_box_beside_a_vm(vm_started: float) -> Builder:
    """A 128 GiB box using 90 GiB all day, then 33 GiB more over the three hours before the
    kernel takes llama-server. Either a 30 GiB VM is up since boot, with 38 GiB usually free
    beside it (so it never held most of the machine), and the climb is the engine's, killed
    at 35 GiB; or the same VM started with the climb, and the engine was killed at its usual
    13 GiB. Only the process table's start time and the kill line tell them apart."""
    n = len(DAY)
    since_boot = vm_started < DAY[0]
    used = [90 * GIB + 33 * GIB * max(0, i - (n - 36)) / 36 for i in range(n)]
    anon = 30753634 if since_boot else 8753634
    kill = (
        f"Out of memory: Killed process 52769 (llama-server) total-vm:62413308kB, "
        f"anon-rss:{anon}kB, file-rss:4519743kB, shmem-rss:0kB, UID:1000 pgtables:17627kB "
        "oom_score_adj:500"
    )
    b = _killed_after(noisy(used, 0.1 * GIB), kill)
    return b.processes([{"pid": 736, "name": "qemu-system-x86", "rss_bytes": 30 * GIB,
                         "start_time": iso(vm_started)}])  # fmt: skip


def test_a_vm_up_since_boot_through_the_roomy_hours_is_not_what_ran_the_box_out(tmp_path):
    result = verdict(tmp_path, _roomy_box_beside_a_vm(AT - 30 * 86400))
    assert result["verdict"] == "leak-ratchet", scores(result)
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    assert not any("qemu-system-x86) holds" in e for e in host["evidence_for"]), host
    assert any("is not its arrival" in e for e in host["evidence_against"]), host


def test_the_same_vm_started_with_the_climb_on_a_roomy_box_ran_it_out(tmp_path):
    result = verdict(tmp_path, _roomy_box_beside_a_vm(AT - 3 * 3600))
    assert result["verdict"] == "host-exhaustion", scores(result)
    host = result["candidates"][0]
    assert any(
        "pid 736 (qemu-system-x86)" in e and "holds 30.0 GiB" in e for e in host["evidence_for"]
    )


def _vm_beside_an_engine_holding_its_weights(vm_started: float) -> Builder:
    """The roomy box's VM beside a llama-server killed holding its usual 8.4 GiB and 40 GiB
    of mapped weights: bigger than the VM, but it held them all day."""
    b = _roomy_box_beside_a_vm(vm_started)
    return b.kernel([
        "Out of memory: Killed process 52769 (llama-server) total-vm:62413308kB, "
        "anon-rss:8753634kB, file-rss:41943040kB, shmem-rss:0kB, UID:1000 pgtables:17627kB "
        "oom_score_adj:500"
    ], ago_s=3 * 60)  # fmt: skip


def test_a_vm_that_arrived_with_the_climb_ran_the_box_out_beside_a_larger_engine(tmp_path):
    result = verdict(tmp_path, _vm_beside_an_engine_holding_its_weights(AT - 3 * 3600))
    assert result["verdict"] == "host-exhaustion", scores(result)
    assert any(
        "the arrival ran the machine out" in e for e in result["candidates"][0]["evidence_for"]
    )


def test_the_same_vm_up_since_boot_did_not_arrive(tmp_path):
    result = verdict(tmp_path, _vm_beside_an_engine_holding_its_weights(AT - 30 * 86400))
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    assert not any("arrival" in e for e in host["evidence_for"]), host


def _one_jump_to_the_kill(second_server: bool) -> Builder:
    """vLLM alone on a 128 GiB shared-pool box: 60 GiB all day, then one busy spell five
    hours before the kill left 30 GiB more that never came back, and the kernel took
    VLLM::EngineCore with nothing else large. Or the same with a second engine's server
    first scraped up at the jump."""
    n = len(DAY)
    used = _floors([(0, 60 * GIB), (n - 60, 90 * GIB), (n - 12, 92 * GIB)], 3 * GIB)
    targets = [seen("vllm", 8000, [1.0] * n)]
    if second_server:
        targets.append(seen("llama-server", 5810, [None] * (n - 62) + [1.0] * 62))
    return _killed_after(used, targets_up=targets)


def test_one_jump_where_nothing_loads_a_second_model_is_the_engines_own(tmp_path):
    result = verdict(tmp_path, _one_jump_to_the_kill(second_server=False))
    assert result["verdict"] == "leak-ratchet", scores(result)
    leak = result["candidates"][0]
    assert not any("a step, not a ratchet" in e for e in leak["evidence_against"]), leak


def _evening_leak_to_the_fall(peak: float) -> Builder:
    """SGLang on a 24 GiB card, 19.4 GiB between requests all day; through the evening's
    last three hours the floor rose bursts by burst to `peak`, then its target went down
    (an EngineDown alert) and nothing in a log says why. The death released the card."""
    n = len(DAY)
    card = [19.4 * GIB + (0.6 * GIB if i % 6 == 3 else 0.0) for i in range(n - 38)]
    card += [19.4 * GIB + (peak - 19.4 * GIB) * (k // 6 + 1) / 6 for k in range(36)]
    card += [0.4 * GIB] * 2
    return history(
        base(trigger=("alert", "EngineDown", "up == 0 for 1m")),
        {
            "targets_up": [
                up("gateway", [1.0] * n),
                seen("sglang", 30000, [1.0] * (n - 2) + [0.0] * 2),
            ],
            "accelerator_memory_used": _series("dcgm", noisy(card, 0.02 * GIB)),
            "accelerator_memory_total": _series("dcgm", [24.0 * GIB] * n),
        },
    )


def test_a_floor_that_rose_until_the_card_was_full_when_the_engine_fell_is_a_leak(tmp_path):
    """No log line says the card ran out, but the scrape does: 23.4 of 24 GiB in the
    minutes before the engine's target fell (blind histories lk04, lk08: the rise read as
    'one jump: a step, not a ratchet', insufficient-evidence)."""
    result = verdict(tmp_path, _evening_leak_to_the_fall(peak=23.4 * GIB))
    assert result["verdict"] == "leak-ratchet", scores(result)
    leak = result["candidates"][0]
    assert not any("a step, not a ratchet" in e for e in leak["evidence_against"]), leak


def test_the_same_rise_with_room_left_on_the_card_is_not_called_a_leak(tmp_path):
    """The look-alike: the same evening rise ending at 20.9 of 24 GiB: nothing says memory
    ran out, so the engine's fall is not this rise's, and the rise alone is a step."""
    result = verdict(tmp_path, _evening_leak_to_the_fall(peak=20.9 * GIB))
    assert result["verdict"] != "leak-ratchet", scores(result)


def _climb_hours_before_the_fall(readings: int, missed: int | None = None) -> Builder:
    """llama-server alone on a 128 GiB box, its host memory at 80 GiB between the evening's
    bursts; eighteen hours before the EngineDown alert its floor rose 25 GiB over
    `readings` five-minute readings and never came back, then 9.5 GiB more through the
    last eight hours; its target went down with nothing in a log and no kill saying why:
    the death released it. `missed`: a reading (counted from the climb's start) at which
    the target's scrape failed once."""
    n, start, late = len(DAY), len(DAY) - 218, len(DAY) - 96
    up = [1.0] * (n - 2) + [0.0] * 2
    if missed is not None:
        up[start + missed] = 0.0
    used = _floors([(0, 80 * GIB)], 3 * GIB)
    used = [
        u
        + 25 * GIB * min(1.0, max(0.0, (i - start + 1) / readings))
        + 9.5 * GIB * max(0, i - late) / 96
        for i, u in enumerate(used)
    ]
    used[-2:] = [40 * GIB] * 2
    return history(
        base(trigger=("alert", "EngineDown", "up == 0 for 1m")),
        {
            "targets_up": [seen("llama-server", 8080, up)],
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [TOTAL - u for u in used]
            ),
            "host_memory_total": plain("node_memory_MemTotal_bytes", [TOTAL] * n),
        },
    ).absent(*NO_LOGS)


@pytest.mark.parametrize(("readings", "leak"), [(16, True), (2, False)], ids=["80-min", "10-min"])
def test_a_rise_that_took_hours_with_nothing_saying_memory_ran_out_is_no_step(
    tmp_path, readings, leak
):
    """Real-path seed 3737 (leak-ratchet-s24, llama-server on a Mac): the floor climbed
    23 GiB in about three hours (80 minutes from a tenth to nine tenths of it) and held
    to the engine's fall; with nothing saying the engine's memory ran out, the two-hour
    floors' one jump read as 'a step, not a ratchet', insufficient-evidence. A model
    loads in minutes. The look-alike: the same rise in ten minutes is a step."""
    result = verdict(tmp_path, _climb_hours_before_the_fall(readings))
    lr = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert any("a step, not a ratchet" in e for e in lr["evidence_against"]) is not leak, lr
    assert (result["verdict"] == "leak-ratchet") is leak, scores(result)


@pytest.mark.parametrize(
    ("missed", "leak"), [(22, True), (-1, False)], ids=["after", "as-it-began"]
)
def test_a_scrape_missed_once_the_floor_had_risen_loaded_nothing(tmp_path, missed, leak):
    """Real-path seed 3737 s3 (Ollama on an RTX 3090, a leak of its host memory killed at
    the end): the gateway missed one scrape half an hour after the floor's rise had ended,
    inside the two stretches around the jump, and the rise read as 'a step, as a server
    came up': host-exhaustion. `up` turns 1 as a load ends: a server seen coming up after
    the line rose loaded none of it. The look-alike: the server came up as it began."""
    result = verdict(tmp_path, _climb_hours_before_the_fall(16, missed))
    lr = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert any("as a server came up" in e for e in lr["evidence_against"]) is not leak, lr
    assert (result["verdict"] == "leak-ratchet") is leak, scores(result)


def _staircase_to_the_kill(released: int) -> Builder:
    """Ollama on a 24 GiB card, the host's floor at 90 GiB of 128 all day; nine hours before
    the gateway's check got HTTP 500 it began to climb busy spell by busy spell (2, 8, 1
    and 17 GiB), then in the last hour to within 2 GiB of the top, and the kernel's kill
    counter rose at the end. The last `released` readings are after the kill: the engine's
    death gave back its memory (the leak and its own 10 GiB) and the card emptied."""
    n, begin = len(DAY), len(DAY) - 108
    steps = [(begin + 24 * k, level * GIB) for k, level in enumerate((92, 100, 101, 118))]
    used = _floors([(0, 90 * GIB), *steps, (n - 12, 126 * GIB)], 2 * GIB)
    used = [min(u, TOTAL - 1.5 * GIB) for u in used[: n - released]] + [80 * GIB] * released
    card = [16 * GIB] * (n - released) + [0.5 * GIB] * released
    return history(
        base(trigger=("healthcheck", "gateway", "HTTP 500")),
        {
            "targets_up": [up("gateway", [1.0] * n)],
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [TOTAL - u for u in used]
            ),
            "host_memory_total": plain("node_memory_MemTotal_bytes", [TOTAL] * n),
            "host_oom_kills": plain(
                "node_vmstat_oom_kill", [0.0] * (n - released) + [1.0] * released
            ),
            "accelerator_memory_used": _series("dcgm", card),
            "accelerator_memory_total": _series("dcgm", [24.0 * GIB] * n),
        },
    ).absent(*NO_LOGS)


def test_the_readings_after_the_engines_death_are_no_floor_of_its_leak(tmp_path):
    """Real-path seed 3434 s80 (Ollama on an RTX 4090): the host's floor climbed busy spell
    by busy spell for nine hours to the kill, and the two readings after it, the engine's
    memory given back, pulled the last stretch's floor down: its rise read as one jump, 'a
    step, not a ratchet', and host-exhaustion won. A death releases; the readings after
    it are a new process's, not the leak's floor."""
    result = verdict(tmp_path, _staircase_to_the_kill(released=1))
    lr = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert not any("a step, not a ratchet" in e for e in lr["evidence_against"]), lr
    assert result["verdict"] == "leak-ratchet", scores(result)


def test_the_same_jump_as_a_second_server_came_up_is_a_step(tmp_path):
    result = verdict(tmp_path, _one_jump_to_the_kill(second_server=True))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert any("as a server came up: a step" in e for e in leak["evidence_against"]), leak


def test_the_same_jump_beside_two_servers_of_one_kind_is_a_step(tmp_path):
    """Two vLLM servers configured side by side can each hold a model: one kind of engine
    is not one model."""
    b = _one_jump_to_the_kill(second_server=False)
    b.engines([engine("vllm", "vllm", url=f"http://127.0.0.1:{port}") for port in (8000, 8001)])
    result = verdict(tmp_path, b)
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert any("a step, not a ratchet" in e for e in leak["evidence_against"]), leak


def test_the_same_rise_in_three_clicks_that_rested_between_is_a_ratchet(tmp_path):
    """Beside the same two vLLM servers, the 30 GiB came within 80 minutes but in three
    clicks of 10 GiB, the floor resting 40 minutes at each: a load does not rest half-way,
    a busy spell's remainders do."""
    n = len(DAY)
    used = _floors([(0, 60 * GIB), (n - 58, 70 * GIB), (n - 50, 80 * GIB), (n - 42, 90 * GIB),
                    (n - 12, 92 * GIB)], 3 * GIB)  # fmt: skip
    b = _killed_after(used, targets_up=[seen("vllm", 8000, [1.0] * n)])
    b.engines([engine("vllm", "vllm", url=f"http://127.0.0.1:{port}") for port in (8000, 8001)])
    result = verdict(tmp_path, b)
    assert result["verdict"] == "leak-ratchet", scores(result)
    leak = result["candidates"][0]
    assert not any("a step, not a ratchet" in e for e in leak["evidence_against"]), leak


def test_a_box_full_all_day_whose_engine_ate_the_last_room_is_a_leak(tmp_path):
    """120 of 128 GiB in use all day; in the last six hours the engine's floor rose 5.5 GiB
    after busy spells (4 % of the machine, but most of the room left) and the kernel took
    it. Its own growth ran the box out: a leak, not the host's exhaustion."""
    n = len(DAY)
    used = _floors([(0, 120 * GIB), (n - 72, 120.8 * GIB), (n - 48, 122 * GIB),
                    (n - 24, 125.5 * GIB)], GIB)  # fmt: skip
    result = verdict(tmp_path, _killed_after(used))
    assert result["verdict"] == "leak-ratchet", scores(result)
    assert "floor rose in the quiet hours" in result["candidates"][0]["evidence_for"][0]


def _notebook_outgrew_ram() -> Builder:
    """A notebook's cells took 64 GiB over the evening, step after step, and the box
    (128 GiB) swapped and stalled; Ollama, idle in its own 0.3 GiB, answered minutes late
    and the health check timed out. Nothing was killed."""
    n = len(DAY)
    steps = [(0, 60 * GIB)] + [(n - 96 + 12 * k, (60 + 8 * (k + 1)) * GIB) for k in range(8)]
    used = _floors(steps, 2 * GIB)
    answers = [
        f'[GIN] 2026/11/29 - 02:{50 + k}:0{k} | 200 | {3 + k}m2.5s | 127.0.0.1 | POST "/api/chat"'
        for k in range(5)
    ]
    b = history(
        base(trigger=("healthcheck", "ollama", "no answer within 60 s")),
        {
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [TOTAL - u for u in used]
            )
        },
    )
    b.pressure([(t, 35.0) for t in WINDOW], [(t, 15.0) for t in WINDOW])
    b.memory([(t, TOTAL - 1.5 * GIB) for t in WINDOW], swap_used=15 * GIB)
    b.checks([{"name": "ollama", "kind": "http", "ok": False, "status": "timeout",
               "reason": "no answer within 60 s", "answer": {}}])  # fmt: skip
    b.processes(
        [
            {"pid": 48211, "name": "python3", "rss_bytes": 64 * GIB},
            {"pid": 1200, "name": "ollama", "rss_bytes": 300 * 2**20},
        ]
    )
    return b.logs(answers, name="ollama")


def test_a_notebook_that_outgrew_ram_beside_an_idle_engine_is_a_stall(tmp_path):
    result = verdict(tmp_path, _notebook_outgrew_ram())
    assert result["verdict"] == "memory-pressure-stall", scores(result)
    by_fault = {c["fault"]: c for c in result["candidates"]}
    # The floor rose, but python3 holds it, not the engine.
    assert any(
        "another process's growth" in e for e in by_fault["leak-ratchet"]["evidence_against"]
    )
    # Minutes per answer while memory stalled is the stall, not a queue.
    assert by_fault["concurrency-overload"]["score"] == 0
    # Short of memory, nothing killed: the shortage is told, the stall is the fault.
    assert by_fault["host-exhaustion"]["score"] < 2
    assert any("nothing was killed" in e for e in by_fault["host-exhaustion"]["evidence_for"])


def _callers_gave_up(
    stall: float, crashed: str | None = None, tokens: list[int] | None = None
) -> Builder:
    """A llama-server with two slots and no queue metric. Its log's last 18 requests: 12
    answered, 6 cancelled by their callers before an answer ("cancel task", a warning it
    prints when the client disconnects); the gateway's completion check timed out while
    the server's own /health answered. Memory stalled `stall` % of the time. Or, where
    the server `crashed` with that line at the end of its log, both checks failed. With
    `tokens`, the log keeps the server's start line (512 tokens a slot) and each answered
    request held that many at its release."""
    start = [ln for ln in REAL_LOG.read_text().splitlines() if "n_ctx_slot" in ln]
    lines = start[:1] if tokens else []
    for k in range(12):
        task = 100 + 3 * k
        lines += [
            f"slot launch_slot_: id  {k % 2} | task {task} | processing task",
            f"slot      release: id  {k % 2} | task {task} | stop processing: n_tokens = "
            f"{tokens[k] if tokens else 2100}, truncated = 0",
        ]
        if k % 2:
            lines.append(f"srv  cancel_tasks: cancel task, id_task = {task + 1}")
    b = base(trigger=("healthcheck", "gateway", "no answer within 120 s")).prometheus(
        {"host_memory_available": available(healthy_bursts())}
    )
    b.pressure([(t, stall) for t in WINDOW], [(t, stall / 3) for t in WINDOW])
    b.checks([
        {"name": "gateway", "kind": "completion", "ok": False, "status": "timeout",
         "reason": "no answer within 120 s", "answer": {}},
        {"name": "llama-server", "kind": "http", "ok": True, "status": "ok", "reason": None,
         "answer": {"http_status": 200}},
    ] if crashed is None else [
        {"name": "gateway", "kind": "completion", "ok": False, "status": "error",
         "reason": "HTTP 502", "answer": {}},
        {"name": "llama-server", "kind": "http", "ok": False, "status": "error",
         "reason": "connection refused", "answer": {}},
    ])  # fmt: skip
    return b.logs(lines + ([crashed] if crashed else []), name="llama-server")


def test_callers_giving_up_while_the_engine_answered_is_a_queue(tmp_path):
    result = verdict(tmp_path, _callers_gave_up(stall=0.0))
    assert result["verdict"] == "concurrency-overload", scores(result)
    assert "6 of the last 18 requests" in result["candidates"][0]["evidence_for"][0]


def test_callers_giving_up_while_each_request_filled_its_slot_is_the_context(tmp_path):
    """The same callers giving up, each answered request having held nearly all of its
    slot: every answer took the longest a prompt can, and callers gave up waiting for it."""
    result = verdict(tmp_path, _callers_gave_up(0.0, tokens=[490, 500, 495, 505] * 3))
    assert result["verdict"] == "context-creep", scores(result)
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    said = "slot context of 512 (nearly filling it): each request held its slot longer"
    assert any(said in e for e in queue["evidence_against"]), queue


def test_prompts_grown_to_half_the_slot_leave_the_callers_queue_standing(tmp_path):
    """Longer prompts, but each still half its slot at the most: the slots, not the length,
    may be what kept callers waiting. The queue is not put down to the context."""
    grown = [150, 160, 170, 180, 200, 220, 240, 260, 280, 290, 300, 300]
    result = verdict(tmp_path, _callers_gave_up(0.0, tokens=grown))
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    assert queue["score"] >= 3, scores(result)
    assert not any("longer context's" in e for e in queue["evidence_against"]), queue


def test_callers_giving_up_beside_prompts_of_their_usual_size_is_still_a_queue(tmp_path):
    result = verdict(tmp_path, _callers_gave_up(0.0, tokens=[200, 210, 190, 205] * 3))
    assert result["verdict"] == "concurrency-overload", scores(result)


def test_callers_giving_up_before_the_engine_ran_out_is_a_queue(tmp_path):
    """The same log, ended by the card running out while the queue stood."""
    result = verdict(tmp_path, _callers_gave_up(0.0, "CUDA error: out of memory"))
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    assert any("cancelled by their callers" in e for e in queue["evidence_for"]), queue


def test_callers_giving_up_on_a_machine_stalled_on_memory_is_no_queue(tmp_path):
    result = verdict(tmp_path, _callers_gave_up(stall=40.0))
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    assert queue["score"] == 0, queue


def _died_with_every_slot_busy(slots: int) -> Builder:
    """llama-server's log tail when the card ran out with its slots busy: 12 tasks taken
    into `slots` slots, 8 cancelled by their callers, and no release line (the answers in
    flight died with it)."""
    lines = []
    for k in range(12):
        lines.append(f"slot launch_slot_: id  {k % slots} | task {200 + 2 * k} | processing task")
        if k % 3:
            lines.append(f"srv  cancel_tasks: cancel task, id_task = {201 + 2 * k}")
    b = base(trigger=("healthcheck", "gateway", "HTTP 502")).prometheus(
        {"host_memory_available": available(healthy_bursts())}
    )
    return b.logs(lines + ["CUDA error: out of memory"], name="llama-server")


def test_callers_giving_up_while_its_slots_took_the_next_task_is_a_queue(tmp_path):
    """Four slots taking twelve tasks: each slot took its next one after the last ended."""
    result = verdict(tmp_path, _died_with_every_slot_busy(slots=4))
    assert result["verdict"] == "concurrency-overload", scores(result)
    queue = result["candidates"][0]["evidence_for"][0]
    assert "8 of the last 16 requests" in queue and "taking the next request" in queue, queue


def test_callers_giving_up_on_slots_that_never_turned_over_is_no_queue(tmp_path):
    """Twelve slots, each taking one task and never another: nothing says any answered."""
    result = verdict(tmp_path, _died_with_every_slot_busy(slots=12))
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    assert queue["score"] == 0, queue


def test_a_kill_in_another_limit_hours_earlier_does_not_make_tonights_shortage_weigh(tmp_path):
    """The same stalled box, whose kernel log also holds a container's java killed inside
    its own memory limit sixteen hours before: context, not tonight's machine running out."""
    java = (
        "Memory cgroup out of memory: Killed process 304967 (java) total-vm:4782906kB, "
        "anon-rss:2034237kB, file-rss:8192kB, shmem-rss:0kB, UID:0 pgtables:4188kB "
        "oom_score_adj:0"
    )
    result = verdict(tmp_path, _notebook_outgrew_ram().kernel([java], ago_s=16 * 3600))
    assert result["verdict"] == "memory-pressure-stall", scores(result)


def test_a_check_that_timed_out_on_a_stalled_machine_with_nothing_killed_is_the_stalls(
    tmp_path,
):
    result = verdict(tmp_path, _notebook_outgrew_ram())
    stall = result["candidates"][0]
    assert stall["fault"] == "memory-pressure-stall", scores(result)
    assert any("timed out while tasks stalled, and nothing was killed" in e
               for e in stall["evidence_for"]), stall  # fmt: skip


def test_a_stall_that_ended_in_a_kill_has_no_timeout_of_its_own(tmp_path):
    result = verdict(tmp_path, _stalled(MACHINE_KILL, 10 * 60))
    stall = next(c for c in result["candidates"] if c["fault"] == "memory-pressure-stall")
    assert not any("timed out while tasks stalled" in e for e in stall["evidence_for"]), stall


def test_models_loaded_into_a_shared_pool_on_a_healthy_day_are_no_leak(tmp_path):
    """A Strix Halo on a healthy day: llama-swap swapped a 10 GiB model in, then the
    28 GiB one back. The host's floors rose 28 GiB over two stretches, none of them one
    jump, but the card's floor rose as much without a ratchet: models loaded, no leak."""
    n = len(DAY)
    card = [0.3 * GIB if i < n - 60 else (10 * GIB if i < n - 36 else 28.2 * GIB) for i in range(n)]
    used = noisy([9 * GIB + c + (2 * GIB if i % 24 in (10, 11) else 0.0)
                  for i, c in enumerate(card)], 0.1 * GIB)  # fmt: skip
    b = history(
        base(trigger=("cron", "baseline")),
        {
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [TOTAL - u for u in used]
            ),
            "accelerator_memory_used": _series("local-llm", card),
            "accelerator_memory_total": _series("local-llm", [TOTAL] * n),
        },
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "no-fault", scores(result)
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert any("models loaded into the shared pool" in e for e in leak["evidence_against"])


def _card_ran_out(card: list[float], total: float = 24.0 * GIB, **series: list[dict]) -> Builder:
    """A card (24 GiB unless said) under one llama-server, whose own allocation failed at
    the end; `series` are more of its history."""
    n = len(DAY)
    b = history(
        base(trigger=("healthcheck", "gateway", "HTTP 502")),
        {
            "accelerator_memory_used": _series("dcgm", card),
            "accelerator_memory_total": _series("dcgm", [total] * n),
            **series,
        },
    )
    return b.logs(
        [
            "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 1024.00 MiB on device 0: "
            "cudaMalloc failed: out of memory",
            "CUDA error: out of memory",
        ]
    )


def _ran_out_busy(last_hour_queued: int) -> Builder:
    """llama-server's four slots full and three callers waiting through the office hours
    every day; in the hour before its allocation failed, `last_hour_queued` of the twelve
    readings had callers waiting. The card sat flat all day."""
    n = len(DAY)
    busy = [100 <= i < 200 or i >= n - 12 for i in range(n)]
    queued = [100 <= i < 200 or i >= n - last_hour_queued for i in range(n)]
    b = history(
        base(trigger=("healthcheck", "gateway", "HTTP 502")),
        {
            "accelerator_memory_used": _series("dcgm", [20.0 * GIB] * n),
            "accelerator_memory_total": _series("dcgm", [24.0 * GIB] * n),
            "requests_running": plain(
                "llamacpp:requests_processing", [4.0 if x else 1.0 for x in busy]
            ),
            "requests_waiting": plain(
                "llamacpp:requests_deferred", [3.0 if q else 0.0 for q in queued]
            ),
        },
    )
    return b.logs(["CUDA error: out of memory"])


def _timed_out_in_a_busy_hour(stall: float) -> Builder:
    """The same office-hours queue every day and in the hour before the gateway's check
    timed out, on a card that never ran out; memory stalled `stall` % of the capture."""
    n = len(DAY)
    queued = [100 <= i < 200 or i >= n - 10 for i in range(n)]
    b = history(
        base(trigger=("healthcheck", "gateway", "no answer within 60 s")),
        {
            "requests_running": plain(
                "llamacpp:requests_processing", [4.0 if q else 1.0 for q in queued]
            ),
            "requests_waiting": plain(
                "llamacpp:requests_deferred", [3.0 if q else 0.0 for q in queued]
            ),
        },
    )
    b.pressure([(t, stall) for t in WINDOW], [(t, stall / 3) for t in WINDOW])
    return b.checks([{"name": "gateway", "kind": "completion", "ok": False, "status": "timeout",
                      "reason": "no answer within 60 s", "answer": {}}])  # fmt: skip


def test_a_check_that_timed_out_behind_the_usual_busy_hours_queue_is_overload(tmp_path):
    result = verdict(tmp_path, _timed_out_in_a_busy_hour(stall=0.0))
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    assert any("this one timed out behind it" in e for e in queue["evidence_for"]), queue


def test_the_same_queue_on_a_machine_stalled_on_memory_is_the_stalls(tmp_path):
    result = verdict(tmp_path, _timed_out_in_a_busy_hour(stall=40.0))
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    assert queue["score"] < 3, queue
    assert any("the machine stalled on memory" in e for e in queue["evidence_against"]), queue


def test_a_card_that_ran_out_under_the_usual_busy_hours_queue_is_overload(tmp_path):
    result = verdict(tmp_path, _ran_out_busy(last_hour_queued=8))
    assert result["verdict"] == "concurrency-overload", scores(result)
    said = result["candidates"][0]["evidence_for"][0]
    assert "when the engine's allocation failed" in said, said


def test_a_card_that_ran_out_with_hardly_anyone_waiting_is_no_overload(tmp_path):
    result = verdict(tmp_path, _ran_out_busy(last_hour_queued=1))
    assert result["verdict"] != "concurrency-overload", scores(result)


def test_a_card_climbing_without_a_pause_to_its_own_allocation_failure_is_a_leak(tmp_path):
    """The allocator leaked: flat at 16 GiB all day, then the last three hours climbed
    steadily to the card's size and an allocation failed. No cache metric climbed."""
    n = len(DAY)
    card = [16 * GIB + (7 * GIB * (i - (n - 36)) / 36 if i >= n - 36 else 0) for i in range(n)]
    result = verdict(tmp_path, _card_ran_out(noisy(card, 0.05 * GIB)))
    assert result["verdict"] == "leak-ratchet", scores(result)
    working = str(result["candidates"][0]["evidence_for"])
    assert "accelerator memory floor rose in the quiet hours and never came back" in working
    assert "ended as accelerator-oom" in working


def _batch_on_an_a100(climbed: bool) -> Builder:
    """llama-server on an 80 GiB card, idle through the day (its context high-water 6637
    tokens), until a nightly batch came two hours before the failure: its four slots full
    from then on and a few callers waiting now and then, the high-water 7561 as the batch
    began and no further. The card held 57.7 GiB through the day; from the batch on it
    climbed to the card's size (`climbed`), or stepped 8 GiB as the batch began and held;
    then an allocation failed."""
    n, k = len(DAY), len(DAY) - 24
    rise = [min(1.0, (i - k) / 23) if climbed else 0.36 for i in range(n)]
    card = [(57.7 + (21.7 * rise[i] if i >= k else 0.0)) * GIB for i in range(n)]
    b = history(
        base(trigger=("healthcheck", "gateway", "HTTP 502")),
        {
            "accelerator_memory_used": _series("dcgm", noisy(card, 0.05 * GIB)),
            "accelerator_memory_total": _series("dcgm", [80.0 * GIB] * n),
            "requests_running": plain(
                "llamacpp:requests_processing", [(4.0 if i % 3 else 3.0) if i >= k else 0.0
                                                 for i in range(n)]
            ),
            "requests_waiting": plain(
                "llamacpp:requests_deferred", [float(i % 3 != 0) * 3 if i >= k else 0.0
                                               for i in range(n)]
            ),
            "context_high_water": plain(
                "llamacpp:n_tokens_max", [7561.0 if i >= k else 6637.0 for i in range(n)]
            ),
        },
    )  # fmt: skip
    return b.logs(["CUDA error: out of memory"])


@pytest.mark.parametrize("climbed", [True, False], ids=["climbed-on", "stepped-and-held"])
def test_a_card_climbing_on_while_a_batch_held_its_slots_is_the_engines_own(tmp_path, climbed):
    """The batch is more load than the day's and callers waited: a queue. But a queue holds
    memory only for what runs: with the slots as full to the end, a card that climbed on
    through the two hours ran out for the engine's own memory. The look-alike, memory that
    came with the batch and held, is the queue's."""
    result = verdict(tmp_path, _batch_on_an_a100(climbed))
    want = "leak-ratchet" if climbed else "concurrency-overload"
    assert result["verdict"] == want, scores(result)
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    said = any("while the requests running held level" in e for e in queue["evidence_against"])
    assert said == climbed, queue


def test_a_climb_under_a_model_manager_is_no_model_loaded(tmp_path):
    """The same three hours' climb to the failed allocation, under llama-swap, which
    could have loaded a second model: a split into two levels fits the climb, but it rose
    quarter after quarter without a pause."""
    n = len(DAY)
    card = [16 * GIB + (7 * GIB * (i - (n - 36)) / 36 if i >= n - 36 else 0) for i in range(n)]
    b = _card_ran_out(noisy(card, 0.05 * GIB))
    b.engines(
        [engine("llama-swap", "llama-swap", readings={"/running": {"models": [], "loaded": []}})]
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "leak-ratchet", scores(result)
    snu = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert any("is no load" in e for e in snu["evidence_against"]), snu


def _floor_rose_as_context_grew(floors: list[tuple[int, float]]) -> Builder:
    """llama-server's card, its floor at `floors` (reading, level) with a burst every two
    hours, to its own allocation failure; llamacpp:n_tokens_max at 4000 all day until the
    last hour, when the conversations reached 12000 tokens."""
    n = len(DAY)
    high_water = [12000.0 if i >= n - 12 else 4000.0 for i in range(n)]
    return _card_ran_out(
        _floors(floors, 2 * GIB, 0.02 * GIB),
        context_high_water=plain("llamacpp:n_tokens_max", high_water),
    )


def test_a_floor_that_rose_in_the_hours_the_context_grew_is_the_creep(tmp_path):
    """Flat at 12 GiB until the last three hours, then 15, 18 and 21 GiB."""
    n = len(DAY)
    floors = [(0, 12 * GIB), (n - 36, 15 * GIB), (n - 24, 18 * GIB), (n - 12, 21 * GIB)]
    result = verdict(tmp_path, _floor_rose_as_context_grew(floors))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert any("tracks the context high water" in e for e in leak["evidence_against"]), leak
    assert result["verdict"] == "context-creep", scores(result)


def test_a_floor_that_rose_all_day_before_the_context_grew_is_the_leak(tmp_path):
    """The floor rose stretch after stretch from the morning, 10 to 21 GiB, long before the
    conversations grew in the last hour: the cache did not drive it."""
    floors = [(24 * k, 10 * GIB + k * GIB) for k in range(12)]
    result = verdict(tmp_path, _floor_rose_as_context_grew(floors))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert not any("tracks" in e for e in leak["evidence_against"]), leak
    assert result["verdict"] == "leak-ratchet", scores(result)


def _floor_rose_beside_the_cache(fullest: float) -> Builder:
    """The card's floor flat at 12 GiB until the last three hours, then 15, 18 and 21 GiB
    to the engine's allocation failure; its KV cache at 2 % all day, rising in those hours
    to `fullest`."""
    n = len(DAY)
    floors = [(0, 12 * GIB), (n - 36, 15 * GIB), (n - 24, 18 * GIB), (n - 12, 21 * GIB)]
    cache = [0.02 + (fullest - 0.02) * max(0, i - (n - 36)) / 36 for i in range(n)]
    return _card_ran_out(
        _floors(floors, 2 * GIB, 0.02 * GIB),
        kv_cache_usage=plain("llamacpp:kv_cache_usage_ratio", cache),
    )


# Seed 1212's leak-ratchet-192677306199721: vLLM's memory leaked to its cgroup's limit while
# its cache rose from nothing to a quarter full; the leak was put down to the cache, and
# the engine's own limit read as the machine running out.
CACHE_BESIDE_THE_FLOOR = [
    pytest.param(0.25, "leak-ratchet", id="cache-with-room"),
    pytest.param(0.95, "context-creep", id="cache-filled"),
]


@pytest.mark.parametrize(("fullest", "expected"), CACHE_BESIDE_THE_FLOOR)
def test_a_cache_with_room_to_spare_took_none_of_the_floors_rise(tmp_path, fullest, expected):
    result = verdict(tmp_path, _floor_rose_beside_the_cache(fullest))
    assert result["verdict"] == expected, scores(result)
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    blamed = any("tracks the kv cache" in e for e in leak["evidence_against"])
    assert blamed == (expected == "context-creep"), leak


def _warmed_up_then(
    per_answer_late: float, cache_read: bool = False, climbing: bool = False
) -> Builder:
    """An engine's card after its start: the first two hours its floor rose 19.9 to 21.35
    GiB, then flat all day; the last three hours it rose to 22.5 GiB before its allocation
    failed. Each answer came with 12 prompt tokens all day, `per_answer_late` in those last
    three hours. llama-server's context high water reached 24000 tokens, the most its slot
    holds, in the first two hours and stayed there; with `cache_read`, SGLang's cache use
    (token_usage) was read instead, at a tenth all day. `climbing`: the floor rose all
    day instead, half a GiB every two hours from 16.5 GiB."""
    n = len(DAY)
    floors = [(0, 19.9 * GIB), (12, 20.5 * GIB), (24, 21.35 * GIB)]
    floors += [(n - 36, 21.55 * GIB), (n - 12, 22.5 * GIB)]
    if climbing:
        floors = [(24 * k, 16.5 * GIB + 0.5 * GIB * k) for k in range(12)]
    per_answer = [per_answer_late if i >= n - 36 else 12.0 for i in range(n)]
    counters = _token_counters([400.0] * n, per_answer)
    gauge = (
        {"kv_cache_usage": plain("sglang:token_usage", [0.1] * n)}
        if cache_read
        else {"context_high_water": plain(
            "llamacpp:n_tokens_max", [min(24000.0, 5000.0 + 800.0 * i) for i in range(n)])}
    )  # fmt: skip
    return _card_ran_out(
        _floors(floors, 0.5 * GIB, 0.01 * GIB),
        **gauge,
        **{name: plain(name, [v for _, v in points]) for name, points in counters.items()},
    )


@pytest.mark.parametrize(("per_answer_late", "creep"), [(30.0, True), (12.0, False)])
def test_a_floor_rising_while_the_prompts_grew_past_a_full_high_water_is_the_creep(
    tmp_path, per_answer_late, creep
):
    """With the prompts as long as ever (12 per answer), the same floor is no creep."""
    result = verdict(tmp_path, _warmed_up_then(per_answer_late))
    assert (result["verdict"] == "context-creep") == creep, scores(result)
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    said = [e for e in leak["evidence_against"] if "in the hours the prompts grew longer" in e]
    assert bool(said) == creep, leak


def test_prompts_grown_beside_a_floor_that_climbed_all_day_leave_the_rise_to_the_leak(tmp_path):
    result = verdict(tmp_path, _warmed_up_then(per_answer_late=30.0, climbing=True))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert not any("prompts grew" in e for e in leak["evidence_against"]), leak
    assert result["verdict"] != "context-creep", scores(result)


def test_the_prompts_grown_beside_a_cache_read_with_room_leave_the_rise_to_the_leak(tmp_path):
    result = verdict(tmp_path, _warmed_up_then(per_answer_late=30.0, cache_read=True))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert not any("prompts grew" in e for e in leak["evidence_against"]), leak
    assert any("the kv cache did not climb with it" in e for e in leak["evidence_for"]), leak


def _second_model_minutes_before(manager: str | None) -> Builder:
    """A 48 GiB card flat at 21.6 GiB all day (but for a 40 MiB ripple nine hours in that
    stayed); 20 minutes before the allocation failed a second llama-server came up and the
    card stepped up 25.5 GiB. With `manager` (llama-swap), it lists the one model it runs
    and the card holds that one alone."""
    n = len(DAY)
    card = [21.6 * GIB + (40 * 2**20 if i >= 110 else 0) for i in range(n)]
    card[n - 4 :] = [47.1 * GIB] * 4
    b = _card_ran_out(
        card,
        total=48 * GIB,
        targets_up=[
            up("gateway", [1.0] * n),
            seen("llama-server", 5803, [1.0] * n),
            seen("llama-server", 5804, [None] * (n - 4) + [1.0] * 4),
        ],
    )
    if manager:
        b.gpu("NVIDIA RTX A6000", 48 * GIB, 47 * GIB, [(901, "llama-server", 46 * GIB)], False)
        running = {"models": [{"model": "qwen3-32b", "state": "ready"}], "loaded": ["qwen3-32b"]}
        b.engines([engine(manager, manager, readings={"/running": running})])
    return b


def test_a_ripple_over_the_day_does_not_hide_a_model_loaded_minutes_before(tmp_path):
    result = verdict(tmp_path, _second_model_minutes_before(None))
    assert result["verdict"] == "swap-not-unloaded", scores(result)
    assert "stepped up 25.5 GiB" in result["candidates"][0]["evidence_for"][0]


def test_a_step_the_manager_says_is_its_one_model_is_that_model_loading(tmp_path):
    """The same step, where llama-swap lists one model and the card holds it alone."""
    result = verdict(tmp_path, _second_model_minutes_before("llama-swap"))
    swap = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert swap["score"] < 3, swap
    assert any("a model loaded" in e for e in swap["evidence_for"]), swap


def _step_as(came: dict, card_job: str = "dcgm") -> Builder:
    """The same 48 GiB card flat at 21.6 GiB, stepping up 25.5 GiB 20 minutes before its
    allocation failed, as the target `came` came up; `card_job` publishes the card's line."""
    n = len(DAY)
    card = [21.6 * GIB] * (n - 4) + [47.1 * GIB] * 4
    return _card_ran_out(
        card,
        total=48 * GIB,
        accelerator_memory_used=_series(card_job, card),
        accelerator_memory_total=_series(card_job, [48 * GIB] * n),
        targets_up=[seen("llama-server", 5803, [1.0] * n), came],
    )


@pytest.mark.parametrize(
    ("came", "card_job"),
    [
        # the gateway missed one scrape: a gap, then up again, loading nothing of its own
        (up("gateway", [1.0] * (len(DAY) - 5) + [0.0] + [1.0] * 4), "dcgm"),
        # the card's own exporter first scraped then: an instrument, whatever its name
        (seen("local-llm", 9835, [None] * (len(DAY) - 4) + [1.0] * 4), "local-llm"),
    ],
)
def test_what_came_up_with_a_step_is_a_second_server_only_if_it_serves_models(
    tmp_path, came, card_job
):
    result = verdict(tmp_path, _step_as(came, card_job))
    swap = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert not any("came up" in e for e in swap["evidence_for"]), swap
    assert any("nothing here loads a second model" in e for e in swap["evidence_against"]), swap


def _probed(url: str) -> dict:
    """blackbox_exporter's probe of `url`, up all day: its job is the prober's."""
    return {"metric": {"__name__": "up", "job": "blackbox", "instance": url},
            "values": [[t, "1.0"] for t in DAY]}  # fmt: skip


@pytest.mark.parametrize(
    ("probed", "manager"),
    [
        ("http://127.0.0.1:11434/api/version", True),  # Ollama's port: a manager
        ("http://127.0.0.1:8080/health", False),  # llama-server's: the one engine
    ],
)
def test_a_manager_watched_only_by_a_blackbox_probe_is_still_a_manager(tmp_path, probed, manager):
    """Blind round 4 r4sw2: Ollama on a Mac, seen only through blackbox, kept a second
    model; the step was read as 'nothing here loads a second model (no model manager)'."""
    result = verdict(tmp_path, _step_as(_probed(probed)))
    swap = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    said = any("nothing here loads a second model" in e for e in swap["evidence_against"])
    assert said is not manager, swap


def test_a_second_llama_server_that_came_up_with_the_step_is_a_model_kept(tmp_path):
    came = seen("llama-server", 5804, [None] * (len(DAY) - 4) + [1.0] * 4)
    result = verdict(tmp_path, _step_as(came))
    assert result["verdict"] == "swap-not-unloaded", scores(result)
    assert "as llama-server/127.0.0.1:5804 came up" in result["candidates"][0]["evidence_for"][0]


def test_a_card_floor_that_clicked_twice_to_its_allocation_failure_is_a_leak(tmp_path):
    """Flat at 13 GiB all day; in the last four hours each busy spell left its floor higher
    (17.5, then 21 GiB) and held there through the quiet, until an allocation failed. Two
    clicks with a flat stretch before them, ended by the card running out: a ratchet."""
    n = len(DAY)
    card = _floors([(0, 13 * GIB), (n - 48, 17.5 * GIB), (n - 24, 21 * GIB)], 2 * GIB, 0.0)
    result = verdict(tmp_path, _card_ran_out(card))
    assert result["verdict"] == "leak-ratchet", scores(result)
    assert "floor rose in the quiet hours" in result["candidates"][0]["evidence_for"][0]


def test_the_climb_back_from_a_swap_is_no_step_that_explains_a_ratchet(tmp_path):
    """A 48 GiB card: early in the day a swap to a small model took the floor to 10 GiB
    for two hours and the 30 GiB model came back; from then on every stretch left the
    floor a GiB higher, to an allocation failure. The climb back from the swap is not the
    rise: the ratchet is the leak."""
    levels = [(0, 30 * GIB), (24, 10 * GIB), (48, 30 * GIB)]
    levels += [(72 + 24 * k, (31 + k) * GIB) for k in range(9)]
    result = verdict(tmp_path, _card_ran_out(_floors(levels, 2 * GIB, 0.0), 48 * GIB))
    assert result["verdict"] == "leak-ratchet", scores(result)
    leak = result["candidates"][0]
    assert "floor rose in the quiet hours" in leak["evidence_for"][0], leak
    assert not any("one jump" in e for e in leak["evidence_against"]), leak


def test_a_card_that_climbed_full_and_sat_there_to_its_allocation_failure_is_a_leak(tmp_path):
    """Flat at 16 GiB all day; five hours before the end a batch started, the allocator
    began to leak under it and the card climbed steadily for three hours to 23.5 of its
    24 GiB, then sat full for two until an allocation failed. Busy throughout, it left no
    quiet floor to compare, and its last three hours are flat only because a full card
    cannot climb: the climb before them is the leak."""
    n = len(DAY)
    rising = range(n - 60, n - 24)
    card = [
        16 * GIB + 7.5 * GIB * min(1.0, max(0, i - rising.start) / len(rising)) for i in range(n)
    ]
    running = [1.0 if i >= rising.start else 0.0 for i in range(n)]
    b = _card_ran_out(noisy(card, 0.05 * GIB), requests_running=_series("llama", running))
    result = verdict(tmp_path, b)
    assert result["verdict"] == "leak-ratchet", scores(result)
    leak = result["candidates"][0]
    assert any("climbed through the hours before" in e for e in leak["evidence_for"]), leak


def test_the_climb_in_the_hours_the_engines_death_ended_is_read_up_to_the_death(tmp_path):
    """Flat at 16.9 GiB; from six hours before the end each busy spell left the card's
    floor higher, the last hours fastest (to 23 GiB), until an allocation failed and the
    engine died: its last readings are the released card. The stretch the death fell in
    keeps the climb read before the release; without it the rise looks too small."""
    n = len(DAY)
    levels = [(0, 16.9 * GIB), (n - 72, 17.4 * GIB), (n - 48, 17.9 * GIB)]
    levels += [(n - 24 + 3 * k, (18.5 + 0.6 * k) * GIB) for k in range(8)]
    card = _floors(levels, 1.5 * GIB, 0.0)
    card[-3:] = [0.4 * GIB] * 3
    result = verdict(tmp_path, _card_ran_out(card))
    assert result["verdict"] == "leak-ratchet", scores(result)
    assert "floor rose in the quiet hours" in result["candidates"][0]["evidence_for"][0]


def test_a_card_that_stepped_then_sat_flat_before_its_allocation_failure_is_no_leak(tmp_path):
    """The same rise in the middle of the window with a flat hour either side: a second
    model's weights and cache, not an engine leaking through the hours."""
    n = len(DAY)
    card = [16 * GIB + 7 * GIB * min(1.0, max(0, i - (n - 24)) / 12) for i in range(n)]
    result = verdict(tmp_path, _card_ran_out(noisy(card, 0.05 * GIB)))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert not any("climbed through the hours" in e for e in leak["evidence_for"]), leak


def _second_model_ramping() -> Builder:
    """A 24 GiB card: vLLM holds 12.7 GiB all day. Two hours before the failure a second
    model's memory ramps up 10.5 GiB over 70 minutes (its weights, then its cache), and its
    llama-server is first scraped up as the ramp tops out, an hour after it began."""
    n = len(DAY)
    ramp = n - 26
    card = [12.7 * GIB + 10.5 * GIB * min(1.0, max(0, i - ramp) / 14) for i in range(n)]
    return history(
        base(trigger=("healthcheck", "gateway", "HTTP 502")),
        {
            "targets_up": [
                up("gateway", [1.0] * n),
                seen("vllm", 8000, [1.0] * n),
                seen("llama-server", 5803, [None] * (ramp + 12) + [1.0] * (n - ramp - 12)),
            ],
            "accelerator_memory_used": _series("dcgm", noisy(card, 0.02 * GIB)),
            "accelerator_memory_total": _series("dcgm", [24 * GIB] * n),
        },
    )


def test_a_server_that_came_up_on_the_ramp_of_a_step_came_with_it(tmp_path):
    result = verdict(tmp_path, _second_model_ramping())
    assert result["verdict"] == "swap-not-unloaded", scores(result)
    said = result["candidates"][0]["evidence_for"][0]
    assert "as llama-server/127.0.0.1:5803 came up" in said, said


def _storm(trigger: tuple[str, ...]) -> Builder:
    """Four callers at most waited all day; a retry storm piled 335 up in the last ten
    minutes: too short for a share of the hour, far deeper than anything before."""
    n = len(DAY)
    waiting = [4.0 if i % 50 == 0 else 0.0 for i in range(n - 2)] + [83.0, 335.0]
    return base(trigger=trigger).prometheus(
        {
            "host_memory_available": available(healthy_bursts()),
            "requests_running": [(t, 8.0) for t in DAY],
            "requests_waiting": list(zip(DAY, waiting, strict=True)),
        }
    )


def test_a_queue_piled_up_in_minutes_before_a_timeout_is_overload(tmp_path):
    result = verdict(tmp_path, _storm(("alert", "RequestsQueueing")))
    assert result["verdict"] == "concurrency-overload", scores(result)
    assert "piled up in the minutes before" in result["candidates"][0]["evidence_for"][0]


def test_the_same_pile_up_with_nothing_failed_is_not_named(tmp_path):
    result = verdict(tmp_path, _storm(("cron", "baseline")))
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    assert not any("piled up" in e for e in queue["evidence_for"]), queue


MEMCG_KILL = (
    "Memory cgroup out of memory: Killed process 417966 (python3) total-vm:5785958kB, "
    "anon-rss:2034237kB, file-rss:8192kB, shmem-rss:0kB, UID:0 pgtables:4188kB oom_score_adj:0"
)


def _preallocated(last_hours_gib: float) -> Builder:
    """A GB10 running vLLM, which takes most of the shared pool at start: 6 GiB of 128
    available all day, a notebook killed inside its own cgroup five hours before a cron
    baseline. In the last two hours available memory stood at `last_hours_gib`."""
    n = len(DAY)
    free = noisy([6 * GIB if i < n - 24 else last_hours_gib * GIB for i in range(n)], 0.2 * GIB)
    b = Builder("spark-2", AT, total=TOTAL, trigger=("cron", "baseline"))
    b.memory([(t, TOTAL - free[-1]) for t in WINDOW]).pressure([(t, 0.0) for t in WINDOW])
    b.processes([{"pid": 700, "name": "vllm", "rss_bytes": 4 * GIB}]).host().logs([])
    b.engines([engine("vllm", "vllm", {"vllm:num_requests_running": 0.0})])
    b.kernel([MEMCG_KILL], ago_s=5 * 3600)
    return history(b, {"host_memory_available": plain("node_memory_MemAvailable_bytes", free)})


def test_available_memory_as_low_all_day_with_nothing_killed_is_the_machines_level(tmp_path):
    result = verdict(tmp_path, _preallocated(6))
    assert result["verdict"] == "no-fault", scores(result)
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    assert any("the level this machine runs at" in e for e in host["evidence_against"]), host


def test_available_memory_lower_tonight_than_all_day_still_counts(tmp_path):
    result = verdict(tmp_path, _preallocated(2))
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    assert not any("the level this machine runs at" in e for e in host["evidence_against"])
    assert any("available memory fell to" in e for e in host["evidence_for"]), host


def _model_loaded_into_gtt(card_jump_gib: float) -> Builder:
    """A Strix Halo (one pool; the card's GTT use is in the host's line): the host's own
    memory follows a day (12.4 GiB in the evening, 5.5 GiB through the night, back up to
    12.6 GiB by the next evening), and Ollama loaded its model on demand for an hour at the
    start of the day and again two and a half hours before a manual capture: the card's
    line stepped from 0.6 GiB by `card_jump_gib`. Nothing failed."""
    n = len(DAY)
    own = _floors([(0, 12.4 * GIB), (48, 5.5 * GIB), (144, 9.0 * GIB), (168, 9.5 * GIB),
                   (192, 10.1 * GIB), (216, 10.5 * GIB), (240, 11.3 * GIB), (264, 12.6 * GIB)],
                  2 * GIB)  # fmt: skip
    card = [(0.6 + (card_jump_gib if 6 <= i < 18 or i >= n - 30 else 0)) * GIB for i in range(n)]
    # The host's line holds the card's model either way: without a jump on the card's line
    # it is the host's own memory that rose.
    used = [o + (0.6 + (7.5 if 6 <= i < 18 or i >= n - 30 else 0)) * GIB for i, o in enumerate(own)]
    b = Builder("evo-x2", AT, total=TOTAL, trigger=("manual", None))
    b.memory([(t, used[-1]) for t in WINDOW]).pressure([(t, 0.0) for t in WINDOW])
    b.processes([{"pid": 800, "name": "ollama", "rss_bytes": GIB}]).host().kernel([]).logs([])
    return history(
        b,
        {
            "host_memory_available": plain("node_memory_MemAvailable_bytes",
                                           [TOTAL - u for u in used]),
            "accelerator_memory_used": _series("local-llm", card),
            "accelerator_memory_total": _series("local-llm", [96.0 * GIB] * n),
        },
    )  # fmt: skip


def test_a_host_floor_that_rose_with_the_cards_model_on_one_pool_is_no_leak(tmp_path):
    result = verdict(tmp_path, _model_loaded_into_gtt(7.5))
    assert result["verdict"] == "no-fault", scores(result)
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert leak["score"] == 0, leak
    assert any("models loaded into the shared pool" in e for e in leak["evidence_against"]), leak


def test_the_same_host_rise_with_the_cards_line_flat_is_the_hosts_own(tmp_path):
    result = verdict(tmp_path, _model_loaded_into_gtt(0))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert any("floor rose in the quiet hours" in e for e in leak["evidence_for"]), leak
    against = leak["evidence_against"]
    assert not any("models loaded into the shared pool" in e for e in against), leak


def _llama_server_card(card: list[float], managed: bool = False) -> Builder:
    """llama-server without --metrics (no context reading anywhere) on a 24 GiB card, its
    allocation failed at the end; `managed`: llama-swap runs it."""
    b = _card_ran_out(card)
    engines = [engine("llama-server", "llama-server", status="absent", reason="connection refused")]
    if managed:
        engines.append(
            engine("llama-swap", "llama-swap", readings={"/running": {"models": [], "loaded": []}})
        )
    return b.engines(engines)


def _late_climb(minutes: int) -> list[float]:
    """Level all day at 18 GiB, then climbing 3 GiB through the last `minutes`."""
    n = len(DAY)
    k = minutes // 5
    return [18.0 * GIB] * (n - k) + [18.0 * GIB + 3.0 * GIB * (i + 1) / k for i in range(k)]


def test_a_card_climbing_past_the_day_under_llama_server_is_the_context(tmp_path):
    """Nothing measured the context: llama-server's card held level all day and climbed
    through the last hour and a half to the failed allocation, giving none back. Its pool
    keeps what the longest context needed: the creep, not the allocation, is the cause."""
    result = verdict(tmp_path, _llama_server_card(_late_climb(90)))
    assert result["verdict"] == "context-creep", scores(result)
    assert "gave none of it back" in result["candidates"][0]["evidence_for"][0]


def test_the_last_minutes_allocations_are_the_ending_not_a_creep(tmp_path):
    """The look-alike: the same rise in the ten minutes before the failure, every slot
    filling at once: how it ended, not a context that grew through the hours."""
    result = verdict(tmp_path, _llama_server_card(_late_climb(10)))
    creep = next(c for c in result["candidates"] if c["fault"] == "context-creep")
    assert creep["score"] == 0, scores(result)


@pytest.mark.parametrize("held", [12, 38])
def test_a_model_sized_step_where_a_manager_loads_models_is_no_creep(tmp_path, held):
    """The other look-alike: llama-swap runs the engine and the card stepped up 3 GiB at
    once, an hour before, or (seed 7070's swap-not-unloaded-265160957192446) minutes before
    the incident window began, where the window alone saw no step and the creep read 3."""
    n = len(DAY)
    card = [18.0 * GIB] * (n - held) + [21.0 * GIB] * held
    result = verdict(tmp_path, _llama_server_card(card, managed=True))
    creep = next(c for c in result["candidates"] if c["fault"] == "context-creep")
    assert creep["score"] == 0, scores(result)


def _mac(
    compressed: list[float],
    swap_used: list[float] | None = None,
    fell: bool = False,
    routine: bool = False,
) -> Builder:
    """A 128 GiB Mac scraped by macOS node-exporter (meminfo_darwin.go: no MemAvailable, no
    PSI, its swap files' use), whose gateway's check timed out and nothing was killed;
    what compressed memory held through the day is given, the free pages fall with it.
    `routine`: nothing failed, a cron capture."""
    n = len(DAY)
    free = [max(1.0 * GIB, 30.0 * GIB - c) for c in compressed]
    named = {
        "host_memory_total_darwin": plain("node_memory_total_bytes", [TOTAL] * n),
        "host_memory_free_darwin": plain("node_memory_free_bytes", free),
        "host_memory_inactive_darwin": plain("node_memory_inactive_bytes", [2.0 * GIB] * n),
        "host_memory_compressed_darwin": plain("node_memory_compressed_bytes", compressed),
    }
    if swap_used is not None:
        named["host_swap_used_darwin"] = plain("node_memory_swap_used_bytes", swap_used)
    if routine:
        return history(base(trigger=("cron", "baseline")), named)
    if fell:  # the engine went down outright a quarter hour before the capture
        named["targets_up"] = [up("llama-server", [1.0] * (n - 3) + [0.0] * 3)]
        b = history(base(trigger=("healthcheck", "gateway", "HTTP 502")), named)
        return b.checks([{"name": "gateway", "kind": "completion", "ok": False,
                          "status": "error", "reason": "HTTP 502", "answer": {}}])  # fmt: skip
    b = history(base(trigger=("healthcheck", "gateway", "no answer within 60 s")), named)
    return b.checks([{"name": "gateway", "kind": "completion", "ok": False, "status": "timeout",
                      "reason": "no answer within 60 s", "answer": {}}])  # fmt: skip


def _evening(level: float, last: float) -> list[float]:
    """Compressed memory at 2 GiB, `level` through the busy evening hours (positions
    120-180 of the day), `last` through the two hours before the capture."""
    n = len(DAY)
    return [last if i >= n - 24 else level if 120 <= i < 180 else 2.0 * GIB for i in range(n)]


def test_macos_compressing_past_any_hour_before_is_the_stall(tmp_path):
    """No PSI on a Mac: its compressor took 18 GiB more than in any hour before, in the
    hours before the check timed out, and nothing was killed: the machine stalled."""
    result = verdict(tmp_path, _mac(_evening(4.0 * GIB, 22.0 * GIB)))
    assert result["verdict"] == "memory-pressure-stall", scores(result)
    assert "compressed" in result["candidates"][0]["evidence_for"][0]


@pytest.mark.parametrize("routine", [False, True], ids=["check-timed-out", "nothing-failed"])
def test_macos_compressing_three_times_its_day_is_a_stall_beside_a_failure(tmp_path, routine):
    """A milder push: 2 GiB compressed all day, 6.9 GiB in the two hours before (4.9 GiB
    more, under a twentieth of the 128 GiB). Beside a check that timed out, nothing killed,
    it is the stall; on a routine capture it is no fault."""
    result = verdict(tmp_path, _mac(_evening(2.0 * GIB, 6.9 * GIB), routine=routine))
    want = "no-fault" if routine else "memory-pressure-stall"
    assert result["verdict"] == want, scores(result)


def test_macos_compressing_as_much_as_every_evening_is_how_it_runs(tmp_path):
    """The look-alike: the same 22 GiB compressed, as it was through the evening before."""
    result = verdict(tmp_path, _mac(_evening(22.0 * GIB, 22.0 * GIB)))
    stall = next(c for c in result["candidates"] if c["fault"] == "memory-pressure-stall")
    assert stall["score"] < 3 and any("compressed" in e for e in stall["evidence_against"]), stall


def test_macos_swap_files_filling_read_from_its_own_names(tmp_path):
    """swap_used_bytes, macOS node-exporter's name (its total grows with the swap files it
    adds), says the swap filled beside the compressor."""
    n = len(DAY)
    used = [
        0.5 * GIB if i < n - 24 else 0.5 * GIB + 5.0 * GIB * (i - n + 25) / 24 for i in range(n)
    ]
    result = verdict(tmp_path, _mac(_evening(4.0 * GIB, 22.0 * GIB), used))
    stall = next(c for c in result["candidates"] if c["fault"] == "memory-pressure-stall")
    assert any("swap filled" in e for e in stall["evidence_for"]), stall


def test_a_service_gone_outright_on_a_mac_out_of_memory_is_exhaustion(tmp_path):
    """The same compressor and swap, but the engine went down outright (an error, not a
    late answer): jetsam's kill, which leaves no kernel line. The machine ran out; the
    stall was its prelude."""
    n = len(DAY)
    used = [
        0.5 * GIB if i < n - 24 else 0.5 * GIB + 5.0 * GIB * (i - n + 25) / 24 for i in range(n)
    ]
    result = verdict(tmp_path, _mac(_evening(4.0 * GIB, 22.0 * GIB), used, fell=True))
    stall = next(c for c in result["candidates"] if c["fault"] == "memory-pressure-stall")
    assert result["verdict"] == "host-exhaustion", scores(result)
    assert "its memory killer (jetsam) took it" in result["candidates"][0]["evidence_for"][0]
    assert any("jetsam" in e for e in stall["evidence_against"]), stall


def _floor_rising_beside_a_notebook(started: float, since_boot: bool = False) -> Builder:
    """A 128 GiB box using 90 GiB all day, then 33 GiB more over the ten hours before a
    check timed out, nothing killed. llama-server holds 40 GiB (its mapped weights, since
    boot); a python3 holding 30 GiB started `started`; `since_boot`: another python3, a
    small service's, up since boot."""
    n = len(DAY)
    used = [90 * GIB + 33 * GIB * max(0, i - (n - 120)) / 120 for i in range(n)]
    b = history(
        base(trigger=("healthcheck", "gateway", "no answer within 60 s")),
        {
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [TOTAL - u for u in noisy(used, 0.1 * GIB)]
            ),
            "host_memory_total": plain("node_memory_MemTotal_bytes", [TOTAL] * n),
        },
    )
    return b.processes([
        {"pid": 52769, "name": "llama-server", "rss_bytes": 40 * GIB,
         "start_time": iso(AT - 30 * 86400)},
        {"pid": 9001, "name": "python3", "rss_bytes": 30 * GIB, "start_time": iso(started)},
    ] + ([{"pid": 640, "name": "python3", "rss_bytes": 2 * GIB,
           "start_time": iso(AT - 30 * 86400)}] if since_boot else []))  # fmt: skip


def test_a_floor_that_rose_for_a_process_that_arrived_is_not_the_engines_leak(tmp_path):
    """The engine holds more than the notebook, but it held its weights all day: the
    notebook started as the floor began to rise and holds what was lost since."""
    result = verdict(tmp_path, _floor_rising_beside_a_notebook(AT - 10 * 3600))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert result["verdict"] != "leak-ratchet", scores(result)
    assert any("the floor rose for it" in e for e in leak["evidence_against"]), leak


def test_the_same_floor_beside_a_process_up_since_boot_is_the_engines(tmp_path):
    result = verdict(tmp_path, _floor_rising_beside_a_notebook(AT - 30 * 86400))
    assert result["verdict"] == "leak-ratchet", scores(result)


def test_an_arrival_counts_apart_from_a_process_of_its_name_up_since_boot(tmp_path):
    """The same notebook beside a small python3 service up since boot: the name's group is
    not what arrived; the notebook alone is."""
    result = verdict(tmp_path, _floor_rising_beside_a_notebook(AT - 10 * 3600, since_boot=True))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert any("pid 9001 (python3)" in e for e in leak["evidence_against"]), leak


def _piled_up_before_the_card_ran_out(depth: float) -> Builder:
    """llama-server's four slots, nobody waiting all day; over the ten minutes before its
    allocation failed, all four busy and `depth` callers waiting."""
    n = len(DAY)
    b = history(
        base(trigger=("healthcheck", "gateway", "HTTP 502")),
        {
            "accelerator_memory_used": _series("dcgm", [20.0 * GIB] * n),
            "accelerator_memory_total": _series("dcgm", [24.0 * GIB] * n),
            "requests_running": plain(
                "llamacpp:requests_processing", [4.0 if i >= n - 2 else 1.0 for i in range(n)]
            ),
            "requests_waiting": plain(
                "llamacpp:requests_deferred", [depth if i >= n - 2 else 0.0 for i in range(n)]
            ),
        },
    )
    return b.logs(["CUDA error: out of memory"])


def test_callers_piling_in_minutes_before_the_card_ran_out_is_overload(tmp_path):
    """A retry storm: twenty callers queued in the minutes before the allocation failed,
    where nobody ever waited before. Too short for a share of the hour; the sequences
    they brought in ran the card out."""
    result = verdict(tmp_path, _piled_up_before_the_card_ran_out(20.0))
    assert result["verdict"] == "concurrency-overload", scores(result)
    assert "piled up in the minutes before" in result["candidates"][0]["evidence_for"][0]


def test_two_callers_waiting_a_moment_before_the_card_ran_out_are_no_pile(tmp_path):
    result = verdict(tmp_path, _piled_up_before_the_card_ran_out(2.0))
    queue = next(c for c in result["candidates"] if c["fault"] == "concurrency-overload")
    assert queue["score"] < 3, scores(result)


def test_a_late_climb_past_a_day_of_small_clicks_is_the_context_not_the_ratchet(tmp_path):
    """The floors clicked up 1.4 GiB through the day (a ratchet's look), then the card
    climbed 3 GiB past all of it in the last hour and a half to the failed allocation:
    most of it came late, as llama-server's pool follows the longest context."""
    n = len(DAY)
    clicks = [18.0 * GIB + 1.4 * GIB * (i // 24) / 10 for i in range(n)]
    top = clicks[n - 19]
    card = clicks[: n - 18] + [top + 3.0 * GIB * (i + 1) / 18 for i in range(18)]
    result = verdict(tmp_path, _llama_server_card(card))
    assert result["verdict"] == "context-creep", scores(result)
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert any("most of it came late" in e for e in leak["evidence_against"]), leak


def _a_day_round(engine_started_h: float) -> Builder:
    """A routine snapshot, nothing failed: the host's line stood at 40 GiB where the
    look-back begins, a day earlier, fell to 24 GiB within the half hour and climbed back
    to 39 GiB over the day. llama-server started `engine_started_h` hours before the capture."""
    n = len(DAY)
    used = [40 * GIB if i < 6 else 24 * GIB + 15 * GIB * max(0, i - 24) / (n - 25)
            for i in range(n)]  # fmt: skip
    b = history(base(trigger=("cron", "baseline")), {"host_memory_available": plain(
        "node_memory_MemAvailable_bytes", [TOTAL - u for u in used])})  # fmt: skip
    return b.processes([{"pid": 4242, "name": "llama-server", "rss_bytes": 8 * GIB,
                         "start_time": iso(AT - engine_started_h * 3600)}])  # fmt: skip


def test_a_host_line_back_where_it_stood_a_day_earlier_is_the_days_round(tmp_path):
    """The engine ran a month, through the fall: its memory did not fall, so the climb
    back is something else's day (a desktop, a job), not a leak."""
    result = verdict(tmp_path, _a_day_round(engine_started_h=30 * 24))
    assert result["verdict"] == "no-fault", scores(result)
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert any("a day earlier" in e for e in leak["evidence_against"]), leak


def _a_day_round_seen_by_prometheus(back_at: float, engine_up: list[float]) -> Builder:
    """The same day's round with no engine in the process table (the capture ran beside
    the history's machine, or its table was not read): only Prometheus says the engine ran
    on. The line ends at `back_at` (40 GiB stood a day earlier)."""
    n = len(DAY)
    used = [40 * GIB if i < 6 else 24 * GIB + (back_at - 24 * GIB) * max(0, i - 24) / (n - 25)
            for i in range(n)]  # fmt: skip
    return history(
        base(trigger=("cron", "baseline")),
        {
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [TOTAL - u for u in used]
            ),
            "targets_up": [seen("llama-server", 8080, engine_up)],
        },
    )


def test_a_day_round_a_little_above_yesterday_with_the_engine_up_throughout_is_no_leak(
    tmp_path,
):
    """Blind healthy days (a browser through the evening, the capture near its peak) were
    called leak-ratchet: the engines were Prometheus targets, not processes here, and the
    evening stood a GiB above the day before's."""
    n = len(DAY)
    result = verdict(tmp_path, _a_day_round_seen_by_prometheus(41 * GIB, [1.0] * n))
    assert result["verdict"] == "no-fault", scores(result)
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert any("a day earlier" in e for e in leak["evidence_against"]), leak


def test_the_same_round_with_the_engine_restarted_after_the_low_is_not_excused(tmp_path):
    n = len(DAY)
    up = [1.0] * 100 + [0.0] * 2 + [1.0] * (n - 102)  # restarted after the night's low
    result = verdict(tmp_path, _a_day_round_seen_by_prometheus(41 * GIB, up))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert not any("a day earlier" in e for e in leak["evidence_against"]), leak


def test_the_same_day_after_the_engine_restarted_below_it_is_a_leak(tmp_path):
    """The engine started after the fall (a restart released what it held): the climb
    since is its own, whatever the line did a day earlier."""
    result = verdict(tmp_path, _a_day_round(engine_started_h=20))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert leak["score"] >= 3, scores(result)


def _host_ratchet_beside_a_full_card(unified: bool) -> Builder:
    """A 24 GiB card whose own allocation failed at the end, its line flat at 23 GiB all
    day; beside it the 32 GiB host's floor climbed 12 -> 20 GiB, a GiB a stretch, through
    the last sixteen hours. The kernel killed nothing."""
    n = len(DAY)
    host = _floors([(0, 12 * GIB)] + [(n - 192 + 24 * k, (13 + k) * GIB) for k in range(8)],
                   2 * GIB)  # fmt: skip
    b = _card_ran_out(
        noisy([23 * GIB] * n, 0.05 * GIB),
        host_memory_available=plain("node_memory_MemAvailable_bytes", [32 * GIB - u for u in host]),
        host_memory_total=plain("node_memory_MemTotal_bytes", [32 * GIB] * n),
    )
    return b.gpu("NVIDIA GeForce RTX 3090", 24 * GIB, 23 * GIB, [(901, "llama-server", 22 * GIB)],
                 unified=unified)  # fmt: skip


def test_a_host_floor_rising_beside_a_discrete_card_that_ran_out_is_not_its_leak(tmp_path):
    """Seed 9090's concurrency-overload-97319506232492: vLLM's card ran out (CUDA OOM) behind
    a queue while the host's floor rose 6.7 GiB over a day. The leak rule read the host's
    rise and took the card's OOM as its ending, tying the queue. On a discrete card the
    host is another pool: its rise did not take the card's room."""
    result = verdict(tmp_path, _host_ratchet_beside_a_full_card(unified=False))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert leak["score"] < 3, scores(result)
    assert any("a pool of its own" in e for e in leak["evidence_against"]), leak


def test_the_same_rise_on_a_unified_box_is_the_leak_the_card_ran_out_of(tmp_path):
    result = verdict(tmp_path, _host_ratchet_beside_a_full_card(unified=True))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert not any("a pool of its own" in e for e in leak["evidence_against"]), leak
    assert leak["score"] >= 3, scores(result)


def _card_stepped_behind_a_gateway(to: float) -> Builder:
    """An 80 GiB card behind a gateway of unknown kind (its job is `gateway`; the engines
    behind it are not scraped and none answered the capture): 40 GiB all day, then 70 min
    before the check failed with HTTP 502 it steps to `to` within one reading and stays."""
    n = len(DAY)
    card = [40 * GIB] * (n - 14) + [to] * 14
    return history(
        base(trigger=("healthcheck", "gateway", "HTTP 502")),
        {
            "targets_up": [up("gateway", [1.0] * n)],
            "accelerator_memory_used": _series("dcgm", noisy(card, 0.02 * GIB)),
            "accelerator_memory_total": _series("dcgm", [80.0 * GIB] * n),
        },
    )


@pytest.mark.parametrize(("to", "named"), [(75 * GIB, True), (60 * GIB, False)])
def test_a_models_size_loaded_at_once_until_no_room_was_left_is_a_model_kept(tmp_path, to, named):
    """make eval 2424 through a real Prometheus (swap-not-unloaded-36029168605044): a
    second model beside the first behind llama-swap, scraped only as `gateway`; the card
    stepped 35 GiB in minutes and stayed until the next load failed. Read 'nothing here
    loads a second model (no model manager, one engine's server)' where no engine was seen
    at all. The look-alike: the same kind of step that left the card room."""
    result = verdict(tmp_path, _card_stepped_behind_a_gateway(to))
    assert (result["verdict"] == "swap-not-unloaded") is named, scores(result)
    swap = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert not any("nothing here loads a second model" in e for e in swap["evidence_against"])


NO_LOGS = ("logs", "no logs configured ([[logs]], or unit/container of an [[engines]] entry)")


def _host_stepped_behind_ollama(how: str) -> Builder:
    """A 120 GiB unified box read by node-exporter alone (no card line, no log read, as a
    real capture without [[logs]]), Ollama behind a gateway scraped as `gateway`, the
    engines not scraped: 65 GiB used, then 40 min before the gateway's check
    failed with HTTP 500, `how`: "load", 51 GiB more within one reading after a level held
    all day; "cells", the same jump where a notebook had already stepped the line 20 GiB
    twice in the three hours before; "unscraped", the load where the only target besides
    node-exporter is a llama-server configured and never up (no gateway scraped)."""
    n, total = len(DAY), 120 * GIB
    used = [65 * GIB] * (n - 8) + [116 * GIB] * 8
    targets = [up("gateway", [1.0] * n)]
    if how == "unscraped":
        targets = [seen("llama-server", 8081, [0.0] * n)]
    if how == "cells":
        used = [
            v - (20 * GIB if i < n - 30 else 0.0) - (20 * GIB if i < n - 20 else 0.0)
            for i, v in enumerate(used)
        ]
    return history(
        base(trigger=("healthcheck", "gateway", "HTTP 500")),
        {
            "targets_up": targets,
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [total - u for u in noisy(used, 0.05 * GIB)]
            ),
            "host_memory_total": plain("node_memory_MemTotal_bytes", [total] * n),
        },
    ).absent(*NO_LOGS)


@pytest.mark.parametrize("how", ["load", "cells", "unscraped"])
def test_one_clean_jump_of_the_host_where_no_card_is_read_is_a_model(tmp_path, how):
    """Fresh seed 2626 through a real Prometheus (swap-not-unloaded-34642956349462):
    Ollama on a GB10 with no DCGM exporter, a second model (llama-3.3-70b) loaded beside
    the first until the next load failed; the host's line, the pool the models load into,
    jumped 51 GiB in one reading after hours level, read as host-exhaustion. The
    look-alike: the same jump after a notebook's other cells stepped it (another process
    growing, steps among steps).

    Seed 2424 (swap-not-unloaded-20800475393540): the same with a llama-server target
    configured and never up, counted as the one engine whose own memory the jump was. A
    target that never ran serves nothing, and with no engine seen at all what loads models
    here is unknown."""
    result = verdict(tmp_path, _host_stepped_behind_ollama(how))
    swap = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    loaded = how != "cells"
    said = any("the size of a model" in e for e in swap["evidence_for"])
    assert said is loaded, swap
    assert (result["verdict"] == "swap-not-unloaded") is loaded, scores(result)


def _available_ran_out_beside_the_engine(engine_after: float) -> Builder:
    """A 32 GiB box: available falls from 20 GiB through the last three hours to 0.5 GiB,
    the kernel's OOM-kill counter rises by one two readings before the check timed out, and
    llama-server's target reads `engine_after` from then on."""
    n, total = len(DAY), 32 * GIB
    available = [20 * GIB] * (n - 36) + [20 * GIB - 19.5 * GIB * (k + 1) / 34 for k in range(34)]
    available += [12 * GIB] * 2
    return history(
        base(trigger=("healthcheck", "gateway", "no answer within 60 s")),
        {
            "targets_up": [
                up("gateway", [1.0] * n),
                seen("llama-server", 8080, [1.0] * (n - 2) + [engine_after] * 2),
            ],
            "host_memory_available": plain("node_memory_MemAvailable_bytes", available),
            "host_memory_total": plain("node_memory_MemTotal_bytes", [total] * n),
            "host_oom_kills": plain("node_vmstat_oom_kill", [0.0] * (n - 2) + [1.0] * 2),
        },
    )


@pytest.mark.parametrize(("engine_after", "spared"), [(1.0, True), (0.0, False)])
def test_a_kill_the_engines_lived_through_took_another_process(tmp_path, engine_after, spared):
    """make eval 2424 through a real Prometheus (host-exhaustion-276663004732062): a data
    job grew until the kernel killed it; no kernel log, only node-exporter's kill counter,
    and the engine's target stayed up. Host-exhaustion was read as how a queue ended
    (concurrency-overload 5 against 2). The killer takes the largest: not an engine, so the
    process that grew. The look-alike: the engine's target fell with the kill."""
    result = verdict(tmp_path, _available_ran_out_beside_the_engine(engine_after))
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    said = any("took another process, not an engine" in e for e in host["evidence_for"])
    assert said is spared, host
    assert result["verdict"] == "host-exhaustion", scores(result)


def _killed_on_32_gib(used: list[float], generated: list[float], **series: list[dict]) -> Builder:
    """The 32 GiB box's memory in use `used` up to the kernel's kill two readings before
    the end (the kill counter rising then), 8 GiB after it; llama-server's token counter
    `generated`; `series` are more of its history."""
    dead = len(DAY) - 2
    return _engine_fell_on_32_gib(
        noisy(used[:dead], 0.05 * GIB) + [8 * GIB] * 2,
        2,
        tokens_generated=plain("llamacpp:tokens_predicted_total", generated),
        host_oom_kills=plain("node_vmstat_oom_kill", [0.0] * dead + [1.0] * 2),
        **series,
    )


def _host_climbed_while_the_engine(served: bool) -> Builder:
    """A 32 GiB box with llama-server: a busy spell every hour all day, each generating
    tokens; through the last four hours each spell leaves the host's memory 4.5 GiB higher
    (10 to 28 GiB), the kernel kills, the engine's target goes down and the host falls to
    8 GiB (a death that gave back as much as the rise: what a leak's looks like). Where
    not `served`, the same steps came while the engine generated nothing after its last
    spell six hours before."""
    n = len(DAY)
    used, generated, made, clicks = [], [], 0.0, 0
    for i in range(n):
        busy = (i % 12) in (5, 6)
        if busy and (served or i < n - 72):
            made += 4000
        generated.append(made)
        if i >= n - 48 and i % 12 == 6:
            clicks += 1
        used.append(10 * GIB + 4.5 * GIB * clicks + (2 * GIB if busy else 0))
    return _killed_on_32_gib(used, generated)


@pytest.mark.parametrize("served", [True, False])
def test_memory_that_climbed_while_the_engine_served_nothing_is_not_its_leak(tmp_path, served):
    """make eval 2424 through a real Prometheus (host-exhaustion-149271859744843): a data
    job grew 35 GiB over four hours while vLLM generated not one token, until the kernel
    killed the engine; without the process table, leak-ratchet read the host's floors
    (5 against 3). An engine that serves nothing leaks nothing. The look-alike: the same
    climb while it served."""
    result = verdict(tmp_path, _host_climbed_while_the_engine(served))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    idle = any("generated not one token" in e for e in leak["evidence_against"])
    assert idle is not served, leak
    if not served:
        assert result["verdict"] == "host-exhaustion", scores(result)


def _leak_read_against(result: dict, words: str) -> bool:
    """Whether leak-ratchet's evidence against says `words`."""
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    return any(words in e for e in leak["evidence_against"])


def _host_climbed_through_a_lull(steady: bool) -> Builder:
    """A 32 GiB box with llama-server, busy two readings each half hour all day but for a
    lull of ninety minutes in the last six hours: through those six the host's memory
    rises 20 GiB, the kernel kills, the engine's target goes down and the host falls to 8
    GiB. Where `steady`, it rises at one pace, lull or not (a data job: the lull holds a
    fifth of the rise); else each busy spell leaves it higher and it holds through the
    lull (a leak)."""
    n, dead = len(DAY), len(DAY) - 2
    climb, lull = range(n - 72, dead), range(n - 48, n - 30)
    spells = [i for i in climb if i % 6 == 3 and i not in lull]
    used, generated, made = [], [], 0.0
    for i in range(n):
        busy = (i % 6) in (2, 3) and i not in lull
        if busy:
            made += 4000
        generated.append(made)
        if steady:
            level = 10 * GIB + 20 * GIB * max(0, min(1, (i - climb[0]) / len(climb)))
        else:
            level = 10 * GIB + 20 * GIB * sum(k <= i for k in spells) / len(spells)
        used.append(level + (1 * GIB if busy else 0))
    return _killed_on_32_gib(used, generated)


@pytest.mark.parametrize("steady", [True, False])
def test_memory_that_kept_its_pace_while_the_engine_idled_is_not_its_leak(tmp_path, steady):
    """make eval 2929 through a real Prometheus (host-exhaustion-278105257277048): a data
    job climbed 25 GiB through four hours of a household afternoon, at the same pace
    through the hour in which llama-server generated not one token, until the kernel
    killed the engine; that hour held a fifth of the rise, not half, and leak-ratchet read
    the host's floors (6 against 3). A leak holds still while nothing is served. The
    look-alike: a leak whose busy spells each left the line higher, level through the
    lull."""
    result = verdict(tmp_path, _host_climbed_through_a_lull(steady))
    paced = _leak_read_against(result, "of the pace it climbed while they worked")
    assert paced is steady, scores(result)
    assert result["verdict"] == ("host-exhaustion" if steady else "leak-ratchet"), scores(result)


def _host_climbed_in_teeth(build: bool) -> Builder:
    """A 32 GiB box with llama-server, a request running two readings each half hour all
    day: through the last four hours the host's memory floor rises 18 GiB, the kernel
    kills, the engine's target goes down and the host falls to 8 GiB. Where `build`, it
    rises in teeth (jobs that start and finish: 3 GiB taken over two readings and given
    back at the third, between requests); else each busy spell leaves it higher (a leak)."""
    n, dead = len(DAY), len(DAY) - 2
    climb = range(n - 50, dead)
    spells = [i for i in climb if i % 6 == 3]
    used, generated, running, made = [], [], [], 0.0
    for i in range(n):
        busy = (i % 6) in (2, 3)
        made += 4000 if busy else 0
        generated.append(made)
        running.append(1.0 if busy else 0.0)
        if build:
            x = max(0, min(1, (i - climb[0]) / len(climb)))
            tooth = 1.5 * GIB * (i % 3) if i in climb else 0
            level = 10 * GIB + 18 * GIB * x + tooth
        else:
            level = 10 * GIB + 18 * GIB * sum(k <= i for k in spells) / len(spells)
        used.append(level)
    return _killed_on_32_gib(
        used, generated, requests_running=plain("llamacpp:requests_processing", running)
    )


@pytest.mark.parametrize("build", [True, False])
def test_memory_that_came_and_went_between_requests_is_not_the_engines_leak(tmp_path, build):
    """make eval 2424 and 3131 through a real Prometheus (host-exhaustion-123247444412822,
    -194211182744671): a build's jobs took and gave back gigabytes every few minutes,
    their troughs rising, until the kernel killed the engine; llama-server and SGLang ran
    requests all the while, so no hour was idle, and leak-ratchet read the troughs as
    floors (5 and 6 against 3). A leak gives nothing back, and an engine with no request
    running frees nothing. The look-alike: the same rise left by the busy spells."""
    result = verdict(tmp_path, _host_climbed_in_teeth(build))
    assert _leak_read_against(result, "coming and going") is build, scores(result)
    assert result["verdict"] == ("host-exhaustion" if build else "leak-ratchet"), scores(result)


def _clicked_at_busy_spells(kernel_line: bool) -> Builder:
    """A 32 GiB box with llama-server, busy two readings every three hours: one spell
    leaves the host's memory 3 GiB higher, a later one 15 GiB, each held through the idle
    hours after; the kernel kills llama-server, its target goes down and the host falls
    to 8 GiB. systemd's OnFailure hook captured it with the unit's result, oom-kill; the
    kernel's own kill line is in the bundle where `kernel_line`, else not read (dmesg is
    root's alone on Debian and Ubuntu)."""
    n, dead = len(DAY), len(DAY) - 2
    used, generated, made = [], [], 0.0
    for i in range(n):
        busy = (i % 36) in (10, 11)
        if busy:
            made += 4000
        generated.append(made)
        level = 12 * GIB + (3 * GIB if i >= 119 else 0) + (15 * GIB if i >= 227 else 0)
        used.append(level + (0.5 * GIB if busy else 0))
    used = noisy(used[:dead], 0.05 * GIB) + [8 * GIB] * 2
    total = 32 * GIB
    b = history(
        base(trigger=("systemd", "llama-server.service", "result=oom-kill exit=killed/KILL")),
        {
            "targets_up": [seen("llama-server", 8080, [1.0] * dead + [0.0] * 2)],
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [total - u for u in used]
            ),
            "host_memory_total": plain("node_memory_MemTotal_bytes", [total] * n),
            "tokens_generated": plain("llamacpp:tokens_predicted_total", generated),
            "host_oom_kills": plain("node_vmstat_oom_kill", [0.0] * dead + [1.0] * 2),
        },
    )
    if kernel_line:
        b = b.kernel(
            [
                "Out of memory: Killed process 4321 (llama-server) total-vm:36093824kB, "
                "anon-rss:27874660kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:692kB"
            ],
            ago_s=5 * 60,
        )
    return b


@pytest.mark.parametrize("kernel_line", [True, False])
def test_systemds_oom_kill_result_is_the_kernels_kill_where_its_line_is_unread(
    tmp_path, kernel_line
):
    """make eval 2929 through a real Prometheus (leak-ratchet-88160751749815): llama-server
    on a Strix Halo leaked in two clicks at busy spells until the kernel killed it; the
    capture came from systemd's hook with result=oom-kill, the kernel's line unread.
    Nothing said the engine's own memory ran out, so the larger click was read as a model
    loading ("a step, not a ratchet") and host-exhaustion won 6 to 1. systemd's result
    says what the kernel's line would: with the victim's size (what its death gave back)
    bounding the others, the kernel took the engine, which cannot have loaded a second
    model."""
    result = verdict(tmp_path, _clicked_at_busy_spells(kernel_line))
    assert result["verdict"] == "leak-ratchet", scores(result)


def _vllm_killed_with_its_own_memory(own_memory: str, job: str = "vllm") -> Builder:
    """A 32 GiB box with vLLM, busy every two hours: from four hours before the end the
    host's available memory falls from 12 GiB to 1 GiB, the kernel kills, vLLM's target
    goes down. Its /metrics publish its process's resident memory, `own_memory`:
    "ratchet", each busy spell of the last eight hours leaves it 1.4 GiB higher (3 to 8.6
    GiB); "climb", 3 GiB all day, then 9 GiB more through the last two hours' work to the
    kill; "level", 3 GiB while something else takes the machine; "leapt", 3 GiB until ten
    hours before the end, then 12 GiB more within the hour, the machine full with it, and
    held there until the kill; "leapt-restarted", the same, where the server came up anew
    at the leap (a new process and what it loaded, not growth)."""
    n, dead = len(DAY), len(DAY) - 2
    leap = n - 120
    own, clicks = [], 0
    for i in range(dead):
        if i >= n - 96 and i % 24 == 12:
            clicks += 1
        grown = {
            "ratchet": 1.4 * GIB * clicks,
            "climb": 9 * GIB * min(1.0, max(0, i - (n - 26)) / 23),
            "level": 0.0,
            "leapt": 12 * GIB * min(1.0, max(0, i - leap) / 12),
        }[own_memory.removesuffix("-restarted")]
        own.append(3 * GIB + grown)
    own = noisy(own, 0.02 * GIB)
    if own_memory.startswith("leapt"):
        swap = [2 * GIB * max(0, i - leap) / (dead - leap) for i in range(dead)]
        used = [14 * GIB + o + s for o, s in zip(own, swap, strict=True)]
    else:
        used = [20 * GIB + 11 * GIB * min(1.0, max(0, i - (n - 48)) / 46) for i in range(dead)]
    used = noisy(used, 0.05 * GIB) + [12 * GIB] * 2
    up = [1.0] * dead + [0.0] * 2
    if own_memory.endswith("-restarted"):
        up[leap - 2 : leap] = [0.0, 0.0]
    rss = {
        "metric": {"__name__": "process_resident_memory_bytes", "job": job,
                   "instance": "127.0.0.1:8000"},
        "values": [[t, repr(v)] for t, v in zip(DAY, own, strict=False)],
    }  # fmt: skip
    return history(
        base(trigger=("alert", "EngineDown")),
        {
            "targets_up": [seen(job, 8000, up)],
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [32 * GIB - u for u in used]
            ),
            "host_memory_total": plain("node_memory_MemTotal_bytes", [32 * GIB] * n),
            "host_oom_kills": plain("node_vmstat_oom_kill", [0.0] * dead + [1.0] * 2),
            "engine_resident_memory": [rss],
        },
    )


@pytest.mark.parametrize("own_memory", ["ratchet", "climb", "level", "leapt", "leapt-restarted"])
def test_the_engines_own_resident_memory_tells_its_leak_from_another_process(tmp_path, own_memory):
    """make eval 2626 through a real Prometheus: vLLM's API server leaked (rss) until the
    kernel killed it (leak-ratchet-237861484058656: 2.8 GiB all day, 31 GiB through the
    nightly batch's two hours), read as host-exhaustion or the batch's queue: without the
    process table the host's line holds every process. vLLM's /metrics publish
    process_resident_memory_bytes (prometheus_client's process collector:
    vllm-project/vllm#26762 shows it), the engine's line alone: floors that ratchet, or a
    climb past anything of the day through the work that ran to the failure. The
    look-alike: that line held level while the machine's memory went elsewhere.

    Fresh 2626 (leak-ratchet-125206175061840, vLLM on a GB10): the API server went from
    1.8 to 32 GiB in an hour, filled the machine, and waited six hours for the kill; read
    as one step (a load), the machine's running out won. A model loads into a new
    process, whose coming up says so: the look-alike is the server restarted at the leap."""
    result = verdict(tmp_path, _vllm_killed_with_its_own_memory(own_memory))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    if own_memory == "leapt-restarted":
        assert result["verdict"] != "leak-ratchet", scores(result)
        return
    leaked = own_memory != "level"
    read = any(e.startswith("the engine's own resident memory") for e in leak["evidence_for"])
    assert read is leaked, leak
    elsewhere = any("another process took it, not an engine" in e for e in host["evidence_for"])
    assert elsewhere is not leaked, host
    assert result["verdict"] == ("leak-ratchet" if leaked else "host-exhaustion"), scores(result)


def test_an_engine_job_named_for_its_model_still_publishes_its_own_memory(tmp_path):
    """The same level line of vLLM's own memory while the machine's went elsewhere, from a
    job the operator named for its model: the engines publishing their memory are known
    by the name's engine, not by a name equal to it."""
    result = verdict(tmp_path, _vllm_killed_with_its_own_memory("level", job="vLLM-qwen3-8b"))
    host = next(c for c in result["candidates"] if c["fault"] == "host-exhaustion")
    assert any("another process took it, not an engine" in e for e in host["evidence_for"]), host
    assert result["verdict"] == "host-exhaustion", scores(result)


def _a_desktop_day_beside_ollama(engine_holds: float) -> Builder:
    """A routine snapshot of a 62.8 GiB box serving Ollama on a discrete card (read by the
    gpu probe: the weights are in its memory, not the host's): a model's
    runner loaded and unloaded through the day, and the host's line climbing from 6.5 GiB
    to 14.5 GiB over fourteen hours in small clicks, the busy spells on top. The process
    table at the capture: the engines hold `engine_holds`; a desktop (Firefox, its content
    processes, the shell) holds 7.5 GiB."""
    n, total = len(DAY), 62.8 * GIB
    used = [
        6.5 * GIB
        + 8 * GIB * (max(0, i - (n - 168)) // 12) / 14
        + (1.5 * GIB if i % 12 in (3, 4) else 0.0)
        for i in range(n)
    ]
    b = history(
        base(trigger=("cron", "baseline")),
        {
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [total - u for u in noisy(used, 0.05 * GIB)]
            ),
            "host_memory_total": plain("node_memory_MemTotal_bytes", [total] * n),
        },
    )
    started = iso(AT - 30 * 86400)
    b.gpu("NVIDIA GeForce RTX 3090", 24 * GIB, int(5.5 * GIB), [],
          unified=False)  # fmt: skip
    return b.processes(
        [
            {"pid": 900, "name": "ollama", "rss_bytes": int(0.1 * GIB), "start_time": started},
            {"pid": 901, "name": "ollama", "rss_bytes": int(engine_holds), "start_time": started},
            {"pid": 700, "name": "firefox", "rss_bytes": int(3.5 * GIB), "start_time": started},
            {
                "pid": 701,
                "name": "Isolated Web Co",
                "rss_bytes": int(2.5 * GIB),
                "start_time": started,
            },
            {"pid": 702, "name": "gnome-shell", "rss_bytes": int(1.5 * GIB), "start_time": started},
        ]  # fmt: skip
    )


@pytest.mark.parametrize(("engine_holds", "leak"), [(0.6 * GIB, False), (9 * GIB, True)])
def test_a_host_rise_the_engines_do_not_hold_is_not_their_leak(tmp_path, engine_holds, leak):
    """Fresh seed 2727's no-fault-149915928125333, named leak-ratchet on a healthy day:
    the host's floor rose 7.4 GiB through the day while the engines held 0.7 GiB at the
    capture, Firefox 3.5 GiB, its content processes 2.5 GiB. 'Another process holds half
    the rise' looked for one name; a leak is held by its leaker, whoever holds the rest.
    The look-alike: the engine holds the rise, a leak named before anything fails."""
    result = verdict(tmp_path, _a_desktop_day_beside_ollama(engine_holds))
    assert (result["verdict"] == "leak-ratchet") is leak, scores(result)
    if not leak:
        assert result["verdict"] == "no-fault", scores(result)
        found = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
        said = any("other processes' growth" in e for e in found["evidence_against"])
        assert said, found


def _longer_prompts_then_memory_filled(served: bool) -> Builder:
    """vLLM on a 64 GiB box: ten prompt tokens per answer token all day, a hundred from four
    hours before the end (the conversations grew); from two and a half hours before, the host's
    memory climbs from 20 GiB to 62 GiB until the engine falls. `served`: the callers keep
    coming to the end; else the last request ended as the climb began (a household gone to
    bed, a notebook filling the machine)."""
    n, total = len(DAY), 64 * GIB
    quiet = n - 30
    ratio = [10.0 if i < n - 48 else 100.0 for i in range(n)]
    made = [250.0 * 300 if served or i < quiet else 0.0 for i in range(n)]
    counters = _token_counters(made, ratio)
    generated, prompt = ([v for _, v in counters[k]] for k in ("tokens_generated", "tokens_prompt"))
    used = noisy([20 * GIB + 42 * GIB * max(0, i - quiet) / 29 for i in range(n)], 0.05 * GIB)
    return history(
        base(trigger=("alert", "EngineDown")),
        {
            "targets_up": [seen("vllm", 8000, [1.0] * (n - 1) + [0.0])],
            "tokens_generated": plain("vllm:generation_tokens_total", generated),
            "tokens_prompt": plain("vllm:prompt_tokens_total", prompt),
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [total - u for u in used]
            ),
            "host_memory_total": plain("node_memory_MemTotal_bytes", [total] * n),
        },
    )


def _longer_prompts_while_the_host_ran_out(card_climbed: bool) -> Builder:
    """llama-server on a 48 GiB card (DCGM read) in a 64 GiB box: 5.5 prompt tokens per
    answer token all day, 9 from two hours before the end; its context high-water at
    8601 all day. From a hundred minutes before, the host's memory climbs from 20 to 63
    GiB (a build), the kernel's kill counter rises and the engine's target falls. The card
    holds 30 GiB level throughout, or (`card_climbed`) climbed to 46 GiB between five and
    four hours before, where it stayed: the cache grew before the incident window."""
    n, total = len(DAY), 64 * GIB
    ratio = [5.5 if i < n - 24 else 9.0 for i in range(n)]
    counters = _token_counters([250.0 * 300] * n, ratio)
    generated, prompt = ([v for _, v in counters[k]] for k in ("tokens_generated", "tokens_prompt"))
    used = noisy([20 * GIB + 43 * GIB * max(0, i - (n - 20)) / 19 for i in range(n)], 0.05 * GIB)
    climb = [min(1.0, max(0.0, (i - (n - 60)) / 12)) if card_climbed else 0.0 for i in range(n)]
    card = [30 * GIB + 16 * GIB * c for c in climb]
    return history(
        base(trigger=("alert", "EngineDown")),
        {
            "targets_up": [seen("llama-server", 8080, [1.0] * (n - 1) + [0.0])],
            "tokens_generated": plain("llamacpp:tokens_predicted_total", generated),
            "tokens_prompt": plain("llamacpp:prompt_tokens_total", prompt),
            "context_high_water": plain("llamacpp:n_tokens_max", [8601.0] * n),
            "accelerator_memory_used": _series("dcgm", noisy(card, 0.02 * GIB)),
            "accelerator_memory_total": _series("dcgm", [48.0 * GIB] * n),
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", [total - u for u in used]
            ),
            "host_memory_total": plain("node_memory_MemTotal_bytes", [total] * n),
            "host_oom_kills": plain("node_vmstat_oom_kill", [0.0] * (n - 2) + [1.0] * 2),
        },
    )


@pytest.mark.parametrize("card_climbed", [False, True], ids=["card-level", "card-climbed"])
def test_longer_prompts_beside_a_level_card_while_the_host_ran_out_are_a_note(
    tmp_path, card_climbed
):
    """Fresh seed 3838 through a real Prometheus (host-exhaustion-s47, a build filling a
    Strix Halo's host while llama-server served): named context-creep with 5 points, the
    prompts 1.6 times their usual length, though the high-water set no new record and
    the card's line, where the cache lives, held level while the host ran out. The
    look-alike (loader seed 2424, context-creep-186704005809370): the card climbed with
    the high-water four hours before and held there: the cache took the memory before
    the incident window, and the creep stands."""
    result = verdict(tmp_path, _longer_prompts_while_the_host_ran_out(card_climbed))
    creep = next(c for c in result["candidates"] if c["fault"] == "context-creep")
    level = any("held level through the last 6 h" in e for e in creep["evidence_against"])
    assert level is not card_climbed, creep
    assert (creep["score"] >= 3) is card_climbed, scores(result)
    if not card_climbed:
        assert result["verdict"] == "host-exhaustion", scores(result)


@pytest.mark.parametrize("served", [True, False])
def test_memory_that_filled_while_nothing_ran_is_not_the_conversations(tmp_path, served):
    """Fresh seed 2626 through a real Prometheus (memory-pressure-stall-226225856124565,
    a notebook filling a GB10 overnight, llama-server idle for three hours): named
    context-creep with 7 points, the prompts per generated token of the evening's last
    busy hour twice the day's and the high-water climbing, while the memory that ran out
    filled after the last request ended. The conversations' cache grows with requests;
    the look-alike is the same climb while they were served."""
    result = verdict(tmp_path, _longer_prompts_then_memory_filled(served))
    creep = next(c for c in result["candidates"] if c["fault"] == "context-creep")
    idle = any("generated not one token" in e for e in creep["evidence_against"])
    assert idle is not served, creep
    assert (creep["score"] >= 3) is served, scores(result)


def _second_model_hours_before(room_left: float) -> Builder:
    """Ollama on a 124 GiB Strix Halo, its GTT (the card's line) and the host's line read:
    the card at 31 GiB all day, then three and a half hours before the check failed with
    HTTP 500 it steps 33 GiB within one reading and stays; the host's line with it, which
    leaves `room_left` of the machine available to the end. Nothing was killed and no log
    was read (no [[logs]] configured)."""
    n, total = len(DAY), 124 * GIB
    card = [31 * GIB if i < n - 42 else 64 * GIB for i in range(n)]
    available = [room_left * total + 64 * GIB - c for c in card]
    return history(
        base(trigger=("healthcheck", "ollama", "HTTP 500")),
        {
            "targets_up": [up("gateway", [1.0] * n)],
            "accelerator_memory_used": _series("gtt", noisy(card, 0.02 * GIB)),
            "accelerator_memory_total": _series("gtt", [96.0 * GIB] * n),
            "host_memory_available": plain(
                "node_memory_MemAvailable_bytes", noisy(available, 0.05 * GIB)
            ),
            "host_memory_total": plain("node_memory_MemTotal_bytes", [total] * n),
        },
    ).absent(*NO_LOGS)


@pytest.mark.parametrize(("room_left", "kept"), [(0.04, True), (0.3, False)])
def test_a_model_loaded_hours_before_that_left_no_room_is_the_model_kept(tmp_path, room_left, kept):
    """Seed 2424 through a real Prometheus (swap-not-unloaded-103399770355405, Ollama on a
    Strix Halo): a second model loaded 205 minutes before the next load failed, kept
    until then, read as a shape (1 point) because only a kill or a logged allocation
    failure said memory ran out; the host's available memory at 5 % of the machine says
    it as well. The look-alike: the same model kept with a third of the machine free."""
    result = verdict(tmp_path, _second_model_hours_before(room_left))
    swap = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert (swap["score"] >= 3) is kept, scores(result)
    assert (result["verdict"] == "swap-not-unloaded") is kept, scores(result)


def _second_model_on_a_card(after: float, held: float = 14.3 * GIB) -> Builder:
    """A 24 GiB card behind a gateway (DCGM read, the engine publishing nothing): `held`
    all day, then three hours and ten minutes before the GatewayDown alert it steps to
    `after` within one reading and stays. Nothing was killed, the host kept room and no
    log was read. A card that held nothing was loaded on demand and let go in the hour
    before the step (Ollama's keep-alive), every other reading full."""
    n = len(DAY)
    card = [held if i < n - 38 else after for i in range(n)]
    if held < GIB:
        card[n - 50 : n - 38] = [after if i % 2 else held for i in range(12)]
    return history(
        base(trigger=("alert", "GatewayDown", "probe_success == 0 for 2m")),
        {
            "targets_up": [up("gateway", [1.0] * n)],
            "accelerator_memory_used": _series("dcgm", noisy(card, 0.02 * GIB)),
            "accelerator_memory_total": _series("dcgm", [24.0 * GIB] * n),
        },
    ).absent(*NO_LOGS)


@pytest.mark.parametrize(
    ("after", "held", "kept"),
    [(23.6 * GIB, 14.3 * GIB, True), (19.0 * GIB, 14.3 * GIB, False), (23.6 * GIB, 0.0, False)],
    ids=["full", "room-left", "filled-from-empty"],
)
def test_a_model_loaded_hours_before_that_filled_the_card_is_the_model_kept(
    tmp_path, after, held, kept
):
    """Real-path seed 3737 (swap-not-unloaded-s11, Ollama on an RTX 3090): a second model
    took the card from 14.3 to 23.6 of 24 GiB 193 minutes before the next load failed and
    the gateway's alert fired: a shape (1 point), insufficient-evidence, because only a
    kill or the host running low said memory ran out. A card left all but full says it.
    The look-alikes: a smaller step that left the card a fifth free, and a card filled
    from empty by one model loaded on demand (fresh seed 4141's real sample,
    context-creep-s8, Ollama on an RTX 3090: read as a model kept, 3)."""
    result = verdict(tmp_path, _second_model_on_a_card(after, held))
    swap = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert (swap["score"] >= 3) is kept, scores(result)
    assert (result["verdict"] == "swap-not-unloaded") is kept, scores(result)
