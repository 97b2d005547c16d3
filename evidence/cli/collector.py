"""The collector's commands: capture, check, prune, keep and units."""

import contextlib
import math
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import orjson

from evidence.archive.layout import ArchiveError, private_dir, resolve_root
from evidence.archive.lock import INGEST_LOCK, Busy, CaptureLock
from evidence.capture.checks import run_all as run_checks
from evidence.capture.config import MAX_WINDOW_S, Config
from evidence.capture.manifest import TRIGGER_KINDS
from evidence.capture.own_metrics import Attempt, archived, checked, refused
from evidence.capture.ratelimit import Limited, admit, undo
from evidence.capture.redact import redact_text, scrub
from evidence.capture.runner import Capture, Outcome, Stopped, Trigger
from evidence.cli.exits import Exit, epilog, fail
from evidence.cli.group import main
from evidence.cli.options import (
    archive_options,
    config_of,
    textfile_of,
    textfile_option,
    warn,
    window_of,
)

if TYPE_CHECKING:  # prune's types: the modules are imported only by the commands that use them
    from evidence.capture.retention import Bundle
    from evidence.capture.serve import Trimmed


def parse_trigger(text: str, detail: str | None) -> Trigger:
    kind, _, name = text.partition(":")
    if kind not in TRIGGER_KINDS:
        raise click.BadParameter(
            f"unknown kind {kind!r} (expected one of {', '.join(TRIGGER_KINDS)})",
            param_hint="--trigger",
        )
    # A trigger's name becomes a directory name and its detail goes in the manifest.
    return Trigger(
        kind=kind,
        name=redact_text(name) if name else None,
        detail=redact_text(detail) if detail else None,
    )


@main.command(
    epilog=epilog(
        Exit.USAGE,
        Exit.BUSY,
        Exit.UNWRITABLE,
        Exit.INCOMPLETE,
        Exit.LIMITED,
        Exit.STOPPED,
        ok="the bundle was sealed complete",
    )
)
@click.option(
    "--window",
    type=click.FloatRange(min=0, max=MAX_WINDOW_S),
    metavar="SECONDS",
    help="Seconds to watch after the freeze (default 30, or window_s in the config); "
    "0 takes a single snapshot, for cron baselines.",
)
@click.option(
    "--trigger",
    "trigger_text",
    default="manual",
    show_default=True,
    metavar="KIND[:NAME]",
    help=f"What started this capture; KIND is one of {', '.join(TRIGGER_KINDS)}.",
)
@click.option("--detail", metavar="TEXT", help="Free text recorded with the trigger.")
@archive_options
@textfile_option
@click.option("--quiet", "-q", is_flag=True, help="No progress and no summary; errors only.")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest summary as JSON.")
def capture(
    window: float | None,
    trigger_text: str,
    detail: str | None,
    archive: str | None,
    config_path: str | None,
    textfile: str | None,
    quiet: bool,
    as_json: bool,
) -> None:
    """Freeze an evidence bundle of this machine.

    Reads what changes first (GPU, processes, engines, then memory, vmstat and pressure,
    then the kernel log and logs), samples them through the window, reads Prometheus
    history beside it, and seals the bundle into the archive. Read-only: nothing on the
    machine is restarted, freed or signalled. Prints the bundle's path.
    """
    trigger = parse_trigger(trigger_text, detail)
    config = config_of(config_path)
    window_s = window_of(window, config)
    progress = None
    if not quiet and not as_json and sys.stderr.isatty() and window_s > 0:
        progress = _progress_bar
    outcome = _run_capture(
        config,
        trigger,
        window_s,
        resolve_root(archive, config.archive),
        progress,
        own_process=True,
        textfile=textfile_of(textfile, config),
    )
    manifest = outcome.manifest
    if as_json:
        click.echo(orjson.dumps(scrub(_summary(outcome)), option=orjson.OPT_INDENT_2).decode())
    elif not quiet:
        click.echo(str(outcome.path))
        _print_probes(scrub(manifest), scrub(outcome.headlines))
    sys.exit(Exit.OK if manifest["complete"] else Exit.INCOMPLETE)


