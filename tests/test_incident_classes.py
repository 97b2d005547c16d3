"""The classes of evidence the real incidents exposed (issue 13), each beside the look-alike
that must not fire. Built apart from the incidents' own fixtures (tests/real_incidents.py)."""

from datetime import UTC, datetime

import pytest
from real_incidents import Thread, gpu_process
from test_classify import AT, GIB, TOTAL, WINDOW, base, scores, verdict

from lab.builder import engine

REFUSED = "connection refused: nothing listening"


def test_a_worker_left_under_its_launching_shell_is_an_orphan(tmp_path):
    """vLLM's workers outlive a SIGKILLed API server, re-parented to the shell that ran
    it, not to init: nothing listens on the port, yet the GPU stays held."""
    b = base(trigger=("healthcheck", "vllm", "connection refused"))
    b.processes(
        [
            {"pid": 900, "name": "bash", "rss_bytes": 4 << 20},
            {"pid": 901, "ppid": 900, "name": "VLLM::Worker_TP0", "rss_bytes": GIB},
        ]
    )
    b.gpu("NVIDIA RTX A6000", 48 * GIB, 40 * GIB, [(901, "VLLM::Worker_TP0", 40 * GIB)], False)
    b.engines([engine("vllm", "vllm", status="absent", reason=REFUSED)])
    result = verdict(tmp_path, b)
    assert result["verdict"] == "orphaned-gpu-holder", scores(result)
    assert "its parent is bash" in result["candidates"][0]["evidence_for"][0]


def test_a_hung_server_under_its_shell_is_not_an_orphan(tmp_path):
    """The look-alike: llama-server started from a shell, its port accepting and nothing
    answering. It is the engine itself, hung, not a leftover."""
    b = base(trigger=("healthcheck", "llama", "no answer within 10 s"))
    b.processes(
        [
            {"pid": 900, "name": "bash", "rss_bytes": 4 << 20},
            {"pid": 901, "ppid": 900, "name": "llama-server", "rss_bytes": GIB},
        ]
    )
    b.gpu("NVIDIA RTX A6000", 48 * GIB, 40 * GIB, [(901, "llama-server", 40 * GIB)], False)
    b.engines([engine("llama", "llama-server", status="timeout")])
    result = verdict(tmp_path, b)
    orphan = next(c for c in result["candidates"] if c["fault"] == "orphaned-gpu-holder")
    assert orphan["score"] == 0, scores(result)


def test_a_process_list_not_measured_is_not_memory_held_by_nobody(tmp_path):
    """NVML under WSL lists processes without sizes: the card's use is not 'unaccounted'."""
    b = base().gpu("NVIDIA GeForce RTX 4090", 24 * GIB, 22 * GIB, [(5, "python3", None)], False)
    result = verdict(tmp_path, b)
    orphan = next(c for c in result["candidates"] if c["fault"] == "orphaned-gpu-holder")
    assert orphan["score"] == 0, scores(result)


def test_memory_held_by_no_listed_process_still_counts_where_the_list_is_whole(tmp_path):
    b = base().gpu("NVIDIA GeForce RTX 4090", 24 * GIB, 22 * GIB, [(5, "python3", 2 * GIB)], False)
    result = verdict(tmp_path, b)
    orphan = next(c for c in result["candidates"] if c["fault"] == "orphaned-gpu-holder")
    assert "held by no listed process" in orphan["evidence_for"][0], scores(result)


@pytest.mark.parametrize(("used_gib", "points"), [(14.2, 1), (23.5, 2)])
def test_memory_held_by_no_listed_process_weighs_where_the_card_was_short(
    tmp_path, used_gib, points
):
    """llama-server holds 12 GiB of a 24 GiB card and the gateway's check timed out; the
    rest of what the card says is used is listed for no process (the driver reserves some
    unlisted). On a card with room it is a note; on a full one, what kept memory out."""
    b = base(trigger=("healthcheck", "gateway", "no answer within 90 s"))
    b.gpu("NVIDIA RTX PRO 6000", 24 * GIB, int(used_gib * GIB),
          [(8572, "llama-server", 12 * GIB)], False)  # fmt: skip
    result = verdict(tmp_path, b)
    orphan = next(c for c in result["candidates"] if c["fault"] == "orphaned-gpu-holder")
    assert orphan["score"] == points, orphan


