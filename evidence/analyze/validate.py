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
  ingest reads every record of thousands of bundles). The schemas are draft 2020-12 and
  fastjsonschema knows drafts 4 to 7, where an unknown keyword is silently ignored: each
  schema is rewritten into its draft-7 equivalent first, and a 2020-12 keyword with none
  stops the compile rather than pass unchecked.
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


DRAFT7 = "http://json-schema.org/draft-07/schema#"
# 2020-12 keywords that draft 7 cannot say; none of the schemas uses one today.
_NO_DRAFT7 = frozenset(
    {
        "unevaluatedProperties",
        "unevaluatedItems",
        "dependentRequired",
        "dependentSchemas",
        "$dynamicRef",
        "$dynamicAnchor",
        "minContains",
        "maxContains",
    }
)
# Keywords whose value is a schema, a list of schemas, or a map of names to schemas.
_SUBSCHEMA = frozenset({"items", "additionalProperties", "propertyNames", "contains", "not"})
_SUBSCHEMA |= {"if", "then", "else", "additionalItems"}
_SUBSCHEMAS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})


def as_draft7(schema: Any) -> Any:
    """A 2020-12 schema as the draft-7 schema that accepts exactly the same documents:
    `prefixItems` and `items` become draft 7's array `items` and `additionalItems`, and a
    `$ref` beside other assertions (which 2020-12 applies and draft 7 ignores) becomes
    an `allOf`."""
    if not isinstance(schema, dict):
        return schema
    unsupported = _NO_DRAFT7 & schema.keys()
    if unsupported:
        raise ValueError(f"no draft-7 equivalent for {', '.join(sorted(unsupported))}")
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SUBSCHEMA:
            out[key] = as_draft7(value)
        elif key in _SUBSCHEMAS:
            out[key] = [as_draft7(v) for v in value]
        elif key in _SCHEMA_MAPS:
            out[key] = {name: as_draft7(v) for name, v in value.items()}
        else:
            out[key] = value
    if "$schema" in out:
        out["$schema"] = DRAFT7
    if "prefixItems" in out:
        prefix = out.pop("prefixItems")
        if "items" in out:
            out["additionalItems"] = out.pop("items")
        out["items"] = prefix
    if "$ref" in out and out.keys() - {"$ref", "description", "title", "$comment"}:
        rest = {k: v for k, v in out.items() if k not in ("$ref", "$defs", "$schema", "$id")}
        kept = {k: v for k, v in out.items() if k in ("$defs", "$schema", "$id")}
        out = {**kept, "allOf": [{"$ref": out["$ref"]}, rest]}
    return out


@cache
def _validator(schema_file: str) -> Any:
    return fastjsonschema.compile(as_draft7(json.loads((SCHEMA_DIR / schema_file).read_text())))


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


def check(bundle: Path) -> tuple[dict[str, Any], str, dict[str, list[Any]], list[str]]:
    """(manifest, manifest sha256, records by file name, files no schema describes) of a
    valid bundle; raises Invalid.

    A file no schema of this analyst describes (a newer collector's) is checked against
    its checksum and kept, unread: it is no reason to refuse the files that are known."""
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
    unknown: list[str] = []
    for entry in manifest["files"]:
        name = entry["name"]
        if "/" in name or name in (".", "..") or name.startswith(".") or "\0" in name:
            raise Invalid(f"the manifest names {name!r}, which is not a file of the bundle")
        data = _regular(bundle / name, name)
        if len(data) != entry["bytes"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise Invalid(f"{name}: checksum or size differs from the manifest")
        if not schema_path(name).is_file():
            unknown.append(name)
            continue
        records[name] = _records(name, data)
        conforms = _validator(schema_path(name).name)  # once per file, not per line
        for i, record in enumerate(records[name]):
            _conforms(conforms, record, f"{name} line {i + 1}" if name.endswith(".jsonl") else name)
    return manifest, hashlib.sha256(raw).hexdigest(), records, unknown
