"""The `evidence serve` command: registered on the click group by add_serve_command.

capture.cli imports this module; it imports capture.cli (and the server itself) only when
the command is registered or run, so neither import order nor `evidence capture`'s start
pays for it.
"""

import re

import click

_SECONDS = re.compile(r"^\d+(?:\.\d+)?$")

_SERVE_EXIT = (
    "\b\nExit status:\n"
    "  0  stopped cleanly by SIGTERM or SIGINT (a running capture was let finish)\n"
    "  1  an unexpected internal error\n"
    "  2  bad usage or bad configuration; the token file is unreadable or readable by\n"
    "     every user; the address is in use or not permitted\n"
    "  4  the archive cannot be written (permissions, not a directory)"
)


def _listen(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, int]:
    from capture.serve import parse_listen

    try:
        return parse_listen(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _cooldown(ctx: click.Context, param: click.Parameter, value: str) -> float:
    from capture.config import ConfigError, parse_duration

    text = value.strip()
    if _SECONDS.match(text):
        return float(text)
    try:
        return float(parse_duration(text, "--cooldown"))
    except ConfigError:
        raise click.BadParameter(
            f"{value!r}: expected seconds or a duration such as 90s, 10m or 1h"
        ) from None


def add_serve_command(main: click.Group) -> None:
    """Register `evidence serve` on the command group."""
    from capture.cli import MAX_WINDOW_S, archive_options

    @main.command(epilog=_SERVE_EXIT)
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
        from capture.archive import ArchiveError, resolve_root
        from capture.cli import EXIT_ARCHIVE, EXIT_USAGE, _config, _window, fail
        from capture.serve import ListenError, TokenError, is_loopback, read_token
        from capture.serve import serve as run_server

        config = _config(config_path)
        window_s = _window(window, config)
        token = None
        if token_file is not None:
            try:
                token = read_token(token_file)
            except TokenError as exc:
                fail(f"--token-file {exc}", EXIT_USAGE)
        host, port = listen
        if token is None and not is_loopback(host):
            fail(
                f"--listen {host}:{port} is not a loopback address: give --token-file, or "
                "anyone who can reach it can trigger captures",
                EXIT_USAGE,
            )
        root = resolve_root(archive, config.archive)
        try:
            run_server(config, root, listen, token, cooldown, window_s)
        except ListenError as exc:
            fail(str(exc), EXIT_USAGE)
        except ArchiveError as exc:
            fail(str(exc), EXIT_ARCHIVE)

    @main.command("serve-capture", hidden=True)
    @click.option("--window", type=click.FloatRange(min=0, max=MAX_WINDOW_S), required=True)
    @archive_options
    def serve_capture(window: float, archive: str | None, config_path: str | None) -> None:
        """One capture for `evidence serve`, in a process of its own: the trigger and its
        alerts as JSON on stdin, the outcome (or why there is none) as JSON on stdout."""
        import orjson

        from capture.archive import resolve_root
        from capture.cli import _config
        from capture.serve import capture_child

        config = _config(config_path)
        root = resolve_root(archive, config.archive)
        outcome = capture_child(config, root, window, click.get_binary_stream("stdin").read())
        click.echo(orjson.dumps(outcome).decode())


if __name__ == "__main__":
    # `python -m capture.serve_cli serve-capture ...`: how the server starts a capture
    # process with its own interpreter, wherever the `evidence` script is.
    from capture.cli import run

    run()
