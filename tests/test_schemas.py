"""The bundle contract: every file a real capture writes validates against its JSON Schema,
and the schemas reject the drift they exist to catch.

One real capture of this machine (a 2 s window, one log file and one journald unit) is
shared by the module; the shapes a healthy machine does not produce (a recovered bundle,
a kernel without PSI, an unreadable log) come from the collector's own code run against
fixture trees, so the schemas are checked against what the code writes, not against
hand-written examples.
"""

import copy
import hashlib
import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest
from conftest import EVIDENCE, bundles, errors, need, read_records, run_evidence, validator
from jsonschema import Draft202012Validator

from evidence.archive.clock import iso
from evidence.archive.recorder import socket_path
from evidence.capture.bundle import BundleWriter
from evidence.capture.config import Config, LogSource
from evidence.capture.manifest import new_manifest, recover
from evidence.capture.probes import Context, ordered
from evidence.capture.probes.logs import Logs
from evidence.capture.probes.memory import Memory
from evidence.capture.probes.pressure import Pressure
from evidence.capture.redact import scrub
from evidence.schemas import SCHEMA_DIR, SCHEMA_VERSION, schema_path

REF = Path(__file__).parent / "fixtures" / "reference"
SCHEMA_ID = "https://evidence.invalid/schemas/{}"
DRAFT = "https://json-schema.org/draft/2020-12/schema"
BUNDLE_FILES = (
    "manifest.json",
    "processes.json",
    "processes.samples.jsonl",
    "memory.json",
    "memory.samples.jsonl",
    "vmstat.json",
    "vmstat.samples.jsonl",
    "pressure.json",
    "pressure.samples.jsonl",
    "host.json",
    "kernel.json",
    "logs.json",
    "gpu.json",
    "gpu.samples.jsonl",
    "engines.json",
    "engines.samples.jsonl",
    "prometheus.json",
    "health.json",
    "recorder.json",
    "memory.history.jsonl",
)
# A tqdm-style progress bar (one line rewritten with \r) and a byte that is not UTF-8.
LOG_BYTES = (
    b"loading model\nprogress  10%\rprogress  55%\rprogress 100%\nweights at \xff offset\nready\n"
)
MISSING_UNIT = "evidence-test-nonexistent.service"


def envelope(probe: str, record: dict[str, Any]) -> dict[str, Any]:
    """What the runner writes for a probe's record: the envelope, then the record, scrubbed."""
    return scrub({"probe": probe, "collected_at": iso(time.time()), **record})


# --- one real capture ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need(Path(EVIDENCE).exists(), f"{EVIDENCE} is missing: install the package first")
    work = tmp_path_factory.mktemp("capture")
    log = work / "engine.log"
    log.write_bytes(LOG_BYTES)
    config = work / "config.toml"
    config.write_text(
        f"[[logs]]\npath = {json.dumps(str(log))}\n\n[[logs]]\nunit = {json.dumps(MISSING_UNIT)}\n"
    )
    archive = work / "archive"
    # The resident recorder first, so that the bundle holds its history files too.
    recorder = subprocess.Popen(
        [EVIDENCE, "record", "--quiet", "--archive", str(archive), "--ring-size", "1"]
    )
    try:
        until = time.monotonic() + 30
        while not socket_path(archive).exists():
            assert recorder.poll() is None and time.monotonic() < until, "no recorder"
            time.sleep(0.05)
        time.sleep(1.5)
        done = run_evidence(
            "capture", "--archive", str(archive), "--window", "2", "--config", str(config)
        )
    finally:
        recorder.terminate()
        recorder.wait(30)
    assert done.returncode == 0, f"capture exited {done.returncode}:\n{done.stderr}"
    hosts = list((archive / "bundles").iterdir())
    assert len(hosts) == 1, hosts
    found = bundles(archive, include_hidden=True)
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(scope="module")
def manifest(bundle: Path) -> dict[str, Any]:
    return json.loads((bundle / "manifest.json").read_text())


