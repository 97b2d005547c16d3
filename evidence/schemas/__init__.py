"""JSON Schemas of the bundle contract, shared by the collector and the analyst."""

from pathlib import Path

SCHEMA_DIR = Path(__file__).parent
SCHEMA_VERSION = 1


def schema_path(record_file: str) -> Path:
    """The schema that governs a bundle file: memory.samples.jsonl -> memory.samples.schema.json."""
    stem = record_file.removesuffix(".jsonl").removesuffix(".json")
    return SCHEMA_DIR / f"{stem}.schema.json"
