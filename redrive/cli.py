"""`redrive run`: the daemon from the command line (typer + rich).

Logs one line per action on stderr (`key=value`, or JSON with `--json`) and prints the counters
on exit (a table, or JSON with `--json`). Errors a user can cause print one line and exit 1
(2 for a malformed command line); tracebacks are for bugs.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from redrive.manual import start_native_move
from redrive.report import event
from redrive.settings import RedriveSettings
from sqsbatch.cli.common import guarded_group
from sqsbatch.errors import ConfigError, SqsBatchError
from sqsbatch.transport import client_config, sqs_errors

__all__ = ["app", "main", "make_client"]


@contextmanager
def _user_errors() -> Iterator[None]:
    """Errors a user can cause: one line on stderr, exit 2 (usage) or 1 (the rest)."""
    from typer._click.exceptions import (  # noqa: PLC0415 - typer's vendored click
        ClickException,
        NoArgsIsHelpError,
        UsageError,
    )

    try:
        yield
    except NoArgsIsHelpError:
        raise
    except UsageError as exc:
        typer.echo(f"redrive: {exc.format_message()}", err=True)
        raise typer.Exit(2) from None
    except ClickException as exc:
        typer.echo(f"redrive: {exc.format_message()}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except SqsBatchError as exc:
        typer.echo(f"redrive: {exc}", err=True)
        raise typer.Exit(1) from None


app = typer.Typer(
    name="redrive",
    cls=guarded_group(_user_errors),
    help="Drain dead-letter queues back to their sources, per message, with backoff.",
    pretty_exceptions_show_locals=False,
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Drain dead-letter queues back to their sources, per message, with backoff."""


def make_client(settings: RedriveSettings) -> Any:
    """A boto3 SQS client; endpoint and region from the settings, else boto3's usual chain."""
    import boto3  # noqa: PLC0415 - slow to import; `--help` does not need it

    with sqs_errors():
        return boto3.session.Session().client(
            "sqs",
            endpoint_url=settings.endpoint_url,
            region_name=settings.region,
            config=client_config(),
        )


Opt = typer.Option


@app.command()
def run(  # noqa: PLR0917 - typer options are parameters
    dlq: Annotated[list[str] | None, Opt("--dlq", help="DLQ name or URL (repeatable).")] = None,
    once: Annotated[bool, Opt("--once", help="Move what is due, hide the rest, exit.")] = False,
    to: Annotated[str | None, Opt(help="Where messages with no known source go.")] = None,
    base_delay: Annotated[float | None, Opt(help="Seconds before the 1st redrive.")] = None,
    factor: Annotated[float | None, Opt(help="Growth of the delay per redrive.")] = None,
    max_delay: Annotated[float | None, Opt(help="Cap of the delay, seconds.")] = None,
    jitter: Annotated[float | None, Opt(help="Up to this many seconds added.")] = None,
    max_redrives: Annotated[int | None, Opt(help="Redrives before a message stays.")] = None,
    rate: Annotated[float | None, Opt(help="Messages/s sent back, at most.")] = None,
    parking_queue: Annotated[str | None, Opt(help="Where exhausted messages go.")] = None,
    native: Annotated[
        bool | None, Opt("--native/--no-native", help="Use SQS's StartMessageMoveTask.")
    ] = None,
    endpoint_url: Annotated[str | None, Opt(help="SQS endpoint (e.g. a local one).")] = None,
    region: Annotated[str | None, Opt(help="AWS region.")] = None,
    as_json: Annotated[bool, Opt("--json", help="JSON logs and summary.")] = False,
) -> None:
    """Redrive until stopped (SIGTERM/SIGINT finish the current batch), or once with --once."""
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
        "native": native,
        "endpoint_url": endpoint_url,
        "region": region,
    }
    _configure_logging(as_json)
    settings = RedriveSettings(**{k: v for k, v in flags.items() if v is not None})
    if settings.native:
        _native(settings, as_json)
    else:
        _redrive(settings, once=once, as_json=as_json)


def _redrive(settings: RedriveSettings, *, once: bool, as_json: bool) -> None:
    redriver = settings.redriver(make_client(settings))
    if once:
        counters = redriver.run_once().as_dict()
    else:
        redriver.run()
        counters = redriver.stats.as_dict()
    counters["requests"] = redriver.requests
    if as_json:
        typer.echo(json.dumps(counters))
        return
    table = Table("counter", "value", title="redrive")
    for name, value in counters.items():
        table.add_row(name, str(value))
    Console().print(table)


def _native(settings: RedriveSettings, as_json: bool) -> None:
    if not settings.dlqs:
        raise ConfigError("no DLQ given: pass --dlq QUEUE (or REDRIVE_DLQS, or [redrive] dlqs)")
    rate = settings.rate
    if rate is not None and not rate.is_integer():
        raise ConfigError(f"rate={rate!r} is invalid with --native (accepted: int 1..500)")
    client = make_client(settings)
    tasks = {}
    for dlq in settings.dlqs:
        whole = int(rate) if rate is not None else None
        tasks[dlq] = start_native_move(dlq, to=settings.to, rate=whole, client=client)
        event(logging.INFO, {"action": "native-move", "dlq": dlq, "task": tasks[dlq]})
    typer.echo(json.dumps({"tasks": tasks}) if as_json else "\n".join(tasks.values()))


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "redrive", None) or {"message": record.getMessage()}
        line = {"time": round(record.created, 3), "level": record.levelname.lower(), **fields}
        return json.dumps({k: v for k, v in line.items() if v is not None})


def _configure_logging(as_json: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter() if as_json else logging.Formatter("%(message)s"))
    logger = logging.getLogger("redrive")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False


def main() -> None:
    """The `redrive` console script."""
    app()
