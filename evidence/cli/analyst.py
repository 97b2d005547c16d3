"""The analyst's commands: ingest, sql, baseline, timeline, export, classify, compare,
runbook, changelog, report and guardrail.

Only click and the shared options are imported at start: DuckDB, Jinja2, the analyst and
the renderers are imported inside each command, so the collector's commands never load
them and a collector-only install says in one line what to add.
"""

import csv
import functools
import io
import math
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import orjson

from evidence.archive.layout import REPORTS, resolve_root
from evidence.cli.exits import Exit, epilog, fail
from evidence.cli.group import main
from evidence.cli.options import (
    archive_options,
    config_of,
    root_of,
    textfile_of,
    textfile_option,
    warn,
)

READ_WAIT_S = 10.0
# What one `evidence sql` may spend: the analyst's box is often the one that is failing.
SQL_MEMORY = "1GB"
SQL_THREADS = 2
SQL_MAX_ROWS = 10_000


def _reader(root: Path) -> Any:
    """A read-only connection; waits a bounded time while an ingest holds the file."""
    import duckdb

    from evidence.analyze.ingest import DATABASE, connect, damaged

    if not (root / DATABASE).exists():
        fail(f"no archive database at {root / DATABASE}: run `evidence ingest` first", Exit.USAGE)
    deadline = time.monotonic() + READ_WAIT_S
    while True:
        try:
            return connect(root, read_only=True)
        except duckdb.Error as exc:
            if damaged(exc):
                raise  # said by _guarded, with the way out
            first = str(exc).splitlines()[0]
            if "Could not set lock" not in first:
                fail(f"{root / DATABASE}: cannot read it: {first}", Exit.UNWRITABLE)
            if time.monotonic() > deadline:
                fail(f"{root / DATABASE}: {first}", Exit.BUSY)
            time.sleep(0.2)


def _guarded(command: Callable[..., None]) -> Callable[..., None]:
    """An analyst command that says so in one line, with the command that rebuilds it, when
    the archive database turns out damaged: at open, or at the first read of a bad block."""

    @functools.wraps(command)
    def guarded(*args: Any, **kwargs: Any) -> None:
        import duckdb

        from evidence.analyze.ingest import DATABASE, damaged

        try:
            command(*args, **kwargs)
        except duckdb.Error as exc:
            if not damaged(exc):
                raise
            root = root_of(kwargs.get("archive"), kwargs.get("config_path"))
            fail(
                f"{root / DATABASE}: the archive database is damaged "
                f"({str(exc).splitlines()[0]}); rebuild it from the bundles with "
                f"`evidence ingest --rebuild --archive {root}`",
                Exit.DAMAGED,
            )

    return guarded


def _host(con: Any, host: str | None) -> str:
    from evidence.analyze.baseline import hosts

    known = hosts(con)
    if host is None:
        if not known:
            fail("the archive holds no bundles yet", Exit.USAGE)
        return known[0]
    if host not in known:
        fail(
            f"no bundles of host {host!r} (the archive has: {', '.join(known) or 'none'})",
            Exit.USAGE,
        )
    return host


