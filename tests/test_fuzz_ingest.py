"""`evidence ingest` against hypothesis-generated broken bundles.

Each example is a small archive: one valid bundle (the control) beside one to three
bundles broken by drawn mutations of a valid one (a file truncated, garbled, deleted or
replaced by a symlink, a FIFO or a directory; a wrong checksum; a manifest or record
field of the wrong type; huge values; NaN; deep nesting; bytes that are not UTF-8; an
unknown schema_version; extra files; an odd directory name), and one bundle whose values
were swapped for others of their own type (so that it often still passes the schema and
its odd values reach the load: integers past 64 bits, times far from now, odd text).
Ingest then runs in-process, and for every example:

- it never raises: one bad bundle costs itself, never the run;
- a bundle the format forbids is quarantined: quarantine.jsonl holds its path and a
  non-empty reason, and none of its rows reach the database;
- no bundle is half in: every bundle_id with rows anywhere has its `bundles` row, and an
  ingested bundle has in every table exactly the rows it gives when ingested alone;
- the control, and a bundle whose evidence a mutation left alone (extra unlisted files, a
  new directory name), are ingested whole: their rows equal the pristine bundle's;
- nothing under bundles/ is modified.

"Forbidden by the format" is decided without the code under test: by the mutation itself
and by the reference tools (the standard library's strict JSON parser, the reference
jsonschema validator where ingest uses fastjsonschema). Where the reference accepts what
ingest refuses (a number past 64 bits, a lone surrogate, nesting past orjson's depth
limit), either outcome is allowed, as long as it is whole.

The default profile is derandomized (50 examples, about 25 s here, more when it has a
failure to shrink); EVIDENCE_FUZZ_PROFILE=long runs random examples (2,000, or
EVIDENCE_FUZZ_EXAMPLES). Each example has a 60 s alarm: a FIFO opened for reading would
otherwise hang the run. What the fuzzing found is pinned below as plain examples.
"""

import contextlib
import hashlib
import json
import os
import random
import signal
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest
from conftest import bundle_errors, errors
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from synth import GIB, Host, write_bundle

from evidence.analyze.ingest import DATABASE, QUARANTINE, ingest
from evidence.schemas import schema_path
from lab.builder import Builder, engine

settings.register_profile(
    "ci",
    max_examples=50,
    deadline=None,
    derandomize=True,
    database=None,  # the same examples here and in CI, whatever ran before
    print_blob=True,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],  # no explain: minutes
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "long",
    max_examples=int(os.environ.get("EVIDENCE_FUZZ_EXAMPLES", "2000")),
    deadline=None,
    print_blob=True,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = settings.get_profile(os.environ.get("EVIDENCE_FUZZ_PROFILE", "ci"))

AT = 1_790_000_000.0  # 2026-09-21: every bundle of an example a minute apart from this
EXAMPLE_TIMEOUT_S = 60  # a FIFO opened for reading blocks: fail instead of hanging


# -- the valid bundles the mutations start from -------------------------------------------------


def _rich(archive: Path, at: float, host: str) -> Path:
    """Every source the builder knows, so that every table of the archive gets rows."""
    oom = (
        "Out of memory: Killed process 4321 (llama-server) total-vm:66093824kB, "
        "anon-rss:31245380kB, file-rss:4096kB, shmem-rss:0kB, UID:1000 pgtables:65288kB "
        "oom_score_adj:0"
    )
    job = {
        "prompt_id": "p-1",
        "status": "success",
        "completed": True,
        "outputs": [{"node": "9", "kind": "images", "filename": "a.png", "subfolder": ""}],
        "execution_start": int((at - 900) * 1000),
        "execution_success": int((at - 600) * 1000),
    }
    engines = [
        engine(
            "chat",
            "llama-server",
            metrics={"llamacpp:requests_processing": 2.0, "llamacpp:kv_cache_usage_ratio": 0.5},
            readings={"/slots": {"busy": 1, "total": 2}, "/props": {"build_info": "b4567"}},
        ),
        engine(
            "swap",
            "llama-swap",
            readings={
                "/running": {"models": [{"model": "qwen3", "state": "ready"}], "loaded": ["qwen3"]}
            },
        ),
        engine("comfy", "comfyui", readings={"/history?max_items=20": {"jobs": [job]}}),
    ]
    window = [at + i for i in range(4)]
    b = Builder(host, at, trigger=("alert", "HostOOM"))
    b.memory([(t, 40 * GIB + i * GIB) for i, t in enumerate(window)], swap_used=GIB)
    b.pressure(
        [(t, 1.5 * i) for i, t in enumerate(window)], [(t, 0.5 * i) for i, t in enumerate(window)]
    )
    b.vmstat([(t, 100.0 * i) for i, t in enumerate(window)])
    b.processes(
        [
            {"pid": 4321, "name": "llama-server", "rss_bytes": 30 * GIB},
            {"pid": 5001, "name": "python3", "rss_bytes": 3 * GIB},
        ]
    )
    b.host().kernel([oom, "NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus"])
    b.logs(["CUDA error: out of memory", "srv  update_slots: all slots are idle"])
    b.gpu(processes=[(4321, "llama-server", 20 * GIB)])
    b.engines(engines, [(t, engines[:1]) for t in window[::2]])
    b.prometheus(
        {"host_memory_available": [(at - 600 + 60 * i, 80.0 * GIB - i * GIB) for i in range(10)]},
        absent=("kv_cache_usage",),
    )
    b.checks(
        [
            {
                "name": "gateway",
                "kind": "completion",
                "ok": False,
                "status": "failed",
                "reason": "the content is empty",
                "answer": {"http_status": 200, "finish_reason": "stop", "content_chars": 0},
            }
        ]
    )
    return _with_newer_file(b.write(archive))


