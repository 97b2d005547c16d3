"""The log and kernel lines that matter: a tag, and the pattern that earns it
(evidence/schemas/lines.toml). A line may earn several tags; matching is case-insensitive.
"""

import re

from evidence.analyze import statlines
from evidence.schemas import catalog

# From the one catalog the collector's kernel probe keeps its lines by; the engines'
# periodic stats lines are statlines.py's, which reads them.
TAGS: tuple[tuple[str, str], ...] = (
    *((t["name"], t["pattern"]) for t in catalog("lines")["tag"]),
    ("engine-stats", statlines.PATTERN),
)

_COMPILED = tuple((tag, re.compile(pattern, re.IGNORECASE)) for tag, pattern in TAGS)


def tags_of(text: str) -> list[str]:
    return [tag for tag, pattern in _COMPILED if pattern.search(text)]
