"""Is this directory a bundle the analyst can trust? Checked before a single row is loaded.

Invariants:
- Read only: a bundle is never modified, whatever is wrong with it.
- The first problem found is the reason given; a bundle is valid or it is not.
- A manifest is sized before it is parsed: parsing costs about twenty times its size in
  memory, and a real one is a few kilobytes.
- Only a sealed bundle is read: one a capture is still writing is refused, so that its
  half is never frozen in the archive under the id the sealed bundle will carry.
- Nothing outside the bundle is read: file names come from the manifest and must be
  plain names of regular files (no "..", no "/", no symlinks).
- Records are checked against schemas/ with validators compiled once per process
  (fastjsonschema: the reference validator costs about 20 times more per bundle, and
  ingest reads every record of thousands of bundles).
"""

import hashlib
import json
import os
import stat
from functools import cache
from pathlib import Path
from typing import Any

import fastjsonschema
import orjson

from evidence.archive.layout import INPROGRESS_SUFFIX, sealed
from evidence.schemas import SCHEMA_DIR, SCHEMA_VERSION, schema_path

MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 8 * 2**20


class Invalid(Exception):
    """Why a bundle cannot be ingested, in one line."""


@cache
def _validator(schema_file: str) -> Any:
    return fastjsonschema.compile(json.loads((SCHEMA_DIR / schema_file).read_text()))


def _regular(path: Path, what: str, limit: int | None = None) -> bytes:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise Invalid(f"{what} is missing") from None
    if stat.S_ISLNK(info.st_mode):
        raise Invalid(f"{what} is a symlink")
    if not stat.S_ISREG(info.st_mode):
        raise Invalid(f"{what} is not a regular file")
    if limit is None:
        return path.read_bytes()
    with open(path, "rb") as f:
        data = f.read(limit + 1)  # bounded even if the file grew since it was sized
    if info.st_size > limit or len(data) > limit:
        raise Invalid(f"{what} is {max(info.st_size, len(data))} bytes, over the {limit} allowed")
    return data


def _records(name: str, data: bytes) -> list[Any]:
    try:
        if name.endswith(".jsonl"):
            return [orjson.loads(line) for line in data.splitlines() if line.strip()]
        return [orjson.loads(data)]
    except orjson.JSONDecodeError as exc:
        raise Invalid(f"{name} is not valid JSON (truncated?): {exc}") from None


def _conforms(validator: Any, record: Any, where: str) -> None:
    try:
        validator(record)
    except fastjsonschema.JsonSchemaException as exc:
        raise Invalid(f"{where} does not match its schema: {exc.message}") from None


def read_manifest(bundle: Path) -> Any:
    """The parsed manifest.json of a bundle directory, sized before it is parsed."""
    return _manifest(bundle)[1]


def _manifest(bundle: Path) -> tuple[bytes, Any]:
    raw = _regular(bundle / MANIFEST, MANIFEST, MAX_MANIFEST_BYTES)
    try:
        return raw, orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Invalid(f"{MANIFEST} is not valid JSON (truncated?): {exc}") from None


def check(bundle: Path) -> tuple[dict[str, Any], str, dict[str, list[Any]]]:
    """(manifest, manifest sha256, records by file name) of a valid bundle; raises Invalid."""
    if bundle.is_symlink():
        raise Invalid("the bundle directory is a symlink")
    if not bundle.is_dir():
        raise Invalid("not a directory")
    if bundle.name.endswith(INPROGRESS_SUFFIX):
        raise Invalid("a capture is still writing it; ingest the bundle once it is sealed")
    raw, manifest = _manifest(bundle)
    version = manifest.get("schema_version") if isinstance(manifest, dict) else None
    if version != SCHEMA_VERSION:
        raise Invalid(f"unknown schema_version {version!r} (this analyst reads {SCHEMA_VERSION})")
    _conforms(_validator(schema_path(MANIFEST).name), manifest, MANIFEST)
    if not sealed(manifest):
        raise Invalid("not sealed: a capture is still writing it, or died before sealing it")
    records: dict[str, list[Any]] = {}
    for entry in manifest["files"]:
        name = entry["name"]
        if "/" in name or name in (".", "..") or name.startswith(".") or "\0" in name:
            raise Invalid(f"the manifest names {name!r}, which is not a file of the bundle")
        data = _regular(bundle / name, name)
        if len(data) != entry["bytes"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise Invalid(f"{name}: checksum or size differs from the manifest")
        if not schema_path(name).is_file():
            raise Invalid(f"{name}: no schema describes this file")
        records[name] = _records(name, data)
        conforms = _validator(schema_path(name).name)  # once per file, not per line
        for i, record in enumerate(records[name]):
            _conforms(conforms, record, f"{name} line {i + 1}" if name.endswith(".jsonl") else name)
    return manifest, hashlib.sha256(raw).hexdigest(), records