NEWER = "recorder.samples.jsonl"


def _with_newer_file(bundle: Path) -> Path:
    """A file a newer collector writes, which no schema here describes (unknown_files)."""
    data = b'{"t": "2026-11-29T03:12:45.123Z", "ring": 1}\n'
    (bundle / NEWER).write_bytes(data)
    manifest = orjson.loads((bundle / "manifest.json").read_bytes())
    entry = {"name": NEWER, "probe": "recorder", "bytes": len(data)}
    manifest["files"].append({**entry, "sha256": hashlib.sha256(data).hexdigest()})
    manifest["files"].sort(key=lambda f: f["name"])
    (bundle / "manifest.json").write_bytes(orjson.dumps(manifest))
    return bundle


def _synth(archive: Path, at: float, host: str) -> Path:
    """The archive tests' generator: samples of processes too, a model manager, a check."""
    return write_bundle(
        archive,
        Host(host, booted_at=at - 86400),
        at,
        random.Random(at),
        start=at,
        window=3,
        trigger=("healthcheck", "gateway"),
        kernel_lines=["Out of memory: Killed process 99 (python3)"],
        models=["qwen3-30b"],
        failed_check="gateway",
        processes=6,
    )


BASES = {"rich": _rich, "synth": _synth}


def _tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [
        row[0]
        for row in con.execute(
            "SELECT table_name FROM information_schema.columns WHERE column_name = 'bundle_id' "
            "AND table_name IN (SELECT table_name FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE') ORDER BY table_name"
        ).fetchall()
    ]


def _rows(db: Path) -> dict[str, dict[str, int]]:
    """bundle_id -> table -> rows, over every table that has a bundle_id."""
    if not db.exists():
        return {}
    con = duckdb.connect(str(db), read_only=True)
    try:
        found: dict[str, dict[str, int]] = {}
        for table in _tables(con):
            query = f"SELECT bundle_id, count(*) FROM {table} GROUP BY bundle_id"
            for bundle_id, n in con.execute(query).fetchall():
                found.setdefault(bundle_id, {})[table] = n
        return found
    finally:
        con.close()


def _alone(bundle: Path) -> tuple[list[str], dict[str, dict[str, int]]]:
    """What the bundle gives when it is ingested by itself into an archive of its own."""
    with tempfile.TemporaryDirectory(prefix="evidence-alone-") as tmp:
        summary = ingest(Path(tmp), [bundle], wait_s=5)
        return summary.ingested, _rows(Path(tmp) / DATABASE)


PRISTINE: dict[str, dict[str, int]] = {}


def pristine(kind: str) -> dict[str, int]:
    """Rows per table of an unbroken bundle of this kind (every kind has rows everywhere
    its sources reach)."""
    if kind not in PRISTINE:
        with tempfile.TemporaryDirectory(prefix="evidence-pristine-") as tmp:
            bundle = BASES[kind](Path(tmp), AT, "pristine")
            assert bundle_errors(bundle, newer=(NEWER,)) == []
            ingested, rows = _alone(bundle)
            assert len(ingested) == 1, f"the pristine {kind} bundle did not ingest"
            (PRISTINE[kind],) = rows.values()
    return PRISTINE[kind]