def test_systemd_saying_the_unit_was_oom_killed_is_the_machine_running_out(tmp_path):
    lines = [
        "Feb 24 11:16:31 box systemd[1]: ollama.service: A process of this unit has been "
        "killed by the OOM killer.",
        "Feb 24 11:16:32 box systemd[1]: ollama.service: Failed with result 'oom-kill'.",
    ]
    result = verdict(tmp_path, base(trigger=("systemd", "ollama.service")).logs(lines))
    assert result["verdict"] == "host-exhaustion", scores(result)
    assert "systemd says" in result["candidates"][0]["evidence_for"][0]


def test_a_unified_pool_nearly_full_is_exhaustion_though_available_looks_fine(tmp_path):
    b = base(trigger=("healthcheck", "gateway", "no answer within 30 s"))
    b.gpu("NVIDIA GB10", int(121.7 * GIB), int(119.2 * GIB), [], True)
    result = verdict(tmp_path, b)
    assert result["verdict"] == "host-exhaustion", scores(result)
    assert "shared memory pool" in result["candidates"][0]["evidence_for"][0]


def test_a_discrete_card_full_by_design_is_not_exhaustion(tmp_path):
    """vLLM preallocates 90 % of its card: a full discrete card says nothing of the host."""
    b = base().gpu("NVIDIA A100 80GB PCIe", 80 * GIB, 73 * GIB, [(7, "vllm", 73 * GIB)], False)
    result = verdict(tmp_path, b)
    assert result["verdict"] == "no-fault", scores(result)


def _card_alone(tmp_path, holder: str, name: str = "NVIDIA A100-SXM4-80GB", **trigger) -> dict:
    """A user's look at the card and nothing else: 73 GB of 80 GiB held by one process."""
    b = Thread("a100", AT, **trigger)
    held = 73 * 10**9
    b.nvidia([{"name": name, "memory_total_bytes": 80 * GIB, "memory_used_bytes": held,
               "processes": [gpu_process(3001, holder, held)]}])  # fmt: skip
    return verdict(tmp_path, b)


def test_a_card_held_by_an_engines_own_preallocation_is_by_design(tmp_path):
    """The card alone, held at vLLM's share: that is the question the look was for, and
    the engine's design answers it (vLLM #550), whatever else went unmeasured."""
    result = _card_alone(tmp_path, "vllm")
    assert result["verdict"] == "no-fault", scores(result)
    assert any("(gpu_memory_utilization" in line for line in result["findings"])
    assert "not measured: memory, pressure, processes" in result["findings"]


def test_a_card_held_as_high_by_an_engine_that_does_not_preallocate_is_not_by_design(
    tmp_path,
):
    """llama-server takes what its model and context need: the same share says nothing
    by itself, and with the host unmeasured there is nothing to call healthy."""
    result = _card_alone(tmp_path, "llama-server")
    assert result["verdict"] == "insufficient-evidence", scores(result)


def test_a_preallocated_card_beside_a_failure_is_no_answer_by_itself(tmp_path):
    """The share is by design, but a failed check is a failure: never no-fault."""
    result = _card_alone(tmp_path, "vllm", trigger=("healthcheck", "vllm", "no answer"))
    assert result["verdict"] == "insufficient-evidence", scores(result)


def test_available_memory_nearly_gone_in_the_capture_is_named(tmp_path):
    """0.1 GiB available, read in the capture and nothing else: not 'looks healthy'."""
    b = base().memory([(t, TOTAL - 0.1 * GIB) for t in WINDOW])
    result = verdict(tmp_path, b)
    assert result["verdict"] == "host-exhaustion", scores(result)


def _ollama(models: list[dict]) -> dict:
    return engine("ollama", "ollama", readings={"/api/ps": {"models": models}})


