"""`evidence serve` under hostile load, printed as figures against the goals.

Three runs of the real server, each in a fresh archive:
- the flood: 20,000 firing alerts (50 names, every fingerprint new) in 200 POSTs from
  8 clients: how many bundles it made, how big alerts.jsonl grew, the server's RSS;
- the trickle: 20 captures, one after the other, against an engine that sends its body a
  byte at a time: the server's threads and the engine's open connections before and
  after, and capture processes left behind;
- the burst: 200 clients POSTing at the same instant: how many were answered, and how
  many were reset.

Figures, never assertions: the bench exits 0 once it could measure.

Run: .venv/bin/python bench/serve_flood.py [--alerts N] [--captures N] [--clients N]
"""

import argparse
import http.client
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
from benchlib import MB, Row, fmt_mb, machine, render, verdict
from capture_bench import BenchError, evidence_exe

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from trickle import Trickle, wait_until  # noqa: E402  (a test helper, shared)

NAMES = 50  # alert names in the flood: one rule each, firing on many instances
PER_POST = 100  # alerts per notification (Alertmanager's max_alerts is often 0 or 100)
GOAL_JOURNAL_BYTES = 16 * 2**20  # alerts.jsonl and its one rotated generation, 8 MiB each
GOAL_RSS_BYTES = 60 * MB