def test_the_pristine_bundles_are_valid_and_reach_every_table():
    con = duckdb.connect()
    try:
        from evidence.analyze.ddl import migrate

        migrate(con)
        tables = set(_tables(con))
    finally:
        con.close()
    reached = set(pristine("rich")) | set(pristine("synth"))
    assert reached == tables, tables - reached


# -- the oracle: broken by the format's own rules, decided with the reference tools -------------


class Broken(Exception):
    """The bundle breaks a rule of the format; ingest must quarantine it."""


class Unknown(Exception):
    """The reference tools cannot say (nesting past their recursion limit)."""


def _strict(data: bytes, name: str) -> Any:
    def constant(token: str) -> None:
        raise Broken(f"{name}: {token} is not JSON")

    try:
        return json.loads(data.decode("utf-8"), parse_constant=constant)
    except UnicodeDecodeError as exc:
        raise Broken(f"{name}: not UTF-8 ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise Broken(f"{name}: not JSON ({exc.msg})") from None
    except RecursionError:
        raise Unknown(f"{name}: nested past the reference parser's limit") from None


def _conforms(name: str, record: Any) -> None:
    try:
        found = errors(name, record)
    except RecursionError:
        raise Unknown(f"{name}: nested past the reference validator's limit") from None
    if found:
        raise Broken(found[0])


def _regular(path: Path) -> bytes:
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise Broken(f"{path.name} is missing") from None
    if not stat.S_ISREG(info.st_mode):
        raise Broken(f"{path.name} is not a regular file")
    return path.read_bytes()


def verdict(bundle: Path) -> str | None:
    """Why the bundle must be quarantined; None if the reference finds nothing wrong (or
    cannot tell), when ingesting it whole is as right as quarantining it."""
    try:
        if bundle.is_symlink() or not bundle.is_dir():
            raise Broken("not a bundle directory")
        manifest = _strict(_regular(bundle / "manifest.json"), "manifest.json")
        _conforms("manifest.json", manifest)
        for entry in manifest["files"]:
            name = entry["name"]
            if "/" in name or name.startswith(".") or "\0" in name:
                raise Broken(f"{name!r} is not a file of the bundle")
            data = _regular(bundle / name)
            if len(data) != entry["bytes"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
                raise Broken(f"{name}: checksum or size differs")
            if not schema_path(name).is_file():
                continue  # a newer collector's file: kept, unread
            if name.endswith(".jsonl"):
                records = [_strict(line, name) for line in data.split(b"\n") if line.strip()]
            else:
                records = [_strict(data, name)]
            for record in records:
                _conforms(name, record)
    except Broken as exc:
        return str(exc) or "broken"
    except Unknown:
        return None
    return None


# -- the mutations ---------------------------------------------------------------------------

DELETE = "<delete>"
HUGE_TEXT = "<300,000 x>"  # drawn as this marker, written as the text, so failures print short
# Values of the same JSON type as the one they replace, so that more of them pass the
# schema and reach the load: integers past 64 bits, times far from now, odd text.
NUMBERS = (
    0,
    -1,
    2**31,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64 - 1,
    -(2**63),
    10**20,
    1e18,
    1e308,
    -1e308,
    5e-324,
    0.5,
    -0.0,
    253402300800,
)
STRINGS = (
    "",
    "\0",
    "é",
    "\U0001f600",
    HUGE_TEXT,
    "'; DROP TABLE bundles; --",
    "2026-13-45T99:99:99.999Z",
    "9999-12-31T23:59:59.999Z",
    "0001-01-01T00:00:00.000Z",
    "\\",
    "\n",
    "%s%n",
    "NaN",
)
HUGE = st.sampled_from(
    [2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63) - 1, 10**30, 1.7976931348623157e308, -0.0]
)
LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    HUGE,
    st.floats(),  # NaN and the infinities among them: not JSON
    st.text(max_size=12),
    st.sampled_from(["", "\0", "\ud800", HUGE_TEXT, "2026-13-45T99:99:99.999Z", "'; --"]),
)
VALUES = st.recursive(
    LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=6,
) | st.just(DELETE)
# Odd names for the bundle's directory. The collector never makes them (its names are
# slugs); bundles copied from elsewhere can have anything.
DIR_NAMES = st.sampled_from(
    [
        "with space",
        "it's",
        "x[1]",
        "a*b?",
        "{a,b}",
        "ünïcödé",
        "%s%n",
        "back\\slash",
        "new\nline",
        "x" * 250,
        b"latin1-\xe9t\xe9",
        b"\xff\xfe",
    ]
)
EXTRA_NAMES = st.sampled_from(
    [
        "notes.txt",
        "memory.json.bak",
        ".hidden.json",
        "extra.jsonl",
        "gpu.samples.jsonl",  # a record file the manifest does not list
        b"\xff.json",
    ]
)
LISTED_NAMES = st.sampled_from(
    [
        "notes.txt",  # no schema describes it: kept, unread
        "extra.json",
        "health.json",  # a real record file; valid or not depending on the content
        "../escape.json",
        "sub/dir.json",
        ".hidden.json",
        "nul\0.json",
        "",
    ]
)
RAW_INSERTS = st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"\x00", b"\x1b"])
NUMBER_TOKENS = st.sampled_from(
    [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400", b"1" * 400, b"0x10", b"01"]
)
DEPTHS = st.sampled_from([64, 1000, 1023, 1024, 1025, 1100, 5000])


@dataclass(frozen=True)
class Mutation:
    """One way of breaking a bundle; `target` picks a file (0: the manifest), `path` a
    value inside a JSON document, both taken modulo what is there."""

    kind: str
    target: int = 0
    path: tuple[int, ...] = ()
    value: Any = None
    line: int = 0


TARGET = st.integers(min_value=0, max_value=63)
PATH = st.lists(st.integers(min_value=0, max_value=63), min_size=1, max_size=6).map(tuple)

SAME_TYPE = st.builds(
    Mutation,
    st.just("same-type"),
    TARGET,
    path=st.integers(0, 10**4).map(lambda i: (i,)),  # which scalar
    value=st.integers(0, 1000),
    line=st.integers(0, 9),
)
MUTATIONS = st.one_of(
    st.builds(Mutation, st.just("truncate"), TARGET, value=st.floats(0, 0.999)),
    st.builds(
        Mutation,
        st.just("garble"),
        TARGET,
        path=st.lists(st.integers(0, 10**6), min_size=1, max_size=4).map(tuple),
        value=st.integers(1, 255),
    ),
    st.builds(Mutation, st.just("delete"), TARGET),
    st.builds(
        Mutation,
        st.just("replace"),
        TARGET,
        value=st.sampled_from(["dir", "symlink-copy", "symlink-out", "fifo", "empty"]),
    ),
    st.builds(
        Mutation,
        st.just("checksum"),
        TARGET,
        value=st.sampled_from(["sha", "bytes+1", "bytes-1", "bytes-str", "sha-upper"]),
    ),
    st.builds(Mutation, st.just("manifest-value"), path=PATH, value=VALUES),
    st.builds(
        Mutation, st.just("record-value"), TARGET, path=PATH, value=VALUES, line=st.integers(0, 9)
    ),
    st.builds(
        Mutation,
        st.just("raw-insert"),
        TARGET,
        path=(st.integers(0, 10**6).map(lambda i: (i,))),
        value=RAW_INSERTS,
    ),
    st.builds(
        Mutation,
        st.just("number-token"),
        TARGET,
        path=(st.integers(0, 10**6).map(lambda i: (i,))),
        value=NUMBER_TOKENS,
    ),
    st.builds(Mutation, st.just("deep"), TARGET, path=PATH, value=DEPTHS, line=st.integers(0, 9)),
    SAME_TYPE,
    st.builds(
        Mutation,
        st.just("schema-version"),
        value=st.sampled_from([0, 2, -1, "1", None, True, 1.5, [1], {"v": 1}, DELETE]),
    ),
    st.builds(Mutation, st.just("extra-file"), value=EXTRA_NAMES, path=st.just((0,))),
    st.builds(Mutation, st.just("extra-listed"), value=LISTED_NAMES, target=st.integers(0, 2)),
    st.builds(Mutation, st.just("rename-dir"), value=DIR_NAMES),
)
# Mutations that leave every byte of evidence the manifest lists as it was.
KEEPS_EVIDENCE = {"extra-file", "rename-dir"}


def _targets(bundle: Path, manifest: dict[str, Any] | None) -> list[str]:
    """The manifest and the files it lists that a mutation may touch: plain names only, so
    that no mutation reaches outside the bundle."""
    names = ["manifest.json"]
    for entry in (manifest or {}).get("files", []):
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and name.strip(".") and "/" not in name and "\0" not in name:
            names.append(name)
    return names


def read_regular(path: Path) -> bytes | None:
    """A regular file's bytes; None for anything else (a FIFO would block the test itself)."""
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return None
        return path.read_bytes()
    except (OSError, ValueError):  # ValueError: a name with a NUL in it
        return None


def _load_manifest(bundle: Path) -> dict[str, Any] | None:
    """The manifest as the mutations see it (None once a mutation made it unreadable)."""
    try:
        found = json.loads(read_regular(bundle / "manifest.json") or b"")
    except (ValueError, RecursionError):
        return None
    ok = isinstance(found, dict) and isinstance(found.get("files"), list)
    return found if ok else None


def _save_manifest(bundle: Path, manifest: dict[str, Any]) -> None:
    (bundle / "manifest.json").write_bytes(json.dumps(manifest).encode())


def _rewrite(bundle: Path, name: str, data: bytes) -> None:
    """Replace a listed file and make the manifest's checksum and size true again, so that
    the break reaches the parser, the schema and the load rather than the checksum."""
    path = bundle / name
    if read_regular(path) is None:
        return
    path.write_bytes(data)
    manifest = _load_manifest(bundle)
    if manifest is None:
        return
    for entry in manifest["files"]:
        if isinstance(entry, dict) and entry.get("name") == name:
            entry["bytes"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    _save_manifest(bundle, manifest)


def _walk(doc: Any, path: tuple[int, ...]) -> tuple[Any, Any] | None:
    """(container, key) of the value `path` leads to, or None in an empty document."""
    container, key = None, None
    node = doc
    for step in path:
        if isinstance(node, dict) and node:
            keys = sorted(node)
            container, key = node, keys[step % len(keys)]
        elif isinstance(node, list) and node:
            container, key = node, step % len(node)
        else:
            break
        node = container[key]
    return None if container is None else (container, key)


def _expand(value: Any) -> Any:
    if isinstance(value, str) and value == HUGE_TEXT:
        return "x" * 300_000
    if isinstance(value, list):
        return [_expand(v) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v) for k, v in value.items()}
    return value


def _put(doc: Any, path: tuple[int, ...], value: Any) -> None:
    found = _walk(doc, path)
    if found is None:
        return
    container, key = found
    if value == DELETE and isinstance(value, str):
        del container[key]
    else:
        container[key] = _expand(value)


def _leaves(doc: Any) -> list[tuple[Any, Any]]:
    """(container, key) of every scalar in the document, in document order."""
    found = []
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    )
    for key, value in items:
        if isinstance(value, dict | list):
            found += _leaves(value)
        else:
            found.append((doc, key))
    return found


