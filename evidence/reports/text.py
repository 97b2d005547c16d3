"""Text from the machine under investigation, made safe to show.

Process names, hostnames, command lines, kernel and log lines are whatever the box (or
whoever ran a process on it) chose. On a terminal an escape sequence in one can retitle
the window, hide lines or rewrite what the operator reads; in Markdown a `<script>`, a
`|` or a `[link](...)` in one changes the page. Each function here makes one kind of
output safe and leaves the words readable.
"""

import re

# ESC and what follows it: a CSI sequence (ESC [ ... final byte), an OSC, DCS, SOS, PM or
# APC string (up to BEL or ESC \), or a two-byte escape; then any C0 control but tab and
# newline, DEL, and the C1 controls (which some terminals obey as ESC + letter).
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[ -~]?"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)
# Markdown's inline metacharacters, and HTML's: escaped wherever they appear in a value;
# and what starts a block (a list, a rule) where a value opens a list item's text.
_MARKDOWN = re.compile(r"[\\`*_\[\]~|#]")
_BLOCK_START = re.compile(r"^(\d*)([-+.)])")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def printable(text: str) -> str:
    """text without terminal control sequences: what a terminal would obey is dropped."""
    return _CONTROL.sub("", text)


def markdown(value: object) -> str:
    """A value as Markdown text that renders as itself: on one line, its Markdown
    metacharacters backslash-escaped and its HTML ones as entities."""
    flat = " ".join(printable(str(value)).splitlines())
    escaped = _BLOCK_START.sub(r"\1\\\2", _MARKDOWN.sub(lambda m: "\\" + m.group(), flat))
    return "".join(_HTML.get(ch, ch) for ch in escaped)


def code(value: object) -> str:
    """A value as a Markdown code span that no backtick inside it can end early."""
    flat = " ".join(printable(str(value)).splitlines())
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"
