"""`consume MODULE:FUNCTION --queue Q`: run the poller on a user's handler."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.table import Table

from sqsbatch._core.handlers import disguised_async, is_async_handler
from sqsbatch._core.receiving import connections_for
from sqsbatch._shell.botocore import receives_fail_fast
from sqsbatch._shell.lifecycle import Counters
from sqsbatch._shell.retries import retries_soon
from sqsbatch.cli.common import CliError, Connection, connection, err, out, print_json, say
from sqsbatch.cli.foreground import Foreground
from sqsbatch.cli.loading import load_body_model, load_handler
from sqsbatch.cli.logs import (
    LogFormat,
    LogFormatOption,
    LogLevelOption,
    VerboseOption,
    cli_logging,
    log_level,
)
from sqsbatch.config import ConsumerConfig
from sqsbatch.errors import SqsBatchError
from sqsbatch.limits import SqsLimits

__all__ = ["app", "load_handler"]

app = typer.Typer()
DEFAULT_IDLE_SECONDS = 2.0


# The options of `consume`, named once (typer reads them from the annotations).
MaxBatchSizeOption = Annotated[
    int | None, typer.Option(min=1, max=100, help="Messages per batch (default: 10).")
]
MaxBatchTimeoutOption = Annotated[
    float | None, typer.Option(min=0, max=60, help="Seconds a batch waits (default: 5).")
]
MaxRetriesOption = Annotated[
    int | None,
    typer.Option(min=0, max=100, help="Default: the queue's maxReceiveCount - 1, else 3."),
]
DeadLetterQueueOption = Annotated[
    str | None,
    typer.Option(help="DLQ name (default: the queue's RedrivePolicy, else none)."),
]
RetryDelayOption = Annotated[
    int | None, typer.Option(min=0, max=86_400, help="Seconds (default: 0).")
]
MaxConcurrencyOption = Annotated[
    int | None, typer.Option(min=1, max=250, help="Batches at once (default: 1).")
]
VisibilityTimeoutOption = Annotated[
    int | None, typer.Option(min=1, max=43_200, help="Seconds (default: 30).")
]
UseAsyncOption = Annotated[
    bool, typer.Option("--async", help="AsyncConsumer, for an `async def` handler.")
]
OnceOption = Annotated[
    bool, typer.Option("--once", help="Stop when the queue is idle, then exit 0.")
]
IdleSecondsOption = Annotated[
    float | None,
    typer.Option(min=0.1, help="With --once: how long 'idle' is (default: 2).", show_default=False),
]
MaxMessageAgeOption = Annotated[
    float | None,
    typer.Option(
        min=1,
        max=1_209_600,
        metavar="SECONDS",
        help="Dead-letter (reason expired) messages older than this, before the handler.",
    ),
]
BodyModelOption = Annotated[
    str | None,
    typer.Option(
        metavar="MODULE:NAME",
        help="Validate each body with this pydantic model (or anything pydantic's "
        "TypeAdapter takes); an invalid one is dead-lettered (reason invalid_body).",
    ),
]


class Envelope(StrEnum):
    """`--envelope`'s choices: the setting's values (`sqsbatch._core.unwrap.ENVELOPES`, which
    tests/cli/test_cli_envelope.py compares)."""

    SNS = "sns"
    EVENTBRIDGE = "eventbridge"


EnvelopeOption = Annotated[
    Envelope | None,
    typer.Option(
        help="Each body is an SNS notification or an EventBridge event: the handler gets its "
        "message (its detail), message.envelope the rest; another body is dead-lettered "
        "(reason invalid_body). Default: none.",
        show_default=False,
    ),
]
PollSecondsOption = Annotated[
    int,
    typer.Option(
        min=1,
        max=20,
        help="Longest long poll. A stop waits for the current one: shorter stops sooner, "
        "at the cost of more empty receives.",
    ),
]
HealthFileOption = Annotated[
    str | None,
    typer.Option(
        metavar="PATH",
        help="Touch PATH while alive (after each receive, and while every slot is busy): "
        "for `sqsbatch health PATH --max-age SECONDS`.",
    ),
]
StallSecondsOption = Annotated[
    float | None,
    typer.Option(
        min=0.001,
        max=86_400,
        help="Exit non-zero after this long neither receiving nor busy "
        "(default: 3 long polls + visibility timeout).",
    ),
]


@app.command()
def consume(
    ctx: typer.Context,
    handler: Annotated[
        str,
        typer.Argument(
            metavar="MODULE:FUNCTION",
            help="The batch handler: MODULE:FUNCTION or FILE.py:FUNCTION.",
        ),
    ],
    *,
    queue: Annotated[str, typer.Option("--queue", "-q", help="Queue name or URL.")],
    max_batch_size: MaxBatchSizeOption = None,
    max_batch_timeout: MaxBatchTimeoutOption = None,
    max_retries: MaxRetriesOption = None,
    dead_letter_queue: DeadLetterQueueOption = None,
    retry_delay: RetryDelayOption = None,
    max_concurrency: MaxConcurrencyOption = None,
    visibility_timeout: VisibilityTimeoutOption = None,
    use_async: UseAsyncOption = False,
    once: OnceOption = False,
    idle_seconds: IdleSecondsOption = None,
    max_message_age: MaxMessageAgeOption = None,
    body_model: BodyModelOption = None,
    envelope: EnvelopeOption = None,
    poll_seconds: PollSecondsOption = 20,
    health_file: HealthFileOption = None,
    stall_seconds: StallSecondsOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the final stats as JSON.")] = False,
    log_format: LogFormatOption = LogFormat.AUTO,
    level: LogLevelOption = None,
    verbose: VerboseOption = 0,
) -> None:
    """Run the poller on a handler until Ctrl-C/SIGTERM (graceful) or, with --once, until idle.

    HANDLER is MODULE:FUNCTION (the current directory is importable) or FILE.py:FUNCTION.

    The first Ctrl-C (or SIGTERM) stops receiving: it says what it waits for (the messages in
    flight, the current long poll of up to --poll-seconds), lets in-flight batches finish and
    settle, prints the stats and exits 0. A second one stops at once (exit 130 for Ctrl-C):
    messages in flight are not settled and come back after their visibility timeout.

    On a terminal it shows live counters. Logs (the library's and the handler's own) go to
    stderr, at WARNING and up unless -v or --log-level says otherwise.

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
        stall_seconds=stall_seconds,
        max_message_age=max_message_age,
        envelope=None if envelope is None else envelope.value,
    )
    if idle_seconds is not None and not once:
        raise typer.BadParameter(
            "--idle-seconds goes with --once (stop when idle): add --once, or drop --idle-seconds",
            param_hint="'--idle-seconds'",
        )
    with cli_logging(log_format, log_level(level, verbose, default=logging.WARNING)):
        function = load_handler(handler)
        config = ConsumerConfig.load(queue, None, **given)  # flags > SQSBATCH_* > toml
        _check_kind(function, handler, use_async=use_async)
        run = _Run(
            queue=queue,
            function=function,
            config=config,
            limits=SqsLimits(max_wait_seconds=poll_seconds),
            until_idle=(idle_seconds or DEFAULT_IDLE_SECONDS) if once else None,
            body_model=load_body_model(body_model) if body_model is not None else None,
            health_file=health_file,
        )
        try:
            stats, requests = _run_async(ctx, run) if use_async else _run_sync(ctx, run)
        except _Stalled as stalled:  # the stats still, then the watchdog's one line
            _report(queue, stalled.stats, stalled.requests, as_json=as_json)
            raise stalled.error from None
    _report(queue, stats, requests, as_json=as_json)