@main.command(
    epilog=epilog(
        Exit.QUARANTINED,
        Exit.USAGE,
        Exit.BUSY,
        Exit.UNWRITABLE,
        Exit.DAMAGED,
        ok="every bundle ingested or already present",
    )
)
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@archive_options
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(0, 3600),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait for another ingest to finish.",
)
@click.option(
    "--rebuild",
    is_flag=True,
    help="Ingest every bundle into a new database file that takes the old one's place; "
    "the old file is kept beside it, renamed.",
)
@textfile_option
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@_guarded
def ingest(
    paths: tuple[Path, ...],
    archive: str | None,
    config_path: str | None,
    wait_s: float,
    rebuild: bool,
    textfile: str | None,
    as_json: bool,
) -> None:
    """Bring new bundles into the archive's DuckDB file.

    Reads the archive's bundles/ (or the PATHS given: bundles, or directories of
    bundles, such as those copied from other hosts). Each bundle is checked against
    schemas/ first; a broken one is listed in quarantine.jsonl with its reason and left
    untouched. Ingesting a bundle twice changes nothing. Bundles are never modified.

    A PATH may be a pack (`evidence pack`): it is unpacked into the archive's
    bundles/<host>/, then ingested like a bundle. A file that is not a pack of one bundle
    (a link, a path out of its directory, too big) is refused in one line.

    With --rebuild (for a damaged database), the bundles on disk and the PATHS given are
    ingested into a new file; the old one is renamed evidence.duckdb.before-rebuild-<time>,
    never deleted, as it still holds the bundles pruned since they were ingested.
    """
    from evidence.analyze.ingest import Locked, Unwritable
    from evidence.analyze.ingest import ingest as run_ingest
    from evidence.analyze.ingest import rebuild as run_rebuild
    from evidence.analyze.own_metrics import ingested, verdicts
    from evidence.archive.layout import ArchiveError
    from evidence.capture.own_metrics import archived
    from evidence.cli.pack import unpacked

    config = config_of(config_path)
    root = resolve_root(archive, config.archive)
    textfile = textfile_of(textfile, config)
    for path in paths:
        if not path.exists():
            fail(f"{path}: no such file or directory", Exit.USAGE)
    started = time.monotonic()
    given, paths = paths, unpacked(root, paths)
    progress = _progress if sys.stderr.isatty() and not as_json else None
    kept = None
    try:
        if rebuild:
            summary, kept = run_rebuild(root, paths, wait_s=wait_s, progress=progress)
        else:
            summary = run_ingest(root, paths, wait_s=wait_s, progress=progress)
    except Locked as exc:
        fail(f"{exc}; waited, not writing beside it", Exit.BUSY)
    except (Unwritable, ArchiveError) as exc:
        fail(f"cannot write the archive: {exc}", Exit.UNWRITABLE)
    except OSError as exc:
        fail(f"{exc.filename or root}: {exc.strerror}", Exit.UNWRITABLE)
    if progress:
        click.echo("", err=True)
    if as_json:
        click.echo(orjson.dumps(summary.as_dict(), option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(summary.line())
    if kept is not None:
        click.echo(f"rebuilt the archive database; the old one is kept as {kept}", err=True)
    con = _reader(root)
    took = time.monotonic() - started
    warn(ingested(con, root, summary, took, textfile) + verdicts(con, root, textfile))
    if paths != given:  # packs were unpacked into the archive: its part has changed
        warn(archived(root, textfile))
    sys.exit(Exit.QUARANTINED if summary.quarantined else Exit.OK)


def _progress(done: int, total: int) -> None:
    click.echo(f"\ringesting {done}/{total}", err=True, nl=False)


@main.command()
@click.argument("query")
@archive_options
@click.option("--json", "as_json", is_flag=True, help="Rows as a JSON array of objects.")
@click.option("--csv", "as_csv", is_flag=True, help="Rows as CSV with a header line.")
@click.option(
    "--max-rows",
    type=click.IntRange(1),
    default=SQL_MAX_ROWS,
    show_default=True,
    help="Print at most this many rows; stderr says when more were left out.",
)
@_guarded
def sql(
    query: str,
    archive: str | None,
    config_path: str | None,
    as_json: bool,
    as_csv: bool,
    max_rows: int,
) -> None:
    """Ask the archive what no command foresaw: a read-only SQL query.

    The database is opened read-only, so a query cannot change it, and confined to it:
    no other file, no extension, no network. A query gets 1 GB of memory and 2 threads.
    Tables: bundles, probes, samples, processes, gpu_devices, gpu_processes, engines,
    engine_models, engine_jobs, log_events, kernel_events, prometheus_series,
    health_checks; view host_memory. See the README for their columns.
    """
    import duckdb

    from evidence.analyze.ingest import damaged
    from evidence.reports.text import printable

    con = _confined(_reader(root_of(archive, config_path)))
    try:
        cursor = con.execute(query)
        names = [printable(d[0]) for d in cursor.description or []]
        rows = cursor.fetchmany(max_rows + 1)  # streamed: the rest is never materialised
    except duckdb.PermissionException as exc:
        fail(f"sql: refused: a query reads the archive's tables only ({_first(exc)})", Exit.USAGE)
    except duckdb.Error as exc:
        if damaged(exc):
            raise
        fail(f"sql: {_first(exc)}", Exit.USAGE)
    cut = len(rows) > max_rows
    rows = rows[:max_rows]
    if as_json:
        click.echo(
            orjson.dumps(
                [dict(zip(names, r, strict=True)) for r in rows],
                default=str,
                option=orjson.OPT_INDENT_2,
            ).decode()
        )
    else:
        cells = [[_cell(v) for v in row] for row in rows]
        click.echo(_csv(names, cells) if as_csv else _table(names, cells), nl=not as_csv)
    if cut:
        click.echo(f"evidence: printed the first {max_rows} rows; there are more", err=True)


def _confined(con: Any) -> Any:
    """The connection a query runs on: bounded, and unable to reach anything but the
    archive's tables. The configuration is locked last, so the query cannot undo it."""
    for setting in (
        f"SET memory_limit = '{SQL_MEMORY}'",
        f"SET threads = {SQL_THREADS}",
        "SET temp_directory = ''",  # nothing spills to disk: over the limit is an error
        "SET enable_external_access = false",
        "SET autoinstall_known_extensions = false",
        "SET autoload_known_extensions = false",
        "SET lock_configuration = true",
    ):
        con.execute(setting)
    return con


def _first(exc: BaseException) -> str:
    from evidence.reports.text import printable

    return printable((str(exc).splitlines() or [""])[0])


def _cell(value: Any) -> str:
    from evidence.reports.text import printable

    return "" if value is None else printable(str(value))


def _csv(names: list[str], cells: list[list[str]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(names)
    writer.writerows(cells)
    return out.getvalue()


def _table(names: list[str], cells: list[list[str]]) -> str:
    widths = [max([len(n), *(len(r[i]) for r in cells)]) for i, n in enumerate(names)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.append(f"({len(cells)} row{'s' if len(cells) != 1 else ''})")
    return "\n".join(lines)


def _gib(value: float | None) -> str:
    return "unknown" if value is None or math.isnan(value) else f"{value / 2**30:.1f} GiB"


@main.command()
@click.option("--host", help="The host (default: the one with the most bundles).")
@click.option("--days", type=click.IntRange(1, 3650), default=7, show_default=True)
@archive_options
@click.option("--json", "as_json", is_flag=True, help="Print the baseline as JSON.")
@_guarded
def baseline(
    host: str | None, days: int, archive: str | None, config_path: str | None, as_json: bool
) -> None:
    """What normal looks like: the memory floor, the daily rhythm, the floor's drift.

    From every memory reading the archive holds for the host (baseline snapshots,
    incident bundles and the Prometheus history they carry) over the last DAYS days.
    The floor of a day is its 5th percentile of memory in use; a floor that moved by
    more than 2% of the machine's memory between the first and the last day is
    reported as rising or falling: the leak question, answered in one glance.
    """
    from evidence.analyze.baseline import baseline as compute

    con = _reader(root_of(archive, config_path))
    result = compute(con, _host(con, host), days, datetime.now(UTC))
    if as_json:
        click.echo(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
        return
    click.echo(
        f"{result['host']}: {result['points']} memory readings over the last {days} "
        f"days ({result['sources']['meminfo']} from bundles, "
        f"{result['sources']['prometheus']} from Prometheus)"
    )
    if result.get("reason"):
        click.echo(f"  {result['reason']}")
    for day in result["daily"]:
        click.echo(
            f"  {day['date']}  floor {_gib(day['floor_bytes']):>10}  "
            f"peak {_gib(day['peak_bytes']):>10}  ({day['points']} readings)"
        )
    if result["hourly"]:
        rhythm = "  ".join(
            f"{h['hour']:02d}h {h['median_used_bytes'] / 2**30:.1f}" for h in result["hourly"]
        )
        click.echo(f"  daily rhythm (median GiB in use by hour, UTC): {rhythm}")
    if result["drift_bytes"] is not None:
        click.echo(
            f"  floor drift first->last day: {_gib(result['drift_bytes'])}: {result['verdict']}"
        )


def _moment(ctx: click.Context, param: click.Parameter, value: str) -> float:
    from evidence.archive.clock import moment

    try:
        return moment(value, time.time())
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@main.command()
@click.option("--host", help="The host (default: the one with the most bundles).")
@click.option(
    "--since",
    default="30d",
    show_default=True,
    metavar="WHEN",
    callback=_moment,
    help="From when: a duration back from now (90m, 12h, 30d), today, yesterday, or a "
    "local time ('2026-11-30 03:00', '2026-11-30'), or ISO 8601 with a zone.",
)
@click.option(
    "--until",
    default="now",
    show_default=True,
    metavar="WHEN",
    callback=_moment,
    help="Up to when, in the same forms as --since.",
)
@archive_options
@click.option("--json", "as_json", is_flag=True, help="Print the events as JSON.")
@_guarded
def timeline(
    host: str | None,
    since: float,
    until: float,
    archive: str | None,
    config_path: str | None,
    as_json: bool,
) -> None:
    """A host's events in order: captures and their triggers, boots, OOM kills, models
    loaded and unloaded, failed health checks."""
    from evidence.analyze.timeline import timeline as compute
    from evidence.archive.clock import iso

    if until < since:
        raise click.BadParameter("is before --since", param_hint="--until")
    con = _reader(root_of(archive, config_path))
    name = _host(con, host)
    events = compute(
        con, name, datetime.fromtimestamp(since, UTC), datetime.fromtimestamp(until, UTC)
    )
    span = {"since": iso(since), "until": iso(until)}
    if as_json:
        click.echo(
            orjson.dumps(
                {"host": name, **span, "events": events}, option=orjson.OPT_INDENT_2
            ).decode()
        )
        return
    click.echo(f"{name}: {len(events)} events from {span['since']} to {span['until']}")
    for e in events:
        click.echo(f"  {e['t'][:19].replace('T', ' ')}  {e['kind']:<15} {e['detail']}")


@main.command()
@click.option(
    "--parquet",
    "target",
    required=True,
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="Where to write <table>/host=<h>/date=<d>/*.parquet.",
)
@archive_options
@click.option("--json", "as_json", is_flag=True, help="Print rows written per table as JSON.")
@_guarded
def export(target: Path, archive: str | None, config_path: str | None, as_json: bool) -> None:
    """Export every table as hive-partitioned Parquet (host=, date=), readable by DuckDB
    from object storage and by Spark, Trino or ClickHouse unchanged."""
    import duckdb

    from evidence.analyze.export import export as write

    con = _reader(root_of(archive, config_path))
    try:
        counts = write(con, target)
    except (OSError, duckdb.IOException) as exc:
        fail(f"{target}: cannot write the export: {str(exc).splitlines()[0]}", Exit.USAGE)
    if as_json:
        click.echo(orjson.dumps(counts, option=orjson.OPT_INDENT_2).decode())
    else:
        written = {t: n for t, n in counts.items() if n}
        click.echo(f"exported {sum(written.values())} rows of {len(written)} tables to {target}")


def _resolve(root: Path, bundle: str) -> str:
    """A bundle named by its directory, its id, or `latest`, ingested first if it is new.

    On an archive that cannot be written (a read-only disk, another user's), nothing is
    ingested: what the database already holds is read, and a bundle not in it is said to
    be not ingested yet.
    """
    from evidence.analyze.validate import MANIFEST

    path = Path(bundle)
    if path.is_dir() and not (path / MANIFEST).exists():
        fail(f"{path}: not a bundle (no {MANIFEST})", Exit.USAGE)
    if not root.is_dir():  # a mistyped --archive must not become a new, empty archive
        fail(f"no archive at {root}: `evidence ingest --archive {root}` makes one", Exit.USAGE)
    unwritable = _ingest_first(root, [path] if path.is_dir() else [])
    con = _reader(root)
    try:
        if path.is_dir():
            row = _ingested(con, path)
            if row is None:
                fail(
                    f"{path}: not ingested yet, and the archive cannot take it ({unwritable}); "
                    "run `evidence ingest` where the archive can be written",
                    Exit.UNWRITABLE if unwritable else Exit.USAGE,
                )
        elif bundle == "latest":
            row = con.execute(
                "SELECT bundle_id FROM bundles ORDER BY started_at DESC LIMIT 1"
            ).fetchone()
        else:
            row = con.execute(
                "SELECT bundle_id FROM bundles WHERE bundle_id = ?", [bundle]
            ).fetchone()
    finally:
        con.close()
    if row is None:
        fail(f"no bundle {bundle!r} in the archive {root}", Exit.USAGE)
    if unwritable and not path.is_dir():
        click.echo(
            f"evidence: note: the archive cannot be written ({unwritable}); "
            "bundles not ingested yet were not looked at",
            err=True,
        )
    return str(row[0])


def _ingest_first(root: Path, paths: list[Path]) -> str | None:
    """Ingest the archive's new bundles (or PATHS); why it could not, if the archive cannot
    be written. A bundle named by its directory that is quarantined ends the command."""
    from evidence.analyze.ingest import Locked, Unwritable
    from evidence.analyze.ingest import ingest as run_ingest
    from evidence.archive.layout import ArchiveError

    try:
        summary = run_ingest(root, paths)
    except Locked as exc:
        fail(f"{exc}; try again when it is done", Exit.BUSY)
    except (Unwritable, ArchiveError) as exc:
        return str(exc)
    except OSError as exc:
        return f"{exc.filename or root}: {exc.strerror}"
    if paths and summary.quarantined:
        fail(f"{paths[0]}: quarantined: {summary.quarantined[0]['reason']}", Exit.USAGE)
    return None


def _ingested(con: Any, path: Path) -> tuple[str] | None:
    """The row of the bundle in directory path, if the database holds it."""
    from evidence.analyze.validate import Invalid, read_manifest

    try:
        bundle_id = read_manifest(path)["bundle_id"]
    except (Invalid, OSError, KeyError, TypeError):
        return None
    return con.execute("SELECT bundle_id FROM bundles WHERE bundle_id = ?", [bundle_id]).fetchone()


NO_NOTIFY = click.option(
    "--no-notify",
    is_flag=True,
    help="Do not post the verdict to the Alertmanager of the config's [notify].",
)


@main.command()
@click.argument("bundle")
@archive_options
@NO_NOTIFY
@click.option("--json", "as_json", is_flag=True, help="The classification contract as JSON.")
@_guarded
def classify(
    bundle: str, archive: str | None, config_path: str | None, no_notify: bool, as_json: bool
) -> None:
    """Name the fault of a bundle, and show the working.

    BUNDLE is a bundle directory, a bundle id, or `latest`; it is ingested first if it
    is not in the archive yet. Every fault of the catalog (schemas/faults.toml) is
    scored against the bundle's evidence, its Prometheus history and the host's earlier
    bundles, and listed with the evidence for and against, what was not measured and
    what would settle it. The verdict is a fault id, `ambiguous`, `no-fault` or
    `insufficient-evidence`.

    With [notify] alertmanager configured, an incident's verdict is posted there as the
    alert EvidenceVerdict (see --no-notify); each host's last verdict is also written
    to evidence's own metrics.
    """
    from evidence.analyze.incident import profile
    from evidence.reports.render import classification
    from evidence.reports.text import printable

    config = config_of(config_path)
    root = resolve_root(archive, config.archive)
    bundle_id = _resolve(root, bundle)
    con = _reader(root)
    # profile() keeps the classification per connection: the metrics and the post that
    # follow read the same one instead of classifying the bundle again.
    result = profile(con, bundle_id).result
    page = root / REPORTS / f"{bundle_id}.html"
    _tell(con, root, config, bundle_id, page if page.exists() else None, not no_notify)
    if as_json:
        click.echo(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(printable(classification(result)), nl=False)


def _tell(
    con: Any, root: Path, config: Any, bundle_id: str, page: Path | None, notify: bool
) -> None:
    """After a verdict: each host's last verdict into the metrics, and this one to the
    configured Alertmanager. Neither failing fails the command: the verdict is printed."""
    from evidence.analyze.incident import profile
    from evidence.analyze.notify import NotifyError, post, verdict_alert, worth_posting
    from evidence.analyze.own_metrics import verdicts
    from evidence.analyze.validate import Invalid, read_manifest

    warn(verdicts(con, root, textfile_of(None, config)))
    url = config.notify_alertmanager
    incident = profile(con, bundle_id)
    if not notify or url is None or not worth_posting(incident):
        return
    (path,) = con.execute("SELECT path FROM bundles WHERE bundle_id = ?", [bundle_id]).fetchone()
    try:
        manifest = read_manifest(Path(path))
    except (OSError, Invalid):
        manifest = {}  # pruned since: the verdict still goes, without the alert's labels
    report = str(page) if page else f"not written yet: evidence report {bundle_id}"
    try:
        post(url, verdict_alert(incident, manifest, report))
    except NotifyError as exc:
        warn([str(exc)])
        return
    click.echo(f"evidence: posted {incident.verdict} on {incident.host} to {url}", err=True)


def _bundle(root: Path, bundle: str) -> tuple[Any, str]:
    """A read-only connection and the id of BUNDLE (a directory, an id or `latest`)."""
    bundle_id = _resolve(root, bundle)
    return _reader(root), bundle_id


def _print(data: Any, as_json: bool, text: str) -> None:
    from evidence.reports.text import printable

    if as_json:
        click.echo(orjson.dumps(data, option=orjson.OPT_INDENT_2, default=str).decode())
    else:
        click.echo(printable(text), nl=not text.endswith("\n"))


@main.command(epilog=epilog(Exit.NOTHING_TO_COMPARE, Exit.USAGE, ok="compared"))
@click.argument("bundle")
@click.option("--with", "other", metavar="OTHER", help="Compare with this bundle.")
@click.option(
    "--auto",
    "how",
    flag_value="auto",
    default=True,
    help="Compare with the most similar past incident (the default).",
)
@click.option(
    "--baseline",
    "how",
    flag_value="baseline",
    help="Compare with the host's healthy baseline (its last earlier no-fault bundle).",
)
@archive_options
@click.option("--json", "as_json", is_flag=True, help="The comparison as JSON.")
@_guarded
def compare(
    bundle: str,
    other: str | None,
    how: str,
    archive: str | None,
    config_path: str | None,
    as_json: bool,
) -> None:
    """Tonight against last month: BUNDLE side by side with another incident.

    The other is the bundle named with --with, the most similar past incident of the
    archive (by verdict, memory shape, engine, model, offending process and host), or
    the host's healthy baseline. "Past" means before BUNDLE was captured, not before
    today. Sections follow the seeds' procedure (when, memory, load, logs, fault); the
    first that differs is marked, because it usually names the fault. A recurring fault
    says how often it was seen before.
    """
    from evidence.analyze.compare import compare as run_compare
    from evidence.reports.render import render

    root = root_of(archive, config_path)
    if other is not None:
        other_id = _resolve(root, other)
        how = "with"
    con, bundle_id = _bundle(root, bundle)
    result = run_compare(con, bundle_id, how, other_id if other is not None else None)
    _print(result, as_json, render("compare.txt.j2", c=result))
    sys.exit(Exit.OK if result["against"] else Exit.NOTHING_TO_COMPARE)


@main.command()
@click.argument("bundle")
@archive_options
@click.option("--json", "as_json", is_flag=True, help="The entry's data as JSON.")
@_guarded
def runbook(bundle: str, archive: str | None, config_path: str | None, as_json: bool) -> None:
    """A runbook entry in Markdown: symptom, first evidence, diagnosis, recovery, prevention.

    Recovery follows the seeds' order: evidence before restart; free before kill (the
    engine's own unload or free call); verify headroom; then load.
    """
    from evidence.analyze.entries import runbook as entry
    from evidence.reports.render import render

    root = root_of(archive, config_path)
    con, bundle_id = _bundle(root, bundle)
    (path,) = con.execute("SELECT path FROM bundles WHERE bundle_id = ?", [bundle_id]).fetchone()
    data = entry(con, bundle_id, path)
    _print(data, as_json, render("runbook.md.j2", d=data))


@main.command()
@click.argument("bundle")
@click.option("--change", metavar="TEXT", help="The single change made.")
@click.option("--guard-rail", metavar="TEXT", help="The guard rail added (default: the catalog's).")
@click.option("--after", metavar="BUNDLE", help="The bundle taken after the change, same load.")
@click.option(
    "--append",
    "append_to",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Add the entry to this changelog file (once; newest incident first).",
)
@archive_options
@click.option("--json", "as_json", is_flag=True, help="The entry's data as JSON.")
@_guarded
def changelog(
    bundle: str,
    change: str | None,
    guard_rail: str | None,
    after: str | None,
    append_to: Path | None,
    archive: str | None,
    config_path: str | None,
    as_json: bool,
) -> None:
    """A changelog entry: the date, the fault, the evidence, the change, the guard rail and
    the recording sheet (healthy baseline, fault reproduced, after one change).

    With --after, the entry says whether the memory graph changed shape under the same
    load: the seeds' proof of a fix. With --append, the entry is added to FILE once;
    adding the same entry again changes nothing.
    """
    from evidence.analyze.entries import changelog as entry
    from evidence.archive.references import refer
    from evidence.reports.changelog import add
    from evidence.reports.render import render

    root = root_of(archive, config_path)
    after_id = _resolve(root, after) if after else None
    con, bundle_id = _bundle(root, bundle)
    data = entry(con, bundle_id, change, guard_rail, after_id)
    text = render("changelog.md.j2", d=data)
    if append_to is not None:
        try:
            added = add(append_to, data["key"], data["started_at"], text)
            refer(root, [row["bundle_id"] for row in data["sheet"]], f"changelog {append_to}")
        except OSError as exc:
            fail(f"{exc.filename or append_to}: cannot write: {exc.strerror}", Exit.USAGE)
        said = "added to" if added else "already in"
        click.echo(f"{said} {append_to}: {data['date']} {data['verdict']}", err=as_json)
        if not as_json:
            return
    _print(data, as_json, text)


def _write_page(path: Path, text: str) -> None:
    """A page or rule file, whole or not at all, in a private folder."""
    from evidence.reports.output import replace_text

    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    replace_text(path, text)


def _write_report(root: Path, target: Path, data: dict[str, Any]) -> None:
    """A report page; the incident it is compared with is then kept by prune."""
    from evidence.archive.references import refer
    from evidence.reports.html import report_page

    _write_page(target, report_page(data))
    against = data["comparison"]["against"]
    if against is None:
        return
    try:
        refer(root, [against["bundle_id"]], f"compared with in {target.name}")
    except OSError as exc:
        # An archive that cannot be written cannot be pruned either: the page stands.
        click.echo(
            f"evidence: note: could not record that {target.name} refers to "
            f"{against['bundle_id']} ({exc.strerror}): prune does not know to keep it",
            err=True,
        )


@main.command()
@click.argument("bundle", required=False)
@click.option("--index", "with_index", is_flag=True, help="Write the archive's index page too.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Where to write the bundle's page (default: <archive>/reports/<bundle id>.html).",
)
@archive_options
@NO_NOTIFY
@click.option("--json", "as_json", is_flag=True, help="Print the pages written as JSON.")
@_guarded
def report(
    bundle: str | None,
    with_index: bool,
    out: Path | None,
    archive: str | None,
    config_path: str | None,
    no_notify: bool,
    as_json: bool,
) -> None:
    """An HTML report of BUNDLE: the verdict and candidates, the graphs (memory, GPU per
    process, pressure, requests, KV cache) over the capture window and the Prometheus
    look-back with the trigger marked, and the most similar past incident.

    With --index, the archive's index page (every incident by host and date, with its
    verdict), and a report for each incident that has none yet. Pages are single
    self-contained files: no script, no font, no network. A BUNDLE's verdict is posted
    to the configured Alertmanager with the page's path, as `classify` does.
    """
    from evidence.analyze.report import index
    from evidence.analyze.report import report as build
    from evidence.reports.html import index_page

    if bundle is None and not with_index:
        raise click.UsageError("name a BUNDLE, or ask for the --index")
    config = config_of(config_path)
    root = resolve_root(archive, config.archive)
    pages = root / REPORTS
    written = []
    try:
        if bundle is not None:
            con, bundle_id = _bundle(root, bundle)
            target = out or pages / f"{bundle_id}.html"
            _write_report(root, target, build(con, bundle_id))
            written.append(str(target))
            _tell(con, root, config, bundle_id, target.absolute(), not no_notify)
        if with_index:
            if bundle is None:
                _resolve(root, "latest")  # the archive's new bundles, ingested first
            con = _reader(root)
            rows = index(con)
            progress = sys.stderr.isatty() and not as_json
            for n, row in enumerate(rows, 1):
                row["href"] = f"{row['bundle_id']}.html"
                page = pages / row["href"]
                if not page.exists():
                    _write_report(root, page, build(con, row["bundle_id"]))
                    written.append(str(page))
                if progress:
                    click.echo(f"\rreports {n}/{len(rows)}", err=True, nl=False)
            if progress:
                click.echo("", err=True)
            stamp = datetime.now(UTC).isoformat(timespec="seconds")
            _write_page(pages / "index.html", index_page(rows, stamp))
            written.append(str(pages / "index.html"))
    except OSError as exc:
        fail(f"{exc.filename or pages}: cannot write the report: {exc.strerror}", Exit.USAGE)
    if as_json:
        click.echo(orjson.dumps({"written": written}, option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo("\n".join(written))


@main.command(epilog=epilog(Exit.NOT_FIRED, Exit.USAGE, ok="written; no rule shown silent"))
@click.argument("bundle")
@click.option("--fault", metavar="ID", help="The fault to guard (default: the bundle's verdict).")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Write the rule file here (and print what it holds) instead of printing it.",
)
@archive_options
@click.option("--json", "as_json", is_flag=True, help="The rules, settings and notes as JSON.")
@_guarded
def guardrail(
    bundle: str,
    fault: str | None,
    out: Path | None,
    archive: str | None,
    config_path: str | None,
    as_json: bool,
) -> None:
    """The guard rail that makes this fault announce itself next time: a Prometheus
    alerting rule file naming only metrics this machine publishes (as seen in the
    bundle's /metrics answers and Prometheus series), and the settings (a llama-swap
    ttl, --parallel, --ctx-size, a rate limit...) as commented snippets.

    A rule over a metric nobody publishes would be silent in exactly the way a healthy
    machine is silent: such a rule is skipped, and the file says what it needed. Load
    the file with Prometheus' rule_files and check it with `promtool check rules`.

    Where promtool is installed, each rule is replayed on the bundle's own Prometheus
    history: it says how long before the failure the rule would have fired, or that it
    would not have (exit 11). With --out FILE, FILE.test.yml is written beside it, a
    `promtool test rules` file that expects each alert when it first fired on this
    history; it is run at once.
    """
    from evidence.analyze.classify import catalog
    from evidence.analyze.guardrail import guardrail as build
    from evidence.analyze.incident import NOT_FAULTS, profile
    from evidence.analyze.rule_test import prove
    from evidence.reports.render import rules_file

    root = root_of(archive, config_path)
    con, bundle_id = _bundle(root, bundle)
    if fault is None:
        fault = profile(con, bundle_id).verdict
        if fault in NOT_FAULTS:
            fail(f"{bundle_id}: no fault named (verdict {fault}); pass --fault ID", Exit.USAGE)
    elif fault not in {f["id"] for f in catalog()["fault"]}:
        raise click.BadParameter(f"unknown fault {fault!r}", param_hint="--fault")
    result = build(con, bundle_id, fault)
    text = rules_file(result)
    proof = prove(con, bundle_id, result, text) if result["rules"] else None
    result["proof"] = [vars(p) for p in proof.proofs] if proof else []
    tested = None
    if out is not None:
        try:
            _write_page(out, text)
            if proof and proof.checks():
                tested = out.with_name(f"{out.stem}.test.yml")
                document = proof.document(out.name)
                _write_page(tested, orjson.dumps(document, option=orjson.OPT_INDENT_2).decode())
        except OSError as exc:
            fail(f"{out}: cannot write the rule file: {exc.strerror}", Exit.USAGE)
    if as_json:
        click.echo(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    elif out is None:
        click.echo(text, nl=False)
    else:
        names = ", ".join(r["alert"] for r in result["rules"]) or "none"
        click.echo(f"wrote {out}: {len(result['rules'])} rule(s) for {fault}: {names}")
        for item in result["skipped"]:
            click.echo(f"  skipped {item['alert']}: {item['reason']}")
        for setting in result["settings"]:
            click.echo(f"  setting, {setting['tool']}: {setting['where']}")
    _report_proof(proof, tested, as_json)


def _report_proof(proof: Any, tested: Path | None, as_json: bool) -> None:
    """Each rule's replay in one line (stderr: the rule file may be on stdout), promtool's
    run of the written test, and exit 11 when a rule would have stayed silent."""
    from evidence.analyze.rule_test import promtool, run

    if proof is None:
        if not as_json:
            click.echo(
                "  proof: the bundle holds no Prometheus history of these rules' metrics", err=True
            )
        return
    if not as_json:
        for item in proof.proofs:
            click.echo(f"  proof: {item.said}", err=True)
    if tested is not None and promtool() is not None:
        answer = run(tested)
        verdict = "passes" if answer.returncode == 0 else "FAILS"
        if not as_json:
            click.echo(f"  promtool test rules {tested}: {verdict}", err=True)
    if proof.failed and any(item.status == "silent" for item in proof.proofs):
        sys.exit(Exit.NOT_FIRED)