def _same_type(doc: Any, leaf: int, pick: int) -> None:
    """Replace one scalar of the document (any of them, alike) with another value of its
    own JSON type."""
    leaves = [(c, k) for c, k in _leaves(doc) if c[k] is not None]
    if not leaves:
        return
    container, key = leaves[leaf % len(leaves)]
    node = container[key]
    if isinstance(node, bool):
        container[key] = not node
    elif isinstance(node, int | float):
        container[key] = NUMBERS[pick % len(NUMBERS)]
    else:
        container[key] = _expand(STRINGS[pick % len(STRINGS)])


def _dump(doc: Any) -> bytes:
    # The standard library writes NaN and Infinity (not JSON) and integers of any size,
    # which is the point; a lone surrogate goes out as its \\u escape.
    return json.dumps(doc).encode()


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"1" + b"]" * depth


def _records(data: bytes, name: str) -> list[Any] | None:
    try:
        if name.endswith(".jsonl"):
            return [json.loads(line) for line in data.split(b"\n") if line.strip()]
        return [json.loads(data)]
    except (ValueError, RecursionError):
        return None


def _serialise(records: list[Any], name: str) -> bytes:
    if name.endswith(".jsonl"):
        return b"".join(_dump(r) + b"\n" for r in records)
    return _dump(records[0])


