"""`redrive run`: the daemon from the command line (typer + rich).

Logs one line per action on stderr (`sqsbatch.cli.logs`: rich on a terminal, plain `key=value`
lines otherwise, JSON lines with `--log-format json` or `--json`) and prints the counters on
exit (a table, or JSON with `--json`). Errors a user can cause print one line and exit 1
(2 for a malformed command line); tracebacks are for bugs.
"""

from __future__ import annotations

import json
import logging
import signal
from typing import Annotated, Any

import typer
from rich.table import Table

from redrive.manual import start_native_move
from redrive.report import event
from redrive.settings import RedriveSettings
from sqsbatch._shell.retries import retries_soon
from sqsbatch.cli.common import (
    Connection,
    connection,
    guarded_group,
    out,
    remember_options,
    wants_json,
)
from sqsbatch.cli.foreground import Foreground
from sqsbatch.cli.logs import (
    LogFormat,
    LogFormatOption,
    LogLevelOption,
    VerboseOption,
    cli_logging,
    log_level,
)
from sqsbatch.cli.options import EndpointUrl, JsonOutput, Profile, Region, version_option
from sqsbatch.errors import ConfigError, SqsBatchError

__all__ = ["app", "main", "make_client"]


app = typer.Typer(
    name="redrive",
    cls=guarded_group(),
    help="Drain dead-letter queues back to their sources, per message, with backoff.",
    pretty_exceptions_show_locals=False,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    add_completion=False,
)


@app.callback()
def _root(  # noqa: PLR0917 - typer options are parameters
    ctx: typer.Context,
    endpoint_url: EndpointUrl = None,
    region: Region = None,
    profile: Profile = None,
    as_json: JsonOutput = False,
    version: Annotated[bool, version_option("redrive")] = False,
) -> None:
    """Drain dead-letter queues back to their sources, per message, with backoff.

    The options above may also come after the command (`redrive run --json`).
    """
    where = Connection(endpoint_url=endpoint_url, region=region, profile=profile)
    remember_options(ctx, where, as_json=as_json)


def make_client(
    settings: RedriveSettings, profile: str | None = None, *, long_poll_seconds: int | None = None
) -> Any:
    """A boto3 SQS client; endpoint and region from the settings, else boto3's usual chain.
    Like every command line client, it gives up soon when SQS cannot be reached or does not
    answer; `long_poll_seconds` (the daemon's) widens its read timeout for the long polls."""
    where = Connection(settings.endpoint_url, settings.region, profile)
    return retries_soon(where.client(long_poll_seconds=long_poll_seconds))


Opt = typer.Option


@app.command()
def run(  # noqa: PLR0917 - typer options are parameters
    ctx: typer.Context,
    dlq: Annotated[
        list[str] | None, Opt("--dlq", metavar="QUEUE", help="DLQ name or URL (repeatable).")
    ] = None,
    once: Annotated[bool, Opt("--once", help="Move what is due, hide the rest, exit.")] = False,
    to: Annotated[str | None, Opt(help="Where messages with no known source go.")] = None,
    base_delay: Annotated[
        float | None, Opt(min=0, max=86_400, help="Seconds before the 1st redrive.")
    ] = None,
    factor: Annotated[
        float | None, Opt(min=1, max=100, help="Growth of the delay per redrive.")
    ] = None,
    max_delay: Annotated[
        float | None, Opt(min=0, max=1_209_600, help="Cap of the delay, seconds.")
    ] = None,
    jitter: Annotated[
        float | None, Opt(min=0, max=86_400, help="Up to this many seconds added.")
    ] = None,
    max_redrives: Annotated[
        int | None, Opt(min=0, max=1_000, help="Redrives before a message stays.")
    ] = None,
    rate: Annotated[float | None, Opt(help="Messages/s sent back, at most.")] = None,
    parking_queue: Annotated[
        str | None, Opt(help="Where exhausted messages, and kept reasons, go.")
    ] = None,
    reasons: Annotated[
        str | None,
        Opt(
            metavar="R1,R2",
            help="Dead-letter reasons to bring back, comma-separated: retries_exhausted, "
            "expired, invalid_body, requested (any a handler gave), requested:TEXT, "
            "moved_by_sqs, or all (default: all but expired,invalid_body).",
        ),
    ] = None,
    native: Annotated[
        bool | None, Opt("--native/--no-native", help="Use SQS's StartMessageMoveTask.")
    ] = None,
    health_file: Annotated[
        str | None,
        Opt(
            metavar="PATH",
            help="Touch PATH after every receive: for `sqsbatch health PATH --max-age SECONDS`.",
        ),
    ] = None,
    stall_seconds: Annotated[
        float | None,
        Opt(
            min=0.001,
            max=86_400,
            help="Exit non-zero after this long without a completed receive "
            "(default: 3 long polls + visibility timeout).",
        ),
    ] = None,
    log_format: LogFormatOption = LogFormat.AUTO,
    level: LogLevelOption = None,
    verbose: VerboseOption = 0,
) -> None:
    """Redrive until stopped (SIGTERM/SIGINT finish the current batch), or once with --once.

    Logs one line per message and action on stderr, at INFO and up (--log-level WARNING shows
    only the problems). Every --dlq must be a dead-letter queue: one that some queue names in
    its RedrivePolicy. With --json: a JSON summary, and JSON logs unless --log-format is given.
    """
    where, as_json = connection(ctx), wants_json(ctx)
    flags = {
        "dlqs": dlq or None,
        "to": to,
        "base_delay": base_delay,
        "factor": factor,
        "max_delay": max_delay,
        "jitter": jitter,
        "max_redrives": max_redrives,
        "rate": rate,
        "parking_queue": parking_queue,
        "reasons": reasons,
        "native": native,
        "stall_seconds": stall_seconds,
        "endpoint_url": where.endpoint_url,
        "region": where.region,
    }
    logs = LogFormat.JSON if as_json and log_format is LogFormat.AUTO else log_format
    with cli_logging(logs, log_level(level, verbose, default=logging.INFO)):
        settings = RedriveSettings(**{k: v for k, v in flags.items() if v is not None})
        if settings.native:
            _native(settings, where.profile, as_json)
        else:
            _redrive(settings, where.profile, once=once, as_json=as_json, health_file=health_file)


