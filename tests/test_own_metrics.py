"""evidence's own metrics: what check, capture, ingest, classify and the recorder write for
node-exporter's textfile collector, and what `evidence serve` answers on /metrics.

The format is checked by Debian's promtool (`promtool check metrics`: the exposition
format and Prometheus' naming conventions), and the files by the real thing: Debian's
node-exporter started with --collector.textfile.directory, scraped by a real Prometheus,
which is then asked for the values a person would look at.
"""

import http.client
import json
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from conftest import need, run_evidence, wait_answering
from fakes import closed_port

from evidence.archive.exposition import Family, exposition, publish, scrape
from evidence.capture.config import load
from evidence.capture.serve import Server

PARTS = ("check", "capture", "archive", "ingest", "verdict", "recorder")


def _promtool() -> str:
    found = shutil.which("promtool")
    need(found is not None, "Debian's promtool is not installed (apt-get install prometheus)")
    return str(found)


def lint(text: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [_promtool(), "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )


def samples(text: str) -> dict[str, float]:
    """'name{labels}' -> value, for the sample lines of an exposition."""
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            found[series] = float(value)
    return found


def test_the_format_escapes_what_it_must_and_carries_no_timestamp(tmp_path):
    odd = 'a "quoted" \\ back\nslash'
    text = exposition(
        [
            Family("evidence_test_up", "gauge", "Help with a \\ and a\nnewline.").add(1, check=odd),
            Family("evidence_test_total", "counter", "Counted.").add(3.5).add(float("nan"), a="b"),
        ]
    )
    assert '{check="a \\"quoted\\" \\\\ back\\nslash"} 1' in text
    assert "# HELP evidence_test_up Help with a \\\\ and a\\nnewline." in text
    assert "evidence_test_total 3.5\n" in text and 'evidence_test_total{a="b"} NaN' in text
    # Every sample line is "series value": a third field would be a timestamp.
    for line in text.splitlines():
        if not line.startswith("#"):
            after = line.rsplit("}", 1)[1] if "}" in line else line.split(" ", 1)[1]
            assert len(after.split()) == 1, line
    result = lint(text)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_part_is_replaced_whole_and_an_unwritable_textfile_is_said_not_raised(tmp_path):
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    family = Family("evidence_test_up", "gauge", "Up.").add(1)
    (tmp_path / "a").mkdir(mode=0o700)
    assert publish(tmp_path / "a", "check", [family], str(textfile)) == []
    assert (textfile / "evidence_check.prom").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "a" / "metrics" / "check.prom").stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in textfile.iterdir()) == ["evidence_check.prom"]  # no temps
    assert "evidence_test_up 1" in scrape(tmp_path / "a")
    said = publish(tmp_path / "a", "check", [family], str(tmp_path / "gone"))
    assert len(said) == 1 and "cannot write the textfile" in said[0]


def _config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "evidence.toml"
    path.write_text(
        f'window_s = 0\n[prometheus]\nurl = "http://127.0.0.1:{closed_port()}"\n'
        '[capture]\nmin_interval = "10m"\n'
        '[[checks]]\nname = "gateway"\nkind = "tcp"\n'
        f'url = "http://127.0.0.1:{closed_port()}"\ntimeout_s = 1\n' + extra
    )
    return path


def _every_part(tmp_path: Path) -> tuple[Path, Path]:
    """An archive and a textfile directory after a failed check (and its capture), a
    refused repeat, an ingest with classification, and a short recorder run."""
    archive, textfile = tmp_path / "archive", tmp_path / "textfile"
    textfile.mkdir()
    config = _config(tmp_path, f'[metrics]\ntextfile = "{textfile}"\n')
    common = ("--archive", str(archive), "--config", str(config))
    assert run_evidence("check", *common, timeout=120).returncode == 9
    repeat = run_evidence("check", *common, timeout=120)
    assert repeat.returncode == 9 and "skipped, and counted" in repeat.stderr
    ingest = run_evidence("ingest", *common, timeout=300)
    assert ingest.returncode == 0, ingest.stderr
    record = run_evidence("record", *common, "--for", "2", "--ring-size", "2", "-q", timeout=60)
    assert record.returncode == 0, record.stderr
    return archive, textfile


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    return _every_part(tmp_path_factory.mktemp("parts"))


