"""A pack: one bundle as one gzip-compressed tar file, to attach to a bug report, and the
safe way back from one.

Invariants:
- A pack holds one top-level directory, the bundle, and in it only regular files with plain
  names: no link, no device, no subdirectory, no absolute path, no "..". Reading refuses
  anything else before a byte is extracted, and extraction goes through tarfile's "data"
  filter besides.
- Reading is bounded: at most MAX_MEMBERS members and MAX_BYTES of content.
- A pack names no one but its bundle: members carry no owner name or id, and the gzip
  header no file name.
- A pack is written whole or not at all (a temporary name beside the target, then a rename),
  0600: it holds command lines.
- A pack being read is never moved, changed or deleted; what is extracted goes to a new
  hidden directory (0700, files 0600) that the caller renames into place.
"""

import contextlib
import gzip
import os
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

SUFFIX = ".tar.gz"
# A bundle is a few megabytes; a day of Prometheus history or the recorder's ring, tens.
MAX_BYTES = 2**30
MAX_MEMBERS = 512  # a bundle has a file or two per probe, and a dozen probes


class PackError(Exception):
    """Why a file cannot be read as a pack, in one line."""


def write(directory: Path, names: Iterable[str], target: Path, top: str) -> int:
    """Write the files `names` of directory as the pack target, under the directory `top`.
    Returns the pack's size in bytes."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)  # 0600
    try:
        # No file name and a fixed time in the gzip header: they would name the pack's maker.
        with (
            os.fdopen(fd, "wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed,
            tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as tar,
        ):
            when = int(directory.stat().st_mtime)
            tar.addfile(_entry(top, tarfile.DIRTYPE, 0o700, when))
            for name in names:
                with open(directory / name, "rb") as f:
                    info = _entry(f"{top}/{name}", tarfile.REGTYPE, 0o600, when)
                    info.size = os.fstat(f.fileno()).st_size
                    tar.addfile(info, f)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target.stat().st_size


def _entry(name: str, kind: bytes, mode: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.mtime = mtime
    return info  # uid, gid 0 and uname, gname "": a pack names no owner


def unpack(pack: Path, into: Path) -> tuple[Path, str]:
    """Extract pack into a new hidden directory under into: (that directory, the name of
    the bundle's directory in the pack). Raises PackError, having extracted nothing."""
    with _opened(pack) as tar:
        top, files = _members(tar)
        staging = Path(tempfile.mkdtemp(prefix=".pack-", dir=into))  # 0700
        try:
            tar.extractall(staging, members=files, filter=_private(top))
        except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
            shutil.rmtree(staging, ignore_errors=True)  # our own half extraction
            raise PackError(f"cannot be read to its end ({_first(exc)})") from None
    return staging, top


@contextlib.contextmanager
def _opened(pack: Path) -> Iterator[tarfile.TarFile]:
    try:
        tar = tarfile.open(pack, mode="r:gz")  # noqa: SIM115  (closed below, once open)
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        raise PackError(f"not a gzip-compressed tar file ({_first(exc)})") from None
    except OSError as exc:
        raise PackError(f"cannot be read: {exc.strerror}") from None
    with tar:
        yield tar


def _members(tar: tarfile.TarFile) -> tuple[str, list[tarfile.TarInfo]]:
    """The pack's one top directory and its files, or PackError for anything else."""
    top: str | None = None
    files: list[tarfile.TarInfo] = []
    seen: set[str] = set()
    total = 0
    try:
        for n, member in enumerate(tar, start=1):
            if n > MAX_MEMBERS:
                raise PackError(f"holds more than {MAX_MEMBERS} members; a bundle has fewer")
            parts = member.name.rstrip("/").split("/")
            where = parts[0]
            if member.name.startswith("/") or any(p in ("", ".", "..") for p in parts):
                raise PackError(f"member {member.name!r} is not a plain relative path")
            if top is None:
                top = where
            if where != top or where.startswith(".") or len(parts) > 2:
                raise PackError(f"member {member.name!r} is outside the one bundle directory")
            if len(parts) == 1:
                if not member.isdir():
                    raise PackError(f"member {member.name!r} is not the bundle's directory")
                continue
            if not member.isreg():
                raise PackError(f"member {member.name!r} is a link or special file")
            if parts[1].startswith(".") or parts[1] in seen:
                raise PackError(f"member {member.name!r} is hidden or repeated")
            seen.add(parts[1])
            total += member.size
            if total > MAX_BYTES:
                raise PackError(f"holds more than {MAX_BYTES} bytes; a bundle holds fewer")
            files.append(member)
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise PackError(f"not a readable tar file ({_first(exc)})") from None
    if top is None or not files:
        raise PackError("holds no bundle")
    return top, files


def _private(top: str) -> Callable[[tarfile.TarInfo, str], tarfile.TarInfo]:
    """tarfile's "data" filter, then the file put straight in the staging directory, 0600."""

    def extract(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
        member = tarfile.data_filter(member, dest)
        return member.replace(name=member.name.removeprefix(f"{top}/"), mode=0o600, deep=False)

    return extract


def _first(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0] or type(exc).__name__