@dataclass(frozen=True)
class _Run:
    """What one `consume` runs: the handler on the queue, until stopped or idle."""

    queue: str
    function: Any
    config: ConsumerConfig
    limits: SqsLimits
    until_idle: float | None
    """With --once: how long idle is; None runs until a signal."""
    health_file: str | None = None
    body_model: Any = None
    """With --body-model: what validates each body."""

    def foreground(
        self, work: Callable[[], object], stop: Callable[[], None], stats: Counters
    ) -> Foreground:
        return Foreground(
            work=work,
            stop=stop,
            stats=stats.as_dict,
            title=f"consuming {self.queue}",
            poll_seconds=self.limits.max_wait_seconds,
            visibility_timeout=self.config.visibility_timeout,
            live=err.is_terminal,
        )

    def starting(self, stall_seconds: float, kind: str = "") -> None:
        """The banner, with the watchdog's effective `stall_seconds` (a JSON record with
        `--log-format json`)."""
        idle = " until idle" if self.until_idle is not None else ""
        described = _describe(self.config).replace(
            "stall_seconds=None", f"stall_seconds={stall_seconds:g} (default)"
        )
        say(f"consuming {self.queue}{kind} with {described}{idle}")


def _given(**flags: object) -> dict[str, object]:
    """The flags given on the command line: only they override the environment and the file."""
    return {name: value for name, value in flags.items() if value is not None}