@pytest.fixture(scope="module")
def first_records(bundle: Path) -> dict[str, Any]:
    """Each file of the real bundle, parsed: the record of a .json, the first line of a .jsonl."""
    return {path.name: read_records(path)[0] for path in bundle.iterdir()}


# --- the schemas themselves ----------------------------------------------------------------


def test_every_bundle_file_has_a_schema():
    present = sorted(p.name for p in SCHEMA_DIR.glob("*.schema.json"))
    assert present == sorted({schema_path(name).name for name in BUNDLE_FILES})


@pytest.mark.parametrize("path", sorted(SCHEMA_DIR.glob("*.schema.json")), ids=lambda p: p.name)
def test_schema_is_valid_and_documented(path: Path):
    schema = json.loads(path.read_text())
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == DRAFT
    assert schema["$id"] == SCHEMA_ID.format(path.name)
    assert schema["title"].strip()
    assert schema["description"].strip()
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False


# --- the real bundle -----------------------------------------------------------------------


def test_manifest_validates(manifest: dict[str, Any]):
    assert errors("manifest.json", manifest) == []
    assert manifest["schema_version"] == SCHEMA_VERSION
    assert manifest["complete"] is True
    assert set(manifest["probes"]) == {cls.name for cls in ordered()}


def test_manifest_lists_exactly_the_files_present(bundle: Path, manifest: dict[str, Any]):
    listed = {entry["name"]: entry for entry in manifest["files"]}
    on_disk = {p.name for p in bundle.iterdir()} - {"manifest.json"}
    assert set(listed) == on_disk
    for name, entry in listed.items():
        data = (bundle / name).read_bytes()
        assert entry["bytes"] == len(data), name
        assert entry["sha256"] == hashlib.sha256(data).hexdigest(), name
        assert schema_path(name).is_file(), f"{name} has no schema"
    by_probes = [f for probe in manifest["probes"].values() for f in probe["files"]]
    assert sorted(by_probes) == sorted(listed)


def test_every_record_validates(bundle: Path):
    problems = []
    checked = 0
    for path in sorted(bundle.iterdir()):
        assert schema_path(path.name).is_file(), f"{path.name} has no schema"
        records = read_records(path)
        assert records, f"{path.name} is empty"
        for i, record in enumerate(records):
            problems += [f"line {i + 1}: {e}" for e in errors(path.name, record)]
            checked += 1
    assert problems == []
    assert checked >= len(BUNDLE_FILES)


def test_capture_exercised_file_and_journald_logs(first_records: dict[str, Any]):
    sources = {s["kind"]: s for s in first_records["logs.json"]["sources"]}
    assert set(sources) == {"file", "journald"}
    tail = sources["file"]
    assert tail["status"] == "ok"
    # Every progress frame is its own line, and the stray byte survived as an escape.
    assert tail["lines"] == [
        "loading model",
        "progress  10%",
        "progress  55%",
        "progress 100%",
        "weights at \\xff offset",
        "ready",
    ]
    assert sources["journald"]["target"] == MISSING_UNIT


# --- shapes a healthy machine does not produce, from the collector's own code ---------------


def test_provisional_manifest_validates():
    trigger = {"kind": "alert", "name": "HostOOM", "detail": None, "fired_at": iso(time.time())}
    provisional = new_manifest(time.time(), 30.0, trigger, "box", None)
    assert errors("manifest.json", provisional) == []


@pytest.mark.parametrize("with_manifest", [True, False], ids=["manifest", "no-manifest"])
def test_recovered_manifest_validates(tmp_path: Path, with_manifest: bool):
    leftover = tmp_path / ".20260101T000000Z_cron.inprogress"
    leftover.mkdir()
    writer = BundleWriter(leftover)
    if with_manifest:
        trigger = {"kind": "cron", "name": None, "detail": None, "fired_at": iso(time.time())}
        manifest = new_manifest(time.time(), 30.0, trigger, "box", None)
        manifest["probes"]["memory"] = {
            "status": "ok",
            "reason": None,
            "duration_ms": 1.5,
            "files": ["memory.json"],
        }
        writer.write_manifest(manifest)
    writer.write_json("memory.json", {"probe": "memory"}, "memory", 800)
    writer.append_jsonl("memory.samples.jsonl", {"t": "x"}, "memory", 750)
    with open(leftover / "memory.samples.jsonl", "ab") as f:
        f.write(b'{"t": "half')  # the line the collector was writing when it died
    (leftover / "host.json").write_bytes(b'{"probe": "ho')
    target = recover(leftover, ["memory", "host"])
    recovered = json.loads((target / "manifest.json").read_text())
    assert errors("manifest.json", recovered) == []
    assert "recovered_at" in recovered
    assert recovered["probes"]["host"]["duration_ms"] is None