def test_every_command_writes_its_part_and_each_says_what_happened(parts):
    archive, textfile = parts
    assert sorted(p.name for p in textfile.iterdir()) == sorted(f"evidence_{p}.prom" for p in PARTS)
    check = samples((textfile / "evidence_check.prom").read_text())
    assert check['evidence_check_up{check="gateway",kind="tcp"}'] == 0
    capture = samples((textfile / "evidence_capture.prom").read_text())
    assert capture['evidence_captures_total{outcome="complete",trigger="healthcheck"}'] == 1
    assert capture['evidence_triggers_refused_total{trigger="healthcheck"}'] == 1
    assert capture['evidence_capture_last_outcome{outcome="complete"}'] == 1
    assert capture['evidence_capture_probe_status{probe="memory",status="ok"}'] == 1
    sealed = capture['evidence_capture_last_timestamp_seconds{trigger="healthcheck"}']
    assert time.time() - 600 < sealed <= time.time()
    archived = samples((textfile / "evidence_archive.prom").read_text())
    assert sum(v for k, v in archived.items() if k.startswith("evidence_archive_bundles{")) == 1
    assert archived["evidence_archive_size_bytes"] > 10_000
    verdict = (textfile / "evidence_verdict.prom").read_text()
    (info,) = [line for line in verdict.splitlines() if line.startswith("evidence_verdict_info{")]
    assert 'trigger="healthcheck:gateway"' in info and 'fault="' in info
    # A dead gateway is never "no-fault" (issue 12): the panel must not say so either.
    assert 'fault="no-fault"' not in info
    recorder = samples((textfile / "evidence_recorder.prom").read_text())
    assert recorder["evidence_recorder_up"] == 0  # it stopped cleanly after --for
    assert recorder['evidence_recorder_source_up{source="memory"}'] == 1
    # The archive keeps the same parts, which is what serve answers on /metrics.
    for part in PARTS:
        assert (archive / "metrics" / f"{part}.prom").read_text() == (
            textfile / f"evidence_{part}.prom"
        ).read_text()


@pytest.mark.parametrize("part", PARTS)
def test_promtool_check_metrics_passes_on_every_part(parts, part):
    _, textfile = parts
    result = lint((textfile / f"evidence_{part}.prom").read_text())
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_textfile_directory_that_does_not_exist_is_one_line_and_status_2(tmp_path):
    result = run_evidence(
        "capture", "--archive", str(tmp_path / "a"), "--textfile", str(tmp_path / "nope")
    )
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "--textfile" in result.stderr and "not a directory" in result.stderr
    assert not (tmp_path / "a").exists()


# --- the real thing: node-exporter and Prometheus ------------------------------------------


def _node_exporter() -> str:
    found = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    need(
        found is not None,
        "Debian's node-exporter is not installed (apt-get install prometheus-node-exporter)",
    )
    return str(found)


def _query(prometheus: str, expr: str) -> list[dict]:
    url = f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())["data"]["result"]


def test_node_exporter_serves_the_parts_and_prometheus_scrapes_them_and_serve(parts, tmp_path):
    node = _node_exporter()
    need(shutil.which("prometheus") is not None, "Debian's prometheus is not installed")
    archive, textfile = parts
    token = tmp_path / "token"
    token.write_text("metrics-scrape-token-0123456789\n")
    token.chmod(0o600)
    serve = Server(
        load(str(_config(tmp_path))),
        archive,
        ("127.0.0.1", 0),
        "metrics-scrape-token-0123456789",
        600,
    )
    serve.start()
    node_port, prom_port = closed_port(), closed_port()
    procs: list[subprocess.Popen] = []
    try:
        node_log = tmp_path / "node.log"
        procs.append(
            subprocess.Popen(
                [
                    node,
                    "--collector.disable-defaults",
                    "--collector.textfile",
                    f"--collector.textfile.directory={textfile}",
                    f"--web.listen-address=127.0.0.1:{node_port}",
                ],
                stdout=node_log.open("w"),
                stderr=subprocess.STDOUT,
            )
        )
        wait_answering(f"http://127.0.0.1:{node_port}/metrics", procs[0], node_log, "node-exporter")
        with urllib.request.urlopen(f"http://127.0.0.1:{node_port}/metrics") as answer:
            served = answer.read().decode()
        # node-exporter refuses a file it cannot parse, and says so in this metric.
        assert "node_textfile_scrape_error 0" in served
        assert 'evidence_check_up{check="gateway",kind="tcp"} 0' in served

        host, port = serve.address
        (tmp_path / "prometheus.yml").write_text(
            json.dumps(
                {
                    "global": {"scrape_interval": "1s"},
                    "scrape_configs": [
                        {
                            "job_name": "node",
                            "static_configs": [{"targets": [f"127.0.0.1:{node_port}"]}],
                        },
                        {
                            "job_name": "evidence-serve",
                            "authorization": {"credentials_file": str(token)},
                            "static_configs": [{"targets": [f"{host}:{port}"]}],
                        },
                    ],
                }
            )
        )
        prom_log = tmp_path / "prometheus.log"
        procs.append(
            subprocess.Popen(
                [
                    "prometheus",
                    f"--config.file={tmp_path / 'prometheus.yml'}",
                    f"--storage.tsdb.path={tmp_path / 'data'}",
                    f"--web.listen-address=127.0.0.1:{prom_port}",
                ],
                stdout=prom_log.open("w"),
                stderr=subprocess.STDOUT,
            )
        )
        prometheus = f"http://127.0.0.1:{prom_port}"
        wait_answering(f"{prometheus}/-/ready", procs[1], prom_log, "Prometheus")
        deadline = time.monotonic() + 60
        while len(_query(prometheus, "evidence_verdict_info")) < 2:  # by both jobs
            assert time.monotonic() < deadline, prom_log.read_text()[-2000:]
            time.sleep(0.5)
        for job in ("node", "evidence-serve"):
            (up,) = _query(prometheus, f'up{{job="{job}"}}')
            assert up["value"][1] == "1", job
            (check,) = _query(prometheus, f'evidence_check_up{{job="{job}",check="gateway"}}')
            assert check["value"][1] == "0"
            (refused,) = _query(prometheus, f'evidence_triggers_refused_total{{job="{job}"}}')
            assert refused["metric"]["trigger"] == "healthcheck" and refused["value"][1] == "1"
            (verdict,) = _query(prometheus, f'evidence_verdict_info{{job="{job}"}}')
            assert verdict["metric"]["trigger"] == "healthcheck:gateway"
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=20)
        serve.stop()


