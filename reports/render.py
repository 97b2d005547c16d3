"""Text renderings of the analyst's results. Templates hold the wording; the data comes
from the analyst unchanged, and nothing here decides anything."""

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2

TEMPLATES = Path(__file__).parent / "templates"
_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=False,
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)
_ENV.filters["when"] = lambda ts: datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def figure(value: Any, name: str = "") -> str:
    """A figure as an operator reads it: bytes in GiB, unknown as "not measured"."""
    if value is None:
        return "not measured"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        if name.endswith("_bytes"):
            return f"{value / 2**30:.1f} GiB"
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return str(value)


_ENV.filters["figure"] = figure


def verdict_line(result: dict[str, Any]) -> str:
    verdict = result["verdict"]
    top = result["candidates"][0]
    return {
        "ambiguous": "ambiguous: collect more evidence",
        "no-fault": "no fault: the measured sources look healthy",
        "insufficient-evidence": "insufficient evidence: too little was measurable to tell",
    }.get(verdict, f"{verdict} ({top['title']})")


_ENV.filters["verdict_line"] = verdict_line


def render(template: str, **data: Any) -> str:
    return _ENV.get_template(template).render(**data)


def classification(result: dict[str, Any]) -> str:
    return render("classify.txt.j2", r=result, verdict_line=verdict_line(result))
