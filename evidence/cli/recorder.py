"""`evidence record`: the resident recorder."""

import signal
import sys
import threading
from typing import Any

import click

from evidence.archive.layout import ArchiveError, resolve_root
from evidence.cli.exits import Exit, epilog, fail
from evidence.cli.group import main
from evidence.cli.options import archive_options, config_of, textfile_of, textfile_option


@main.command(
    epilog=epilog(
        Exit.USAGE,
        Exit.BUSY,
        Exit.UNWRITABLE,
        ok="stopped by SIGTERM or SIGINT, or --for ran out; the ring is kept",
    )
)
@click.option(
    "--for",
    "for_s",
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help="Stop after SECONDS (default: run until SIGTERM).",
)
@click.option(
    "--ring-size",
    type=click.IntRange(min=1),
    metavar="MIB",
    help="Size of the ring in MiB (default 64, or recorder.ring_size in the config).",
)
@click.option("--quiet", "-q", is_flag=True, help="Say nothing but errors.")
@archive_options
@textfile_option
def record(
    for_s: float | None,
    ring_size: int | None,
    quiet: bool,
    archive: str | None,
    config_path: str | None,
    textfile: str | None,
) -> None:
    """Keep the last hours of this machine in a fixed-size ring.

    Samples host memory, vmstat and PSI every second, the top processes and the GPU
    every 5 s, and each engine every 10 s (the capture's own probes, GET only), into
    <archive>/recorder.ring, preallocated so that a full disk cannot stop it. Every
    `evidence capture` takes the last hour from it over <archive>/recorder.sock (only
    the archive's owner can open it). It starts a capture itself (trigger
    recorder:<reason>, under the capture's rate limit) when memory PSI stays high,
    available memory runs low, the OOM killer kills, or an engine that answered stops.
    It never signals or restarts anything.
    """
    from evidence.record.recorder import Recorder
    from evidence.record.ring import RingError
    from evidence.record.server import RecorderBusy, Server

    config = config_of(config_path)
    root = resolve_root(archive, config.archive)
    textfile = textfile_of(textfile, config)

    def say(text: str) -> None:
        if not quiet:
            click.echo(f"evidence record: {text}", err=True)

    try:
        recorder = Recorder(config, root, ring_size and ring_size * 2**20, say, textfile)
    except (ArchiveError, RingError) as exc:
        fail(str(exc), Exit.UNWRITABLE)
    try:
        server = Server(recorder, root)
    except RecorderBusy as exc:
        recorder.close()
        fail(str(exc), Exit.BUSY)
    except OSError as exc:
        recorder.close()
        fail(f"{root}: cannot listen for captures: {exc.strerror or exc}", Exit.UNWRITABLE)
    stop = threading.Event()

    def stopping(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, stopping)
    signal.signal(signal.SIGINT, stopping)
    recorder.start()
    server.start()
    ring = recorder.ring
    kept = f", {len(ring.index)} readings kept from before" if ring.index else ""
    skipped = f", {ring.skipped} damaged records skipped" if ring.skipped else ""
    say(f"recording into {ring.path} ({ring.size / 2**20:.0f} MiB{kept}{skipped})")
    try:
        recorder.run(stop, for_s)
    finally:
        server.close()
        recorder.close()
    say("stopped; the ring is kept")
    sys.exit(Exit.OK)