def test_an_idle_manager_on_a_full_card_squats_without_a_queue_reading(tmp_path):
    """Ollama publishes no queue: a loaded model, 0 % utilisation, and a card with nothing
    free for the next load."""
    held = 24 * GIB - 200 * 2**20
    b = base().gpu("NVIDIA GeForce RTX 3090", 24 * GIB, held, [(501, "ollama", held)], False, 0)
    b.engines([_ollama([{"name": "qwen3:32b", "model": "qwen3:32b", "size": 20 * GIB}])])
    result = verdict(tmp_path, b)
    assert result["verdict"] == "idle-squatter", scores(result)


def test_an_idle_manager_on_a_card_with_room_is_not_squatting(tmp_path):
    b = base().gpu(
        "NVIDIA GeForce RTX 3090", 24 * GIB, 14 * GIB, [(501, "ollama", 14 * GIB)], False, 0
    )
    b.engines([_ollama([{"name": "qwen3:14b", "model": "qwen3:14b", "size": 12 * GIB}])])
    result = verdict(tmp_path, b)
    assert result["verdict"] == "no-fault", scores(result)


def test_a_model_listed_long_past_its_unload_time_was_not_unloaded(tmp_path):
    expired = datetime.fromtimestamp(AT - 16 * 60, UTC).isoformat()
    model = {"name": "m", "model": "m", "size": 6 * GIB, "expires_at": expired}
    result = verdict(tmp_path, base().engines([_ollama([model])]))
    assert result["verdict"] == "swap-not-unloaded", scores(result)
    assert "16 min after it was to be unloaded" in result["candidates"][0]["evidence_for"][0]


def test_a_model_kept_alive_until_later_is_not_overdue(tmp_path):
    later = "2026-11-10T03:05:00.123456789+00:00"  # Go's nanoseconds, five minutes ahead
    model = {"name": "m", "model": "m", "size": 6 * GIB, "expires_at": later}
    result = verdict(tmp_path, base().engines([_ollama([model])]))
    assert result["verdict"] == "no-fault", scores(result)


def test_an_amd_card_holding_memory_beside_an_empty_loaded_set_disagrees(tmp_path):
    """AMD's sysfs lists no processes: the card's use against the manager's word."""
    b = Thread("rx7900", AT)
    b.amd([{"name": "AMD Radeon RX 7900 XTX", "vram_total_bytes": 24 * GIB,
            "vram_used_bytes": 6 * GIB}])  # fmt: skip
    b.engines([_ollama([])])
    result = verdict(tmp_path, b)
    assert result["candidates"][0]["fault"] == "swap-not-unloaded", scores(result)


def test_an_nvidia_card_whose_list_is_read_speaks_through_its_holders(tmp_path):
    """The look-alike: NVML lists the holders, and none is the manager's: not its model."""
    b = base().gpu("NVIDIA GeForce RTX 4090", 24 * GIB, 6 * GIB, [(77, "blender", 6 * GIB)], False)
    result = verdict(tmp_path, b.engines([_ollama([])]))
    swap = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert swap["score"] == 0, scores(result)