class Serve:
    """`evidence serve` on a free loopback port, in its own archive, until closed."""

    def __init__(self, scratch: Path, config: str):
        self.archive = scratch / "archive"
        path = scratch / "evidence.toml"
        path.write_text(config)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log = (scratch / "serve.log").open("w")
        self.proc = subprocess.Popen(
            [evidence_exe(), "serve", "--listen", f"127.0.0.1:{self.port}"]
            + ["--archive", str(self.archive), "--config", str(path)],
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        if not wait_until(self._listening, 30):
            raise BenchError(f"evidence serve did not listen; see {self.log.name}")

    def _listening(self) -> bool:
        if self.proc.poll() is not None:
            raise BenchError(f"evidence serve exited {self.proc.returncode}; see {self.log.name}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            return True
        except OSError:
            return False

    def post(self, alerts: list[dict]) -> int:
        """One notification; the HTTP status."""
        body = orjson.dumps({"version": "4", "status": "firing", "alerts": alerts})
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("POST", "/alertmanager", body, {"Content-Type": "application/json"})
            answer = conn.getresponse()
            answer.read()
            return answer.status
        finally:
            conn.close()

    def status(self, field: str) -> int:
        """A number from /proc/<serve>/status: VmRSS and VmHWM in bytes, Threads as is."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                value = int(line.split()[1])
                return value * 1024 if line.endswith("kB") else value
        raise BenchError(f"no {field} in /proc/{self.proc.pid}/status")

    def children(self) -> int:
        count = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == self.proc.pid:
                    count += 1
            except (OSError, IndexError, ValueError):
                continue
        return count

    def captures(self) -> int:
        """Capture attempts that ended, from the journal (unrotated: the trickle's is small)."""
        journal = self.archive / "alerts.jsonl"
        text = journal.read_bytes() if journal.exists() else b""
        return text.count(b'"event":"capture"')

    def bundles(self) -> int:
        return sum(1 for p in (self.archive / "bundles").glob("*/*") if not p.name.startswith("."))

    def journal_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.archive.glob("alerts.jsonl*"))

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def alert(name: str, fingerprint: str) -> dict:
    return {
        "status": "firing",
        "labels": {"alertname": name, "instance": fingerprint, "job": "node"},
        "annotations": {"summary": f"{name} fired on {fingerprint}", "runbook": "x" * 200},
        "startsAt": "2026-11-29T03:12:40.123Z",
        "fingerprint": fingerprint,
    }


def quiet(serve: Serve, for_s: float = 3.0) -> bool:
    """No capture running, and none ended for for_s: what was queued has been taken."""
    before = serve.bundles()
    if serve.children():
        return False
    time.sleep(for_s)
    return serve.children() == 0 and serve.bundles() == before >= 1


def settle(serve: Serve, done: Callable[[], bool], what: str, timeout_s: float = 300) -> None:
    if not wait_until(done, timeout_s, every_s=0.2):
        raise BenchError(f"{what} did not finish within {timeout_s:g} s")


def flood(scratch: Path, n_alerts: int) -> list[Row]:
    serve = Serve(scratch, 'window_s = 0\n[prometheus]\nurl = "http://127.0.0.1:9"\n')
    try:
        posts = [
            [alert(f"Flood{i % NAMES}", f"f{i}") for i in range(start, start + PER_POST)]
            for start in range(0, n_alerts, PER_POST)
        ]
        started = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            answered = sum(status == 200 for status in pool.map(serve.post, posts))
        elapsed = time.monotonic() - started
        rss = serve.status("VmRSS")
        settle(serve, lambda: quiet(serve), "the flood's captures")
        bundles, journal = serve.bundles(), serve.journal_bytes()
        peak = max(rss, serve.status("VmHWM"))  # the kernel updates the high-water lazily
    finally:
        serve.close()
    sent = len(posts) * PER_POST
    return [
        Row(
            "flood: alerts sent",
            f"all answered ({len(posts)} POSTs)",
            f"{sent} in {elapsed:.1f} s, {answered} POSTs answered",
            verdict(answered == len(posts)),
        ),
        Row(
            "flood: bundles made",
            f"<= {NAMES} (one per name per min_interval)",
            str(bundles),
            verdict(1 <= bundles <= NAMES),
        ),
        Row(
            "flood: alerts.jsonl (+ .1)",
            f"<= {fmt_mb(GOAL_JOURNAL_BYTES)}",
            fmt_mb(journal),
            verdict(journal <= GOAL_JOURNAL_BYTES),
        ),
        Row(
            "flood: server RSS after / peak",
            f"<= {fmt_mb(GOAL_RSS_BYTES)}",
            f"{fmt_mb(rss)} / {fmt_mb(peak)}",
            verdict(peak <= GOAL_RSS_BYTES),
        ),
    ]


def trickle(scratch: Path, n_captures: int) -> list[Row]:
    with Trickle(every_s=0.05) as engine:
        serve = Serve(
            scratch,
            'window_s = 0\n[prometheus]\nurl = "http://127.0.0.1:9"\n'
            f'[[engines]]\nkind = "llama-server"\nurl = "{engine.url}"\ntimeout_s = 1\n',
        )
        try:
            threads_before = serve.status("Threads")
            started = time.monotonic()
            for i in range(n_captures):
                if serve.post([alert(f"Trickle{i}", f"t{i}")]) != 200:
                    raise BenchError("the server refused an alert")
                settle(serve, lambda n=i + 1: serve.captures() >= n, f"capture {i + 1}")
            elapsed = time.monotonic() - started
            wait_until(lambda: serve.status("Threads") <= threads_before, 10)
            threads_after, children = serve.status("Threads"), serve.children()
            wait_until(lambda: engine.open == 0, 10)
            sockets, rss = engine.open, serve.status("VmRSS")
        finally:
            serve.close()
    return [
        Row(
            f"trickle: server threads, before / after {n_captures} captures",
            "no more after",
            f"{threads_before} / {threads_after} ({elapsed:.0f} s in all)",
            verdict(threads_after <= threads_before),
        ),
        Row("trickle: engine connections still open", "0", str(sockets), verdict(sockets == 0)),
        Row("trickle: capture processes left", "0", str(children), verdict(children == 0)),
        Row(
            "trickle: server RSS after",
            f"<= {fmt_mb(GOAL_RSS_BYTES)}",
            fmt_mb(rss),
            verdict(rss <= GOAL_RSS_BYTES),
        ),
    ]


def burst(scratch: Path, n_clients: int) -> list[Row]:
    serve = Serve(scratch, 'window_s = 0\n[prometheus]\nurl = "http://127.0.0.1:9"\n')
    gate = threading.Barrier(n_clients)
    outcomes: list[str] = []

    def client(i: int) -> None:
        gate.wait()
        try:
            outcomes.append(str(serve.post([alert("Burst", f"b{i}")])))
        except ConnectionError:
            outcomes.append("reset")
        except OSError as exc:
            outcomes.append(type(exc).__name__)

    try:
        clients = [threading.Thread(target=client, args=(i,)) for i in range(n_clients)]
        for c in clients:
            c.start()
        for c in clients:
            c.join()
        settle(serve, lambda: quiet(serve), "the burst's capture")
    finally:
        serve.close()
    answered = outcomes.count("200") + outcomes.count("503")
    reset = outcomes.count("reset")
    other = len(outcomes) - answered - reset
    return [
        Row(
            f"burst: {n_clients} POSTs at once, answered",
            f"{n_clients}",
            str(answered),
            verdict(answered == n_clients),
        ),
        Row(
            "burst: reset / other errors",
            "0 / 0",
            f"{reset} / {other}",
            verdict(reset == other == 0),
        ),
    ]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alerts", type=int, default=20_000, help="alerts in the flood")
    parser.add_argument("--captures", type=int, default=20, help="captures in the trickle")
    parser.add_argument("--clients", type=int, default=200, help="clients in the burst")
    args = parser.parse_args(argv)
    if min(args.alerts, args.captures, args.clients) < 1:
        parser.error("--alerts, --captures and --clients must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print("\n".join(machine("evidence serve under a flood, a trickle and a burst")), flush=True)
    rows: list[Row] = []
    try:
        for run, size in ((flood, args.alerts), (trickle, args.captures), (burst, args.clients)):
            with tempfile.TemporaryDirectory(prefix="evidence-serve-bench-") as scratch:
                rows += run(Path(scratch), size)
    except BenchError as exc:
        print(f"serve_flood: {exc}", file=sys.stderr)
        return 1
    print("\n" + render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
