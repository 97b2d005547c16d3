"""The HTML report and the archive's index, opened in a real browser (Debian's chromium):
they must render with no console error and without a single network request, because
they are read on the box that just failed, or mailed as one file."""

import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import orjson
import pytest
from browser import chromium, open_page
from conftest import bundle_errors, need, run_evidence
from incidents import TONIGHT, archive, bundle

from evidence.analyze.ingest import ingest

REPO = Path(__file__).resolve().parent.parent
# Screenshots are kept where a person (or CI's artifacts) can look at them.
SHOTS = Path(os.environ.get("EVIDENCE_TEST_OUTPUT", REPO / "test-output"))


class Refs(HTMLParser):
    """Every address a page names: src, href, and url() in inline styles."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.scripts += tag == "script"
        self.refs += [v for k, v in attrs if k in ("src", "href", "xlink:href") and v]

    def handle_data(self, data: str) -> None:
        self.refs += re.findall(r"url\(([^)]*)\)|@import", data)


def _archive(root: Path) -> Path:
    for path in archive(root):
        assert bundle_errors(path) == []
    assert not ingest(root).quarantined
    return root


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Path:
    return _archive(tmp_path_factory.mktemp("archive"))


def _refs(page: Path) -> Refs:
    parser = Refs()
    parser.feed(page.read_text())
    return parser


def test_the_report_names_nothing_outside_itself(lab):
    result = run_evidence("report", "latest", "--archive", str(lab), "--json")
    assert result.returncode == 0, result.stderr
    (page,) = map(Path, orjson.loads(result.stdout)["written"])
    assert page.parent == lab / "reports" and oct(page.stat().st_mode)[-3:] == "600"
    refs = _refs(page)
    assert refs.scripts == 0 and refs.refs == []
    html = page.read_text()
    assert "leak-ratchet" in html and "Seen 3 times before since 2026-09-10" in html
    assert html.count("<svg") >= 8  # window and look-back graphs, or their not-measured panels
    # A source the bundle did not hold is said to be unmeasured, not drawn flat at zero.
    assert "not measured: the gpu probe did not run" in html
    assert "trigger 03:12:00Z" in html


def test_the_index_lists_every_incident_and_links_to_its_report(lab):
    result = run_evidence("report", "--index", "--archive", str(lab))
    assert result.returncode == 0, result.stderr
    index = lab / "reports" / "index.html"
    links = _refs(index).refs
    assert len(links) == 8  # the incidents of tests/incidents.py; baselines are not incidents
    for link in links:
        assert not re.match(r"[a-z]+:", link), link  # relative: the folder travels whole
        assert (index.parent / link).exists(), link
    assert index.read_text().count("<h2>") == 2  # one table per host


def test_a_report_without_a_bundle_or_index_is_a_usage_error(lab):
    result = run_evidence("report", "--archive", str(lab))
    assert result.returncode == 2 and "--index" in result.stderr


def test_the_report_renders_in_chromium_without_errors_or_requests(tmp_path):
    need(chromium() is not None, "Debian's chromium is not installed (apt-get install chromium)")
    lab = _archive(tmp_path)
    extra = bundle(lab, "concurrency-overload", TONIGHT + 3600, seed=99, gpu=True)
    result = run_evidence("report", str(extra), "--index", "--archive", str(lab), "--json")
    assert result.returncode == 0, result.stderr
    written = [Path(p) for p in orjson.loads(result.stdout)["written"]]
    SHOTS.mkdir(parents=True, exist_ok=True)
    html = written[0].read_text()
    assert "GPU memory per process" in html and "llama-server (pid 4242)" in html
    for page in (written[0], lab / "reports" / "index.html"):
        shot = SHOTS / f"{page.stem}.png"
        seen = open_page(page, shot)
        assert seen.console_errors == [], seen.console_errors
        assert seen.requests == [], seen.requests
        assert shot.stat().st_size > 20_000  # a page, not a blank
    shutil.copy(written[0], SHOTS / "report.html")
