"""The one `evidence` command group; evidence.cli attaches every command to it."""

import click

from evidence import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="evidence")
def main() -> None:
    """Flight recorder and incident analyst for local AI services.

    Freeze the evidence before anyone restarts anything, then diagnose it offline.
    """
