"""A real Prometheus (Debian's package): history backfilled with promtool, served on a
free loopback port, stopped by whoever started it. Used by tests/test_peer.py,
tests/test_prometheus.py and the real-Prometheus sample of `make eval`."""

import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

from lab.fakes import payloads


def missing() -> str | None:
    """Why a real Prometheus cannot run here, or None when it can."""
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        return "Debian's prometheus package (prometheus, promtool) is not installed"
    return None


class Prometheus:
    def __init__(self, work: Path, history: str):
        data = work / "data"
        (work / "history.om").write_text(history)
        subprocess.run(
            [
                "promtool",
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                str(work / "history.om"),
                str(data),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        (work / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 15s\nscrape_configs: []\n"
        )
        port = payloads.closed_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = work / "prometheus.log"
        self.log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={work / 'prometheus.yml'}",
                f"--storage.tsdb.path={data}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=30d",
            ],
            stdout=self.log,
            stderr=self.log,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(
                    "Prometheus did not become ready: " + self.log_path.read_text()[-2000:]
                )
            time.sleep(0.3)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()
