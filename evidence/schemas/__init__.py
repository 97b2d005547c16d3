"""JSON Schemas of the bundle contract, and the catalogs of shared knowledge, as data:
shared by the collector and the analyst, so neither keeps a copy."""

import tomllib
from functools import cache
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).parent
SCHEMA_VERSION = 1


def schema_path(record_file: str) -> Path:
    """The schema that governs a bundle file: memory.samples.jsonl -> memory.samples.schema.json.
    The recorder's history is the same readings from before: memory.history.jsonl too."""
    stem = record_file.removesuffix(".jsonl").removesuffix(".json")
    if stem.endswith(".history"):
        stem = stem.removesuffix(".history") + ".samples"
    return SCHEMA_DIR / f"{stem}.schema.json"


@cache
def catalog(name: str) -> dict[str, Any]:
    """A catalog of shared knowledge kept as data here (lines.toml, engines.toml,
    faults.toml, guardrails.toml), read once per process."""
    with open(SCHEMA_DIR / f"{name}.toml", "rb") as f:
        return tomllib.load(f)


def engine_kinds() -> dict[str, dict[str, Any]]:
    """Every engine kind of engines.toml, by the name the configuration uses."""
    return {kind: entry for kind, entry in catalog("engines").items() if "module" in entry}
