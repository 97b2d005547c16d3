"""The gpu probe end to end through the real pynvml, against a fake libnvidia-ml.so.1.

The fake (tests/fakenvml/fakenvml.c) is compiled here with the system C compiler and
loaded by `evidence capture` in a subprocess through LD_LIBRARY_PATH, exactly as
pynvml loads the real driver library. The scenarios (tests/fixtures/nvml/) are data.
"""

import ctypes
import importlib.metadata
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import orjson
import pytest
from conftest import bundle_errors, bundles, manifest, need, run_evidence
from packaging.requirements import Requirement

from evidence.capture.config import Config
from evidence.capture.gpu import amdgpu
from evidence.capture.probes import Context
from evidence.capture.probes.gpu import Gpu
from evidence.capture.redact import MARK
from evidence.capture.runner import SEAL_MARGIN_S

ROOT = Path(__file__).parent.parent
SCENARIOS = Path(__file__).parent / "fixtures" / "nvml"
GIB = 1024**3


@pytest.fixture(scope="session")
def fake_nvml(tmp_path_factory) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    need(compiler is not None, "building the fake NVML library needs a C compiler (cc)")
    out = tmp_path_factory.mktemp("fakenvml")
    subprocess.run(
        [
            compiler,
            "-shared",
            "-fPIC",
            "-O1",
            "-Wall",
            "-Werror",
            "-o",
            str(out / "libnvidia-ml.so.1"),
            str(ROOT / "tests/fakenvml/fakenvml.c"),
        ],
        check=True,
    )
    return out


@pytest.fixture
def engines():
    """Two real processes standing in for engines; one carries a secret on its command line."""
    code = "import time; time.sleep(120)"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                code,
                "--model",
                "qwen3-32b.gguf",
                "--api-key",
                "sk-gpu-test-0123456789",
            ]
        ),
        subprocess.Popen([sys.executable, "-c", code, "--port", "8188"]),
    ]
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def scenario(tmp_path: Path, name: str, procs=()) -> Path:
    text = (SCENARIOS / f"{name}.scenario").read_text()
    for key, proc in zip(("pid_a", "pid_b"), procs, strict=False):
        text = text.replace("{" + key + "}", str(proc.pid))
    path = tmp_path / f"{name}.scenario"
    path.write_text(text)
    return path


def capture_with(
    fake: Path | None,
    scenario_file: Path | None,
    tmp_path: Path,
    window: str = "0",
    env_extra: dict | None = None,
) -> tuple[subprocess.CompletedProcess, Path | None]:
    env = dict(os.environ)
    if fake is not None:
        env["LD_LIBRARY_PATH"] = str(fake)
        env["FAKE_NVML_SCENARIO"] = str(scenario_file)
    env.update(env_extra or {})
    archive = tmp_path / "archive"
    result = run_evidence("capture", "--archive", str(archive), "--window", window, env=env)
    found = bundles(archive)
    return result, found[0] if found else None


def gpu_record(bundle: Path) -> dict:
    """gpu.json, after checking that the whole bundle keeps its schemas."""
    assert bundle_errors(bundle) == []
    return orjson.loads((bundle / "gpu.json").read_bytes())


def test_the_installed_pynvml_matches_the_fake_struct_layouts(fake_nvml):
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = next(d for d in pyproject["project"]["dependencies"] if d.startswith("nvidia-ml-py"))
    assert Requirement(wanted).specifier.contains(importlib.metadata.version("nvidia-ml-py"))
    import pynvml

    lib = ctypes.CDLL(str(fake_nvml / "libnvidia-ml.so.1"))
    lib.fake_nvml_layout.restype = ctypes.c_size_t
    lib.fake_nvml_layout.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    pairs = {
        "nvmlMemory_t": (pynvml.c_nvmlMemory_t, "used"),
        "nvmlMemory_v2_t": (pynvml.c_nvmlMemory_v2_t, "used"),
        "nvmlProcessInfo_t": (pynvml.c_nvmlProcessInfo_v3_t, "usedGpuMemory"),
        "nvmlPciInfo_t": (pynvml.nvmlPciInfo_t, "busId"),
        "nvmlUtilization_t": (pynvml.c_nvmlUtilization_t, "memory"),
        "nvmlEventData_t": (pynvml.c_nvmlEventData_t, "eventData"),
        "nvmlDeviceAddressingMode_t": (pynvml.c_nvmlDeviceAddressingMode_t, "value"),
    }
    for c_name, (struct, field) in pairs.items():
        assert lib.fake_nvml_layout(c_name.encode(), None) == ctypes.sizeof(struct), c_name
        assert (
            lib.fake_nvml_layout(c_name.encode(), field.encode()) == getattr(struct, field).offset
        )


