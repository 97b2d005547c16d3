"""`evidence serve`, the Alertmanager receiver, and the capture process it starts."""

import re

import click

from evidence.capture.config import MAX_WINDOW_S
from evidence.cli.exits import Exit, epilog, fail
from evidence.cli.group import main
from evidence.cli.options import archive_options, config_of, window_of

_SECONDS = re.compile(r"^\d+(?:\.\d+)?$")


def _listen(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, int]:
    from evidence.capture.serve import parse_listen

    try:
        return parse_listen(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _cooldown(ctx: click.Context, param: click.Parameter, value: str) -> float:
    from evidence.capture.config import ConfigError, parse_duration

    text = value.strip()
    if _SECONDS.match(text):
        return float(text)
    try:
        return float(parse_duration(text, "--cooldown"))
    except ConfigError:
        raise click.BadParameter(
            f"{value!r}: expected seconds or a duration such as 90s, 10m or 1h"
        ) from None


@main.command(
    epilog=epilog(
        Exit.USAGE,
        Exit.UNWRITABLE,
        ok="stopped cleanly by SIGTERM or SIGINT (a running capture was let finish)",
    )
)
@click.option(
    "--listen",
    default="127.0.0.1:9095",
    show_default=True,
    metavar="HOST:PORT",
    callback=_listen,
    help="Address to listen on; an address other than loopback needs --token-file.",
)
@click.option(
    "--token-file",
    metavar="FILE",
    help="Require `Authorization: Bearer <token>`, the token read from FILE (one line; "
    "not readable by every user). Alertmanager sends it with http_config: "
    "authorization: credentials_file: FILE.",
)
@click.option(
    "--cooldown",
    default="10m",
    show_default=True,
    metavar="DURATION",
    callback=_cooldown,
    help="The same alert (Alertmanager fingerprint) captures at most once per DURATION "
    "(seconds, or 90s, 10m, 1h); repeats are recorded in alerts.jsonl. 0: no cool-down.",
)
@click.option(
    "--window",
    type=click.FloatRange(min=0, max=MAX_WINDOW_S),
    metavar="SECONDS",
    help="Window of each bundle (default: window_s in the config, or 30).",
)
@archive_options
def serve(
    listen: tuple[str, int],
    token_file: str | None,
    cooldown: float,
    window: float | None,
    archive: str | None,
    config_path: str | None,
) -> None:
    """Receive Alertmanager webhooks; a firing alert captures a bundle.

    Takes POSTs of Alertmanager's webhook (payload version 4) at /alertmanager and /,
    and answers at once. Each firing alert captures a bundle with trigger
    alert:<alertname> and the alert's labels and annotations (redacted) in the
    manifest. One capture runs at a time: alerts arriving meanwhile are coalesced into
    the next bundle, and a capture that finds another one (cron, a check) holding the
    archive is retried. Each capture runs in a process of its own, stopped if it
    overruns. The same alert captures once per --cooldown, and one alert name once
    per capture.min_interval. A resolved alert captures nothing. Every alert
    received, and what was done with it, is a line in <archive>/alerts.jsonl. Logs
    one line per request and decision on stderr.

    \b
    In alertmanager.yml:
      receivers:
        - name: evidence
          webhook_configs:
            - url: http://127.0.0.1:9095/alertmanager
              http_config:
                authorization:
                  credentials_file: /etc/evidence/serve.token
    """
    from evidence.archive.layout import ArchiveError, resolve_root
    from evidence.capture.serve import ListenError, TokenError, is_loopback, read_token
    from evidence.capture.serve import serve as run_server

    config = config_of(config_path)
    window_s = window_of(window, config)
    token = None
    if token_file is not None:
        try:
            token = read_token(token_file)
        except TokenError as exc:
            fail(f"--token-file {exc}", Exit.USAGE)
    host, port = listen
    if token is None and not is_loopback(host):
        fail(
            f"--listen {host}:{port} is not a loopback address: give --token-file, or "
            "anyone who can reach it can trigger captures",
            Exit.USAGE,
        )
    root = resolve_root(archive, config.archive)
    try:
        run_server(config, root, listen, token, cooldown, window_s)
    except ListenError as exc:
        fail(str(exc), Exit.USAGE)
    except ArchiveError as exc:
        fail(str(exc), Exit.UNWRITABLE)


@main.command("serve-capture", hidden=True)
@click.option("--window", type=click.FloatRange(min=0, max=MAX_WINDOW_S), required=True)
@archive_options
def serve_capture(window: float, archive: str | None, config_path: str | None) -> None:
    """One capture for `evidence serve`, in a process of its own: the trigger and its
    alerts as JSON on stdin, the outcome (or why there is none) as JSON on stdout."""
    import orjson

    from evidence.archive.layout import resolve_root
    from evidence.capture.serve import capture_child

    config = config_of(config_path)
    root = resolve_root(archive, config.archive)
    outcome = capture_child(config, root, window, click.get_binary_stream("stdin").read())
    click.echo(orjson.dumps(outcome).decode())