def proc_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_memory_with_swap_devices(tmp_path: Path):
    proc = proc_tree(
        tmp_path,
        {
            "meminfo": (REF / "proc-meminfo.txt").read_text(),
            "swaps": (REF / "proc-swaps.txt").read_text(),
        },
    )
    reading = Memory(Context(config=Config(), started=time.time(), proc=proc)).freeze()
    record = envelope("memory", reading.record)
    assert len(record["swaps"]) == 2
    assert errors("memory.json", record) == []


def test_memory_with_keys_the_kernel_did_not_print(tmp_path: Path):
    (tmp_path / "meminfo").write_text("MemTotal:  1000 kB\nMemFree:  400 kB\n")
    ctx = Context(config=Config(), started=time.time(), proc=tmp_path)
    reading = Memory(ctx).freeze()
    assert reading.status == "ok"
    record = envelope("memory", reading.record)
    assert record["swaps"] is None
    assert record["free"]["available"] is None
    assert errors("memory.json", record) == []


def test_pressure_on_a_kernel_without_psi(tmp_path: Path):
    ctx = Context(config=Config(), started=time.time(), proc=tmp_path)
    ctx.shared["cgroups_of_interest"] = ["/system.slice/llama.service"]
    reading = Pressure(ctx).freeze()
    assert reading.status == "absent"
    assert errors("pressure.json", envelope("pressure", reading.record)) == []


def test_pressure_cgroup_with_limits_and_oom_kills(tmp_path: Path):
    proc = proc_tree(
        tmp_path / "proc",
        {
            "pressure/cpu": (REF / "proc-pressure-cpu-pre-5.13.txt").read_text(),
            "pressure/memory": (REF / "proc-pressure-memory.txt").read_text(),
            "pressure/io": (REF / "proc-pressure-io.txt").read_text(),
            "self/mountinfo": f"30 1 0:26 / {tmp_path}/cg rw,nosuid - cgroup2 cgroup2 rw\n",
        },
    )
    proc_tree(
        tmp_path / "cg" / "system.slice" / "llama.service",
        {
            "memory.current": (REF / "cgroup-memory-current.txt").read_text(),
            "memory.max": (REF / "cgroup-memory-max.txt").read_text(),
            "memory.high": "max\n",
            "memory.events": (REF / "cgroup-memory-events.txt").read_text(),
            "memory.pressure": (REF / "cgroup-memory-pressure.txt").read_text(),
        },
    )
    ctx = Context(config=Config(), started=time.time(), proc=proc)
    ctx.shared["cgroups_of_interest"] = ["/system.slice/llama.service", "/gone.scope"]
    probe = Pressure(ctx)
    record = envelope("pressure", probe.freeze().record)
    llama, gone = record["cgroups"]
    assert llama["memory_max"] == "max" and llama["memory_events"]["oom_kill"] == 3
    assert gone["status"] == "absent"
    assert errors("pressure.json", record) == []
    sample = scrub({"t": iso(time.time()), **probe.sample()})
    assert errors("pressure.samples.jsonl", sample) == []


def test_pressure_cgroup_without_cgroup2(tmp_path: Path):
    (tmp_path / "pressure").mkdir()
    (tmp_path / "pressure" / "memory").write_text(
        "some avg10=1.50 avg60=0.20 avg300=0.00 total=1234\n"
        "full avg10=0.50 avg60=0.10 avg300=0.00 total=567\n"
    )
    ctx = Context(config=Config(), started=time.time(), proc=tmp_path)
    ctx.shared["cgroups_of_interest"] = ["/system.slice/llama.service"]
    probe = Pressure(ctx)
    record = envelope("pressure", probe.freeze().record)
    assert record["cgroups"][0]["status"] == "absent"
    assert errors("pressure.json", record) == []
    sample = {"t": iso(time.time()), **probe.sample()}
    assert errors("pressure.samples.jsonl", scrub(sample)) == []


