"""`evidence pack`: one bundle as one file to attach to a bug report, masked if asked; and
the way back in, `evidence ingest PACK`.

The file format is evidence.archive.pack's and the masking evidence.capture.mask's; here
are the command, what is packed and where it goes, and where a pack given to `ingest` is
unpacked: the archive's bundles/<host>/, where a capture would have put the bundle.
"""

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import orjson

from evidence.archive.clock import iso
from evidence.archive.layout import BUNDLES, ArchiveError, host_dir, new_bundle_name, private_dir
from evidence.archive.layout import slug as slug_of
from evidence.archive.pack import SUFFIX, PackError, unpack, write
from evidence.capture.bundle import MANIFEST
from evidence.capture.mask import Masker, masked_copy
from evidence.cli.analyst import _bundle, _guarded
from evidence.cli.exits import Exit, epilog, fail
from evidence.cli.group import main
from evidence.cli.options import archive_options, root_of

MAPPING_SUFFIX = ".mapping.json"


@main.command(
    epilog=epilog(Exit.USAGE, Exit.BUSY, Exit.UNWRITABLE, Exit.DAMAGED, ok="the pack was written")
)
@click.argument("bundle")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Where to write the pack (default: <bundle directory>.tar.gz, or "
    "<bundle directory>.masked.tar.gz with --mask, in the current directory).",
)
@click.option(
    "--mask",
    is_flag=True,
    help="Replace host names, IP addresses, user names and home paths with tokens "
    "(host-1, 198.18.0.1, user-1, /home/user-1), the same original by the same token in "
    "every file; the mapping back is written beside the pack, never in it.",
)
@archive_options
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@_guarded
def pack(
    bundle: str,
    out: Path | None,
    mask: bool,
    archive: str | None,
    config_path: str | None,
    as_json: bool,
) -> None:
    """Write BUNDLE as one compressed file, to attach to a bug report upstream.

    BUNDLE is a bundle directory, a bundle id, or `latest`. The pack (a .tar.gz) holds the
    bundle's directory: its manifest.json, with every file's sha256, and the files it
    lists. The bundle is checked first, as `evidence ingest` checks one; anyone can read
    the pack back with `evidence ingest PACK`.

    With --mask, host names (the bundle's own, its fully qualified names and /etc/hosts
    names), every IPv4 and IPv6 address but loopback and 0.0.0.0/::, the names of users
    (process owners, home directories) and home paths (/home/<user>, /Users/<user>,
    /root) are replaced consistently, and the manifest's checksums are those of the masked
    files. A bundle captured on this machine is also masked of this machine's names and
    users. System accounts (root, daemon...), and users named as a program they run, are
    kept: they name a service. Secrets were already redacted at capture. The mapping from
    original to token is written 0600 beside the pack, as <pack>.mapping.json: keep it,
    do not attach it.
    """
    from evidence.analyze.validate import Invalid, check

    directory = _directory(bundle, archive, config_path)
    try:
        manifest, _, records, unknown = check(directory)
    except Invalid as exc:
        fail(f"{directory}: cannot pack it: {exc}", Exit.USAGE)
    except OSError as exc:
        fail(f"{exc.filename or directory}: cannot read it: {exc.strerror}", Exit.USAGE)
    if mask and unknown:
        fail(
            f"{directory}: cannot mask {unknown[0]}, a newer collector's file this evidence "
            "does not read: pack it with a newer evidence, or without --mask",
            Exit.USAGE,
        )
    names = [MANIFEST, *(entry["name"] for entry in manifest["files"])]
    top, masker = directory.name, None
    with tempfile.TemporaryDirectory(prefix="evidence-pack-") as work:
        source = directory
        if mask:
            source = Path(work) / "bundle"
            try:
                masker = masked_copy(directory, manifest, records, source)
            except OSError as exc:
                fail(f"{work}: cannot write the masked copy: {exc.strerror}", Exit.USAGE)
            top = masker.text(top)
            try:
                check(source)
            except Invalid as exc:
                fail(
                    f"{directory}: masking made the bundle unreadable ({exc}); please report "
                    "this, and pack it without --mask meanwhile",
                    Exit.INTERNAL,
                )
        top = slug_of(top)
        target = out or Path.cwd() / f"{top}{'.masked' if mask else ''}{SUFFIX}"
        try:
            # The way back first: a pack whose mapping could not be written is never made.
            mapping = _write_mapping(target, masker, manifest) if masker else None
            size = write(source, names, target, top)
        except OSError as exc:
            fail(f"{target}: cannot write the pack: {exc.strerror}", Exit.USAGE)
    if mapping is not None:
        click.echo(
            f"evidence: the mapping back to the original names is in {mapping} "
            "(keep it, do not attach it)",
            err=True,
        )
    if as_json:
        summary = {
            "pack": str(target),
            "bundle_id": manifest["bundle_id"],
            "bytes": size,
            "files": len(names),
            "masked": mask,
            "mapping": None if mapping is None else str(mapping),
            "tokens": {k: len(v) for k, v in masker.mapping().items()} if masker else None,
        }
        click.echo(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(str(target))


def _directory(bundle: str, archive: str | None, config_path: str | None) -> Path:
    """BUNDLE's directory: a directory as given (nothing is ingested), else the one of the
    archive's bundle of that id, or the latest."""
    if Path(bundle).is_dir():
        return Path(bundle)
    con, bundle_id = _bundle(root_of(archive, config_path), bundle)
    try:
        (path,) = con.execute(
            "SELECT path FROM bundles WHERE bundle_id = ?", [bundle_id]
        ).fetchone()
    finally:
        con.close()
    return Path(path)


def _write_mapping(target: Path, masker: Masker, manifest: dict[str, Any]) -> Path:
    from evidence.reports.output import replace_text

    path = target.with_name(target.name + MAPPING_SUFFIX)
    mapping = {
        "pack": target.name,
        "bundle_id": manifest["bundle_id"],
        "masked_at": iso(time.time()),
        **masker.mapping(),
    }
    replace_text(path, orjson.dumps(mapping, option=orjson.OPT_INDENT_2).decode() + "\n")
    os.chmod(path, 0o600)  # an earlier mapping of the same name may have been opened up
    return path


def unpacked(root: Path, paths: tuple[Path, ...]) -> tuple[Path, ...]:
    """PATHS, each pack among them replaced by its bundle, unpacked into the archive where
    a capture of its host would have put it (or the same bundle already there). A file
    that is not a pack, or a pack with anything but one bundle's files in it, ends the
    command before anything is unpacked."""
    packs = [p for p in paths if p.is_file()]
    if not packs:
        return paths
    try:
        shelf = private_dir(root / BUNDLES)
    except ArchiveError as exc:
        fail(f"cannot write the archive: {exc}", Exit.UNWRITABLE)
    staged: dict[Path, tuple[Path, str]] = {}
    placed: dict[Path, Path] = {}
    try:
        for path in packs:
            try:
                staged[path] = unpack(path, shelf)
            except PackError as exc:
                fail(f"{path}: not a pack of one bundle: {exc}", Exit.USAGE)
        for path in packs:
            placed[path] = _place(root, *staged.pop(path))
    except (OSError, ArchiveError) as exc:
        fail(f"cannot unpack into the archive: {exc}", Exit.UNWRITABLE)
    finally:
        for staging, _ in staged.values():
            shutil.rmtree(staging, ignore_errors=True)  # ours, and never the pack
    return tuple(placed.get(p, p) for p in paths)


def _place(root: Path, staging: Path, top: str) -> Path:
    """Move an unpacked bundle to bundles/<its host>/<its name>; a broken one too, for
    ingest to quarantine with its reason."""
    from evidence.analyze.validate import Invalid, read_manifest

    try:
        hostname = str(read_manifest(staging)["host"]["hostname"])
    except (Invalid, OSError, KeyError, TypeError):
        hostname = "unknown"
    parent = host_dir(root, hostname)
    name = slug_of(top)
    there = parent / name
    manifest = _manifest(staging)
    if manifest is not None and _manifest(there) == manifest:
        shutil.rmtree(staging)  # the same bundle, unpacked before
        return there
    stamp, _, trigger = name.partition("_")
    target = parent / new_bundle_name(parent, stamp, trigger or "pack")
    os.rename(staging, target)
    return target


def _manifest(bundle: Path) -> bytes | None:
    try:
        return (bundle / MANIFEST).read_bytes()
    except OSError:
        return None