@main.command(epilog=epilog(Exit.CHECK_FAILED, Exit.USAGE, ok="every check passed"))
@click.option(
    "--window",
    type=click.FloatRange(min=0, max=MAX_WINDOW_S),
    metavar="SECONDS",
    help="Window of the bundle captured on a failure (default: window_s, or 30).",
)
@archive_options
@textfile_option
@click.option("--verbose", "-v", is_flag=True, help="Print every check, passed or not.")
@click.option(
    "--json", "as_json", is_flag=True, help="Report every check (and any bundle) as JSON."
)
def check(
    window: float | None,
    archive: str | None,
    config_path: str | None,
    textfile: str | None,
    verbose: bool,
    as_json: bool,
) -> None:
    """Run the configured health checks; on a failure, capture a bundle.

    Each [[checks]] entry probes one layer: http (a GET expecting a status, text or JSON
    field), completion (one small chat completion: an empty answer is a failure even
    with HTTP 200), command (must exit 0 in time: userspace can still fork) and tcp (a
    connect, for contrast). All pass: exit 0 and print nothing unless asked. One fails:
    capture a bundle with trigger healthcheck:<name>, the checks' full answers in its
    health record, print its path, exit 1.
    """
    config = config_of(config_path)
    if not config.checks:
        fail(f"no [[checks]] configured in {config.source or 'any configuration file'}", Exit.USAGE)
    window_s = window_of(window, config)
    textfile = textfile_of(textfile, config)
    root = resolve_root(archive, config.archive)
    results = run_checks(config.checks)
    try:
        private_dir(root)
        warn(checked(root, results, textfile))
    except ArchiveError as exc:  # the capture that follows a failure says it again
        warn([str(exc)])
    failed = [r for r in results if not r["ok"]]
    report: dict[str, Any] = {"ok": not failed, "checks": results, "bundle": None}
    if failed:
        first = failed[0]
        trigger = Trigger(
            "healthcheck",
            first["name"],
            f"{len(failed)} of {len(results)} checks failed; {first['name']}: {first['reason']}",
        )
        try:
            outcome = _run_capture(
                config,
                trigger,
                window_s,
                root,
                None,
                Exit.CHECK_FAILED,
                health=results,
                textfile=textfile,
            )
            report["bundle"] = str(outcome.path)
        finally:
            _report_checks(report, results, verbose, as_json)
        if not as_json:
            click.echo(report["bundle"])
        sys.exit(Exit.CHECK_FAILED)
    _report_checks(report, results, verbose, as_json)


def _report_checks(
    report: dict[str, Any], results: list[dict[str, Any]], verbose: bool, as_json: bool
) -> None:
    # Printed lines end in the journal (the check timer's unit): redacted like a bundle.
    if as_json:
        click.echo(orjson.dumps(scrub(report), option=orjson.OPT_INDENT_2).decode())
        return
    for r in results:
        if verbose or not r["ok"]:
            note = f": {redact_text(r['reason'])}" if r["reason"] else ""
            click.echo(
                f"  {r['name']:<16} {r['kind']:<10} {r['status']:<8} "
                f"{r['elapsed_ms']:.0f} ms{note}",
                err=True,
            )


def _run_capture(
    config: Config,
    trigger: Trigger,
    window_s: float,
    root: Path,
    progress: Callable[[float, float], None] | None,
    code: Exit | None = None,
    health: list[dict[str, Any]] | None = None,
    own_process: bool = False,
    textfile: str | None = None,
) -> Outcome:
    """Capture, or end with one line: `code` overrides the capture's own exit status.
    Every attempt, refused or not, is counted in evidence's own metrics."""
    signal.signal(signal.SIGTERM, _stop)
    try:
        # Refused here, before the capture lock: a flood of triggers costs a file lock each.
        private_dir(root)
        trigger.skipped = admit(root, trigger.kind, trigger.name, config.limits.min_interval_s)
    except Limited as exc:
        warn(refused(root, trigger.kind, textfile))
        fail(str(exc), code or Exit.LIMITED)
    except ArchiveError as exc:
        fail(str(exc), code or Exit.UNWRITABLE)
    except OSError as exc:
        fail(f"{exc.filename or root}: {exc.strerror}", code or Exit.UNWRITABLE)
    attempt = Attempt(root, trigger.kind, textfile)

    def counted(outcome: str, probes: dict[str, Any] | None = None) -> None:
        said = attempt.done(outcome, probes)
        if probes is not None:  # a failed capture's one line says what the archive lacks
            warn(said)

    try:
        try:
            outcome = Capture(
                config,
                trigger,
                window_s,
                root,
                on_progress=progress,
                health=health,
                own_process=own_process,
            ).run()
        except (Busy, ArchiveError, OSError):
            with contextlib.suppress(OSError):
                undo(root, trigger.kind, trigger.name)
            raise
    except Stopped as exc:
        counted("stopped")
        kept = getattr(exc, "partial", None)
        fail(
            f"stopped by SIGTERM; kept what was captured as {kept}"
            if kept
            else "stopped by SIGTERM before anything was captured",
            code or Exit.STOPPED,
        )
    except Busy as exc:
        counted("busy")
        fail(
            f"another capture is running ({exc}); waited {config.limits.lock_wait_s:g} s, "
            "not stacking a second one",
            code or Exit.BUSY,
        )
    except ArchiveError as exc:
        counted("failed")
        fail(str(exc), code or Exit.UNWRITABLE)
    except OSError as exc:
        counted("failed")
        fail(f"{exc.filename or root}: {exc.strerror}", code or Exit.UNWRITABLE)
    manifest = outcome.manifest
    counted("complete" if manifest["complete"] else "incomplete", manifest["probes"])
    if progress:
        click.echo("", err=True)
    for path in outcome.recovered:
        click.echo(
            f"evidence: kept the unfinished bundle of a capture that died as {path}", err=True
        )
    return outcome


