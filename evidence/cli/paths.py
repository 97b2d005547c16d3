"""`evidence paths`: where this `evidence` reads its configuration and keeps its archive."""

import click
import orjson

from evidence.archive.layout import BUNDLES, DATABASE, REPORTS, resolve_root
from evidence.capture.config import locate
from evidence.cli.group import main
from evidence.cli.options import archive_options, config_of


@main.command()
@archive_options
@click.option("--json", "as_json", is_flag=True, help="The paths as JSON.")
def paths(archive: str | None, config_path: str | None, as_json: bool) -> None:
    """Print the effective configuration file, archive, database and reports locations.

    The configuration is the first of --config, $EVIDENCE_CONFIG,
    $XDG_CONFIG_HOME/evidence/config.toml (~/.config/evidence/config.toml) and
    /etc/evidence/config.toml that exists; the archive the first of --archive,
    $EVIDENCE_ARCHIVE, the configuration's `archive`, /var/lib/evidence (root) and
    $XDG_DATA_HOME/evidence. Reads nothing else and creates nothing.
    """
    config = config_of(config_path)
    source = locate(config_path)
    root = resolve_root(archive, config.archive)
    found = {
        "config": str(source) if source else None,
        "archive": str(root),
        "bundles": str(root / BUNDLES),
        "database": str(root / DATABASE),
        "reports": str(root / REPORTS),
    }
    if as_json:
        click.echo(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode())
        return
    for name, where in found.items():
        click.echo(f"{name:<9} {where or '(none: the built-in defaults)'}")