def test_logs_that_cannot_be_read(tmp_path: Path):
    config = Config(
        logs=(
            LogSource(name="gone", path=str(tmp_path / "gone.log")),
            LogSource(name="dir", path=str(tmp_path)),
        )
    )
    reading = Logs(Context(config=config, started=time.time())).freeze()
    assert reading.status == "absent"
    record = envelope("logs", reading.record)
    assert [s["status"] for s in record["sources"]] == ["absent", "error"]
    assert errors("logs.json", record) == []


def test_logs_not_configured():
    reading = Logs(Context(config=Config(), started=time.time())).freeze()
    assert reading.status == "skipped"
    assert errors("logs.json", envelope("logs", reading.record)) == []


# --- drift the schemas must reject ----------------------------------------------------------

Mutation = Callable[[Any], None]


def _set(path: tuple[Any, ...], value: Any) -> Mutation:
    def mutate(doc: Any) -> None:
        for key in path[:-1]:
            doc = doc[key]
        doc[path[-1]] = value

    return mutate


def _delete(path: tuple[Any, ...]) -> Mutation:
    def mutate(doc: Any) -> None:
        for key in path[:-1]:
            doc = doc[key]
        del doc[path[-1]]

    return mutate


def _stringify(path: tuple[Any, ...]) -> Mutation:
    def mutate(doc: Any) -> None:
        for key in path[:-1]:
            doc = doc[key]
        doc[path[-1]] = str(doc[path[-1]])

    return mutate


def _fail_probe(doc: Any) -> None:
    doc["probes"]["memory"]["status"] = "error"  # a status that is not ok with no reason


def _drop_but_complete(doc: Any) -> None:
    doc["dropped"].append({"file": "logs.json", "probe": "logs", "reason": "disk full"})


_NO_TOTAL = {"avg10": 1.0, "avg60": 0.5, "avg300": 0.1}  # total_us missing

DRIFT = [
    # (file, mutation, where the schema must complain, why)
    ("memory.json", _stringify(("free", "available")), "$.free.available", "free value as text"),
    ("memory.json", _set(("free", "available"), "unknown"), "$.free.available", "text for null"),
    ("memory.json", _delete(("free", "swap_total")), "$.free", "free key missing, not null"),
    ("memory.json", _stringify(("meminfo_kb", "MemTotal")), "$.meminfo_kb", "meminfo as text"),
    ("memory.json", _set(("probe",), "vmstat"), "$.probe", "wrong probe in the envelope"),
    ("memory.samples.jsonl", _delete(("t",)), "$", "sample without its time"),
    ("manifest.json", _set(("probes", "memory", "status"), "partial"), "$.probes.memory", "status"),
    ("manifest.json", _set(("schema_version",), 2), "$.schema_version", "a future format"),
    ("manifest.json", _set(("trigger", "kind"), "webhook"), "$.trigger.kind", "unknown trigger"),
    ("manifest.json", _set(("started_at",), "2026-11-29T03:12:45Z"), "$.started_at", "no-ms"),
    ("manifest.json", _set(("started_at",), "2026-11-29T03:12:45.123+00:00"), "$.started_at", "tz"),
    ("manifest.json", _set(("files", 0, "sha256"), "not-a-digest"), "$.files[0]", "sha256"),
    ("manifest.json", _set(("extra",), True), "$", "an undeclared top-level key"),
    ("manifest.json", _fail_probe, "$.probes.memory.reason", "not ok without a reason"),
    ("manifest.json", _drop_but_complete, "$", "complete although evidence was dropped"),
    ("processes.json", _delete(("processes", 0, "pid")), "$.processes[0]", "row without pid"),
    ("processes.json", _set(("processes", 0, "rss_bytes"), "9 MB"), "$.processes[0]", "rss text"),
    ("processes.json", _set(("processes", 0, "memory"), 1), "$.processes[0]", "unknown column"),
    ("processes.samples.jsonl", _delete(("top",)), "$", "sample without its top list"),
    ("vmstat.json", _set(("counters", "oom_kill"), None), "$.counters", "counter as null"),
    ("pressure.json", _set(("system", "memory"), {"some": _NO_TOTAL}), "$.system", "psi no total"),
    ("pressure.json", _set(("system", "swap"), {}), "$.system", "a resource PSI does not have"),
    ("host.json", _set(("loadavg",), [0.1, 0.2]), "$.loadavg", "two load averages"),
    ("logs.json", _set(("sources", 0, "reason"), "odd"), "$.sources[0]", "ok with a reason"),
    ("logs.json", _set(("sources", 0, "kind"), "syslog"), "$.sources[0].kind", "unknown kind"),
]


