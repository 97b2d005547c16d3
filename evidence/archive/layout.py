"""Where bundles live, and the rules that keep two captures from trampling each other.

Invariants:
- Everything the collector writes is under the archive root: directories 0700, files 0600.
- A bundle becomes visible only by a rename once sealed; an unsealed one has a hidden name.
- A hidden leftover found under the lock belongs to a capture that died; it is renamed
  into a visible `-partial` bundle, never deleted.
"""

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

BUNDLES = "bundles"
DATABASE = "evidence.duckdb"  # the analyst's, rebuilt from bundles/ at any time
REPORTS = "reports"
INPROGRESS_SUFFIX = ".inprogress"
PARTIAL_SUFFIX = "-partial"


class ArchiveError(Exception):
    """The archive cannot be used (not writable, not a directory)."""


def default_root() -> Path:
    """The design's default: /var/lib/evidence for root, else the XDG data directory."""
    if os.geteuid() == 0:
        return Path("/var/lib/evidence")
    data = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return Path(data) / "evidence"


def resolve_root(cli_value: str | None, config_value: str | None) -> Path:
    """--archive, then $EVIDENCE_ARCHIVE, then the configuration, then the default."""
    chosen = cli_value or os.environ.get("EVIDENCE_ARCHIVE") or config_value
    return Path(chosen).expanduser().absolute() if chosen else default_root()


def private_dir(path: Path) -> Path:
    """Create path and every missing parent with mode 0700; existing ones are left alone."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    try:
        for directory in reversed(missing):
            directory.mkdir(mode=0o700)
    except FileExistsError:
        pass  # a concurrent capture made it first
    except OSError as exc:
        raise ArchiveError(f"{path}: cannot create archive directory: {exc.strerror}") from None
    if not path.is_dir():
        raise ArchiveError(f"{path}: exists and is not a directory")
    return path


@contextlib.contextmanager
def private_files() -> Iterator[None]:
    """Files created meanwhile by code that takes no mode (DuckDB, its WAL, COPY's Parquet)
    are 0600 and directories 0700, whatever umask cron or a shell left. The umask is the
    process's: meant for commands that are the only thing their process does."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def slug(text: str) -> str:
    """A trigger as a directory-name fragment: alert:HostOOM -> alert-HostOOM."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:80] or "manual"


def host_dir(root: Path, hostname: str) -> Path:
    return private_dir(root / BUNDLES / slug(hostname))


def new_bundle_name(parent: Path, stamp: str, trigger_slug: str) -> str:
    """<stamp>_<slug>, suffixed -2, -3... if a bundle of the same second already exists."""
    base = f"{stamp}_{trigger_slug}"
    name, n = base, 1
    while any(
        (parent / candidate).exists()
        for candidate in (name, f".{name}{INPROGRESS_SUFFIX}", f"{name}{PARTIAL_SUFFIX}")
    ):
        n += 1
        name = f"{base}-{n}"
    return name


def sealed(manifest: object) -> bool:
    """Whether a parsed manifest.json is that of a bundle: sealed by its capture, or made a
    visible partial bundle after its capture died. Anything else is not a bundle yet."""
    return isinstance(manifest, dict) and (
        manifest.get("finished_at") is not None or "recovered_at" in manifest
    )


def inprogress_path(parent: Path, name: str) -> Path:
    return parent / f".{name}{INPROGRESS_SUFFIX}"


def leftovers(parent: Path) -> list[Path]:
    """Hidden bundles of captures that never sealed (only meaningful under the lock)."""
    return sorted(p for p in parent.glob(f".*{INPROGRESS_SUFFIX}") if p.is_dir())


def partial_path(leftover: Path) -> Path:
    """The visible name a leftover is kept under."""
    name = leftover.name[1:].removesuffix(INPROGRESS_SUFFIX) + PARTIAL_SUFFIX
    return leftover.with_name(name)
