"""The HTML pages: one incident's report and the archive's index. Self-contained: inline
CSS and inline SVG, no script, no font, no address outside the page (the report is read
on the box that just failed, or mailed as one file)."""

from datetime import UTC, datetime
from typing import Any

import jinja2
from markupsafe import Markup

from evidence.reports.charts import Line, Marker, line_chart, not_measured
from evidence.reports.render import TEMPLATES, figure, verdict_line

_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)
_ENV.filters["figure"] = figure
_ENV.filters["verdict_line"] = verdict_line


def _svg(chart: dict[str, Any], trigger_at: float, recorded_until: float | None) -> Markup:
    # charts.py escapes every text it draws, so its SVG goes in as markup.
    if chart["reason"]:
        return Markup(not_measured(chart["title"], chart["reason"]))
    markers = [
        Marker(trigger_at, datetime.fromtimestamp(trigger_at, UTC).strftime("trigger %H:%M:%SZ"))
    ]
    if recorded_until is not None:
        # Left of it the resident recorder's readings, right of it the capture's own.
        markers.append(Marker(recorded_until, "recorder | capture"))
    lines = [Line(x["label"], x["points"]) for x in chart["lines"]]
    return Markup(line_chart(chart["title"], lines, chart["unit"], markers))


def report_page(data: dict[str, Any]) -> str:
    graphs = {
        "window": [_svg(c, data["trigger_at"], data["recorded_until"]) for c in data["window"]],
        "lookback": [_svg(c, data["trigger_at"], None) for c in data["lookback"]],
    }
    return _ENV.get_template("report.html.j2").render(d=data, graphs=graphs)


def index_page(rows: list[dict[str, Any]], generated: str) -> str:
    return _ENV.get_template("index.html.j2").render(rows=rows, generated=generated)
