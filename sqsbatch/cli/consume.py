"""`consume MODULE:FUNCTION --queue Q`: run the poller on a user's handler."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.table import Table

from sqsbatch.cli.common import CliError, Connection, connection, err, out, print_json
from sqsbatch.config import ConsumerConfig
from sqsbatch.consuming import connections_for
from sqsbatch.limits import SqsLimits

__all__ = ["app", "load_handler"]

app = typer.Typer()


def load_handler(spec: str) -> Any:
    """The callable named by `package.module:function` (the current directory is importable)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise typer.BadParameter(f"{spec!r}: expected MODULE:FUNCTION, e.g. app.jobs:handle")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise CliError(f"cannot import {module_name!r}: {exc}") from None
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise CliError(f"module {module_name!r} has no {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise CliError(f"{spec} is not callable")
    return target


@app.command()
def consume(
    ctx: typer.Context,
    handler: Annotated[str, typer.Argument(metavar="MODULE:FUNCTION", help="The batch handler.")],
    *,
    queue: Annotated[str, typer.Option("--queue", "-q", help="Queue name or URL.")],
    max_batch_size: Annotated[int | None, typer.Option(help="1..100 (default: 10)")] = None,
    max_batch_timeout: Annotated[
        float | None, typer.Option(help="Seconds 0..60 (default: 5)")
    ] = None,
    max_retries: Annotated[int | None, typer.Option(help="0..100 (default: 3)")] = None,
    dead_letter_queue: Annotated[str | None, typer.Option(help="DLQ name (default: none)")] = None,
    retry_delay: Annotated[int | None, typer.Option(help="Seconds 0..86400 (default: 0)")] = None,
    max_concurrency: Annotated[
        int | None, typer.Option(help="Batches at once (default: 1)")
    ] = None,
    visibility_timeout: Annotated[int | None, typer.Option(help="Seconds (default: 30)")] = None,
    use_async: Annotated[
        bool, typer.Option("--async", help="AsyncConsumer, for an `async def` handler.")
    ] = False,
    once: Annotated[
        bool, typer.Option("--once", help="Stop when the queue is idle, then exit 0.")
    ] = False,
    idle_seconds: Annotated[
        float, typer.Option(min=0.1, help="With --once: how long 'idle' is.")
    ] = 2.0,
    poll_seconds: Annotated[
        int,
        typer.Option(
            min=1,
            max=20,
            help="Longest long poll. A stop waits for the current one: shorter stops sooner, "
            "at the cost of more empty receives.",
        ),
    ] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print the final stats as JSON.")] = False,
) -> None:
    """Run the poller on a handler until SIGTERM/SIGINT (graceful) or, with --once, until idle.

    On SIGTERM/SIGINT it stops receiving (after the current long poll), lets in-flight batches
    finish and settle, prints the stats and exits 0.

    Settings not given as flags come from SQSBATCH_* variables, then from the queue's
    [[queues.consumers]] table in sqsbatch.toml ($SQSBATCH_CONFIG_FILE), then the defaults.
    """
    given = _given(
        max_batch_size=max_batch_size,
        max_batch_timeout=max_batch_timeout,
        max_retries=max_retries,
        dead_letter_queue=dead_letter_queue,
        retry_delay=retry_delay,
        max_concurrency=max_concurrency,
        visibility_timeout=visibility_timeout,
    )
    function = load_handler(handler)
    config = ConsumerConfig.load(queue, None, **given)  # flags > SQSBATCH_* > toml
    _check_kind(function, handler, use_async=use_async)
    _log_to_stderr()
    client_pool = connections_for(config)
    limits = SqsLimits(max_wait_seconds=poll_seconds)
    if use_async:
        stats, requests = _run_async(
            ctx,
            queue=queue,
            function=function,
            config=config,
            once=once,
            idle_seconds=idle_seconds,
            limits=limits,
        )
    else:
        stats, requests = _run_sync(
            ctx,
            queue=queue,
            function=function,
            config=config,
            once=once,
            idle_seconds=idle_seconds,
            pool=client_pool,
            limits=limits,
        )
    _report(queue, stats, requests, as_json=as_json)


def _given(**flags: object) -> dict[str, object]:
    """The flags given on the command line: only they override the environment and the file."""
    return {name: value for name, value in flags.items() if value is not None}


def _check_kind(function: Any, spec: str, *, use_async: bool) -> None:
    is_async = inspect.iscoroutinefunction(function)
    if is_async and not use_async:
        raise CliError(f"{spec} is `async def`: run it with --async")
    if use_async and not is_async:
        raise CliError(f"{spec} is not `async def`: drop --async")


def _run_sync(
    ctx: typer.Context,
    *,
    queue: str,
    function: Any,
    config: ConsumerConfig,
    once: bool,
    idle_seconds: float,
    pool: int,
    limits: SqsLimits,
) -> tuple[dict[str, int], int]:
    from sqsbatch.consumer import Consumer  # noqa: PLC0415

    client = connection(ctx).client(max_pool_connections=pool)
    consumer = Consumer(queue, function, config, client=client, limits=limits)
    err.print(f"consuming {queue} with {_describe(config)}" + (" until idle" if once else ""))
    if once:
        consumer.run_until_idle(idle_seconds)
    else:
        consumer.run()
    return consumer.stats.as_dict(), consumer.requests


def _run_async(
    ctx: typer.Context,
    *,
    queue: str,
    function: Any,
    config: ConsumerConfig,
    once: bool,
    idle_seconds: float,
    limits: SqsLimits,
) -> tuple[dict[str, int], int]:
    from sqsbatch.async_consumer import AsyncConsumer  # noqa: PLC0415 - aioboto3 is slow to load

    with _exported(connection(ctx)):  # the async client is aioboto3's: it reads the env
        consumer = AsyncConsumer(queue, function, config, limits=limits)
        err.print(f"consuming {queue} (async) with {_describe(config)}")
        asyncio.run(consumer.run_until_idle(idle_seconds) if once else consumer.run())
    return consumer.stats.as_dict(), consumer.requests


@contextmanager
def _exported(conn: Connection) -> Iterator[None]:
    """The connection options as the environment variables aioboto3 reads, for the block."""
    wanted = {
        "AWS_ENDPOINT_URL_SQS": conn.endpoint_url,
        "AWS_DEFAULT_REGION": conn.region,
        "AWS_REGION": conn.region,
        "AWS_PROFILE": conn.profile,
    }
    saved = {name: os.environ.get(name) for name in wanted}
    os.environ.update({name: value for name, value in wanted.items() if value is not None})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _describe(config: ConsumerConfig) -> str:
    return ", ".join(f"{key}={value}" for key, value in config.model_dump().items())


def _log_to_stderr() -> None:
    """The library's warnings (policy mismatches, handler errors) on stderr, once."""
    from rich.logging import RichHandler  # noqa: PLC0415

    log = logging.getLogger("sqsbatch")
    if not any(isinstance(h, RichHandler) for h in log.handlers):
        log.addHandler(RichHandler(console=err, show_path=False, markup=False))
        log.setLevel(logging.WARNING)


def _report(queue: str, stats: dict[str, int], requests: int, *, as_json: bool) -> None:
    if as_json:
        print_json({"queue": queue, "stats": stats, "requests": requests})
        return
    table = Table(title=f"consumer of {queue} stopped", title_justify="left")
    table.add_column("counter")
    table.add_column("value", justify="right")
    for key, value in stats.items():
        if value or key in ("received", "batches", "acked", "retried", "dead_lettered"):
            table.add_row(key.replace("_", " "), str(value))
    table.add_row("SQS requests", str(requests))
    out.print(table)
