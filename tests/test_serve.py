"""`evidence serve`, the Alertmanager webhook receiver: the payload parser, the HTTP answers,
coalescing, cool-down, Busy, and end to end with Debian's real Prometheus and Alertmanager.

In-process tests start a Server on an ephemeral loopback port with real captures (the
runner `evidence capture` uses); the command-line tests run the installed `evidence`.
"""

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import (
    EVIDENCE,
    bundle_errors,
    bundles,
    manifest,
    need,
    run_evidence,
    start_alertmanager,
    wait_answering,
)
from fakes import closed_port
from test_gpu import fake_nvml, scenario  # noqa: F401  (fake_nvml is a fixture)

from evidence.archive.clock import iso
from evidence.archive.lock import CaptureLock
from evidence.capture.config import load
from evidence.capture.runner import Trigger
from evidence.capture.serve import (
    JOURNAL,
    MAX_BODY_BYTES,
    ROTATED,
    CaptureFailed,
    ChildCapture,
    CoolDown,
    Journal,
    PayloadError,
    Server,
    TokenError,
    derived_fingerprint,
    parse_listen,
    parse_payload,
    read_token,
    trim_journal,
)

TOKEN = "s3cret-webhook-token-0123456789"

# The webhook body exactly as Alertmanager's docs (docs/configuration.md, <webhook_config>)
# lay it out, with values as Alertmanager 0.25 fills them in.
DOC_PAYLOAD: dict[str, Any] = {
    "version": "4",
    "groupKey": '{}:{alertname="HostOutOfMemory"}',
    "truncatedAlerts": 0,
    "status": "firing",
    "receiver": "evidence",
    "groupLabels": {"alertname": "HostOutOfMemory"},
    "commonLabels": {"alertname": "HostOutOfMemory", "instance": "box:9100", "job": "node"},
    "commonAnnotations": {"summary": "box: available memory below 5%"},
    "externalURL": "http://box:9093",
    "alerts": [
        {
            "status": "firing",
            "labels": {"alertname": "HostOutOfMemory", "instance": "box:9100", "job": "node"},
            "annotations": {"summary": "box: available memory below 5%"},
            "startsAt": "2026-11-29T03:12:40.123Z",
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://box:9090/graph?g0.expr=node_memory_MemAvailable_bytes",
            "fingerprint": "5ba8d1b1d3e6b3a0",
        }
    ],
}


def alert(name: str, fingerprint: str | None = None, status: str = "firing", **labels: str):
    item: dict[str, Any] = {
        "status": status,
        "labels": {"alertname": name, **labels},
        "annotations": {"summary": f"{name} fired"},
        "startsAt": "2026-11-29T03:12:40.123Z",
        "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else "2026-11-29T03:20:00Z",
        "generatorURL": "http://box:9090/graph?g0.expr=up",
    }
    if fingerprint is not None:
        item["fingerprint"] = fingerprint
    return item


def payload(*alerts: dict[str, Any]) -> dict[str, Any]:
    firing = any(a["status"] == "firing" for a in alerts)
    return {
        **DOC_PAYLOAD,
        "status": "firing" if firing else "resolved",
        "alerts": list(alerts),
    }


def post(
    url: str,
    body: bytes | dict | None = None,
    token: str | None = None,
    method: str = "POST",
    path: str = "/alertmanager",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict]:
    """One request; (status, JSON answer)."""
    host, port = url.split("//")[1].split("/")[0].rsplit(":", 1)
    data = orjson.dumps(body) if isinstance(body, dict) else body
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        sent = {"Content-Type": "application/json", **(headers or {})}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        conn.request(method, path, body=data, headers=sent)
        answer = conn.getresponse()
        raw = answer.read()
        return answer.status, (orjson.loads(raw) if raw else {})
    finally:
        conn.close()


def journal(root: Path) -> list[dict]:
    path = root / JOURNAL
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