def _forgotten(manager: str, loaded: list[str]) -> list:
    """A card 22 of 24 GiB full after the next model's load failed: the manager (`manager`,
    saying `loaded`) runs the first model's server as its child, which still holds 20 GiB."""
    b = base(trigger=("healthcheck", "gateway", "HTTP 502"))
    b.processes([
        {"pid": 900, "name": manager, "rss_bytes": GIB // 4},
        {"pid": 901, "ppid": 900, "name": "llama-server", "rss_bytes": GIB,
         "cmdline": ["llama-server", "-m", "/models/gemma-3-27b.gguf", "--port", "5801"]},
    ])  # fmt: skip
    b.gpu("NVIDIA GeForce RTX 4090", 24 * GIB, 22 * GIB, [(901, "llama-server", 20 * GIB)], False)
    b.logs(["CUDA error: out of memory"])
    if manager == "llama-swap":
        running = [{"model": m, "state": "ready"} for m in loaded]
        return b.engines([engine("llama-swap", "llama-swap", readings={"/running": {
            "models": running, "loaded": loaded}})])  # fmt: skip
    return b.engines([_ollama([{"name": m, "model": m, "size": 20 * GIB} for m in loaded])])


def test_llama_swap_saying_nothing_runs_beside_its_child_holding_the_card_disagrees(tmp_path):
    result = verdict(tmp_path, _forgotten("llama-swap", []))
    assert result["verdict"] == "swap-not-unloaded", scores(result)
    assert (
        "llama-swap says nothing loaded, the accelerator holds memory for 1 process"
        in (result["candidates"][0]["evidence_for"][0])
    )


def test_ollama_listing_nothing_beside_its_runner_is_a_load_it_does_not_report(tmp_path):
    """Ollama lists no model while it loads one: an empty /api/ps beside its runner holding
    the card says nothing against it."""
    result = verdict(tmp_path, _forgotten("ollama", []))
    swap = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert not any("two sources disagree" in e for e in swap["evidence_for"]), swap


def _vllm(tokens: float, prompt: float) -> dict:
    metrics = {
        "vllm:num_requests_running": 1.0,
        "vllm:num_requests_waiting": 0.0,
        "vllm:generation_tokens_total": tokens,
        "vllm:prompt_tokens_total": prompt,
    }
    return engine("vllm-1", "vllm", metrics=metrics)


def test_two_readings_a_moment_apart_cannot_show_no_progress(tmp_path):
    samples = [(AT, [_vllm(5000, 900)]), (AT + 0.06, [_vllm(5000, 900)])]
    result = verdict(tmp_path, base().engines([_vllm(5000, 900)], samples))
    wedged = next(c for c in result["candidates"] if c["fault"] == "wedged-no-progress")
    assert wedged["score"] == 0 and "span 0.1 s" in wedged["missing"][0], scores(result)


def test_a_long_prompt_being_read_is_progress(tmp_path):
    """No token generated through the window, while a long re-prefill moves the prompt
    counter: working, not wedged."""
    samples = [(t, [_vllm(5000, 900 + 2048 * i)]) for i, t in enumerate(WINDOW[::5])]
    result = verdict(tmp_path, base().engines([_vllm(5000, 900)], samples))
    wedged = next(c for c in result["candidates"] if c["fault"] == "wedged-no-progress")
    assert wedged["score"] == 0 and "prompt tokens were processed" in wedged["evidence_against"][0]


def _stalled_once():
    """PSI memory some at 12 % at one reading of the window, quiet at the others: a stall
    PSI alone does not name."""
    return base().pressure([(t, 12.0 if i == 10 else 1.0) for i, t in enumerate(WINDOW)])


def test_reclaim_beyond_swap_is_pressure_on_a_box_without_swap(tmp_path):
    """No swap, so no anonymous refaults: the page cache thrashing and direct compaction
    stalls are what the pressure looks like."""
    n = len(WINDOW)
    b = _stalled_once().vmstat(
        [(t, 0) for t in WINDOW],
        workingset_refault_anon=[0] * n,
        workingset_refault_file=[i * 400 for i in range(n)],
        compact_stall=[i // 10 for i in range(n)],
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "memory-pressure-stall", scores(result)
    assert any("file pages faulted back in" in e for e in result["candidates"][0]["evidence_for"])


def test_a_short_stall_with_quiet_reclaim_is_not_named(tmp_path):
    n = len(WINDOW)
    b = _stalled_once().vmstat(
        [(t, 0) for t in WINDOW], workingset_refault_file=[5 * i for i in range(n)]
    )
    result = verdict(tmp_path, b)
    assert result["verdict"] == "no-fault", scores(result)


def _offload(required: str) -> str:
    """Ollama's estimate line before a load (the shape of the one in ollama/ollama#9001)."""
    return (
        'time=2026-11-10T02:59:00.318Z level=INFO source=memory.go:356 msg="offload to cuda" '
        "layers.requested=-1 layers.model=81 layers.offload=14 layers.split=7,7 "
        'memory.available="[14.5 GiB 15.2 GiB]" memory.gpu_overhead="0 B" '
        f'memory.required.full="{required}" memory.required.partial="28.7 GiB"'
    )


def test_a_load_that_spills_past_what_the_host_has_is_overcommit(tmp_path):
    """Ollama never says 'loading': its estimate line is the load. 136 GiB needed, 30 on
    the GPUs, and the host with 20 GiB available."""
    b = base(trigger=("systemd", "ollama.service")).logs([_offload("136.3 GiB")])
    b.memory([(t, TOTAL - 20 * GIB) for t in WINDOW])
    result = verdict(tmp_path, b)
    assert result["verdict"] == "admission-overcommit", scores(result)


def test_a_partial_offload_that_fits_the_host_is_ollamas_normal_way(tmp_path):
    result = verdict(tmp_path, base().logs([_offload("48.0 GiB")]))
    assert result["verdict"] == "no-fault", scores(result)


def _scout_load(free: str) -> list[str]:
    """ollama/ollama#10739's journal lines, each whole as journald prints it (the thread
    wraps them): Ollama's reading of host memory, its estimate, the runner killed."""
    head = "May 16 17:44:49 Debian ollama[6012]: time=2025-05-16T17:44:49.{ms}+02:00 level="
    return [
        head.format(ms="091") + 'INFO source=server.go:135 msg="system memory" '
        f'total="62.6 GiB" free="{free}" free_swap="215.1 MiB"',
        head.format(ms="187") + "INFO source=server.go:168 msg=offload library=cuda "
        'layers.requested=-1 layers.model=49 layers.offload=4 layers.split="" '
        'memory.available="[11.4 GiB]" memory.gpu_overhead="0 B" '
        'memory.required.full="68.3 GiB" memory.required.partial="10.9 GiB" '
        'memory.required.kv="2.2 GiB" memory.required.allocations="[10.9 GiB]"',
        "May 16 17:45:16 Debian ollama[6012]: time=2025-05-16T17:45:16.661+02:00 level=ERROR "
        'source=sched.go:478 msg="error loading llama server" error="llama runner process '
        'has terminated: signal: killed"',
    ]


def _only_the_journal(lines: list[str]) -> Thread:
    b = Thread("debian", AT, ("healthcheck", "ollama", "HTTP 500"))
    return b.tails(b.journal("ollama", lines))


def test_ollamas_own_reading_of_host_memory_shows_the_load_did_not_fit(tmp_path):
    """No memory probe: Ollama's own line says 59.1 GiB free (and swap) when 56.9 GiB had
    to come from the host, and the runner was then killed."""
    result = verdict(tmp_path, _only_the_journal(_scout_load("59.1 GiB")))
    assert result["verdict"] == "admission-overcommit", scores(result)
    assert "by Ollama's own reading" in result["candidates"][0]["evidence_for"][0]


def test_the_same_load_on_a_host_with_room_is_no_overcommit(tmp_path):
    """The look-alike: the runner was killed all the same, but the host had room for what
    the GPU could not take: the load is not what ran out."""
    lines = _scout_load("59.1 GiB")
    lines[0] = lines[0].replace(
        'total="62.6 GiB" free="59.1 GiB"', 'total="250 GiB" free="240 GiB"'
    )
    result = verdict(tmp_path, _only_the_journal(lines))
    assert scores(result)["admission-overcommit"] < 3, scores(result)


def test_pytorchs_out_of_memory_states_its_sizes(tmp_path):
    line = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.16 GiB. GPU 0 has a "
        "total capacity of 47.99 GiB of which 489.44 MiB is free. Including non-PyTorch memory, "
        "this process has 20.10 GiB memory in use."
    )
    result = verdict(tmp_path, base().logs([line]))
    oom = result["candidates"][0]
    assert oom["fault"] == "accelerator-oom", scores(result)
    assert "27.4 GiB of the card is held by other processes" in oom["evidence_for"][1]


def test_nv_err_no_memory_alone_confirms_nothing(tmp_path):
    """The driver prints it on starts that succeed as well."""
    nvrm = "NVRM: nvAssertOkFailedNoLog: Assertion failed: NV_ERR_NO_MEMORY returned from x"
    result = verdict(tmp_path, base().kernel([nvrm]))
    assert result["verdict"] == "no-fault", scores(result)


def _slept(freed: float, kept: float) -> str:
    return (
        "INFO 11-10 02:58:02 [gpu_worker.py:104] Sleep mode freed "
        f"{freed:.2f} GiB memory, {kept:.2f} GiB memory is still in use."
    )


def test_a_sleep_that_freed_less_than_stayed_did_not_unload(tmp_path):
    result = verdict(tmp_path, base().logs([_slept(0.0, 70.31)]))
    assert result["verdict"] == "swap-not-unloaded", scores(result)


def test_a_sleep_that_freed_the_model_is_what_sleep_is_for(tmp_path):
    result = verdict(tmp_path, base().logs([_slept(71.25, 1.38)]))
    assert result["verdict"] == "no-fault", scores(result)


def _unloads(held_gib: list[float], models: list[list[dict]]) -> list:
    """One baseline bundle per unload, ten minutes apart: the card's use and Ollama's
    loaded set at each."""
    out = []
    for i, (held, loaded) in enumerate(zip(held_gib, models, strict=True)):
        b = base(trigger=("cron", "baseline"))
        b.at = AT - (len(held_gib) - 1 - i) * 600
        b.gpu("NVIDIA GeForce RTX 4090", 24 * GIB, int(held * GIB), [], False, 0)
        out.append(b.engines([_ollama(loaded)]))
    return out


def test_a_floor_that_rises_at_every_unload_is_a_leak(tmp_path):
    """No bursts: with nothing loaded each time, the card holds more after every unload."""
    held = [0.2, 0.5, 0.8, 1.1, 2.4, 4.6]
    result = verdict(tmp_path, *_unloads(held, [[]] * len(held)))
    assert result["verdict"] == "leak-ratchet", scores(result)
    assert "each unload left more behind" in result["candidates"][0]["evidence_for"][0]


def test_larger_models_loaded_one_after_another_are_no_staircase(tmp_path):
    """The look-alike: the card's use rises because each bundle has a bigger model
    loaded, which is what loading is."""
    held = [4.0, 8.0, 12.0, 16.0, 20.0]
    models = [
        [{"name": f"m{i}", "model": f"m{i}", "size": int(h * GIB)}] for i, h in enumerate(held)
    ]
    result = verdict(tmp_path, *_unloads(held, models))
    leak = next(c for c in result["candidates"] if c["fault"] == "leak-ratchet")
    assert leak["score"] == 0, scores(result)


def test_a_weak_note_on_a_box_where_nothing_failed_stays_a_finding(tmp_path):
    """The look-alike of 'strong evidence below the line': a build holding a quarter of
    memory with the rest free is worth saying, and is not a fault."""
    compilers = [{"pid": 300 + i, "name": "cc1plus", "rss_bytes": 4 * GIB} for i in range(8)]
    result = verdict(tmp_path, base().processes(compilers))
    assert result["verdict"] == "no-fault", scores(result)
    assert any(f.startswith("noted, not a fault (build-swarm, 1)") for f in result["findings"])


# llama-server's idle sleep as a real build logs it (b1-0c1e570 with --sleep-idle-seconds,
# run here): tests/fixtures/engines/llamacpp-server-real-b1-0c1e570.log's neighbours.
LLAMA_SLEEPS = (
    "0.03.525.560 I que    start_loop: entering sleeping state",
    "0.03.525.777 I srv  handle_sleep: server is entering sleeping state",
)
LLAMA_WAKES = (
    "0.05.675.176 I que    start_loop: exiting sleeping state",
    "0.05.675.182 I srv  handle_sleep: server is exiting sleeping state",
)


def _asleep_on_the_card(lines: tuple[str, ...]):
    # Its /health still answers while asleep (seen on the real server): the check that
    # fails is the completion that has to wake it.
    b = base(trigger=("healthcheck", "answer", "no answer within 60 s"))
    b.processes(
        [
            {"pid": 1, "name": "systemd", "rss_bytes": 8 << 20},
            {"pid": 901, "ppid": 1, "name": "llama-server", "rss_bytes": GIB},
        ]
    )
    b.gpu("NVIDIA GeForce RTX 3090", 24 * GIB, 22 * GIB, [(901, "llama-server", 21 * GIB)], False)
    b.engines([engine("llama", "llama-server")])
    return b.logs(list(lines))


def test_a_llama_server_asleep_still_holding_the_card_did_not_unload(tmp_path):
    """ggml-org/llama.cpp#23395: the server says it sleeps, its model unloaded, and the
    card's memory stays with it; the next wake does not fit."""
    result = verdict(tmp_path, _asleep_on_the_card(LLAMA_SLEEPS))
    assert result["verdict"] == "swap-not-unloaded", scores(result)
    said = result["candidates"][0]["evidence_for"]
    assert any("said it is sleeping" in e and "21.0 GiB" in e for e in said), said


def test_a_llama_server_awake_again_holds_its_own_model(tmp_path):
    result = verdict(tmp_path, _asleep_on_the_card(LLAMA_SLEEPS + LLAMA_WAKES))
    unloaded = next(c for c in result["candidates"] if c["fault"] == "swap-not-unloaded")
    assert not any("sleeping" in e for e in unloaded["evidence_for"]), scores(result)


def test_ollamas_rocm_out_of_memory_is_the_card_running_out(tmp_path):
    """ggml built for HIP says 'ROCm error: out of memory' (ollama/ollama#9957, #11713),
    and Ollama passes it on in its failed load."""
    line = (
        'time=2025-05-04T10:12:01.223+02:00 level=ERROR source=sched.go:476 msg="error loading '
        'llama server" error="llama runner process has terminated: ROCm error: out of memory"'
    )
    result = verdict(tmp_path, base(trigger=("healthcheck", "ollama", "HTTP 500")).logs([line]))
    oom = next(c for c in result["candidates"] if c["fault"] == "accelerator-oom")
    assert oom["score"] > 0 and "hip-oom" in oom["evidence_for"][0], scores(result)


# -- a build's own words (bs-vllm-source-build-j64-oom) ----------------------------------------

# `make -j4` on a 4 GB droplet, as pasted in hoytech/strfry#41.
GCC_KILLED = [
    "g++: fatal error: Killed signal terminated program cc1plus",
    "compilation terminated.",
    "make: *** [golpe/rules.mk:28: build/config.o] Error 1",
    "make: *** Waiting for unfinished jobs....",
]


def setup_py_failed(jobs: int) -> list[str]:
    """The line pip prints when vLLM's setup.py build fails (vllm-project/vllm#8878)."""
    return [
        "      subprocess.CalledProcessError: Command '['cmake', '--build', '.', "
        f"'-j={jobs}', '--target=_core_C', '--target=_C']' returned non-zero exit status 1."
    ]


def test_a_compiler_the_build_says_was_killed_is_the_build_swarm(tmp_path):
    result = verdict(tmp_path, base().logs(GCC_KILLED))
    assert result["verdict"] == "build-swarm", scores(result)
    assert "a compiler was killed" in result["candidates"][0]["evidence_for"][0]


def test_the_kernel_taking_a_compiler_is_the_build_swarm(tmp_path):
    kill = (
        "Out of memory: Killed process 24212 (cicc) total-vm:9874660kB, anon-rss:7340032kB, "
        "file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:14360kB oom_score_adj:0"
    )
    result = verdict(tmp_path, base().kernel([kill]))
    assert result["verdict"] == "build-swarm", scores(result)
    assert "the OOM killer took a compiler" in result["candidates"][0]["evidence_for"][0]


def test_a_build_asking_more_than_the_machine_for_its_jobs_is_the_build_swarm(tmp_path):
    result = verdict(tmp_path, base().logs(setup_py_failed(96)))  # 96 jobs on 128 GiB
    assert result["verdict"] == "build-swarm", scores(result)
    assert "96 jobs at once failed" in result["candidates"][0]["evidence_for"][0]


def test_a_build_whose_jobs_fit_the_machine_failed_for_its_own_reasons(tmp_path):
    result = verdict(tmp_path, base().logs(setup_py_failed(8)))
    swarm = next(c for c in result["candidates"] if c["fault"] == "build-swarm")
    assert swarm["score"] == 0, scores(result)
    assert any("fits 128.0 GiB" in e for e in swarm["evidence_against"]), swarm
