"""`evidence pack`: one bundle as one file, masked of who and where it came from, and read
back by `evidence ingest PACK`; a hostile or broken pack is refused in one line."""

import gzip
import hashlib
import io
import ipaddress
import os
import random
import re
import socket
import stat
import tarfile
from pathlib import Path

import orjson
import pytest
from conftest import bundle_errors, run_evidence
from synth import Host, write_bundle

from evidence.archive.clock import iso
from evidence.capture.mask import Masker

TS = 1_764_000_000.0  # 2025-11-24
HOST = "gpu-box-17"
FQDN = "gpu-box-17.lab.example.com"
# Every identifier the seeded bundle holds, as it would be searched for in the pack.
SEEDED = [
    HOST,
    FQDN,
    "lab.example.com",
    "db-primary",
    "corp.example.net",
    "10.20.30.40",
    "192.168.77.12",
    "172.16.5.9",
    "fd12:3456:789a::17",
    "2a01:4f8:c17:1::5",
    "alice",
    "bob",
    "/root",
    "/home/alice",
    "/Users/bob",
]


def _reseal(bundle: Path) -> None:
    """The manifest's sizes and checksums made those of the files as they now are."""
    manifest = orjson.loads((bundle / "manifest.json").read_bytes())
    for entry in manifest["files"]:
        data = (bundle / entry["name"]).read_bytes()
        entry["bytes"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    (bundle / "manifest.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))


def _edit(bundle: Path, name: str, change) -> None:
    record = orjson.loads((bundle / name).read_bytes())
    change(record)
    (bundle / name).write_bytes(orjson.dumps(record))


def seeded_bundle(root: Path) -> Path:
    """A valid bundle naming every kind of identifier: host name and FQDN, IPv4 and IPv6
    addresses, users as process owners and in command lines, and home paths."""
    kernel = [
        f"IPv4: martian source 10.20.30.40 from 192.168.77.12, on dev eth0 ({HOST})",
        f"nfs: server {FQDN.upper()} not responding, still trying",
        "Out of memory: Killed process 4242 (python3) total-vm:9000kB, anon-rss:8000kB, UID:1000",
    ]
    bundle = write_bundle(
        root, Host(HOST), TS, random.Random(7), start=TS - 86400, kernel_lines=kernel,
        models=["chat"], processes=2, window=2, trigger=("alert", "HostOOM"),
    )  # fmt: skip

    def processes(record):
        rows = record["processes"]
        rows[0].update(
            user="alice",
            name="python3",
            cmdline=["/home/alice/venv/bin/python", "-m", "vllm", "--user", "alice",
                     "--download-dir", "/home/alice/models", "--host", "10.20.30.40"],
        )  # fmt: skip
        rows[1].update(
            user="bob",
            name="llama-server",
            cmdline=["/Users/bob/llama.cpp/llama-server", "--log-file", "/Users/Bob/llama.log"],
        )
        rows.append(
            {**rows[1], "pid": 3000, "user": "root", "name": "ollama",
             "cmdline": ["/root/ollama/bin/ollama", "serve", "--models", "/root/.ollama"]}
        )  # fmt: skip
        record["count"] = len(rows)

    def engines(record):
        engine = record["engines"][0]
        engine["url"] = "http://[fd12:3456:789a::17]:8080"
        endpoint = engine["endpoints"]["/running"]
        endpoint["url"] = "http://[fd12:3456:789a::17]:8080/running"
        endpoint["body"] = '{"peer": "10.20.30.40", "owner": "alice"}'

    _edit(bundle, "processes.json", processes)
    _edit(bundle, "engines.json", engines)
    lines = [
        "127.0.0.1 localhost\n172.16.5.9 db-primary.corp.example.net db-primary\n"
        f"10.20.30.40 {FQDN} {HOST}",
        f"accepted connection from 2a01:4f8:c17:1::5 port 443 for ALICE on {HOST}",
        "bob: loaded model from /Users/bob/models/chat.gguf; /root/.cache is 2 GiB",
        "listening on 127.0.0.1:8080 and [::1]:8080 and 0.0.0.0:9090",
    ]  # fmt: skip
    logs = {
        "probe": "logs",
        "collected_at": iso(TS),
        "sources": [
            {"name": "/home/alice/llama.log", "kind": "file", "target": "/home/alice/llama.log",
             "status": "ok", "size": 4096, "mtime": iso(TS), "bytes": 400, "truncated": False,
             "lines": lines}
        ],
    }  # fmt: skip
    (bundle / "logs.json").write_bytes(orjson.dumps(logs))
    manifest = orjson.loads((bundle / "manifest.json").read_bytes())
    manifest["files"].append({"name": "logs.json", "probe": "logs", "bytes": 0, "sha256": "0"})
    manifest["files"].sort(key=lambda e: e["name"])
    manifest["probes"]["logs"] = {
        "status": "ok", "reason": None, "duration_ms": 1.0, "files": ["logs.json"],
    }  # fmt: skip
    manifest["config_source"] = "/home/alice/.config/evidence/config.toml"
    (bundle / "manifest.json").write_bytes(orjson.dumps(manifest))
    _reseal(bundle)
    assert bundle_errors(bundle) == []
    return bundle


def members(pack: Path) -> dict[str, bytes]:
    with tarfile.open(pack, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isreg()}


def texts(name: str, data: bytes) -> str:
    """Every string of a JSON or JSON-lines file, keys included, one a line."""
    found: list[str] = []

    def walk(value) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            found.extend(value)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for line in data.splitlines() if name.endswith(".jsonl") else [data]:
        walk(orjson.loads(line))
    return "\n".join(found)


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.fixture
def seeded(tmp_path) -> Path:
    return seeded_bundle(tmp_path / "source")


def test_a_masked_pack_keeps_no_host_address_user_or_home_and_still_ingests(tmp_path, seeded):
    out = tmp_path / "share" / "bug.tar.gz"
    out.parent.mkdir()
    done = run_evidence("pack", str(seeded), "--mask", "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    summary = orjson.loads(done.stdout)
    mapping_path = Path(summary["mapping"])
    assert summary["pack"] == str(out) and summary["masked"]
    assert str(mapping_path) in done.stderr  # said where the way back is

    files = members(out)
    listed = orjson.loads((seeded / "manifest.json").read_bytes())["files"]
    assert f"{seeded.name}/manifest.json" in files and len(files) == len(listed) + 1
    assert not any("mapping" in name for name in files)
    for name, data in files.items():
        for original in SEEDED:
            assert original.lower().encode() not in data.lower(), (original, name)
    loopback = b"".join(files.values())
    assert b"127.0.0.1" in loopback and b"0.0.0.0" in loopback  # they name no machine

    # The way back: beside the pack, private, and complete.
    assert mapping_path.parent == out.parent
    assert stat.S_IMODE(mapping_path.stat().st_mode) == 0o600
    mapping = orjson.loads(mapping_path.read_bytes())
    assert {HOST, FQDN, "db-primary"} <= mapping["hosts"].keys()
    assert {"alice", "bob"} <= mapping["users"].keys()
    assert "root" not in mapping["users"] and "ollama" not in mapping["users"]
    assert {"10.20.30.40", "192.168.77.12", "172.16.5.9"} <= mapping["addresses"].keys()
    assert {"fd12:3456:789a::17", "2a01:4f8:c17:1::5"} <= mapping["addresses"].keys()
    assert mapping["homes"] == {"/root": mapping["homes"]["/root"]}

    # The same original is the same token in every file it appears in.
    def holding(token: str) -> set[str]:
        found = re.compile(rf"(?<![A-Za-z0-9_.-]){re.escape(token)}(?![A-Za-z0-9_-])")
        return {
            name.split("/")[1] for name, data in files.items() if found.search(texts(name, data))
        }

    host = mapping["hosts"][HOST]
    assert {"manifest.json", "host.json", "kernel.json", "logs.json"} <= holding(host)
    assert {"processes.json", "logs.json", "engines.json"} <= holding(mapping["users"]["alice"])
    assert {"kernel.json", "logs.json", "processes.json", "engines.json"} <= holding(
        mapping["addresses"]["10.20.30.40"]
    )
    home = f"/home/{mapping['users']['alice']}/models"
    assert home.encode() in files[f"{seeded.name}/processes.json"]

    archive = tmp_path / "archive"
    done = run_evidence("ingest", "--archive", str(archive), str(out), "--json")
    assert done.returncode == 0, done.stderr
    (bundle_id,) = orjson.loads(done.stdout)["bundle_ids"]
    (unpacked,) = (archive / "bundles" / host).iterdir()
    assert bundle_errors(unpacked) == []
    done = run_evidence("classify", "--archive", str(archive), bundle_id)
    assert done.returncode == 0, done.stderr


def test_an_unmasked_pack_reads_back_as_the_same_bundle(tmp_path, seeded):
    manifest = orjson.loads((seeded / "manifest.json").read_bytes())
    done = run_evidence("pack", str(seeded), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    pack = Path(done.stdout.strip())
    assert pack == tmp_path / f"{seeded.name}.tar.gz"
    assert not list(tmp_path.glob("*.mapping.json"))
    assert stat.S_IMODE(pack.stat().st_mode) == 0o600
    with tarfile.open(pack, "r:gz") as tar:
        assert {m.uname for m in tar} == {""}  # no owner's name in the pack

    archive = tmp_path / "archive"
    done = run_evidence("ingest", "--archive", str(archive), str(pack), "--json")
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["bundle_ids"] == [manifest["bundle_id"]]
    unpacked = archive / "bundles" / HOST / seeded.name
    for entry in ["manifest.json", *(e["name"] for e in manifest["files"])]:
        assert (unpacked / entry).read_bytes() == (seeded / entry).read_bytes()
        assert stat.S_IMODE((unpacked / entry).stat().st_mode) == 0o600

    again = run_evidence("ingest", "--archive", str(archive), str(pack), "--json")
    assert again.returncode == 0 and orjson.loads(again.stdout)["already_present"] == 1
    assert [p.name for p in (archive / "bundles" / HOST).iterdir()] == [seeded.name]

    by_id = run_evidence(
        "pack", manifest["bundle_id"], "--archive", str(archive), "--out", str(tmp_path / "b.tgz")
    )
    assert by_id.returncode == 0, by_id.stderr
    assert members(tmp_path / "b.tgz") == members(pack)


def _hostile(path: Path, *entries: tarfile.TarInfo) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info in entries:
            data = b"{}" if info.isreg() else None
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def _link(name: str, kind: bytes, to: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, to
    return info


@pytest.mark.parametrize(
    ("entries", "said"),
    [
        ([_file("b/manifest.json"), _file("b/../../escaped")], "plain relative path"),
        ([_file("b/manifest.json"), _file("/tmp/escaped-evidence-pack")], "plain relative path"),
        ([_file("b/manifest.json"), _link("b/kernel.json", tarfile.SYMTYPE, "/etc/passwd")],
         "link or special file"),
        ([_file("b/manifest.json"), _link("b/host.json", tarfile.LNKTYPE, "b/manifest.json")],
         "link or special file"),
        ([_file("b/manifest.json"), _link("b/dev", tarfile.CHRTYPE, "")], "link or special"),
        ([_file("b/manifest.json"), _file("c/host.json")], "outside the one bundle directory"),
        ([_file("b/sub/host.json")], "outside the one bundle directory"),
        ([], "holds no bundle"),
    ],
)  # fmt: skip
def test_a_hostile_pack_is_refused_in_one_line_and_nothing_is_written(tmp_path, entries, said):
    pack = _hostile(tmp_path / "evil.tar.gz", *entries)
    archive = tmp_path / "archive"
    done = run_evidence("ingest", "--archive", str(archive), str(pack), cwd=tmp_path)
    assert done.returncode == 2
    assert said in one_line(done.stderr) and str(pack) in done.stderr
    assert pack.exists()  # never deleted
    assert sorted(p.name for p in tmp_path.iterdir()) == ["archive", "evil.tar.gz"]
    assert not Path("/tmp/escaped-evidence-pack").exists()
    assert [p for p in archive.rglob("*") if p.is_file() and "bundles" in p.parts] == []
    assert list((archive / "bundles").iterdir()) == []  # no staging left behind


@pytest.mark.parametrize(
    "content", [b"not a tar at all\n", gzip.compress(b"gzip, but no tar inside"), b""]
)
def test_a_file_that_is_not_a_pack_is_one_line_and_kept(tmp_path, content):
    path = tmp_path / "bundle.tar.gz"
    path.write_bytes(content)
    done = run_evidence("ingest", "--archive", str(tmp_path / "archive"), str(path))
    assert done.returncode == 2
    assert "not a pack of one bundle" in one_line(done.stderr)
    assert path.read_bytes() == content


def test_a_pack_whose_files_differ_from_its_checksums_is_quarantined_with_the_reason(
    tmp_path, seeded
):
    (seeded / "kernel.json").write_bytes((seeded / "kernel.json").read_bytes().replace(b"3", b"4"))
    pack = tmp_path / "tampered.tar.gz"
    with tarfile.open(pack, "w:gz") as tar:
        tar.add(seeded, arcname=seeded.name)
    archive = tmp_path / "archive"
    done = run_evidence("ingest", "--archive", str(archive), str(pack))
    assert done.returncode == 8, done.stderr
    assert "kernel.json: checksum or size differs from the manifest" in done.stdout
    assert "Traceback" not in done.stderr and pack.exists()
    quarantined = (archive / "quarantine.jsonl").read_text()
    assert "checksum or size differs" in quarantined


def test_a_bundle_that_does_not_validate_is_not_packed(tmp_path, seeded):
    (seeded / "host.json").write_bytes(b"{}")
    done = run_evidence("pack", str(seeded), cwd=tmp_path)
    assert done.returncode == 2
    assert "cannot pack it" in one_line(done.stderr)
    assert list(tmp_path.glob("*.tar.gz")) == []


def test_a_real_bundle_of_this_machine_is_masked_of_its_names_and_addresses(tmp_path):
    archive = tmp_path / "archive"
    done = run_evidence("capture", "--archive", str(archive), "--window", "0", "-q")
    assert done.returncode in (0, 5), done.stderr  # 5: a probe this box lacks
    done = run_evidence("pack", "latest", "--archive", str(archive), "--mask", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    pack = Path(done.stdout.strip())
    text = b"".join(members(pack).values()).decode()
    for name in {os.uname().nodename, socket.gethostname()}:
        word = re.compile(rf"(?<![A-Za-z0-9_-]){re.escape(name)}(?![A-Za-z0-9_-])", re.I)
        assert not word.search(text), name
    for found in re.findall(r"(?<![0-9.])(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?![0-9]|\.[0-9])", text):
        try:
            address = ipaddress.ip_address(found)
        except ValueError:
            continue
        assert address.is_loopback or address.is_unspecified or address in TOKENS_V4, found
    done = run_evidence("ingest", "--archive", str(tmp_path / "other"), str(pack))
    assert done.returncode == 0, done.stdout + done.stderr


TOKENS_V4 = ipaddress.ip_network("198.18.0.0/15")


def test_names_are_masked_whole_and_services_are_not_people():
    masker = Masker()
    masker.learn_host("vm")
    record = {
        "processes": [
            {"pid": 1, "name": "ollama", "cmdline": ["ollama", "serve"], "user": "ollama"},
            {"pid": 2, "name": "bash", "cmdline": ["bash"], "user": "root"},
            {"pid": 3, "name": "python3", "cmdline": ["python3"], "user": "1001"},
        ],
        "kind": "ollama",
        "lines": ["vm: Killed process 7 (stress-ng-vm) total-vm:10kB", "vm.example.com up"],
    }
    masker.learn(record)
    masked = masker.mask(record)
    assert masked["lines"] == [
        "host-1: Killed process 7 (stress-ng-vm) total-vm:10kB",
        "host-1.domain-1.invalid up",
    ]
    assert masked["kind"] == "ollama" and masked["processes"] == record["processes"]
    assert masker.mapping()["users"] == {}
