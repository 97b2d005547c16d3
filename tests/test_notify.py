"""The verdict goes back: a classified incident posts EvidenceVerdict to a real
Alertmanager (Debian's package, v2 API), which routes it, by the labels it shares with
the alert that triggered the capture, to the same receiver.

The triggering alert comes in through `evidence serve` as Alertmanager would send it, so
the bundle's manifest holds exactly what a real alert leaves there.
"""

import json
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import bundles, manifest, run_evidence, start_alertmanager, wait_answering
from fakes import closed_port
from test_serve import alert, payload, post

from evidence.capture.config import load
from evidence.capture.serve import Server

TRIGGER_LABELS = {"severity": "page", "team": "inference", "instance": "box:8080"}


class _Receiver(BaseHTTPRequestHandler):
    """A webhook receiver standing for the operator's pager: it keeps what it is sent."""

    got: list[dict] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.got.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def _incident(tmp_path: Path, config: str) -> str:
    """A bundle captured for a firing GatewayDown alert, as serve captures it."""
    archive = tmp_path / "archive"
    server = Server(load(config), archive, ("127.0.0.1", 0), None, 600)
    server.start()
    try:
        sent = alert("GatewayDown", "f00dfeedf00dfeed", **TRIGGER_LABELS)
        assert post(server.url, payload(sent))[0] == 200
        deadline = time.monotonic() + 120
        while not (server.recorder.idle and bundles(archive)):
            assert time.monotonic() < deadline, "no bundle from serve"
            time.sleep(0.1)
    finally:
        server.stop()
    (bundle,) = bundles(archive)
    return manifest(bundle)["bundle_id"]


def _config(tmp_path: Path, alertmanager: str) -> tuple[str, ...]:
    """An evidence config posting verdicts to `alertmanager`; the common arguments."""
    config = tmp_path / "evidence.toml"
    config.write_text(
        f'window_s = 0\n[prometheus]\nurl = "http://127.0.0.1:{closed_port()}"\n'
        f'[notify]\nalertmanager = "{alertmanager}"\n'
    )
    return ("--archive", str(tmp_path / "archive"), "--config", str(config))


def _alerts(url: str) -> list[dict]:
    with urllib.request.urlopen(f"{url}/api/v2/alerts", timeout=10) as answer:
        return json.loads(answer.read())


@pytest.fixture
def alertmanager(tmp_path):
    """A real Alertmanager: alerts with severity=page go to the pager (the test's
    webhook receiver), the rest nowhere."""
    _Receiver.got = []
    pager = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=pager.serve_forever, daemon=True).start()
    port = closed_port()
    route = {
        "receiver": "nowhere",
        "group_by": ["alertname"],
        "group_wait": "1s",
        "group_interval": "1s",
        "repeat_interval": "1h",
        "routes": [{"receiver": "pager", "matchers": ['severity="page"']}],
    }
    hook = {"url": f"http://127.0.0.1:{pager.server_address[1]}/hook"}
    receivers = [{"name": "nowhere"}, {"name": "pager", "webhook_configs": [hook]}]
    url = f"http://127.0.0.1:{port}"
    try:
        proc, log = start_alertmanager(tmp_path, {"route": route, "receivers": receivers}, port)
        try:
            wait_answering(f"{url}/-/ready", proc, log, "Alertmanager")
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    finally:
        pager.shutdown()


def test_the_verdict_reaches_the_receiver_of_the_alert_that_triggered_the_capture(
    tmp_path, alertmanager
):
    common = _config(tmp_path, alertmanager)
    bundle = _incident(tmp_path, common[-1])
    first = run_evidence("classify", bundle, *common, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "posted " in first.stderr and alertmanager in first.stderr

    (posted,) = [a for a in _alerts(alertmanager) if a["labels"]["alertname"] == "EvidenceVerdict"]
    labels = posted["labels"]
    assert labels["bundle"] == bundle and labels["host"] and labels["fault"]
    assert labels["fault"] != "no-fault"  # the gateway alert fired: something failed
    for key, value in TRIGGER_LABELS.items():  # routed as the trigger was
        assert labels[key] == value
    annotations = posted["annotations"]
    assert annotations["report"] == f"not written yet: evidence report {bundle}"
    assert annotations["summary"] == f"evidence: {labels['fault']} on {labels['host']}"
    assert "trigger alert:GatewayDown" in annotations["description"]

    deadline = time.monotonic() + 30
    while not any(
        a["labels"]["alertname"] == "EvidenceVerdict" for n in _Receiver.got for a in n["alerts"]
    ):
        assert time.monotonic() < deadline, "the pager never got the verdict"
        time.sleep(0.2)
    (note,) = [n for n in _Receiver.got if n["groupLabels"].get("alertname") == "EvidenceVerdict"]
    assert note["receiver"] == "pager" and note["status"] == "firing"

    # The report posts the same alert again, now with the page's path: still one alert.
    report = run_evidence("report", bundle, *common, timeout=300)
    assert report.returncode == 0, report.stderr
    (again,) = [a for a in _alerts(alertmanager) if a["labels"]["alertname"] == "EvidenceVerdict"]
    assert again["fingerprint"] == posted["fingerprint"]
    page = tmp_path / "archive" / "reports" / f"{bundle}.html"
    assert again["annotations"]["report"] == str(page) and page.exists()


def test_no_notify_and_an_unreachable_alertmanager_leave_the_verdict_printed(tmp_path):
    common = _config(tmp_path, f"http://127.0.0.1:{closed_port()}")
    bundle = _incident(tmp_path, common[-1])
    result = run_evidence("classify", bundle, *common, timeout=300)
    assert result.returncode == 0 and f"Bundle {bundle} of" in result.stdout
    (line,) = [line for line in result.stderr.splitlines() if "Alertmanager" in line]
    assert line.startswith("evidence: warning:") and "did not take the verdict" in line
    quiet = run_evidence("classify", bundle, *common, "--no-notify", timeout=300)
    assert quiet.returncode == 0 and "Alertmanager" not in quiet.stderr


def test_a_quiet_baseline_posts_nothing_but_a_baseline_that_found_a_fault_does():
    from datetime import UTC, datetime

    from evidence.analyze.incident import Incident
    from evidence.analyze.notify import worth_posting

    def incident(trigger: str, verdict: str) -> Incident:
        return Incident(
            bundle_id="b", host="h", started_at=datetime.now(UTC), trigger=trigger,
            routine=trigger == "cron", verdict=verdict, result={}, sections={}, offender={},
            fingerprint="f", signature="s",
        )  # fmt: skip

    assert not worth_posting(incident("cron", "no-fault"))
    assert not worth_posting(incident("cron", "insufficient-evidence"))
    assert worth_posting(incident("cron", "leak-ratchet"))
    assert worth_posting(incident("healthcheck:gw", "no-fault"))
