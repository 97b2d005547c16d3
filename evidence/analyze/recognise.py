"""Which engine a process is: by the words of evidence/schemas/engines.toml, in its name and
arguments, case-insensitively. One place, for the rules and the incident summaries."""

from typing import Any

from evidence.schemas import engine_kinds

ENGINE_WORDS = {kind: tuple(e["words"]) for kind, e in engine_kinds().items()}
# The engines that take a fixed share of the card at start, and the setting that sizes it.
PREALLOCATES = {
    kind: e["preallocates"] for kind, e in engine_kinds().items() if "preallocates" in e
}


def belongs(process: dict[str, Any], kind: str) -> bool:
    """Whether process (a row of the process table) is one of this engine kind's."""
    text = " ".join([process.get("name") or "", *(process.get("cmdline") or [])]).lower()
    return any(word in text for word in ENGINE_WORDS.get(kind, ()))