def test_no_gpu_here_is_absent_with_a_reason(tmp_path):
    if Gpu(Context(config=Config(), started=time.time())).freeze().status != "absent":
        pytest.skip("this machine has a GPU; the absent case is shown by the fake scenarios")
    result, bundle = capture_with(None, None, tmp_path)
    assert result.returncode == 0, result.stderr
    entry = manifest(bundle)["probes"]["gpu"]
    assert entry["status"] == "absent"
    assert "libnvidia-ml.so.1" in entry["reason"] and "amdgpu" in entry["reason"]
    lines = [line.split()[0] for line in result.stderr.splitlines()]
    assert lines.index("gpu") < lines.index("processes")  # read first of the machine


def test_discrete_card_with_two_compute_processes(fake_nvml, engines, tmp_path):
    result, bundle = capture_with(
        fake_nvml, scenario(tmp_path, "discrete-24gb", engines), tmp_path, window="2"
    )
    assert result.returncode == 0, result.stderr
    nvidia = gpu_record(bundle)["nvidia"]
    assert nvidia["status"] == "ok" and nvidia["backend"] == "nvml"
    assert nvidia["driver_version"] == "580.95.05" and nvidia["cuda_driver_version"] == 13000
    (card,) = nvidia["devices"]
    assert card["memory_api"] == "v2"
    assert card["memory_total_bytes"] == 25757220864 and card["memory_used_bytes"] == 20 * GIB
    assert card["memory_reserved_bytes"] == 512 * 1024**2
    assert card["power_w"] == 412.0 and card["clock_event_reasons"] == ["sw_power_cap"]
    assert card["unified_memory"] is False
    by_pid = {p["pid"]: p for p in card["processes"]}
    first, second = (by_pid[p.pid] for p in engines)
    assert first["used_bytes"] == 16 * GIB and second["used_bytes"] == 3.5 * GIB
    assert first["name"].startswith("python") and "qwen3-32b.gguf" in first["cmdline"]
    assert first["cmdline"][first["cmdline"].index("--api-key") + 1] == MARK
    samples = [orjson.loads(x) for x in (bundle / "gpu.samples.jsonl").read_bytes().splitlines()]
    assert len(samples) >= 2
    assert samples[0]["nvidia"]["devices"][0]["processes"][0]["used_bytes"] == 16 * GIB
    xids = [e for s in samples for e in s["nvidia"]["xid"]]
    assert xids == [{"device": 0, "xid": 79}]  # delivered once, during the window
    assert b"sk-gpu-test" not in b"".join(f.read_bytes() for f in bundle.iterdir())


def test_gb10_memory_unsupported_is_unknown_not_zero_and_unified(fake_nvml, engines, tmp_path):
    result, bundle = capture_with(fake_nvml, scenario(tmp_path, "gb10", engines), tmp_path)
    assert result.returncode == 0, result.stderr
    (card,) = gpu_record(bundle)["nvidia"]["devices"]
    for field in ("memory_total_bytes", "memory_used_bytes", "memory_free_bytes"):
        assert card[field] is None
    assert card["unavailable"]["memory"]["status"] == "unsupported"
    assert "Not Supported" in card["unavailable"]["memory"]["reason"]
    assert card["unified_memory"] is True
    assert "per-process memory is reported" in card["unified_memory_basis"]
    types = {p["type"]: p["used_bytes"] for p in card["processes"]}
    assert types == {"compute": 60 * GIB, "graphics": 43 * 1024**2}
    assert "unified memory" in result.stderr and "aggregate memory unknown" in result.stderr


def test_per_process_memory_not_available_like_wddm(fake_nvml, engines, tmp_path):
    result, bundle = capture_with(fake_nvml, scenario(tmp_path, "wddm", engines), tmp_path)
    assert result.returncode == 0, result.stderr
    (card,) = gpu_record(bundle)["nvidia"]["devices"]
    assert card["memory_used_bytes"] == 9 * GIB
    assert [p["used_bytes"] for p in card["processes"]] == [None, None]
    assert card["unavailable"]["process_memory"]["status"] == "unsupported"
    assert card["unified_memory"] is False