def _summary(outcome: Outcome) -> dict[str, Any]:
    m = outcome.manifest
    return {
        "bundle_id": m["bundle_id"],
        "path": str(outcome.path),
        "host": m["host"],
        "trigger": m["trigger"],
        "started_at": m["started_at"],
        "finished_at": m["finished_at"],
        "window_s": m["window_s"],
        "complete": m["complete"],
        "partial_reason": m["partial_reason"],
        "probes": {
            name: {"status": p["status"], "reason": p["reason"]} for name, p in m["probes"].items()
        },
        "dropped": m["dropped"],
        "recovered": [str(p) for p in outcome.recovered],
        "collector": m["collector"],
    }


def _print_probes(manifest: dict[str, Any], headlines: dict[str, str]) -> None:
    """One line per probe: its status, what it found (or why not), and what it cost."""
    for name, probe in manifest["probes"].items():
        found = probe["reason"] or headlines.get(name, "")
        cost = [] if probe["duration_ms"] is None else [f"{probe['duration_ms']:.0f} ms"]
        samples = probe.get("sampling", {}).get("samples")
        if samples:
            cost.append(f"{samples} samples")
        tail = f"  [{', '.join(cost)}]" if cost else ""
        click.echo(f"  {name:<10} {probe['status']:<8} {found}{tail}", err=True)
    for item in manifest["dropped"]:
        click.echo(f"  dropped {item['file']}: {item['reason']}", err=True)


def _stop(signum: int, frame: Any) -> None:
    raise Stopped("stopped by SIGTERM")


def _progress_bar(elapsed: float, total: float) -> None:
    width = 30
    done = int(width * elapsed / total) if total else width
    click.echo(
        f"\rwatching [{'#' * done}{'.' * (width - done)}] {elapsed:4.0f}/{total:.0f} s",
        err=True,
        nl=False,
    )


_SIZE_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _size(text: str) -> int:
    number, unit = text[:-1] if text[-1:].isalpha() else text, text[-1:].upper()
    unit = unit if text[-1:].isalpha() else ""
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _SIZE_UNITS or not math.isfinite(value) or value < 0:
        raise click.BadParameter(
            f"{text!r}: expected a size such as 500M or 20G", param_hint="--max-size"
        )
    return int(value * _SIZE_UNITS[unit])