def _redrive(
    settings: RedriveSettings,
    profile: str | None,
    *,
    once: bool,
    as_json: bool,
    health_file: str | None = None,
) -> None:
    polls = None if once else settings.wait_seconds  # --once polls 1 s: a short read timeout
    redriver = settings.redriver(make_client(settings, profile, long_poll_seconds=polls))
    redriver.health_file = health_file
    if once:
        counters = redriver.run_once().as_dict()
    else:
        daemon = _Daemon(
            work=redriver.run,
            stop=redriver.stop,
            stats=redriver.stats.as_dict,
            title="redrive",
            poll_seconds=settings.wait_seconds,
            visibility_timeout=settings.visibility_timeout,
        )
        try:
            daemon.run()
        except SqsBatchError:
            if redriver.stalled:  # the counters still, then the watchdog's one line
                _counters(redriver.stats.as_dict(), redriver.requests, as_json=as_json)
            raise
        counters = redriver.stats.as_dict()
    _counters(counters, redriver.requests, as_json=as_json)


def _counters(counters: dict[str, int], requests: int, *, as_json: bool) -> None:
    counters = {**counters, "requests": requests}
    if as_json:
        typer.echo(json.dumps(counters))
        return
    table = Table("counter", "value", title="redrive")
    for name, value in counters.items():
        table.add_row(name, str(value))
    out.print(table)


class _Daemon(Foreground):
    """`redrive run` in the foreground, as `sqsbatch consume` runs: the daemon on a thread, and
    the main thread answering signals. The first SIGINT/SIGTERM finishes the current pass (its
    sends and deletes) and the long poll under way, then the counters are printed; a second one
    ends the process at once (exit 128 + the signal, 130 for Ctrl-C)."""

    def _stopping_line(self, sig: signal.Signals) -> str:
        again = "Ctrl-C" if sig is signal.SIGINT else sig.name
        return (
            f"{sig.name}: stopping after the current pass (its sends and deletes) and the "
            f"long poll under way (up to {self.poll_seconds} s). {again} again stops at once."
        )

    def _again_line(self, sig: signal.Signals) -> str:
        return (
            f"{sig.name} again: stopped at once; messages received from a DLQ and not moved "
            f"yet come back when their visibility timeout ends ({self.visibility_timeout} s); "
            "one sent and not yet deleted from its DLQ is in both queues (never lost)"
        )


def _native(settings: RedriveSettings, profile: str | None, as_json: bool) -> None:
    if not settings.dlqs:
        raise ConfigError("no DLQ given: pass --dlq QUEUE (or REDRIVE_DLQS, or [redrive] dlqs)")
    rate = settings.rate
    if rate is not None and not rate.is_integer():
        raise ConfigError(f"rate={rate!r} is invalid with --native (accepted: int 1..500)")
    client = make_client(settings, profile)
    tasks = {}
    for dlq in settings.dlqs:
        whole = int(rate) if rate is not None else None
        tasks[dlq] = start_native_move(dlq, to=settings.to, rate=whole, client=client)
        event(logging.INFO, {"action": "native-move", "dlq": dlq, "task": tasks[dlq]})
    typer.echo(json.dumps({"tasks": tasks}) if as_json else "\n".join(tasks.values()))


def main() -> None:
    """The `redrive` console script."""
    app()
