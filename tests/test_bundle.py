"""The bundle writer on a real, tiny filesystem: what goes first when the disk is full."""

import hashlib

import orjson

from evidence.capture.bundle import BundleWriter
from evidence.capture.redact import MARK


def test_eviction_drops_the_least_important_file_first(small_disk):
    bundle = small_disk / "b"
    bundle.mkdir()
    writer = BundleWriter(bundle)
    writer.write_manifest({"schema_version": 1})
    assert writer.write_json("logs.json", {"lines": ["l" * 100_000]}, "logs", 100)
    assert writer.write_json("kernel.json", {"lines": ["k" * 100_000]}, "kernel", 400)
    # Only room for this one if something else goes: the logs go, the kernel stays.
    assert writer.write_json("processes.json", {"rows": ["p" * 80_000]}, "processes", 900)
    assert sorted(p.name for p in bundle.iterdir()) == [
        "kernel.json",
        "manifest.json",
        "processes.json",
    ]
    assert [d["file"] for d in writer.dropped] == ["logs.json"]
    assert "processes.json" in writer.dropped[0]["reason"]


def test_a_write_that_cannot_fit_is_refused_whole_and_recorded(small_disk):
    bundle = small_disk / "b"
    bundle.mkdir()
    writer = BundleWriter(bundle)
    assert writer.write_json("kernel.json", {"lines": ["k" * 150_000]}, "kernel", 400)
    assert not writer.write_json("logs.json", {"lines": ["l" * 150_000]}, "logs", 100)
    assert not (bundle / "logs.json").exists()  # no half file left behind
    assert writer.dropped[0]["file"] == "logs.json"
    # a later append to a dropped file is refused too, instead of writing half a series
    assert not writer.append_jsonl("logs.json", {"x": 1}, "logs", 100)


def test_a_failed_append_leaves_only_whole_lines(small_disk):
    bundle = small_disk / "b"
    bundle.mkdir()
    writer = BundleWriter(bundle)
    n = 0
    while writer.append_jsonl("memory.samples.jsonl", {"pad": "m" * 20_000}, "memory", 750):
        n += 1
    lines = (bundle / "memory.samples.jsonl").read_bytes().splitlines()
    assert len(lines) == n > 0
    assert all(orjson.loads(line)["pad"] for line in lines)
    # The earlier samples stay, and the inventory describes exactly what is on disk.
    data = (bundle / "memory.samples.jsonl").read_bytes()
    table = {f["name"]: f for f in writer.table()}
    assert table["memory.samples.jsonl"]["bytes"] == len(data)
    assert table["memory.samples.jsonl"]["sha256"] == hashlib.sha256(data).hexdigest()
    (cut,) = writer.dropped
    assert cut["file"] == "memory.samples.jsonl" and "cut short" in cut["reason"]
    # no later sample is appended after the gap, which would hide it
    assert not writer.append_jsonl("memory.samples.jsonl", {"x": 1}, "memory", 750)


def test_records_are_redacted_on_the_way_to_disk(tmp_path):
    writer = BundleWriter(tmp_path)
    writer.write_json(
        "logs.json", {"lines": ["curl -H 'Authorization: Bearer abcdefghijkl'"]}, "logs", 100
    )
    text = (tmp_path / "logs.json").read_text()
    assert "abcdefghijkl" not in text and MARK in text