@main.command(
    epilog=epilog(
        Exit.USAGE,
        Exit.BUSY,
        Exit.UNWRITABLE,
        ok="pruned (or, with --dry-run, listed); or no archive yet",
    )
)
@click.option("--keep-days", type=click.FloatRange(0), metavar="DAYS", help="Remove older bundles.")
@click.option("--max-size", metavar="SIZE", help="Remove the oldest until bundles fit: 500M, 20G.")
@click.option("--dry-run", is_flag=True, help="List what would go; remove nothing.")
@archive_options
@click.option("--json", "as_json", is_flag=True, help="What went (or would go) as JSON.")
def prune(
    keep_days: float | None,
    max_size: str | None,
    dry_run: bool,
    archive: str | None,
    config_path: str | None,
    as_json: bool,
) -> None:
    """Keep the archive bounded: remove bundles older than --keep-days, then the oldest
    until the bundles fit in --max-size, baselines (cron) before incidents. With
    --keep-days, the lines of serve's alert journal as old go too.

    Never removed: a bundle marked with `evidence keep`, one a changelog entry or a
    written report refers to, and the newest bundle of each host. The archive's database
    keeps what was ingested from a removed bundle.
    """
    if keep_days is None and max_size is None:
        raise click.UsageError("say what to keep: --keep-days, --max-size, or both")
    max_bytes = _size(max_size) if max_size else None
    config = config_of(config_path)
    root = resolve_root(archive, config.archive)
    if not _archive_exists(root):
        # The hourly timer may run before the first capture has made the archive; prune
        # does not make it.
        if as_json:
            _print_prune([], [], [], None, dry_run=dry_run, as_json=True)
        else:
            click.echo(f"no archive at {root} yet: nothing to prune")
        return
    bundles, gone, held = _prune_bundles(root, keep_days, max_bytes, dry_run)
    if gone and not dry_run:
        warn(archived(root, textfile_of(None, config)))
    trimmed, failure = None, None
    if keep_days is not None and not dry_run:
        trimmed, failure = _trim_journal(root, keep_days)
    _print_prune(bundles, gone, held, trimmed, dry_run=dry_run, as_json=as_json)
    if failure:
        fail(*failure)


def _archive_exists(root: Path) -> bool:
    """False if nothing is at root; an archive that cannot be looked at is one line."""
    try:
        root.stat()
    except FileNotFoundError:
        return False
    except OSError as exc:
        fail(f"{root}: {exc.strerror}", Exit.UNWRITABLE)
    return True


def _prune_bundles(
    root: Path, keep_days: float | None, max_bytes: int | None, dry_run: bool
) -> tuple[list["Bundle"], list["Bundle"], list[dict[str, Any]]]:
    """Every bundle, those that go (gone unless dry_run), and why the others stay."""
    from evidence.archive.references import referenced
    from evidence.capture import retention

    lock = CaptureLock(root, INGEST_LOCK)
    try:
        if not dry_run:
            lock.acquire(10.0)  # an ingest must not read a bundle half removed
        bundles = retention.inventory(root)
        gone, held = retention.plan(bundles, referenced(root), time.time(), keep_days, max_bytes)
        for b in [] if dry_run else gone:
            retention.remove(b)
    except Busy:
        fail("an ingest is reading the archive; try again when it is done", Exit.BUSY)
    except ArchiveError as exc:
        fail(str(exc), Exit.UNWRITABLE)
    except OSError as exc:
        fail(f"{exc.filename or root}: {exc.strerror}", Exit.UNWRITABLE)
    finally:
        lock.release()
    return bundles, gone, held


def _trim_journal(root: Path, keep_days: float) -> tuple["Trimmed | None", tuple[str, int] | None]:
    """serve's alert journal, trimmed to keep_days like the bundles; or why not, to be
    said after what was removed (which stays removed)."""
    from evidence.capture.serve import trim_journal

    try:
        return trim_journal(root, keep_days), None
    except Busy:
        return None, ("serve held its alert journal, which was not trimmed; try again", Exit.BUSY)
    except ArchiveError as exc:
        return None, (str(exc), Exit.UNWRITABLE)
    except OSError as exc:
        return None, (f"{exc.filename or root}: {exc.strerror}", Exit.UNWRITABLE)


