"""Text renderings of the analyst's results. Templates hold the wording; the data comes
from the analyst unchanged, and nothing here decides anything."""

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2

from evidence.reports.text import code, markdown

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
# Values read from the machine, in Markdown: as text, and as a code span.
_ENV.filters["md"] = markdown
_ENV.filters["code"] = code


def verdict_line(result: dict[str, Any]) -> str:
    verdict = result["verdict"]
    top = result["candidates"][0]
    return {
        "ambiguous": "ambiguous: collect more evidence",
        "no-fault": "no fault: the measured sources look healthy",
        "insufficient-evidence": "insufficient evidence: too little was measurable to tell",
    }.get(verdict, f"{verdict} ({top['title']})")


_ENV.filters["verdict_line"] = verdict_line


def quote(text: Any) -> str:
    """A JSON string that YAML reads back unchanged as a double-quoted scalar: escapes for
    the quote, the backslash and every character YAML would not keep as it is."""
    out = ['"']
    for ch in str(text):
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\\ufffd")  # a lone surrogate is not text in either language
        elif code < 0x20 or 0x7F <= code <= 0x9F or ch in "\u2028\u2029\ufeff\ufffe\uffff":
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_ENV.filters["q"] = quote
_ENV.filters["comment"] = lambda text: " ".join(str(text).split())


def render(template: str, **data: Any) -> str:
    return _ENV.get_template(template).render(**data)


def classification(result: dict[str, Any]) -> str:
    return render("classify.txt.j2", r=result, verdict_line=verdict_line(result))


def rules_file(result: dict[str, Any]) -> str:
    """A guard rail (analyze.guardrail) as a Prometheus rule file: one group,
    evidence-<fault>, its settings and notes as comments."""
    return render("guardrail.rules.yml.j2", r=result)
