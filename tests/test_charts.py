"""The report's charts: an unknown reading stays a gap (never a zero), axes read in units a
person knows, markers land where they happened, and no label can break out of the SVG.
Then, in a real headless Chromium, a page of charts draws with no console error and no
fetch, and pages that do err or fetch are caught, so the browser check can fail."""

import json
import math
import re
import xml.etree.ElementTree as ET

import pytest
from browser import _net_log, _requests, chromium, open_page
from conftest import need

from evidence.reports.charts import Line, Marker, line_chart, not_measured

SVG = "{http://www.w3.org/2000/svg}"
GIB, MIB = 1024**3, 1024**2
T0 = 1_714_530_000  # 2024-05-01 02:20:00 UTC
PNG = b"\x89PNG\r\n\x1a\n"


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)  # raises unless the SVG is well-formed XML
    assert root.tag == f"{SVG}svg"
    return root


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{SVG}text")]


def runs(root: ET.Element) -> list[list[tuple[float, float]]]:
    """Each drawn piece of line as its points: a polyline, or a dot for a lone reading."""
    pieces = [
        [tuple(map(float, xy.split(","))) for xy in p.get("points").split()]
        for p in root.iter(f"{SVG}polyline")
    ]
    return pieces + [[(float(c.get("cx")), float(c.get("cy")))] for c in root.iter(f"{SVG}circle")]


def tick_y(root: ET.Element, label: str) -> float:
    """The height at which the y axis shows `label`."""
    return next(float(t.get("y")) for t in root.iter(f"{SVG}text") if t.text == label)


def minutes(values: list[float | None]) -> list[tuple[float, float | None]]:
    return [(T0 + 60 * i, v) for i, v in enumerate(values)]


@pytest.mark.parametrize("unknown", [None, math.nan], ids=["None", "NaN"])
def test_an_unknown_reading_breaks_the_line_and_is_never_drawn_as_zero(unknown):
    values = [40 * GIB, 41 * GIB, 42 * GIB, 43 * GIB, unknown, unknown, 46 * GIB, 47 * GIB]
    root = parse(line_chart("Available memory", [Line("available", minutes(values))], "bytes"))

    pieces = runs(root)
    assert [len(p) for p in pieces] == [4, 2], "one line either side of the gap, none across it"
    zero = tick_y(root, "0 GiB")
    assert all(y != zero for piece in pieces for _, y in piece), "a gap was drawn at zero"
    assert pieces[0][-1][0] < pieces[1][0][0]


def test_a_lone_reading_between_gaps_is_a_visible_dot():
    values = [1.0, 2.0, None, 5.0, None, 3.0, 4.0]
    root = parse(line_chart("Queue", [Line("waiting", minutes(values))], "count"))

    assert sorted(len(p) for p in runs(root)) == [1, 2, 2]
    assert len(list(root.iter(f"{SVG}circle"))) == 1


def test_a_series_never_measured_is_named_in_the_legend_not_drawn():
    lines = [Line("available", minutes([5 * GIB, 6 * GIB])), Line("vllm", minutes([None, None]))]
    root = parse(line_chart("Memory", lines, "bytes"))

    assert "vllm (not measured)" in texts(root)
    assert len(runs(root)) == 1


@pytest.mark.parametrize(
    ("unit", "values", "labels"),
    [
        ("bytes", [0, 100 * GIB], ["0 GiB", "100 GiB"]),
        ("bytes", [0, 1000 * MIB], ["0 MiB", "1,000 MiB"]),  # under 2 GiB: MiB
        ("ratio", [0.2, 0.6], ["20%", "60%"]),
        ("percent", [20, 60], ["20%", "60%"]),
        ("seconds", [0, 30], ["0 s", "30 s"]),
    ],
)
def test_each_reading_is_drawn_at_the_axis_label_of_its_value(unit, values, labels):
    root = parse(line_chart("Chart", [Line("m", minutes(values))], unit))
    (piece,) = runs(root)
    for (_, y), label in zip(piece, labels, strict=True):
        assert y == pytest.approx(tick_y(root, label), abs=0.1), label
    assert not any(re.search(r"\d{7}|e\+", t) for t in texts(root)), "raw bytes on an axis"


@pytest.mark.parametrize(
    ("low", "high"), [(0, 37), (0, 100), (-3, 12), (0.2, 0.9), (5, 5), (0, 7e9)]
)
def test_the_y_axis_has_four_to_six_round_ticks(low, high):
    root = parse(line_chart("Queue", [Line("q", minutes([low, high]))], "count"))
    ticks = [t for t in texts(root) if re.fullmatch(r"-?[\d,]+(\.\d+)?", t)]
    assert 4 <= len(ticks) <= 6, ticks
    values = [float(t.replace(",", "")) for t in ticks]
    assert min(values) <= min(low, 0) and max(values) >= high


@pytest.mark.parametrize(
    ("span", "pattern"),
    [(120, r"\d\d:\d\d:\d\d"), (6 * 3600, r"\d\d:\d\d"), (5 * 86400, r"\d\d-\d\d")],
    ids=["minutes", "hours", "days"],
)
def test_time_labels_suit_the_span(span, pattern):
    root = parse(line_chart("Queue", [Line("q", [(T0, 1), (T0 + span, 2)])], "count"))
    labels = [t for t in texts(root) if re.fullmatch(pattern, t)]
    assert len(labels) >= 3, texts(root)


