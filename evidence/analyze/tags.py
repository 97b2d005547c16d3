"""The log and kernel lines that matter, as data: a tag, and the pattern that earns it.

The patterns are the strings the kernel and the engines print (shared/reference/
formats.md section 9; Ollama's own out-of-memory list, section 2.5), not guesses.
A line may earn several tags. Matching is case-insensitive.
"""

import re

from evidence.analyze import statlines

TAGS: tuple[tuple[str, str], ...] = (
    (
        "oom-killer",
        r"invoked oom-killer|Out of memory: Kill|Killed process \d+|oom-kill:"
        r"|Memory cgroup out of memory|oom_reaper",
    ),
    (
        "cuda-oom",
        r"CUDA (?:error: )?out of memory|cudaMalloc failed|cudaErrorMemoryAllocation"
        r"|OutOfMemoryError|would exceed allowed memory",
    ),
    # ggml built for HIP reports as "ROCm error: out of memory" (ollama/ollama#9957, #11713).
    (
        "hip-oom",
        r"hipErrorOutOfMemory|HIP out of memory|hipMalloc failed|ROCm error: out of memory",
    ),
    ("metal-oom", r"Insufficient Memory|failed to create (?:MTL|Metal) buffer"),
    ("vulkan-oom", r"ErrorOutOfDeviceMemory|vk_error_out_of_device_memory"),
    (
        "host-alloc-fail",
        r"std::bad_alloc|Cannot allocate memory|failed to allocate|"
        r"insufficient memory|not enough memory|page allocation failure",
    ),
    ("nv-no-memory", r"NV_ERR_NO_MEMORY"),
    ("xid", r"NVRM: Xid"),
    ("gpu-lost", r"fallen off the bus|GPU is lost"),
    # The KV cache out of room, not vLLM's periodic "GPU KV cache usage: x%" or its
    # start-up "GPU KV cache size" (formats.md 9.4, 9.5; SGLang's retract line).
    (
        "kv-cache",
        r"buffer for kv cache|max seq len|No available memory for the cache blocks"
        r"|KV cache (?:pool )?is full|exceeds the available context size",
    ),
    ("slot-unavailable", r"slot (?:is )?unavailable|no slot available|all slots are busy"),
    ("killed", r"\bKilled\b|exit(?:ed)? (?:with )?(?:code |status )?137"),
    # systemd's words when the kernel killed a process of a unit (the journal of the unit,
    # often all an operator pastes): the kill, without the kernel's line.
    (
        "unit-oom",
        r"has been killed by the OOM killer|Failed with result 'oom-kill'",
    ),
    ("hung-task", r"blocked for more than \d+ seconds|hung_task"),
    # A compiler killed mid-build, in the words gcc, nvcc and the linkers print for a
    # SIGKILL (the OOM killer's signal): what a build's log says where no kernel line is.
    (
        "compiler-killed",
        r"Killed signal terminated program|internal compiler error: Killed"
        r"|died due to signal 9|terminated with signal 9",
    ),
    # A build that failed, as setup.py, make and ninja report it: its command line says how
    # many jobs ran at once.
    (
        "build-failed",
        r"CalledProcessError: Command .* returned non-zero exit status"
        r"|ninja: build stopped: subcommand failed|make(?:\[\d+\])?: \*\*\* .*Error \d+",
    ),
    # Ollama's estimate before a load: what the model needs against what the GPUs have.
    ("load-estimate", r"memory\.required\.full="),
    # An engine saying it released its model: vLLM's sleep mode, with what it freed;
    # llama-server's idle sleep (--sleep-idle-seconds), and its waking.
    (
        "engine-sleep",
        r"Sleep mode freed [\d.]+ GiB memory|seconds to fall asleep"
        r"|server is (?:entering|exiting) sleeping state",
    ),
    # An engine's periodic stats: its queue and cache, read by analyze/statlines.py.
    ("engine-stats", statlines.PATTERN),
    # A request its caller gave up on before the answer: llama-server warns "cancel task,
    # id_task = N" when the client disconnects (SRV_WRN in cancel_tasks, and in
    # server_response_reader::stop of 2026 builds), whether it was running or waiting.
    ("request-cancelled", r"cancel task, id_task = \d+"),
    # A request answered: llama-server's access and slot lines, Ollama's GIN line, the
    # uvicorn access line of vLLM and SGLang. Progress, seen in the log.
    (
        "request-done",
        r"log_server_r: request: POST \S+ \S+ 200|stop processing: n_(?:past|tokens)"
        r"|\[GIN\][^|]*\|\s*200\s*\|.*POST|\"POST /v1/\S+ HTTP/1\.1\" 200",
    ),
)

_COMPILED = tuple((tag, re.compile(pattern, re.IGNORECASE)) for tag, pattern in TAGS)


def tags_of(text: str) -> list[str]:
    return [tag for tag, pattern in _COMPILED if pattern.search(text)]