def test_an_older_driver_falls_back_to_v1_and_the_old_reason_call(fake_nvml, tmp_path):
    result, bundle = capture_with(fake_nvml, scenario(tmp_path, "old-driver"), tmp_path)
    assert result.returncode == 0, result.stderr
    (card,) = gpu_record(bundle)["nvidia"]["devices"]
    assert card["memory_api"] == "v1" and card["memory_total_bytes"] == 11 * GIB
    assert card["clock_event_reasons"] == ["gpu_idle"]
    assert card["processes"] == []


@pytest.mark.parametrize(
    ("name", "status", "words"),
    [
        ("no-devices", "absent", "NVML reports no devices"),
        ("driver-not-loaded", "absent", "Driver Not Loaded"),
        ("init-mismatch", "error", "NVML/RM version mismatch"),
    ],
)
def test_nvml_without_usable_devices(fake_nvml, tmp_path, name, status, words):
    result, bundle = capture_with(fake_nvml, scenario(tmp_path, name), tmp_path)
    assert result.returncode == 0, result.stderr
    entry = manifest(bundle)["probes"]["gpu"]
    assert entry["status"] == status and words in entry["reason"]
    assert bundle_errors(bundle) == []
    assert manifest(bundle)["probes"]["processes"]["status"] == "ok"


def test_a_hung_call_costs_its_timeout_and_keeps_what_was_read(fake_nvml, tmp_path):
    start = time.monotonic()
    result, bundle = capture_with(fake_nvml, scenario(tmp_path, "hang-memory"), tmp_path)
    elapsed = time.monotonic() - start
    assert result.returncode == 0, result.stderr
    assert elapsed < SEAL_MARGIN_S
    m = manifest(bundle)
    assert bundle_errors(bundle) == []
    assert m["probes"]["gpu"]["status"] == "timeout"
    assert "nvmlDeviceGetMemoryInfo gave no answer within 1 s" in m["probes"]["gpu"]["reason"]
    assert 900 <= m["probes"]["gpu"]["duration_ms"] < 2000
    (card,) = gpu_record(bundle)["nvidia"]["devices"]
    assert card["name"] == "NVIDIA H100 80GB HBM3"  # read before the hang, kept
    assert all(m["probes"][p]["status"] == "ok" for p in ("processes", "memory", "pressure"))


def test_a_driver_that_hangs_during_the_window_still_seals_on_time(fake_nvml, tmp_path):
    start = time.monotonic()
    result, bundle = capture_with(
        fake_nvml, scenario(tmp_path, "hang-in-window"), tmp_path, window="3"
    )
    elapsed = time.monotonic() - start
    assert result.returncode == 0, result.stderr
    assert elapsed < 3 + SEAL_MARGIN_S
    sampling = manifest(bundle)["probes"]["gpu"]["sampling"]
    assert sampling["gaps"] + sampling["errors"] >= 2
    assert "nvmlEventSetWait" in sampling["last_error"]
    assert manifest(bundle)["probes"]["memory"]["sampling"]["samples"] >= 2


def test_a_lost_gpu_is_a_stub_and_the_other_card_is_kept(fake_nvml, tmp_path):
    result, bundle = capture_with(fake_nvml, scenario(tmp_path, "one-lost"), tmp_path, window="1")
    assert result.returncode == 0, result.stderr
    nvidia = gpu_record(bundle)["nvidia"]
    assert nvidia["status"] == "ok"
    healthy, lost = nvidia["devices"]
    assert healthy["memory_total_bytes"] == 51527024640 and healthy["processes"] == []
    assert lost["name"] is None and lost["processes"] is None
    assert lost["unavailable"]["name"]["reason"].endswith("GPU is lost")
    sample = orjson.loads((bundle / "gpu.samples.jsonl").read_bytes().splitlines()[0])
    assert [d["index"] for d in sample["nvidia"]["devices"]] == [0]  # the lost one is not asked


