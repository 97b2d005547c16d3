"""What every command shares: --archive and --config, and reading the configuration."""

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from evidence.archive.layout import resolve_root
from evidence.capture.config import Config, ConfigError, load
from evidence.cli.exits import Exit, fail


def archive_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--archive and --config, shared by every command."""
    fn = click.option(
        "--config",
        "config_path",
        metavar="FILE",
        help="Configuration file (default: $EVIDENCE_CONFIG, "
        "$XDG_CONFIG_HOME/evidence/config.toml, /etc/evidence/config.toml).",
    )(fn)
    return click.option(
        "--archive",
        metavar="DIR",
        help="Archive root (default: $EVIDENCE_ARCHIVE, the config's archive, "
        "/var/lib/evidence as root, else ~/.local/share/evidence).",
    )(fn)


def config_of(config_path: str | None) -> Config:
    """The configuration, or one line naming the bad key and status 2."""
    try:
        return load(config_path)
    except ConfigError as exc:
        fail(f"config: {exc}", Exit.USAGE)
        raise  # unreachable: fail() exits


def root_of(archive: str | None, config_path: str | None) -> Path:
    return resolve_root(archive, config_of(config_path).archive)


def window_of(window: float | None, config: Config) -> float:
    if window is not None and not math.isfinite(window):
        raise click.BadParameter("must be a finite number of seconds", param_hint="--window")
    return config.window_s if window is None else window


def textfile_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--textfile: node-exporter's textfile directory for evidence's own metrics."""
    return click.option(
        "--textfile",
        metavar="DIR",
        help="Also write evidence's own metrics into DIR for node-exporter's textfile "
        "collector (default: the config's [metrics] textfile).",
    )(fn)


def textfile_of(textfile: str | None, config: Config) -> str | None:
    """The textfile directory to write, or one line and status 2 when it is not one: a
    typo would otherwise leave the metrics silently unwritten."""
    chosen = textfile or config.metrics_textfile
    if chosen is not None and not Path(chosen).is_dir():
        where = "--textfile" if textfile else "[metrics] textfile"
        fail(f"{where}: {chosen}: not a directory", Exit.USAGE)
    return chosen


def warn(problems: list[str]) -> None:
    """What could not be written besides the command's work: said, never fatal."""
    for problem in problems:
        click.echo(f"evidence: warning: {problem}", err=True)
