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


def classification(result: dict[str, Any]) -> str:
    verdict = result["verdict"]
    top = result["candidates"][0]
    line = {
        "ambiguous": "ambiguous: collect more evidence",
        "no-fault": "no fault: the measured sources look healthy",
        "insufficient-evidence": "insufficient evidence: too little was measurable to tell",
    }.get(verdict, f"{verdict} ({top['title']})")
    return _ENV.get_template("classify.txt.j2").render(r=result, verdict_line=line)