def test_nvidia_smi_fallback_keeps_na_as_unknown(engines, tmp_path):
    """pynvml cannot be imported (shadowed), nvidia-smi answers in the GB10 format."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "pynvml.py").write_text("raise ImportError('No module named pynvml')\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    # Rows as nvidia-smi 580 prints them on a GB10 (shared/reference/samples/nvidia-smi-gb10.txt),
    # in the order of capture.gpu.smi.GPU_FIELDS, with --format=csv,noheader,nounits.
    smi.write_text(f"""#!/bin/sh
case "$1" in
--query-gpu=*) echo "0, NVIDIA GB10, GPU-a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d, 0000000F:01:00.0, \
580.95.05, [N/A], [N/A], [N/A], 93, [N/A], 721, 3003, 11.17, 41" ;;
--query-compute-apps=*) echo "GPU-a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d, {engines[0].pid}, 61440" ;;
*) exit 2 ;;
esac
""")
    smi.chmod(0o755)
    env = {"PYTHONPATH": str(shadow), "PATH": f"{bindir}:{os.environ['PATH']}"}
    result, bundle = capture_with(None, None, tmp_path, env_extra=env)
    assert result.returncode == 0, result.stderr
    nvidia = gpu_record(bundle)["nvidia"]
    assert nvidia["backend"] == "nvidia-smi" and nvidia["driver_version"] == "580.95.05"
    (card,) = nvidia["devices"]
    assert card["memory_total_bytes"] is None
    assert card["unavailable"]["memory_total_bytes"]["reason"] == "nvidia-smi printed [N/A]"
    assert card["utilization_gpu_pct"] == 93 and card["power_w"] == 11.17
    assert card["utilization_memory_pct"] is None
    assert card["processes"][0]["used_bytes"] == 60 * GIB
    assert card["processes"][0]["pid"] == engines[0].pid
    assert card["unified_memory"] is True


def amd_tree(root: Path) -> Path:
    """A sysfs fixture shaped like amdgpu on a Ryzen AI Max+ (names from node_exporter's drm
    collector and the kernel's amdgpu documentation)."""
    card = root / "class" / "drm" / "card1" / "device"
    card.mkdir(parents=True)
    values = {
        "vendor": "0x1002",
        "mem_info_vram_total": str(512 * 1024**2),
        "mem_info_vram_used": str(300 * 1024**2),
        "mem_info_gtt_total": str(96 * GIB),
        "mem_info_gtt_used": str(40 * GIB),
        "gpu_busy_percent": "87",
        "uevent": "DRIVER=amdgpu\nPCI_SLOT_NAME=0000:c5:00.0\n",
    }
    for leaf, text in values.items():
        (card / leaf).write_text(text + "\n")
    connector = root / "class" / "drm" / "card1-DP-1"
    connector.mkdir()
    nvidia = root / "class" / "drm" / "card0" / "device"
    nvidia.mkdir(parents=True)
    (nvidia / "vendor").write_text("0x10de\n")
    return root


def test_amdgpu_from_a_sysfs_tree(tmp_path):
    root = amd_tree(tmp_path / "sys")
    (card,) = amdgpu.snapshot(root)
    assert card["vendor"] == "amd" and card["card"] == "card1"
    assert card["pci_bus_id"] == "0000:c5:00.0"
    assert card["gtt_total_bytes"] == 96 * GIB and card["gtt_used_bytes"] == 40 * GIB
    assert card["busy_pct"] == 87
    assert card["vis_vram_total_bytes"] is None
    assert card["unavailable"]["vis_vram_total_bytes"]["status"] == "unsupported"
    (sample,) = amdgpu.sample(root)
    assert sample == {
        "card": "card1",
        "vram_used_bytes": 300 * 1024**2,
        "gtt_used_bytes": 40 * GIB,
        "busy_pct": 87,
    }


def test_gpu_probe_reports_amd_when_there_is_no_nvidia(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi either
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    probe = Gpu(Context(config=Config(), started=time.time(), sys=amd_tree(tmp_path / "sys")))
    reading = probe.freeze()
    if reading.record["nvidia"]["status"] == "ok":
        pytest.skip("this machine has an NVIDIA driver")
    assert reading.status == "ok"
    assert reading.record["amd"]["devices"][0]["gtt_used_bytes"] == 40 * GIB
    assert probe.sample()["amd"][0]["busy_pct"] == 87
    assert "GTT 40.0 GiB of 96.0 GiB" in probe.headline(reading.record)