def test_serve_answers_metrics_only_to_a_get_with_its_token(parts, tmp_path):
    archive, _ = parts
    serve = Server(load(str(_config(tmp_path))), archive, ("127.0.0.1", 0), "tok-0123456789", 600)
    serve.start()
    try:
        host, port = serve.address

        def ask(method: str, token: str | None) -> tuple[int, str, str]:
            conn = http.client.HTTPConnection(host, port, timeout=10)
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            conn.request(method, "/metrics", headers=headers)
            answer = conn.getresponse()
            body = answer.read().decode()
            conn.close()
            return answer.status, answer.getheader("Content-Type", ""), body

        status, kind, body = ask("GET", "tok-0123456789")
        assert status == 200 and kind.startswith("text/plain; version=0.0.4")
        assert body == scrape(archive) and "evidence_captures_total" in body
        assert ask("GET", None)[0] == 401 and ask("GET", "wrong")[0] == 401
        assert ask("POST", "tok-0123456789")[0] == 405
    finally:
        serve.stop()


def test_metrics_that_cannot_be_written_never_fail_the_capture(tmp_path):
    archive, textfile = tmp_path / "archive", tmp_path / "textfile"
    textfile.mkdir()
    config = _config(tmp_path)
    blocked = archive / "metrics"
    archive.mkdir(mode=0o700)
    blocked.write_text("a file where the folder should be")
    result = run_evidence(
        "capture", "--archive", str(archive), "--config", str(config), "--textfile",
        str(textfile), "--window", "0", timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "warning" in result.stderr and "Traceback" not in result.stderr
    # node-exporter still gets what needs no count kept in the archive.
    assert "evidence_archive_bundles" in (textfile / "evidence_archive.prom").read_text()
    assert os.path.isfile(blocked)


def test_serve_counts_the_alerts_it_turns_away_and_its_captures(tmp_path):
    from test_serve import alert, payload, post

    archive = tmp_path / "archive"
    serve = Server(load(str(_config(tmp_path))), archive, ("127.0.0.1", 0), None, 600)
    serve.start()
    try:
        firing = alert("GatewayDown", "0123456789abcdef")
        assert post(serve.url, payload(firing))[0] == 200
        deadline = time.monotonic() + 120
        while not (serve.recorder.idle and (archive / "metrics" / "archive.prom").exists()):
            assert time.monotonic() < deadline, "no capture"
            time.sleep(0.1)
        assert post(serve.url, payload(firing))[0] == 200  # the same alert: cool-down
    finally:
        serve.stop()
    counted = samples(scrape(archive))
    assert counted['evidence_captures_total{outcome="complete",trigger="alert"}'] == 1
    assert counted['evidence_triggers_refused_total{trigger="alert"}'] == 1