@pytest.mark.parametrize(
    ("record_file", "mutate", "where", "why"),
    DRIFT,
    ids=[f"{d[0]}:{d[3]}" for d in DRIFT],
)
def test_schema_rejects_drift(
    first_records: dict[str, Any], record_file: str, mutate: Mutation, where: str, why: str
):
    original = first_records[record_file]
    assert errors(record_file, original) == [], "the unmutated record must be valid"
    drifted = copy.deepcopy(original)
    mutate(drifted)
    found = validator(record_file).iter_errors(drifted)
    paths = [e.json_path for e in found]
    assert any(p.startswith(where) for p in paths), f"{why}: not rejected at {where}: {paths}"


def _query_record(point: list[Any]) -> dict[str, Any]:
    at = "2026-11-29T03:12:45.123Z"
    series = {"metric": {"__name__": "vllm:num_requests_waiting"}, "values": [point]}
    query = {"name": "waiting", "expr": "vllm:num_requests_waiting", "status": "ok"}
    return {
        "probe": "prometheus",
        "collected_at": at,
        "url": "http://127.0.0.1:9090",
        "version": "2.45.3",
        "start": at,
        "end": at,
        "step_s": 15,
        "queries": [{**query, "reason": None, "series": [series], "warnings": []}],
    }


@pytest.mark.parametrize(
    ("point", "valid"),
    [([1764386000.0, "3"], True), ([1764386000, "NaN"], True), (["not-a-number", "x"], False)],
)
def test_the_ingest_validator_checks_what_the_2020_12_schema_says(point, valid):
    """fastjsonschema knows drafts 4-7, where `prefixItems` is an unknown keyword and
    would be skipped: the point's time must still be a number."""
    from evidence.analyze.validate import Invalid, _conforms, _validator

    record = _query_record(point)
    assert (errors("prometheus.json", record) == []) is valid  # the reference, 2020-12
    if valid:
        _conforms(_validator("prometheus.schema.json"), record, "prometheus.json")
    else:
        with pytest.raises(Invalid, match="does not match its schema"):
            _conforms(_validator("prometheus.schema.json"), record, "prometheus.json")


@pytest.mark.parametrize(
    ("record_file", "mutate", "where", "why"),
    DRIFT,
    ids=[f"{d[0]}:{d[3]}" for d in DRIFT],
)
def test_the_ingest_validator_refuses_every_drift_the_reference_does(
    first_records: dict[str, Any], record_file: str, mutate: Mutation, where: str, why: str
):
    from evidence.analyze.validate import _validator
    from evidence.schemas import schema_path

    drifted = copy.deepcopy(first_records[record_file])
    mutate(drifted)
    compiled = _validator(schema_path(record_file).name)
    with pytest.raises(fastjsonschema.JsonSchemaException):
        compiled(drifted)


def test_a_2020_12_keyword_without_a_draft_7_equivalent_stops_the_compile():
    from evidence.analyze.validate import as_draft7

    with pytest.raises(ValueError, match="unevaluatedProperties"):
        as_draft7({"type": "object", "properties": {"a": {"unevaluatedProperties": False}}})
