"""A changelog file that entries are added to once each, newest incident first.

Each entry the tool writes opens with a marker line carrying its key (bundle, change,
after-bundle) and the incident's date. Adding an entry whose key is already there
changes nothing; otherwise the entry goes in its place by incident date, so replaying an
old incident files it where it happened, not on top. Text before the first marker (a
title, the operator's own notes) is kept as it is. The file is replaced atomically.
"""

import hashlib
import re
from pathlib import Path

from evidence.reports.output import replace_text

HEADER = "# Changelog\n\n"
_MARKER = re.compile(r"^<!-- evidence:entry key=([0-9a-f]{16}) date=(\S+) -->$", re.MULTILINE)


def entry_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def add(path: Path, key: str, date: str, text: str) -> bool:
    """Add one entry; False if it was already there (the file is then untouched)."""
    old = path.read_text() if path.exists() else HEADER
    marks = list(_MARKER.finditer(old))
    digest = entry_key(key)
    if any(m.group(1) == digest for m in marks):
        return False
    head = old[: marks[0].start()] if marks else old
    if head and not head.endswith("\n"):
        head += "\n"
    blocks = [
        (m.group(2), old[m.start() : marks[i + 1].start() if i + 1 < len(marks) else len(old)])
        for i, m in enumerate(marks)
    ]
    entry = f"<!-- evidence:entry key={digest} date={date} -->\n{text.rstrip()}\n\n"
    # Newest first: before the first entry of the same date or older; the rest untouched.
    at = next((i for i, (when, _) in enumerate(blocks) if when <= date), len(blocks))
    blocks.insert(at, (date, entry))
    replace_text(path, head + "".join(b if b.endswith("\n\n") else b + "\n" for _, b in blocks))
    return True