def wait_for(condition, timeout: float = 60, what: str = "condition") -> None:
    """Poll until condition holds. The timeout only bounds a failure: on a loaded 2-core CI
    box a capture process takes seconds to start, and 20 s was once not enough."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def start(tmp_path):
    """Start in-process servers on ephemeral ports; every one is stopped at teardown."""
    started: list[Server] = []

    def _start(
        window_s: float = 0,
        token: str | None = None,
        cooldown_s: float = 600,
        lock_wait_s: float = 10,
        retry_s: float = 5,
        serving: bool = True,
    ) -> Server:
        # A file, not a dict: each capture runs in a process of its own, which reads it.
        # Nothing answers at the Prometheus URL: the prometheus probe says absent at once.
        path = tmp_path / f"evidence-{len(started)}.toml"
        path.write_text(
            f'window_s = {window_s}\n[prometheus]\nurl = "http://127.0.0.1:{closed_port()}"\n'
            f"[capture]\nlock_wait_s = {lock_wait_s}\n"
        )
        config = load(str(path))
        server = Server(
            config, tmp_path / "archive", ("127.0.0.1", 0), token, cooldown_s, retry_s=retry_s
        )
        started.append(server)
        if serving:
            server.start()
        return server

    yield _start
    for server in started:
        server.stop()


def settled(server: Server, count: int) -> bool:
    """`count` bundles sealed and nothing running or waiting."""
    return server.recorder.idle and len(bundles(server.root)) >= count


# --- the payload -------------------------------------------------------------------------


def test_the_payload_of_alertmanagers_docs_parses():
    note = parse_payload(orjson.dumps(DOC_PAYLOAD))
    assert note.receiver == "evidence" and note.status == "firing"
    assert note.group_key == '{}:{alertname="HostOutOfMemory"}' and note.truncated_alerts == 0
    (only,) = note.alerts
    assert only.alertname == "HostOutOfMemory" and only.fingerprint == "5ba8d1b1d3e6b3a0"
    assert only.annotations == {"summary": "box: available memory below 5%"}
    assert only.starts_at == "2026-11-29T03:12:40.123Z" and only.ends_at.startswith("0001")
    # No fingerprint (an older sender, a hand-made curl): one derived from the labels.
    unprinted = parse_payload(orjson.dumps(payload(alert("A", instance="x")))).alerts[0]
    assert unprinted.fingerprint == derived_fingerprint({"alertname": "A", "instance": "x"})


def _without(key: str) -> dict:
    return {k: v for k, v in DOC_PAYLOAD.items() if k != key}


def _with_alert(**changes: Any) -> dict:
    item = {**DOC_PAYLOAD["alerts"][0], **changes}
    return {**DOC_PAYLOAD, "alerts": [item]}


@pytest.mark.parametrize(
    "body, reason",
    [
        (b"{not json", "the body is not JSON"),
        (b"", "the body is not JSON"),
        (b"[1, 2]", "the body is a list, expected a JSON object"),
        (orjson.dumps(_without("alerts")), "no alerts"),
        (orjson.dumps(_without("version")), "no version"),
        (orjson.dumps({**DOC_PAYLOAD, "version": "3"}), 'version "3" is not supported'),
        (orjson.dumps({**DOC_PAYLOAD, "version": 4}), "version 4 is not supported"),
        (orjson.dumps({**DOC_PAYLOAD, "alerts": {}}), "alerts is an object, expected a list"),
        (orjson.dumps({**DOC_PAYLOAD, "alerts": []}), "alerts is empty"),
        (orjson.dumps({**DOC_PAYLOAD, "alerts": ["x"]}), "alerts[0] is a string"),
        (orjson.dumps(_with_alert(labels={"job": "node"})), "alerts[0].labels has no alertname"),
        (orjson.dumps(_with_alert(labels={"alertname": ""})), "alerts[0].labels has no alertname"),
        (orjson.dumps(_with_alert(labels={"alertname": 7})), "alerts[0].labels.alertname is a "),
        (orjson.dumps(_with_alert(status="pending")), 'alerts[0].status is "pending"'),
        (orjson.dumps(_with_alert(annotations=[])), "alerts[0].annotations is a list"),
        (orjson.dumps(_with_alert(fingerprint=12)), "alerts[0].fingerprint is a number"),
        (orjson.dumps({**DOC_PAYLOAD, "truncatedAlerts": -1}), "truncatedAlerts is -1"),
    ],
)
def test_a_malformed_payload_is_one_clear_reason(body, reason):
    with pytest.raises(PayloadError) as caught:
        parse_payload(body)
    message = str(caught.value)
    assert message.startswith(reason) and "\n" not in message


# --- the journal -------------------------------------------------------------------------


def lines_of(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_a_flood_rotates_the_journal_keeping_the_newest_and_saying_so(tmp_path):
    log = Journal(tmp_path, max_bytes=4096)
    for i in range(300):  # about 60 bytes a line: 18 KB in all
        assert log.write({"event": "alert", "n": i, "received_at": iso(time.time())})
    live, rotated = tmp_path / JOURNAL, tmp_path / ROTATED
    assert live.stat().st_size <= 4096 and rotated.stat().st_size <= 4096
    assert live.stat().st_mode & 0o777 == 0o600 == rotated.stat().st_mode & 0o777
    newest = lines_of(live)
    assert newest[-1]["n"] == 299
    assert newest[0]["event"] == "rotated" and ROTATED in newest[0]["reason"]
    older = [r["n"] for r in lines_of(rotated) if "n" in r]
    assert older == list(range(older[0], newest[1]["n"]))  # no gap between the two
    assert older[0] > 0  # what came before was dropped, as the note says


def test_trim_journal_removes_lines_older_than_keep_days_and_says_so(tmp_path):
    now = time.time()
    day = 86400
    (tmp_path / ROTATED).write_bytes(
        b"".join(
            orjson.dumps({"event": "alert", "received_at": iso(now - d * day)}) + b"\n"
            for d in (40, 39)
        )
    )
    (tmp_path / JOURNAL).write_bytes(
        orjson.dumps({"event": "capture", "at": iso(now - 31 * day)})
        + b"\n{torn line\n"
        + orjson.dumps({"event": "alert", "received_at": iso(now - 2 * day)})
        + b"\n"
    )
    before = (tmp_path / ROTATED).stat().st_size + (tmp_path / JOURNAL).stat().st_size
    trimmed = trim_journal(tmp_path, keep_days=30, now=now)
    assert trimmed.lines == 3
    assert not (tmp_path / ROTATED).exists()  # nothing in it was recent
    kept = (tmp_path / JOURNAL).read_bytes().splitlines()
    assert kept[0] == b"{torn line"  # a line without a readable time is not prune's to judge
    assert orjson.loads(kept[1])["received_at"] == iso(now - 2 * day)
    note = orjson.loads(kept[2])
    assert note["event"] == "trimmed" and "3 lines older than 30 days" in note["reason"]
    assert trimmed.freed_bytes == before - sum(len(x) + 1 for x in kept[:2])
    assert (tmp_path / JOURNAL).stat().st_mode & 0o777 == 0o600
    assert trim_journal(tmp_path, keep_days=30, now=now) == (0, 0)  # nothing more to do


def test_cool_down_expires():
    now = [1000.0]
    table = CoolDown(600, clock=lambda: now[0])
    assert table.ago("f") is None
    table.take("f")
    now[0] += 599
    assert table.ago("f") == pytest.approx(599)
    now[0] += 2
    assert table.ago("f") is None  # expired, and pruned
    table.take("f")
    table.forget(["f"])  # a failed capture took nothing
    assert table.ago("f") is None
    off = CoolDown(0, clock=lambda: now[0])
    off.take("f")
    assert off.ago("f") is None


def test_listen_addresses():
    assert parse_listen("127.0.0.1:9095") == ("127.0.0.1", 9095)
    assert parse_listen(":9096") == ("127.0.0.1", 9096) == parse_listen("9096")
    assert parse_listen("[::1]:9095") == ("::1", 9095)
    for bad in ("127.0.0.1:http", "127.0.0.1:70000", "::1:9095", "box:"):
        with pytest.raises(ValueError):
            parse_listen(bad)


def test_the_token_file_must_not_be_readable_by_every_user(tmp_path):
    path = tmp_path / "token"
    path.write_text(f"  {TOKEN}\n")
    path.chmod(0o640)  # shared with Alertmanager's group: fine
    assert read_token(path) == TOKEN
    path.chmod(0o644)
    with pytest.raises(TokenError, match="every user can read or write it"):
        read_token(path)
    path.chmod(0o600)
    path.write_text("\n")
    with pytest.raises(TokenError, match="empty"):
        read_token(path)
    with pytest.raises(TokenError, match="cannot read"):
        read_token(tmp_path / "missing")


# --- HTTP --------------------------------------------------------------------------------


def test_bad_requests_get_their_status_and_the_server_keeps_answering(start, tmp_path):
    server = start(token=TOKEN)
    url = server.url
    good = orjson.dumps(DOC_PAYLOAD)
    assert post(url, good) == (401, {"error": "no bearer token (Authorization: Bearer ...)"})
    assert post(url, good, token="wrong")[0] == 401
    assert post(url, good, headers={"Authorization": f"Basic {TOKEN}"})[0] == 401
    assert post(url, good, token=TOKEN, path="/nowhere")[0] == 404
    status, answer = post(url, None, token=TOKEN, method="GET")
    assert status == 405 and "POST" in answer["error"]
    status, answer = post(url, b"{", token=TOKEN)
    assert status == 400 and answer["error"].startswith("the body is not JSON")
    status, answer = post(url, orjson.dumps(_without("alerts")), token=TOKEN)
    assert status == 400 and answer["error"].startswith("no alerts")

    # Oversized: refused on its Content-Length, before a byte of the body is read (the
    # client here never sends one).
    host, port = server.address
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.putrequest("POST", "/alertmanager")
    conn.putheader("Authorization", f"Bearer {TOKEN}")
    conn.putheader("Content-Length", str(MAX_BODY_BYTES + 1))
    conn.endheaders()
    answer = conn.getresponse()
    assert answer.status == 413 and b"max_alerts" in answer.read()
    conn.close()

    # A client that promises a body and stops sending costs one thread for a while, not
    # the server: the next request is answered meanwhile.
    stalled = socket.create_connection((host, port))
    stalled.sendall(
        b"POST /alertmanager HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
        + f"Authorization: Bearer {TOKEN}\r\n\r\n{{".encode()
    )
    assert journal(server.root) == []  # nothing was accepted so far
    status, answer = post(url, good, token=TOKEN, path="/")
    assert status == 200 and answer == {"received": 1, "actions": {"capture": 1}}
    stalled.close()
    wait_for(lambda: settled(server, 1), what="the capture")
    (line,) = [r for r in journal(server.root) if r["event"] == "alert"]
    assert line["action"] == "capture" and line["fingerprint"] == "5ba8d1b1d3e6b3a0"


def raw(server: Server, request: bytes) -> bytes:
    """Send bytes as they are (no client library to tidy them) and read the whole answer."""
    with socket.create_connection(server.address, timeout=10) as conn:
        conn.sendall(request)
        conn.shutdown(socket.SHUT_WR)
        return b"".join(iter(lambda: conn.recv(65536), b""))


@pytest.mark.parametrize("path, status", [("/alertmanager", b"400 "), ("/nowhere", b"404 ")])
def test_a_content_length_that_is_not_ascii_digits_is_answered_not_a_dropped_connection(
    start, path, status, capfd
):
    # latin-1 \xb2 is "²": str.isdigit() says yes and int() says no. A refused path is
    # answered before the length matters; the webhook's path says what is wrong with it.
    server = start()
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: ".encode()
    answer = raw(server, head + b"\xb2\r\n\r\n")
    assert answer.startswith(b"HTTP/1.0 " + status), answer
    assert status == b"404 " or b"is not a byte count" in answer
    assert "Traceback" not in capfd.readouterr().err
    assert post(server.url, payload(alert("After", "a1", status="resolved")))[0] == 200


def test_what_the_server_logs_passes_redaction(start, capfd):
    server = start()
    # http.server logs a malformed request line's words as they came.
    answer = raw(server, b"GET /alertmanager HTTP/1.1?access_token=hunter2-in-url\r\n\r\n")
    assert b"Error code: 400" in answer
    err = capfd.readouterr().err
    assert "Bad request version" in err and "hunter2-in-url" not in err


def test_two_hundred_clients_connecting_at_once_are_all_answered(start):
    # The server is not accepting yet: every connection waits in the listen backlog, as a
    # burst does while the accept loop is busy. A backlog of 16 leaves the rest unanswered.
    server = start(serving=False)
    waiting = [socket.create_connection(server.address, timeout=2) for _ in range(200)]
    server.start()
    body = orjson.dumps(payload(alert("Burst", "b0", status="resolved")))
    head = f"POST /alertmanager HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
    for conn in waiting:
        conn.sendall(head.encode() + body)
    answered = 0
    for conn in waiting:
        with conn:
            answered += conn.recv(65536).startswith(b"HTTP/1.0 200 ")
    assert answered == 200


def test_alerts_during_a_capture_are_coalesced_into_the_next_bundle(start):
    server = start(window_s=2)
    url = server.url
    assert post(url, payload(alert("First", "f0")))[1]["actions"] == {"capture": 1}
    # While the first capture runs (its bundle is still hidden), three more arrive.
    wait_for(lambda: bundles(server.root, include_hidden=True), what="the first capture")
    assert bundles(server.root) == []
    assert post(url, payload(alert("Second", "f1"), alert("Third", "f2")))[0] == 200
    assert post(url, payload(alert("Fourth", "f3", instance="gpu0")))[0] == 200
    wait_for(lambda: settled(server, 2), what="the second bundle")

    first, second = bundles(server.root)
    assert manifest(first)["trigger"]["alerts"][0]["fingerprint"] == "f0"
    trigger = manifest(second)["trigger"]
    assert trigger["kind"] == "alert" and trigger["name"] == "Second"
    assert trigger["detail"] == "3 alerts: Second, Third, Fourth"
    assert [a["fingerprint"] for a in trigger["alerts"]] == ["f1", "f2", "f3"]
    assert trigger["alerts"][2]["labels"] == {"alertname": "Fourth", "instance": "gpu0"}
    assert trigger["alerts"][2]["annotations"] == {"summary": "Fourth fired"}
    assert bundle_errors(first) == [] and bundle_errors(second) == []

    lines = journal(server.root)
    actions = {r["fingerprint"]: r["action"] for r in lines if r["event"] == "alert"}
    assert actions == {"f0": "capture", "f1": "coalesced", "f2": "coalesced", "f3": "coalesced"}
    captures = [r for r in lines if r["event"] == "capture"]
    assert [(c["result"], c["fingerprints"]) for c in captures] == [
        ("captured", ["f0"]),
        ("captured", ["f1", "f2", "f3"]),
    ]
    assert [c["bundle"] for c in captures] == [str(first), str(second)]
    assert (server.root / JOURNAL).stat().st_mode & 0o777 == 0o600


def test_a_flapping_alert_captures_once_per_cool_down(start):
    server = start(window_s=0)
    for _ in range(20):
        assert post(server.url, payload(alert("Flappy", "ff")))[0] == 200
    wait_for(lambda: settled(server, 1), what="the capture")
    time.sleep(0.2)
    assert len(bundles(server.root)) == 1
    lines = [r for r in journal(server.root) if r["event"] == "alert"]
    assert len(lines) == 20
    assert [r["action"] for r in lines] == ["capture"] + ["cool-down"] * 19
    assert "cool-down 600 s" in lines[-1]["reason"]
    # Another alert is not cooled down by this one.
    assert post(server.url, payload(alert("Other", "oo")))[1]["actions"] == {"capture": 1}
    wait_for(lambda: settled(server, 2), what="the second capture")


def test_one_alertname_starts_one_capture_per_min_interval_whatever_its_fingerprints(start):
    server = start(window_s=0)  # capture.min_interval: 60 s, the default
    # One rule firing on five GPUs, each its own group: five notifications, five
    # fingerprints, one name.
    assert post(server.url, payload(alert("GpuHot", "g0", gpu="0")))[1]["actions"] == {"capture": 1}
    wait_for(lambda: settled(server, 1), what="the capture")
    for i in range(1, 5):
        answer = post(server.url, payload(alert("GpuHot", f"g{i}", gpu=str(i))))[1]
        assert answer["actions"] == {"rate-limited": 1}
    time.sleep(0.3)
    assert server.recorder.idle and len(bundles(server.root)) == 1
    lines = [r for r in journal(server.root) if r["event"] == "alert"]
    assert [r["action"] for r in lines] == ["capture"] + ["rate-limited"] * 4
    assert "capture.min_interval 60 s" in lines[-1]["reason"]
    # Instances of one name that arrive together are one bundle; another name is not limited.
    both = payload(alert("DiskFull", "d0", disk="a"), alert("DiskFull", "d1", disk="b"))
    assert post(server.url, both)[1]["actions"] == {"capture": 2}
    wait_for(lambda: settled(server, 2), what="the second capture")
    newest = max(bundles(server.root), key=lambda b: manifest(b)["started_at"])
    assert [a["fingerprint"] for a in manifest(newest)["trigger"]["alerts"]] == ["d0", "d1"]


def test_a_resolved_alert_is_recorded_not_captured(start):
    server = start(window_s=0)
    status, answer = post(server.url, payload(alert("Gone", "g1", status="resolved")))
    assert status == 200 and answer["actions"] == {"resolved": 1}
    time.sleep(0.3)
    assert server.recorder.idle and bundles(server.root, include_hidden=True) == []
    (line,) = journal(server.root)
    assert line["event"] == "alert" and line["status"] == "resolved"
    assert line["action"] == "resolved" and line["ends_at"] == "2026-11-29T03:20:00Z"


def test_secrets_in_labels_and_annotations_never_reach_disk(start):
    server = start(window_s=0)
    leaky = alert("Leaky", "l1", password="hunter2-label")
    leaky["annotations"] = {"description": "curl -H 'Authorization: Bearer abcdefghijklmnop'"}
    leaky["generatorURL"] = "http://admin:pw-in-url@box:9090/graph"
    assert post(server.url, payload(leaky))[0] == 200
    wait_for(lambda: settled(server, 1), what="the capture")
    (bundle,) = bundles(server.root)
    (alert_record,) = manifest(bundle)["trigger"]["alerts"]
    assert alert_record["labels"]["password"] == "[REDACTED]"
    for path in [server.root / JOURNAL, *bundle.iterdir()]:
        text = path.read_text()
        for secret in ("hunter2-label", "abcdefghijklmnop", "pw-in-url"):
            assert secret not in text, (path.name, secret)


def test_another_capture_holding_the_lock_delays_the_alerts_but_keeps_them(start):
    server = start(window_s=0, lock_wait_s=0, retry_s=0.2)
    server.root.mkdir(parents=True, exist_ok=True)
    held = CaptureLock(server.root)
    held.acquire(0)  # as a cron capture would
    try:
        assert post(server.url, payload(alert("Waiting", "w1")))[0] == 200
        time.sleep(0.7)  # a few refused attempts
        assert post(server.url, payload(alert("AlsoWaiting", "w2")))[0] == 200
        assert bundles(server.root) == []
    finally:
        held.release()
    wait_for(lambda: settled(server, 1), what="the retried capture")
    (bundle,) = bundles(server.root)
    assert [a["fingerprint"] for a in manifest(bundle)["trigger"]["alerts"]] == ["w1", "w2"]
    (capture,) = [r for r in journal(server.root) if r["event"] == "capture"]
    assert capture["result"] == "captured" and capture["attempts"] >= 2


def test_alerts_of_one_name_waiting_for_the_lock_are_one_capture_not_rate_limited(start):
    # capture.min_interval: 60 s, the default. A capture refused for the lock read nothing:
    # another instance of its rule arriving meanwhile joins it.
    server = start(window_s=0, lock_wait_s=0, retry_s=0.2)
    server.root.mkdir(parents=True, exist_ok=True)
    held = CaptureLock(server.root)
    held.acquire(0)
    try:
        assert post(server.url, payload(alert("GpuHot", "g0", gpu="0")))[0] == 200
        time.sleep(0.5)  # a few refused attempts
        answer = post(server.url, payload(alert("GpuHot", "g1", gpu="1")))[1]
        assert answer["actions"] == {"capture": 1}
    finally:
        held.release()
    wait_for(lambda: settled(server, 1), what="the retried capture")
    (bundle,) = bundles(server.root)
    assert [a["fingerprint"] for a in manifest(bundle)["trigger"]["alerts"]] == ["g0", "g1"]
    (capture,) = [r for r in journal(server.root) if r["event"] == "capture"]
    assert capture["fingerprints"] == ["g0", "g1"] and capture["attempts"] >= 2


def test_alerts_still_waiting_at_shutdown_are_recorded_as_not_captured(start, capfd):
    server = start(window_s=0, lock_wait_s=0, retry_s=30)
    server.root.mkdir(parents=True, exist_ok=True)
    held = CaptureLock(server.root)
    held.acquire(0)
    try:
        assert post(server.url, payload(alert("Stuck", "s1")))[0] == 200
        said: list[str] = []
        wait_for(
            lambda: (
                said.append(capfd.readouterr().err) or "holds the archive lock" in "".join(said)
            ),
            what="the refused attempt",
        )
    finally:
        server.stop()  # does not wait out the 30 s retry pause
        held.release()
    capture = journal(server.root)[-1]
    assert capture["event"] == "capture" and capture["result"] == "not-captured"
    assert capture["fingerprints"] == ["s1"] and bundles(server.root) == []


# --- the capture process -----------------------------------------------------------------


def children_of(pid: int) -> list[int]:
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[1]) == pid:
            found.append(int(stat_file.parent.name))
    return found


def test_a_hung_gpu_call_dies_with_its_capture_process_not_in_the_server(
    start,
    fake_nvml,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    # The driver call never returns (60 s): a capture abandons its thread after 1 s. In
    # the server's own process, each capture would leave one such thread behind.
    monkeypatch.setenv("LD_LIBRARY_PATH", str(fake_nvml))
    monkeypatch.setenv("FAKE_NVML_SCENARIO", str(scenario(tmp_path, "hang-memory")))
    server = start(window_s=0)
    threads = threading.active_count()
    for i in range(3):
        assert post(server.url, payload(alert(f"Hung{i}", f"h{i}")))[0] == 200
        wait_for(lambda n=i + 1: settled(server, n), what=f"capture {i}")
    for bundle in bundles(server.root):
        assert manifest(bundle)["probes"]["gpu"]["status"] == "timeout"  # it met the hang
    wait_for(lambda: threading.active_count() <= threads, what="the request threads to end")
    assert children_of(os.getpid()) == []


def test_a_capture_process_past_its_bound_is_stopped_and_one_without_an_outcome_says_why(
    tmp_path,
):
    child = ChildCapture(load(None), tmp_path, 0)
    child.argv = [sys.executable, "-c", "import time; time.sleep(60)"]
    child.bound_s = 0.5
    started = time.monotonic()
    with pytest.raises(CaptureFailed, match="ran past 0.5 s; stopped"):
        child(Trigger("alert", "Slow"))
    assert time.monotonic() - started < 5
    child.argv = [sys.executable, "-c", "import sys; sys.exit('evidence: config: bad key')"]
    with pytest.raises(CaptureFailed, match="exited 1 without an outcome: evidence: config"):
        child(Trigger("alert", "Broken"))


def test_an_archive_error_is_logged_and_the_server_keeps_serving(start, capfd):
    server = start(window_s=0)
    (server.root / "bundles").write_text("not a directory")
    assert post(server.url, payload(alert("Broken", "b1")))[0] == 200
    wait_for(lambda: server.recorder.idle and len(journal(server.root)) == 2, what="failure")
    capture = journal(server.root)[1]
    assert capture["event"] == "capture" and capture["result"] == "failed"
    assert "not a directory" in capture["reason"].lower()
    # The failed capture took nothing: the same alert may try again, and is answered.
    assert post(server.url, payload(alert("Broken", "b1")))[1]["actions"] == {"capture": 1}
    wait_for(lambda: server.recorder.idle and len(journal(server.root)) == 4, what="retry")
    err = capfd.readouterr().err
    assert "capture failed:" in err and "Traceback" not in err


# --- the command -------------------------------------------------------------------------


def _serve(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path, str]:
    """`evidence serve` on a free port, once it answers; (process, stderr file, url)."""
    port = closed_port()
    err = tmp_path / "serve.err"
    proc = subprocess.Popen(
        [EVIDENCE, "serve", "--listen", f"127.0.0.1:{port}", *args],
        stdout=subprocess.DEVNULL,
        stderr=err.open("w"),
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            assert proc.poll() is None, err.read_text()
            assert time.monotonic() < deadline, "evidence serve did not listen"
            time.sleep(0.05)
    return proc, err, f"http://127.0.0.1:{port}/alertmanager"


def _stop(proc: subprocess.Popen) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


def test_sigterm_lets_the_running_capture_finish_and_exits_0(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(f'window_s = 2\n[prometheus]\nurl = "http://127.0.0.1:{closed_port()}"\n')
    archive = tmp_path / "a"
    proc, err, url = _serve(tmp_path, "--archive", str(archive), "--config", str(config))
    try:
        assert post(url, payload(alert("Late", "t1")))[0] == 200
        wait_for(lambda: bundles(archive, include_hidden=True), what="the capture to start")
    finally:
        code = _stop(proc)
    log = err.read_text()
    assert code == 0, log
    (bundle,) = bundles(archive)
    assert manifest(bundle)["complete"] and not bundle.name.endswith("-partial")
    assert "SIGTERM: stopping" in log and log.rstrip().endswith("evidence serve: stopped")
    assert "Traceback" not in log


def test_refusals_of_the_command_are_one_line_and_status_2(tmp_path):
    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(0o644)
    result = run_evidence("serve", "--archive", str(tmp_path / "a"), "--token-file", str(token))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "every user can read or write it" in result.stderr
    bare = run_evidence("serve", "--archive", str(tmp_path / "a"), "--listen", "0.0.0.0:0")
    assert bare.returncode == 2 and "not a loopback address" in bare.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_evidence(
            "serve", "--archive", str(tmp_path / "a"), "--listen", f"127.0.0.1:{port}"
        )
    assert result.returncode == 2 and "address already in use" in result.stderr.lower()
    assert result.stderr.count("\n") == 1
    help_text = run_evidence("serve", "--help").stdout
    assert "Exit status:" in help_text and "stopped cleanly" in help_text


# --- end to end: Debian's Prometheus and Alertmanager ------------------------------------


def test_a_real_prometheus_rule_through_a_real_alertmanager_captures_a_bundle(tmp_path):
    need(shutil.which("prometheus") is not None, "Debian's prometheus is not installed")
    summary = 'evidence: the "always" rule fired'
    prom_port, am_port = closed_port(), closed_port()
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    config = tmp_path / "evidence.toml"
    config.write_text(f'window_s = 1\n[prometheus]\nurl = "http://127.0.0.1:{prom_port}"\n')
    archive = tmp_path / "archive"
    procs: list[subprocess.Popen] = []
    serve, serve_err, url = _serve(
        tmp_path,
        "--archive",
        str(archive),
        "--config",
        str(config),
        "--token-file",
        str(token),
        "--cooldown",
        "10m",
    )
    try:
        hook = {"url": url, "http_config": {"authorization": {"credentials_file": str(token)}}}
        route = {
            "receiver": "evidence",
            "group_by": ["alertname"],
            "group_wait": "1s",
            "group_interval": "1s",
            "repeat_interval": "1h",
        }
        receivers = [{"name": "evidence", "webhook_configs": [hook]}]
        am, am_log = start_alertmanager(tmp_path, {"route": route, "receivers": receivers}, am_port)
        procs.append(am)
        (tmp_path / "rules.yml").write_text(
            json.dumps(
                {
                    "groups": [
                        {
                            "name": "evidence-serve-test",
                            "interval": "1s",
                            "rules": [
                                {
                                    "alert": "EvidenceServeAlways",
                                    "expr": "vector(1) > 0",
                                    "for": "0s",
                                    "labels": {"severity": "critical"},
                                    "annotations": {"summary": summary},
                                }
                            ],
                        }
                    ]
                }
            )
        )
        (tmp_path / "prometheus.yml").write_text(
            json.dumps(
                {
                    "global": {"scrape_interval": "15s", "evaluation_interval": "1s"},
                    "rule_files": [str(tmp_path / "rules.yml")],
                    "alerting": {
                        "alertmanagers": [
                            {"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}
                        ]
                    },
                    "scrape_configs": [],
                }
            )
        )
        prom_log = tmp_path / "prometheus.log"
        procs.append(
            subprocess.Popen(
                [
                    "prometheus",
                    f"--config.file={tmp_path / 'prometheus.yml'}",
                    f"--storage.tsdb.path={tmp_path / 'prom-data'}",
                    f"--web.listen-address=127.0.0.1:{prom_port}",
                    # Prometheus learns of its Alertmanager only after about 5 s, and drops
                    # what fired before; resend each second rather than after a minute.
                    "--rules.alert.resend-delay=1s",
                ],
                stdout=prom_log.open("w"),
                stderr=subprocess.STDOUT,
            )
        )
        wait_answering(f"http://127.0.0.1:{am_port}/-/ready", procs[0], am_log, "Alertmanager")
        wait_answering(f"http://127.0.0.1:{prom_port}/-/ready", procs[1], prom_log, "Prometheus")

        deadline = time.monotonic() + 45
        while not bundles(archive):
            assert serve.poll() is None, serve_err.read_text()
            assert time.monotonic() < deadline, (
                f"no bundle; evidence serve said:\n{serve_err.read_text()[-3000:]}\n"
                f"alertmanager said:\n{am_log.read_text()[-2000:]}"
            )
            time.sleep(0.2)
    finally:
        for proc in reversed(procs):  # only what this test started, by its pid
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        code = _stop(serve)
    log = serve_err.read_text()
    assert code == 0, log

    (bundle,) = bundles(archive)
    trigger = manifest(bundle)["trigger"]
    assert trigger["kind"] == "alert" and trigger["name"] == "EvidenceServeAlways"
    (received,) = trigger["alerts"]
    assert received["status"] == "firing" and len(received["fingerprint"]) == 16
    assert received["labels"] == {"alertname": "EvidenceServeAlways", "severity": "critical"}
    assert received["annotations"] == {"summary": summary}
    assert received["generator_url"].startswith("http://")
    assert bundle_errors(bundle) == []
    assert manifest(bundle)["probes"]["prometheus"]["status"] == "ok"  # it read the test's
    lines = journal(archive)
    assert lines[0]["event"] == "alert" and lines[0]["action"] == "capture"
    assert lines[0]["receiver"] == "evidence"
    assert " 401" not in log and "Traceback" not in log
    assert os.stat(archive / JOURNAL).st_mode & 0o777 == 0o600


def test_serve_module_stays_stdlib():
    """The server must not pull in the analyst (duckdb, jinja2) nor click."""
    code = (
        "import sys, evidence.capture.serve; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('duckdb', 'jinja2', 'click')))"
    )
    out = subprocess.run(
        [sys.executable, "-E", "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"