def _print_prune(
    bundles: list["Bundle"],
    gone: list["Bundle"],
    held: list[dict[str, Any]],
    trimmed: "Trimmed | None",
    *,
    dry_run: bool,
    as_json: bool,
) -> None:
    freed = sum(b.size for b in gone)
    left = sum(b.size for b in bundles) - freed
    if as_json:
        report = {
            "dry_run": dry_run,
            "removed": [b.describe() for b in gone],
            "kept": held,
            "freed_bytes": freed,
            "left_bytes": left,
            "journal": None if trimmed is None else trimmed._asdict(),  # None: not trimmed
        }
        click.echo(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    verb = "would remove" if dry_run else "removed"
    for b in gone:
        click.echo(f"{verb} {b.path}" + (" (baseline)" if b.routine else ""))
    for h in held:
        click.echo(f"kept {h['path']}: {'; '.join(h['kept_because'])}")
    click.echo(
        f"{verb} {len(gone)} bundle(s), {freed / 2**20:.1f} MiB; "
        f"{len(bundles) - len(gone)} left, {left / 2**20:.1f} MiB"
    )
    if trimmed is not None and trimmed.lines:
        click.echo(
            f"trimmed {trimmed.lines} line(s) from the alert journal, "
            f"{trimmed.freed_bytes / 2**10:.1f} KiB"
        )


@main.command()
@click.argument("bundle")
@click.option("--reason", default="kept by hand", show_default=True, help="Why, for prune's list.")
@archive_options
def keep(bundle: str, reason: str, archive: str | None, config_path: str | None) -> None:
    """Mark BUNDLE (a directory or a bundle id) so that prune never removes it."""
    from evidence.archive.references import refer
    from evidence.capture import retention

    root = resolve_root(archive, config_of(config_path).archive)
    path = Path(bundle)
    by_id = {b.bundle_id: b for b in retention.inventory(root)}
    if path.is_dir():
        try:
            bundle_id = orjson.loads((path / "manifest.json").read_bytes())["bundle_id"]
        except (OSError, orjson.JSONDecodeError, KeyError):
            fail(f"{path}: not a bundle (no readable manifest.json)", Exit.USAGE)
    elif bundle in by_id:
        bundle_id = bundle
    else:
        fail(f"no bundle {bundle!r} in the archive {root}", Exit.USAGE)
    refer(root, [bundle_id], reason)
    click.echo(f"kept {bundle_id}: {reason}")


@main.command()
@click.option(
    "--install",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Write the units into DIR (e.g. /etc/systemd/system) instead of printing them.",
)
@click.option("--force", is_flag=True, help="With --install: replace units that differ.")
@click.option(
    "--cron",
    is_flag=True,
    help="Print the /etc/cron.d lines that do the same on a box without systemd instead.",
)
@click.option("--listen", default="127.0.0.1:9095", show_default=True, help="For serve's unit.")
@click.option("--token-file", metavar="FILE", help="For serve's unit: the bearer token's file.")
@archive_options
def units(
    directory: Path | None,
    force: bool,
    cron: bool,
    listen: str,
    token_file: str | None,
    archive: str | None,
    config_path: str | None,
) -> None:
    """The systemd units that start captures by themselves.

    evidence-capture@.service (for OnFailure=evidence-capture@%n.service in any unit:
    the failed unit becomes the trigger systemd:<unit>), evidence-baseline.service and
    .timer (a snapshot every 10 minutes), evidence-check.service and .timer (the health
    checks every minute), evidence-serve.service (the Alertmanager receiver) and
    evidence-prune.service and .timer (an hourly `evidence prune`: without it the
    baselines fill the disk), and evidence-record.service (the resident recorder, whose
    last hour every capture takes). They run this very `evidence`, with --archive and
    --config passed on. Then: systemctl daemon-reload; systemctl enable --now
    evidence-record.service evidence-baseline.timer evidence-check.timer
    evidence-serve.service evidence-prune.timer
    """
    from evidence.capture.units import UnitConflict, cron_lines, install, unit_files

    config = config_of(config_path)
    evidence = str(Path(sys.argv[0]).resolve()) if os.path.isabs(sys.argv[0]) else None
    evidence = evidence or shutil.which("evidence") or sys.argv[0]
    if cron:
        click.echo(cron_lines(str(Path(evidence).absolute()), archive, config_path), nl=False)
        return
    timeouts = [c.timeout_s for c in config.checks] or [60.0]
    try:
        files = unit_files(
            str(Path(evidence).absolute()),
            archive,
            config_path,
            window_s=config.window_s,
            check_timeout_s=max(timeouts),
            listen=listen,
            token_file=token_file,
        )
    except ValueError as exc:
        fail(str(exc), Exit.USAGE)
    if directory is None:
        for name, text in files.items():
            click.echo(f"### {name}\n{text}")
        return
    try:
        written = install(directory, files, force=force)
    except UnitConflict as exc:
        fail(f"{exc}; --force replaces it", Exit.USAGE)
    except OSError as exc:
        fail(f"{exc.filename or directory}: {exc.strerror}", Exit.UNWRITABLE)
    for path in written:
        click.echo(f"wrote {path}")
    if not written:
        click.echo(f"the units in {directory} are already these")