def apply(m: Mutation, bundle: Path, outside: Path) -> Path:
    """Break `bundle` one way; returns where the bundle now is."""
    manifest = _load_manifest(bundle)
    targets = _targets(bundle, manifest)
    name = targets[m.target % len(targets)]
    path = bundle / name
    reads = (
        "truncate",
        "garble",
        "raw-insert",
        "number-token",
        "deep",
        "record-value",
        "same-type",
    )
    if m.kind in reads:
        data = read_regular(path)
        if data is None:
            return bundle
    if m.kind == "truncate":
        path.write_bytes(data[: int(len(data) * m.value)])
    elif m.kind == "garble":
        garbled = bytearray(data)
        for at in m.path:
            if garbled:
                garbled[at % len(garbled)] ^= m.value
        path.write_bytes(bytes(garbled))
    elif m.kind == "delete":
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            path.unlink()
    elif m.kind == "replace":
        if path.is_dir() and not path.is_symlink():
            return bundle
        copy = outside / f"copy-{os.urandom(4).hex()}"
        copy.write_bytes(read_regular(path) or b"")
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        if m.value == "dir":
            path.mkdir()
            (path / "inside.json").write_bytes(b"{}")
        elif m.value == "symlink-copy":  # the same bytes, through a link: still refused
            path.symlink_to(copy)
        elif m.value == "symlink-out":
            path.symlink_to("/etc/hostname")
        elif m.value == "fifo":
            os.mkfifo(path)
        else:
            path.write_bytes(b"")
    elif m.kind == "checksum":
        if manifest is None or name == "manifest.json":
            return bundle
        for entry in manifest["files"]:
            if isinstance(entry, dict) and entry.get("name") == name:
                if m.value == "sha":
                    entry["sha256"] = hashlib.sha256(b"not these bytes").hexdigest()
                elif m.value == "sha-upper":
                    entry["sha256"] = str(entry.get("sha256", "")).upper()
                elif m.value == "bytes-str":
                    entry["bytes"] = str(entry.get("bytes"))
                elif isinstance(entry.get("bytes"), int):
                    entry["bytes"] += 1 if m.value == "bytes+1" else -1
        _save_manifest(bundle, manifest)
    elif m.kind == "manifest-value":
        if manifest is None:
            return bundle
        _put(manifest, m.path, m.value)
        (bundle / "manifest.json").write_bytes(_dump(manifest))
    elif m.kind in ("record-value", "deep", "same-type"):
        records = _records(data, name)
        if not records:
            return bundle
        line = m.line % len(records)
        if m.kind == "same-type":
            _same_type(records[line], m.path[0], m.value)
            text = _serialise(records, name)
        elif m.kind == "deep":
            marker = "\x01deep\x01"
            _put(records[line], m.path, marker)
            text = _serialise(records, name)
            text = text.replace(_dump(marker), _nested(m.value), 1)
        else:
            _put(records[line], m.path, m.value)
            text = _serialise(records, name)
        if name == "manifest.json":
            path.write_bytes(text)
        else:
            _rewrite(bundle, name, text)
    elif m.kind in ("raw-insert", "number-token"):
        if m.kind == "raw-insert":  # inside a string: after an opening quote
            spots = [i for i in range(len(data)) if data[i : i + 1] == b'"'] or [0]
            at = spots[m.path[0] % len(spots)] + 1
            text = data[:at] + m.value + data[at:]
        else:  # in place of a number
            digits = [
                i
                for i in range(1, len(data))
                if data[i - 1 : i] == b":" and data[i : i + 1] in b"-0123456789"
            ]
            if not digits:
                return bundle
            at = digits[m.path[0] % len(digits)]
            end = at
            while end < len(data) and data[end : end + 1] in b"-+.eE0123456789":
                end += 1
            text = data[:at] + m.value + data[end:]
        if name == "manifest.json":
            path.write_bytes(text)
        else:
            _rewrite(bundle, name, text)
    elif m.kind == "schema-version":
        if manifest is None:
            return bundle
        if m.value == DELETE and isinstance(m.value, str):
            manifest.pop("schema_version", None)
        else:
            manifest["schema_version"] = m.value
        _save_manifest(bundle, manifest)
    elif m.kind == "extra-file":
        target = (
            os.fsencode(bundle)
            + b"/"
            + (m.value if isinstance(m.value, bytes) else m.value.encode())
        )
        if not os.path.lexists(target):
            with open(target, "wb") as f:
                f.write(b'{"probe": "gpu", "not": "listed"}\n')
    elif m.kind == "extra-listed":
        if manifest is None:
            return bundle
        contents = [b"{}", b"not json", _pristine_record("health.json")]
        data = contents[m.target % len(contents)]
        plain = m.value and "/" not in m.value and "\0" not in m.value
        if plain and not os.path.lexists(bundle / m.value):
            (bundle / m.value).write_bytes(data)
        manifest["files"].append(
            {
                "name": m.value,
                "probe": "extra",
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
        _save_manifest(bundle, manifest)
    elif m.kind == "rename-dir":
        new = (
            os.fsencode(bundle.parent)
            + b"/"
            + (m.value if isinstance(m.value, bytes) else m.value.encode())
        )
        if os.path.lexists(new):
            return bundle
        os.rename(os.fsencode(bundle), new)
        return Path(os.fsdecode(new))
    return bundle


_RECORD_CACHE: dict[str, bytes] = {}


def _pristine_record(name: str) -> bytes:
    if name not in _RECORD_CACHE:
        with tempfile.TemporaryDirectory() as tmp:
            _RECORD_CACHE[name] = (_rich(Path(tmp), AT, "r") / name).read_bytes()
    return _RECORD_CACHE[name]


# -- the property ----------------------------------------------------------------------------


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def expire(signum, frame):
        raise TimeoutError(f"the example took more than {seconds} s (blocked on a FIFO?)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def tree(root: Path) -> dict[bytes, tuple[int, bytes]]:
    """Every entry under root: its mode and, for a regular file, its bytes."""
    found = {}
    for directory, dirs, files in os.walk(os.fsencode(root)):
        for entry in dirs + files:
            path = os.path.join(directory, entry)
            info = os.lstat(path)
            data = b""
            if stat.S_ISREG(info.st_mode):
                with open(path, "rb") as f:
                    data = f.read()
            found[path] = (info.st_mode, data)
    return found


def bundle_id_of(bundle: Path) -> str | None:
    try:
        found = orjson.loads(read_regular(bundle / "manifest.json") or b"")
    except orjson.JSONDecodeError:
        return None
    bundle_id = found.get("bundle_id") if isinstance(found, dict) else None
    return bundle_id if isinstance(bundle_id, str) else None


@dataclass
class Case:
    kind: str
    path: Path
    original_id: str
    mutations: tuple[Mutation, ...]
    must_quarantine: str | None = None

    @property
    def keeps_evidence(self) -> bool:
        return all(m.kind in KEEPS_EVIDENCE for m in self.mutations)


def key(path: Path) -> str:
    return str(Path(os.path.abspath(path)).resolve())


@PROFILE
@given(
    control=st.sampled_from(sorted(BASES)),
    broken=st.lists(
        st.tuples(st.sampled_from(sorted(BASES)), st.lists(MUTATIONS, min_size=1, max_size=3)),
        min_size=1,
        max_size=3,
    ),
    # and one bundle changed in its values only, each for another of its own type, so that
    # it often still passes the schema and its odd values reach the load
    subtle=st.tuples(st.sampled_from(sorted(BASES)), st.lists(SAME_TYPE, min_size=1, max_size=4)),
)
def test_ingest_never_crashes_quarantines_the_broken_and_never_ingests_half(
    control, broken, subtle
):
    with tempfile.TemporaryDirectory(prefix="evidence-fuzz-") as tmp, time_limit(EXAMPLE_TIMEOUT_S):
        root, outside = Path(tmp) / "archive", Path(tmp) / "outside"
        outside.mkdir()
        good = BASES[control](root, AT, "fuzz")
        cases = []
        for i, (kind, mutations) in enumerate([*broken, subtle], start=1):
            path = BASES[kind](root, AT + 60 * i, "fuzz")
            original = bundle_id_of(path)
            for m in mutations:
                path = apply(m, path, outside)
            cases.append(Case(kind, path, original, tuple(mutations), verdict(path)))
        before = tree(root / "bundles")

        summary = ingest(root, wait_s=5)  # never raises: that is the first property

        assert tree(root / "bundles") == before, "ingest modified a bundle"
        rows = _rows(root / DATABASE)
        listed = (
            [orjson.loads(x) for x in (root / QUARANTINE).read_bytes().splitlines()]
            if (root / QUARANTINE).exists()
            else []
        )
        reasons = {e["path"]: e["reason"] for e in listed}
        assert all(isinstance(r, str) and r.strip() for r in reasons.values()), listed
        assert {q["path"] for q in summary.quarantined} == set(reasons)

        # No half bundle: rows anywhere mean the bundle's row is there too.
        orphans = {b for b, tables in rows.items() if "bundles" not in tables}
        assert not orphans, f"rows without their bundle: {orphans}"
        assert all(tables["bundles"] == 1 for tables in rows.values())

        # The control is in, whole.
        good_id = bundle_id_of(good)
        assert key(good) not in reasons, reasons.get(key(good))
        assert rows.get(good_id) == pristine(control)

        for case in cases:
            where = f"{case.mutations} -> {case.path.name!r}"
            current = bundle_id_of(case.path)
            quarantined = key(case.path) in reasons
            outcome = "quarantined" if quarantined else "ingested"
            for m in case.mutations:
                event(f"{m.kind}: {outcome}")
            ids = {i for i in (current, case.original_id) if i}
            if case.must_quarantine:
                assert quarantined, f"not quarantined ({case.must_quarantine}): {where}"
            elif case.keeps_evidence:  # nothing it lists was touched: it goes in, whole
                assert not quarantined, f"{reasons[key(case.path)]}: {where}"
            if quarantined:
                for i in ids:
                    assert i not in rows or i == good_id, f"quarantined but in the archive: {where}"
                continue
            assert current in summary.ingested, f"neither ingested nor quarantined: {where}"
            assert current in rows, f"said ingested, not in the archive: {where}"
            if case.keeps_evidence:
                assert rows[current] == pristine(case.kind), f"evidence lost: {where}"
            else:
                alone_ids, alone = _alone(case.path)
                assert alone_ids == [current], f"alone it does not ingest: {where}"
                assert rows[current] == alone[current], f"half of it, or more: {where}"


# -- what the fuzzing found, pinned as plain examples ------------------------------------------


def _archive_with(tmp: Path, name: bytes, broken: bool) -> tuple[Path, Path, Path]:
    """An archive: a bundle in a directory called `name` (broken or not) between two
    valid ones."""
    root = tmp / "archive"
    first = _rich(root, AT, "odd")
    odd = _rich(root, AT + 60, "odd")
    last = _rich(root, AT + 120, "odd")
    if broken:
        (odd / "vmstat.json").write_bytes(b"{}")
    target = os.fsencode(odd.parent) + b"/" + name
    os.rename(os.fsencode(odd), target)
    return root, first, last


@pytest.mark.parametrize("broken", [False, True], ids=["valid", "broken"])
def test_a_bundle_directory_named_in_bytes_that_are_not_utf8_costs_only_itself(tmp_path, broken):
    # Bundles copied from another machine (rsync from a Latin-1 file system, a torn name)
    # can be named in any bytes. Ingest must still finish, take the others, and quarantine
    # or ingest this one whole.
    root, first, last = _archive_with(tmp_path, b"20260921T000100Z_latin1-\xe9t\xe9", broken)
    summary = ingest(root, wait_s=5)
    rows = _rows(root / DATABASE)
    for good in (first, last):
        assert rows.get(bundle_id_of(good)) == pristine("rich")
    assert len(summary.ingested) + len(summary.quarantined) == 3
    if broken:
        assert len(summary.quarantined) == 1 and summary.quarantined[0]["reason"]


@pytest.mark.parametrize("name", ["back\\slash", "new\nline"], ids=["backslash", "newline"])
def test_a_valid_bundle_is_not_refused_for_its_directory_name(tmp_path, name):
    root, first, last = _archive_with(tmp_path, name.encode(), broken=False)
    summary = ingest(root, wait_s=5)
    assert summary.quarantined == [], summary.quarantined
    assert len(summary.ingested) == 3


def _edit_record(bundle: Path, name: str, change) -> None:
    record = json.loads((bundle / name).read_bytes())
    change(record)
    _rewrite(bundle, name, json.dumps(record).encode())
    assert verdict(bundle) is None  # still a valid bundle by the reference


def _far_prometheus_time(record: dict) -> None:
    record["queries"][0]["series"][0]["values"][0][0] = 1e18  # a number, as the schema says


def _far_job_start(record: dict) -> None:
    jobs = record["engines"][2]["endpoints"]["/history?max_items=20"]["readings"]["jobs"]
    jobs[0]["execution_start"] = 10**20  # milliseconds, any number


@pytest.mark.parametrize(
    ("name", "change"),
    [("prometheus.json", _far_prometheus_time), ("engines.json", _far_job_start)],
    ids=["prometheus-point", "render-job"],
)
def test_a_time_far_outside_the_calendar_costs_only_its_bundle(tmp_path, name, change):
    root = tmp_path / "archive"
    first, odd, last = (_rich(root, AT + 60 * i, "far") for i in range(3))
    _edit_record(odd, name, change)
    summary = ingest(root, wait_s=5)  # must not raise
    rows = _rows(root / DATABASE)
    for good in (first, last):
        assert rows.get(bundle_id_of(good)) == pristine("rich")
    if summary.quarantined:
        assert summary.quarantined[0]["reason"] and bundle_id_of(odd) not in rows
    else:
        assert rows[bundle_id_of(odd)] == _alone(odd)[1][bundle_id_of(odd)]