def test_a_marker_is_drawn_where_it_happened_and_not_outside_the_range():
    line = Line("available", minutes([50 * GIB] * 61))  # one hour
    markers = [Marker(T0 + 1800, "trigger 02:50:00Z"), Marker(T0 + 7200, "outside")]
    svg = line_chart("Memory", [line], "bytes", markers)
    root = parse(svg)

    grid = [g for g in root.iter(f"{SVG}line") if g.get("y1") == g.get("y2")]
    left, right = min(float(g.get("x1")) for g in grid), max(float(g.get("x2")) for g in grid)
    assert [runs(root)[0][0][0], runs(root)[0][-1][0]] == [left, right], "the hour fills the plot"
    dashed = [ln for ln in root.iter(f"{SVG}line") if ln.get("stroke-dasharray")]
    assert len(dashed) == 1 and dashed[0].get("x1") == dashed[0].get("x2")
    assert float(dashed[0].get("x1")) == pytest.approx((left + right) / 2, abs=0.1)
    assert "trigger 02:50:00Z" in texts(root)
    assert "outside" not in svg


def test_every_text_is_escaped_and_nothing_is_fetched_or_run():
    title = "<script>alert(1)</script> & co"
    label = "llama-server <pid 4242> \"q\" & 'x'"
    svg = line_chart(title, [Line(label, minutes([1, 2]))], "count", [Marker(T0 + 30, "<b>&")])
    root = parse(svg)

    assert root.get("aria-label") == title
    assert root.find(f"{SVG}title").text == title
    assert {title, label, "<b>&"} <= set(texts(root))
    assert not list(root.iter(f"{SVG}script"))
    assert "href" not in svg and "url(" not in svg
    assert svg == line_chart(
        title, [Line(label, minutes([1, 2]))], "count", [Marker(T0 + 30, "<b>&")]
    )

    panel = parse(not_measured("GPU <per> process", "unsupported: NVML & co not found"))
    assert "not measured: unsupported: NVML & co not found" in texts(panel)


def test_a_chart_with_no_readings_is_the_not_measured_panel():
    lines = [Line("a", minutes([None, math.nan])), Line("b", [])]
    assert line_chart("GPU memory", lines, "bytes") == not_measured("GPU memory", "no readings")


def test_an_unknown_unit_is_refused():
    with pytest.raises(ValueError, match="furlongs"):
        line_chart("Memory", [Line("m", minutes([1, 2]))], "furlongs")


def test_a_net_log_cut_short_by_a_killed_browser_is_still_read(tmp_path):
    """Chromium writes one net log event a line; killed, it leaves the array open."""
    event = {"type": 1, "phase": 1, "source": {"id": 7, "type": 1}}
    lines = [
        json.dumps({"constants": {"logEventTypes": {"URL_REQUEST_START_JOB": 1}}})[:-1] + ",",
        '"events": [',
        json.dumps({**event, "params": {"url": "http://192.0.2.1/a", "initiator": "null"}}) + ",",
        json.dumps({**event, "params": {"url": "http://192.0.2.1/b", "initiator": "null"}}) + ",",
        json.dumps({**event, "params": {"url": "http://192.0.2.1/c"}})[:25],
    ]
    cut = tmp_path / "net.json"
    cut.write_text("\n".join(lines))
    assert _requests(_net_log(cut)) == ["http://192.0.2.1/a", "http://192.0.2.1/b"]


def page(tmp_path, body: str):
    html = tmp_path / "page.html"
    html.write_text(
        f'<!doctype html><html><head><meta charset="utf-8"></head><body>{body}</body></html>'
    )
    return open_page(html, tmp_path / "page.png", timeout=60)


@pytest.fixture
def installed_chromium():
    need(chromium() is not None, "Debian's chromium is not installed (apt-get install chromium)")


@pytest.mark.usefixtures("installed_chromium")
def test_a_page_of_charts_renders_with_no_console_error_and_no_request(tmp_path):
    memory = line_chart(
        "Available memory",
        [
            Line("available", minutes([60 * GIB - i * GIB if i % 9 else None for i in range(50)])),
            Line("llama-server (pid 4242)", minutes([20 * GIB + i * GIB / 2 for i in range(50)])),
        ],
        "bytes",
        [Marker(T0 + 40 * 60, "trigger 03:00:00Z")],
    )
    pressure = line_chart(
        "Memory pressure", [Line("some", minutes([i / 60 for i in range(50)]))], "ratio"
    )
    shown = page(
        tmp_path, memory + pressure + not_measured("GPU per process", "unsupported: NVML not found")
    )

    assert shown.console_errors == []
    assert shown.requests == []
    png = shown.screenshot.read_bytes()
    assert png.startswith(PNG) and len(png) > 5000
    assert int.from_bytes(png[16:20]) == 1280 and int.from_bytes(png[20:24]) == 2400


@pytest.mark.usefixtures("installed_chromium")
def test_the_browser_check_sees_a_page_that_fetches(tmp_path):
    (tmp_path / "logo.png").write_bytes(PNG)
    shown = page(tmp_path, '<img src="http://192.0.2.1/x.png"><img src="logo.png">')

    assert shown.requests == ["http://192.0.2.1/x.png", (tmp_path / "logo.png").as_uri()]
    assert shown.console_errors == []


@pytest.mark.usefixtures("installed_chromium")
def test_the_browser_check_sees_a_page_that_errs(tmp_path):
    shown = page(tmp_path, "<p>hello</p><script>undefinedFunction()</script>")

    assert any("undefinedFunction is not defined" in e for e in shown.console_errors)
    assert shown.requests == []