def _check_kind(function: Any, spec: str, *, use_async: bool) -> None:
    is_async = is_async_handler(function)  # an `async def` under a decorator counts too
    if is_async and not use_async:
        disguise = disguised_async(function)
        kind = f"{disguise} (it returns a coroutine)" if disguise else "is `async def`"
        raise CliError(f"{spec} {kind}: run it with --async")
    if use_async and not is_async:
        raise CliError(
            f"{spec} is not `async def`: drop --async (a def that returns a coroutine: "
            "annotate it -> Awaitable[None])"
        )


def _run_sync(ctx: typer.Context, run: _Run) -> tuple[dict[str, int], int]:
    from sqsbatch._sync.consumer import Consumer  # noqa: PLC0415

    client = receives_fail_fast(
        retries_soon(
            connection(ctx).client(
                max_pool_connections=connections_for(run.config),
                long_poll_seconds=run.limits.max_wait_seconds,
                margin_seconds=run.config.read_timeout_margin,
            )
        )
    )
    consumer = Consumer(
        run.queue,
        run.function,
        run.config,
        client=client,
        limits=run.limits,
        health_file=run.health_file,
        body_model=run.body_model,
    )
    run.starting(consumer.stall_seconds)  # once the consumer is made: bad settings fail first
    idle = run.until_idle
    work = consumer.run if idle is None else (lambda: consumer.run_until_idle(idle))
    _drive(run.foreground(work, consumer.stop, consumer.stats), consumer)
    return consumer.stats.as_dict(), consumer.requests


class _Stalled(Exception):
    """The watchdog ended the run: the stats are printed, then its error line."""

    def __init__(self, error: SqsBatchError, stats: dict[str, int], requests: int) -> None:
        super().__init__(str(error))
        self.error, self.stats, self.requests = error, stats, requests


def _drive(foreground: Foreground, consumer: Any) -> None:
    try:
        foreground.run()
    except SqsBatchError as exc:
        if not consumer.stalled:
            raise
        raise _Stalled(exc, consumer.stats.as_dict(), consumer.requests) from None


def _run_async(ctx: typer.Context, run: _Run) -> tuple[dict[str, int], int]:
    from sqsbatch._async.consumer import AsyncConsumer  # noqa: PLC0415 - aioboto3 is slow to load

    with _exported(connection(ctx)):  # the async client is aioboto3's: it reads the env
        consumer = AsyncConsumer(
            run.queue,
            run.function,
            run.config,
            limits=run.limits,
            health_file=run.health_file,
            body_model=run.body_model,
        )
        run.starting(consumer.stall_seconds, " (async)")
        idle = run.until_idle

        def work() -> None:
            asyncio.run(consumer.run() if idle is None else consumer.run_until_idle(idle))

        _drive(run.foreground(work, consumer.stop, consumer.stats), consumer)
    return consumer.stats.as_dict(), consumer.requests


@contextmanager
def _exported(conn: Connection) -> Iterator[None]:
    """The connection options as the environment variables aioboto3 reads, for the block."""
    conn.check()  # a malformed endpoint is one line, not aiobotocore's ValueError
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


FROM_THE_QUEUE = ("dead_letter_queue", "max_retries")
"""Settings that, unless given, come from the queue's RedrivePolicy at start."""


def _describe(config: ConsumerConfig) -> str:
    given = config.model_fields_set
    return ", ".join(
        f"{key}=(the queue's)" if key in FROM_THE_QUEUE and key not in given else f"{key}={value}"
        for key, value in config.model_dump().items()
    )


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
