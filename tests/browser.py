"""Open a local HTML file in headless Chromium (Debian's package) and report what the page
did: its console messages, every fetch it tried, and a screenshot.

Stdlib only: the browser is driven by command-line flags and read back from two files it
writes. What Chromium 156 writes there, found by trying it (tests/test_charts.py proves
that each reading can fail):
- stderr (--enable-logging=stderr): a console message is the record
  `[pid:tid:MMDD/HHMMSS.micros:INFO:CONSOLE:<line>] "<message>", source: <url> (<line>)`,
  running over several lines when the message holds newlines. A web page's messages are
  all logged at INFO (content/browser/log_console_message.cc keeps the level for the
  browser's own pages only), so console.error cannot be told from console.log here:
  every message counts as an error. A report page runs no script, so any is a fault.
  With --vmodule=file_url_loader_factory=1 every file: load is the record
  `...:VERBOSE1:content/browser/loader/file_url_loader_factory.cc:477] FileURLLoader::Start: <url>`
  (file: loads never reach the net log).
- the net log (--log-net-log): JSON {"constants", "events", "polledData"}, one event a
  line, event, source and phase types as numbers named in constants. A fetch is a
  URL_REQUEST_START_JOB event with params.url and params.initiator (the origin of the
  document that asked; "null" for a file: page); a <link rel=preconnect> is only a
  HTTP_STREAM_JOB_CONTROLLER event with params.is_preconnect. data: and about: URLs are
  served inside the renderer and appear in neither file.
"""

import contextlib
import json
import os
import re
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from shutil import which
from urllib.parse import unquote

FLAGS = [
    "--headless",
    # Chromium refuses to start as root with its sandbox, and CI runs as root; the pages
    # opened are the report's own.
    "--no-sandbox",
    # Software rendering everywhere: no probing for a GPU that CI does not have.
    "--disable-gpu",
    # Fewer of the browser's own requests (filtered out anyway, see _requests) and less
    # start-up work. The last stops the network-time fetch, which the others leave on.
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-features=NetworkTimeServiceQuerying",
    # Nothing leaves the machine and every fetch fails at once (a closed loopback port),
    # so a page that reaches out is recorded, not waited for; the net log still shows it.
    "--proxy-server=127.0.0.1:9",
    "--enable-logging=stderr",
    "--vmodule=file_url_loader_factory=1",
    "--window-size=1280,2400",
    # Up to 3 s of the page's own time (timers, layout, fonts) before the screenshot;
    # virtual time runs fast, so an idle page takes far less than 3 real seconds.
    "--virtual-time-budget=3000",
]
CONSOLE = re.compile(
    r'^\[[^\]\n]*:CONSOLE:\d+\] "(?P<message>.*)", source: (?P<source>\S*) \((?P<line>\d+)\)$',
    re.S | re.M,
)
RECORD = re.compile(r"^\[\d+:\d+:\d{4}/\d{6}\.\d+:", re.M)  # where each log record starts
FILE_LOAD = re.compile(r"FileURLLoader::Start: (\S+)")
BROWSER_ITSELF = "not an origin"  # the initiator the net log gives a request no page made


@dataclass
class Page:
    console_errors: list[str]  # every console message, uncaught exceptions included
    requests: list[str]  # every URL fetched other than the page itself, data: and about:
    screenshot: Path


def chromium() -> str | None:
    """The chromium command, or None where it is not installed."""
    return which("chromium")


def open_page(html: Path, screenshot: Path, timeout: float = 60) -> Page:
    """Load `html` in a fresh headless Chromium, save a screenshot, and report the page's
    console messages and fetches. Raises when the browser fails or runs past `timeout`."""
    browser = chromium()
    if browser is None:
        raise FileNotFoundError("chromium is not installed")
    page_url = html.resolve().as_uri()
    screenshot.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="browser-") as tmp:
        work = Path(tmp)
        # HOME and XDG too: chromium writes crash-report and dconf state under them.
        env = {**os.environ, "HOME": tmp, "XDG_CONFIG_HOME": tmp, "XDG_CACHE_HOME": tmp}
        args = [
            browser,
            *FLAGS,
            f"--user-data-dir={work / 'profile'}",  # fresh: no state shared between runs
            f"--log-net-log={work / 'net.json'}",
            f"--screenshot={screenshot}",
            page_url,
        ]
        with (work / "stderr").open("w") as err:
            proc = subprocess.Popen(args, stdout=err, stderr=err, env=env, start_new_session=True)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # the browser and its helper processes
                proc.wait()
                raise TimeoutError(
                    f"chromium ran past {timeout} s on {html}:\n{_tail(work / 'stderr')}"
                ) from None
        if not screenshot.is_file():
            raise RuntimeError(
                f"chromium exited {proc.returncode} without a screenshot of {html}:\n"
                f"{_tail(work / 'stderr')}"
            )
        log = (work / "stderr").read_text(errors="replace")
        files = [u for u in FILE_LOAD.findall(log) if unquote(u) != unquote(page_url)]
        return Page(
            console_errors=[
                f"{m['message']} ({m['source']}:{m['line']})"
                for m in map(CONSOLE.match, _records(log))
                if m
            ],
            requests=list(dict.fromkeys(_requests(_net_log(work / "net.json")) + files)),
            screenshot=screenshot,
        )


def _records(log: str) -> list[str]:
    starts = [m.start() for m in RECORD.finditer(log)] + [len(log)]
    return [log[a:b] for a, b in zip(starts, starts[1:], strict=False)]


def _net_log(path: Path) -> dict:
    """The net log, read leniently. A browser that dies before closing the file leaves the
    events array open (the NetLog viewer's repair is to close it) or, killed at exit, the
    polled data unfinished: drop the half-written last line and close what is open."""
    text = path.read_text(errors="replace")
    head = text[: text.rfind("\n")].rstrip().rstrip(",")
    for candidate in (text, head + "]}", head + "}"):
        with contextlib.suppress(json.JSONDecodeError):
            log = json.loads(candidate)
            if "events" in log:
                return log
    raise RuntimeError(f"chromium's net log {path} is unreadable, even closed")


def _requests(log: dict) -> list[str]:
    """URLs the page fetched or preconnected to, in order.

    The browser's own traffic (update checks, account lookups) is told apart by its
    initiator alone: Chromium gives every request a document makes (subresource, frame,
    navigation) that document's origin as initiator, and a request made by the browser
    itself none, which the net log writes as "not an origin". Checked on a blank page
    and on one with images, a stylesheet, a font, a frame, a manifest and an icon."""
    names = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    urls = []
    for event in log["events"]:
        kind, params = names.get(event["type"]), event.get("params", {})
        fetch = kind == "URL_REQUEST_START_JOB" and params.get("initiator") != BROWSER_ITSELF
        preconnect = kind == "HTTP_STREAM_JOB_CONTROLLER" and params.get("is_preconnect")
        if (fetch or preconnect) and "url" in params:  # an event's end names no URL
            urls.append(params["url"])
    return urls


def _tail(path: Path, lines: int = 20) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
