"""The classes of evidence the real incidents exposed (issue 13), each beside the look-alike
that must not fire. Built apart from the incidents' own fixtures (tests/real_incidents.py)."""

from test_classify import GIB, TOTAL, WINDOW, base, scores, verdict

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


def test_available_memory_nearly_gone_in_the_capture_is_named(tmp_path):
    """0.1 GiB available, read in the capture and nothing else: not 'looks healthy'."""
    b = base().memory([(t, TOTAL - 0.1 * GIB) for t in WINDOW])
    result = verdict(tmp_path, b)
    assert result["verdict"] == "host-exhaustion", scores(result)
