"""Log tails: bounded, carriage returns split, bytes never dropped, each source on its own."""

import os
import shutil
import time
from pathlib import Path

from conftest import need

from evidence.capture.config import from_dict
from evidence.capture.probes import Context
from evidence.capture.probes.logs import Logs


def probe(tmp_path: Path, logs: list[dict], **capture) -> Logs:
    config = from_dict({"logs": logs, "capture": capture})
    return Logs(Context(config=config, started=time.time()))


def test_progress_bars_written_with_carriage_returns_become_lines(tmp_path):
    log = tmp_path / "comfy.log"
    log.write_bytes(
        b"got prompt\r\n 10%|#         | 1/10 [00:56<08:24, 56.0s/it]"
        b"\r 20%|##        | 2/10 [01:52<07:28, 56.0s/it]\rdone\n"
    )
    (source,) = probe(tmp_path, [{"path": str(log)}]).freeze().record["sources"]
    assert source["lines"] == [
        "got prompt",
        " 10%|#         | 1/10 [00:56<08:24, 56.0s/it]",
        " 20%|##        | 2/10 [01:52<07:28, 56.0s/it]",
        "done",
    ]


def test_bytes_that_are_not_utf8_are_escaped_not_dropped(tmp_path):
    log = tmp_path / "engine.log"
    log.write_bytes(b"weights \xff\xfe loaded\n")
    (source,) = probe(tmp_path, [{"path": str(log)}]).freeze().record["sources"]
    assert source["lines"] == ["weights \\xff\\xfe loaded"]


def test_the_byte_cap_keeps_the_end_and_no_half_line(tmp_path):
    log = tmp_path / "big.log"
    log.write_text("".join(f"line {i:06d}\n" for i in range(10000)))
    (source,) = probe(tmp_path, [{"path": str(log)}], log_bytes=2048).freeze().record["sources"]
    assert source["truncated"] is True and source["size"] == log.stat().st_size
    assert source["lines"][-1] == "line 009999"
    assert all(line.startswith("line ") and len(line) == 11 for line in source["lines"])
    assert source["bytes"] <= 2048


def test_the_line_cap_keeps_the_last_lines(tmp_path):
    log = tmp_path / "l.log"
    log.write_text("".join(f"{i}\n" for i in range(50)))
    (source,) = probe(tmp_path, [{"path": str(log)}], log_lines=5).freeze().record["sources"]
    assert source["lines"] == ["45", "46", "47", "48", "49"] and source["truncated"] is True


def test_each_source_has_its_own_status(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    ok = tmp_path / "ok.log"
    ok.write_text("fine\n")
    reading = probe(
        tmp_path, [{"path": str(tmp_path / "missing.log")}, {"path": str(fifo)}, {"path": str(ok)}]
    ).freeze()
    missing, pipe, good = reading.record["sources"]
    assert reading.status == "ok"
    assert missing["status"] == "absent" and "missing.log" in missing["reason"]
    assert pipe["status"] == "error" and "not a regular file" in pipe["reason"]
    assert good["lines"] == ["fine"]


def test_all_sources_failing_makes_the_probe_say_so(tmp_path):
    reading = probe(tmp_path, [{"path": str(tmp_path / "nope.log")}]).freeze()
    assert reading.status == "absent" and reading.reason == "no log source could be read"


def test_a_container_runtime_that_is_not_installed_is_absent(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker, no podman
    (source,) = probe(tmp_path, [{"container": "llama"}]).freeze().record["sources"]
    assert source["status"] == "absent" and "docker or podman" in source["reason"]


def test_a_docker_error_keeps_its_message(tmp_path, monkeypatch):
    fake = tmp_path / "docker"
    fake.write_text(
        "#!/bin/sh\necho 'Error response from daemon: No such container: llama' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    (source,) = probe(tmp_path, [{"container": "llama"}]).freeze().record["sources"]
    assert source["status"] == "error" and "No such container: llama" in source["reason"]


def test_journald_unit_through_journalctl(tmp_path):
    need(shutil.which("journalctl") is not None, "journalctl (systemd) is not installed")
    (source,) = probe(tmp_path, [{"unit": "evidence-test-none.service"}]).freeze().record["sources"]
    assert source["kind"] == "journald" and source["status"] == "ok"
    assert source["lines"] == [] and source["since"].endswith("Z")


def test_after_copytruncate_the_nul_hole_is_skipped_and_the_last_line_kept(tmp_path):
    # copytruncate empties the file; the engine writes on at its old offset: a hole of
    # NULs, then the one line that matters, with no newline before it.
    log = tmp_path / "engine.log"
    log.write_bytes(b"\0" * 300_000 + b"CUDA out of memory\n")
    (source,) = probe(tmp_path, [{"path": str(log)}], log_bytes=4096).freeze().record["sources"]
    assert source["status"] == "ok" and source["truncated"] is True
    assert source["lines"] == ["CUDA out of memory"]
    assert source["nul_bytes"] == 4096 - len(b"CUDA out of memory\n")


def test_a_cut_just_after_a_line_end_keeps_the_next_line(tmp_path):
    log = tmp_path / "engine.log"
    log.write_bytes(b"x" * 5000 + b"\n" + b"last line\n")
    (source,) = probe(tmp_path, [{"path": str(log)}], log_bytes=1024).freeze().record["sources"]
    assert source["lines"] == ["last line"] and "nul_bytes" not in source
    log.write_bytes(b"y" * 2000 + b"\n" + b"z" * 1023 + b"\n")  # the cut lands on a line start
    (source,) = probe(tmp_path, [{"path": str(log)}], log_bytes=1024).freeze().record["sources"]
    assert source["lines"] == ["z" * 1023]


def test_nul_runs_inside_a_log_end_lines_and_are_counted(tmp_path):
    log = tmp_path / "engine.log"
    log.write_bytes(b"before\n" + b"\0" * 64 + b"after\n")
    (source,) = probe(tmp_path, [{"path": str(log)}]).freeze().record["sources"]
    assert source["lines"] == ["before", "after"] and source["nul_bytes"] == 64


def test_proc_kmsg_is_refused_without_being_opened(tmp_path, monkeypatch):
    # Reading /proc/kmsg consumes the kernel's messages: the collector must not even open
    # it, whether named directly or through a link.
    link = tmp_path / "kernel.log"
    link.symlink_to("/proc/kmsg")
    opened = []
    real_open = os.open
    monkeypatch.setattr(
        os, "open", lambda p, *a, **k: opened.append(str(p)) or real_open(p, *a, **k)
    )
    sources = (
        probe(tmp_path, [{"path": "/proc/kmsg"}, {"path": str(link)}, {"path": "/dev/null"}])
        .freeze()
        .record["sources"]
    )
    assert [s["status"] for s in sources] == ["error", "error", "error"]
    assert all("/proc/kmsg" in s["reason"] and "consume" in s["reason"] for s in sources[:2])
    assert "not a regular file" in sources[2]["reason"]
    assert not {"/proc/kmsg", str(link), "/dev/null"} & set(opened)


def test_a_private_key_in_a_log_goes_whole_not_line_by_line(tmp_path):
    log = tmp_path / "app.log"
    log.write_text(
        "loading key\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAzQx9bodyline1\n"
        "bodyline2SecretBase64==\n-----END RSA PRIVATE KEY-----\nserving on :8080\n"
    )
    (source,) = probe(tmp_path, [{"path": str(log)}]).freeze().record["sources"]
    text = "\n".join(source["lines"])
    assert "bodyline" not in text and "MIIE" not in text
    assert source["lines"][0] == "loading key" and source["lines"][-1] == "serving on :8080"
