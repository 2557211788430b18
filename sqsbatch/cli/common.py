"""What every command shares: the connection options, the consoles, output helpers, errors.

Tables and progress go through rich; `--json` output is plain JSON on stdout, never rich markup.
Messages for people (notes, errors) go to stderr so that stdout stays parseable.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import typer
from rich.console import Console, ConsoleDimensions
from rich.markup import escape
from typer.core import TyperGroup

from sqsbatch._core.shapes import queue_name
from sqsbatch._shell.botocore import (
    LONG_POLL_SECONDS,
    MARGIN_SECONDS,
    checks_answers,
    client_config,
    sqs_errors,
)
from sqsbatch._sync.door import SyncSqs
from sqsbatch.cli.options import arity, endpoint_problem, hoist, tidy_help
from sqsbatch.errors import SqsBatchError

__all__ = [
    "CONNECT_ATTEMPTS",
    "CONNECT_TIMEOUT_SECONDS",
    "STDERR",
    "CliError",
    "Connection",
    "ask",
    "connection",
    "err",
    "fail",
    "format_age",
    "guarded_group",
    "out",
    "print_json",
    "queue_attributes",
    "remember_options",
    "say",
    "sqs_for",
    "stderr_line",
    "user_errors",
    "wants_json",
]

PIPE_WIDTH = 10_000
"""The width of stdout when it is not a terminal: wide enough that no line is wrapped."""


class _Console(Console):
    """rich's Console, but as wide as its lines when it does not write to a terminal: a pipe
    or a file gets whole lines and table rows, never rows folded at 80 columns."""

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        if not self.is_terminal:  # whatever $COLUMNS says: it is the terminal's, not the pipe's
            return ConsoleDimensions(PIPE_WIDTH, size.height)
        return size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size


out: Console = _Console(highlight=False, soft_wrap=False)
"""Tables and results (stdout)."""
err = Console(stderr=True, highlight=False)
"""Notes, progress and errors (stderr)."""

CONNECT_TIMEOUT_SECONDS = 2.0
"""How long the command line waits for a TCP connection to SQS."""
CONNECT_ATTEMPTS = 2
"""Tries per request when SQS cannot be reached at all, or does not answer in time (throttling
and 5xx keep the retries of `_botocore.client_config`)."""
READ_TIMEOUT_SECONDS = 3.0
"""How long a command that does not long-poll waits for SQS's answer (its receives wait 1 s at
most): a silent endpoint is one error line after `CONNECT_ATTEMPTS` of these, within 10 s."""

_JSON = "sqsbatch.json"


class _Stderr:
    """How lines for people come out on stderr: `json` once a command logs as JSON
    (`cli_logging`), so that a script reading stderr gets one JSON object per line."""

    json = False


STDERR = _Stderr()


def stderr_line(text: str, level: str = "info") -> str:
    """`text` as a line for stderr (newline included): as it is, or a JSON record shaped like
    the JSON logs (`time`, `level`, `logger`, `message`)."""
    if not STDERR.json:
        return text + "\n"
    now = datetime.now().astimezone().isoformat(timespec="milliseconds")
    record = {"time": now, "level": level, "logger": "sqsbatch.cli", "message": text}
    return json.dumps(record) + "\n"


def say(text: str, level: str = "info") -> None:
    """A note for people (a banner, what a stop waits for) on stderr: see `stderr_line`."""
    if STDERR.json:
        sys.stderr.write(stderr_line(text, level))
        sys.stderr.flush()
    else:
        err.print(text, markup=False, highlight=False, soft_wrap=True)


class CliError(Exception):
    """A mistake the user can fix (a bad module path, a refused prompt): one line, exit 1."""

    exit_code = 1


@dataclass(frozen=True)
class Connection:
    """The global `--endpoint-url`, `--region` and `--profile`; None leaves it to boto3.

    boto3 itself reads `AWS_ENDPOINT_URL_SQS`/`AWS_ENDPOINT_URL`, `AWS_REGION`/
    `AWS_DEFAULT_REGION`, `AWS_PROFILE` and the usual credential chain.
    """

    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None

    def client(
        self,
        *,
        max_pool_connections: int = 10,
        long_poll_seconds: float | None = None,
        margin_seconds: float = MARGIN_SECONDS,
    ) -> Any:
        """A boto3 SQS client that gives up soon when SQS cannot be reached or does not answer
        (a wrong endpoint, or one that never answers, is one error line within seconds, not
        botocore's retries with backoff). Its read timeout is `READ_TIMEOUT_SECONDS`; for a
        command that long-polls (`consume`, `redrive run`), the longest long poll
        (`long_poll_seconds`) plus `margin_seconds`."""
        import boto3  # noqa: PLC0415 - slow to import; `--help` should not pay for it
        from botocore.config import Config  # noqa: PLC0415

        config = client_config(
            max_pool_connections=max_pool_connections,
            long_poll_seconds=LONG_POLL_SECONDS if long_poll_seconds is None else long_poll_seconds,
            margin_seconds=margin_seconds,
        ).merge(Config(connect_timeout=CONNECT_TIMEOUT_SECONDS))
        if long_poll_seconds is None:
            config = config.merge(Config(read_timeout=READ_TIMEOUT_SECONDS))
        self.check()
        with sqs_errors():
            session = boto3.session.Session(profile_name=self.profile, region_name=self.region)
            try:
                client = session.client("sqs", endpoint_url=self.endpoint_url, config=config)
            except ValueError as exc:  # botocore's "Invalid endpoint: host:port", and others
                url, _, _ = str(exc).partition(": ")[2].partition(" ")
                problem = endpoint_problem(url) if url else None
                what = f"{url!r} {problem}" if problem else f"is invalid ({exc})"
                raise CliError(f"SQS endpoint {what} (from {self._source()})") from None
        client.meta.events.register_first("needs-retry.sqs", _give_up_when_unreachable)
        return checks_answers(client)

    def check(self) -> None:
        """A `CliError` naming what is wrong with the endpoint in use (the option's, else
        `$AWS_ENDPOINT_URL_SQS`'s or `$AWS_ENDPOINT_URL`'s), before any client is made."""
        url = (
            self.endpoint_url
            or os.environ.get("AWS_ENDPOINT_URL_SQS")
            or os.environ.get("AWS_ENDPOINT_URL")
        )
        problem = endpoint_problem(url) if url else None
        if problem is not None:
            raise CliError(f"SQS endpoint {url!r} {problem} (from {self._source()})")

    def _source(self) -> str:
        if self.endpoint_url:
            return "the command line or the settings"
        return "$AWS_ENDPOINT_URL_SQS, $AWS_ENDPOINT_URL or the AWS config file"


def _give_up_when_unreachable(
    caught_exception: BaseException | None = None, attempts: int = 0, **_: Any
) -> None:
    """A `needs-retry` hook: after `CONNECT_ATTEMPTS` tries that could not connect, or that
    got no answer in time, raise the error instead of letting botocore's standard mode retry
    it (with backoff)."""
    from botocore.exceptions import (  # noqa: PLC0415
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        ReadTimeoutError,
    )

    unanswered = isinstance(
        caught_exception,
        EndpointConnectionError | ConnectTimeoutError | ReadTimeoutError | ConnectionClosedError,
    )
    if unanswered and attempts >= CONNECT_ATTEMPTS:
        raise caught_exception  # type: ignore[misc]


def remember_options(ctx: typer.Context, where: Connection, *, as_json: bool) -> None:
    """Keep the app's global options for its commands (the app's callback calls this)."""
    ctx.obj = where
    ctx.meta[_JSON] = as_json
    STDERR.json = False  # until the command's logging says otherwise


def connection(ctx: typer.Context) -> Connection:
    """The connection options of the running command (set by the app's callback)."""
    found = ctx.find_object(Connection)
    return found if found is not None else Connection()


def wants_json(ctx: typer.Context) -> bool:
    """Whether the global `--json` was given (before or after the command)."""
    return bool(ctx.meta.get(_JSON, False))


def sqs_for(ctx: typer.Context) -> SyncSqs:
    """A request-counting, error-translating SQS door for the running command."""
    return SyncSqs(connection(ctx).client())


def queue_attributes(sqs: SyncSqs, queue: str, names: list[str] | None = None) -> dict[str, str]:
    """A queue's attributes (all by default); `QueueNotFound` names the queue."""
    url = sqs.queue_url(queue)
    params = {"QueueUrl": url, "AttributeNames": names or ["All"]}
    attributes: dict[str, str] = sqs.call("get_queue_attributes", params, queue=queue_name(queue))[
        "Attributes"
    ]
    return attributes


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print `error: message` as one line on stderr; return the Exit to raise."""
    if STDERR.json:
        say(" ".join(message.split()), "error")
        return typer.Exit(code)
    line = escape(" ".join(message.split()))
    err.print(f"[bold red]error:[/] {line}", markup=True, highlight=False, soft_wrap=True)
    return typer.Exit(code)


def print_json(data: Any) -> None:
    """Plain JSON on stdout, for scripts: one document, on one line."""
    sys.stdout.write(json.dumps(data, default=_jsonable) + "\n")
    sys.stdout.flush()


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def format_age(seconds: float | None) -> str:
    """`-`, `42s`, `3m05s`, `2h10m`, `3d4h`."""
    if seconds is None:
        return "-"
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h"


def ask(question: str) -> bool:
    """A yes/no question on stderr, the answer a line of stdin: `y` or `yes` is yes; anything
    else, or no answer (end of input), is no. Nothing goes to stdout (click's prompt writes a
    space there), so `--json` output stays parseable."""
    sys.stderr.write(f"{question} [y/N]: ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    if not answer.endswith("\n"):
        sys.stderr.write("\n")  # end of input: end the prompt's line
    return answer.strip().lower() in {"y", "yes"}


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the errors a user can cause into one `error: ...` line and an exit code: 2 for a
    malformed command line, 1 for the rest (a missing queue, no credentials, a bad value)."""
    from typer._click.exceptions import (  # noqa: PLC0415 - typer's vendored click
        ClickException,
        NoArgsIsHelpError,
        UsageError,
    )

    try:
        yield
    except NoArgsIsHelpError:
        raise  # shows the help, as asked
    except UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        raise fail(exc.format_message() + hint, exc.exit_code) from None
    except ClickException as exc:
        raise fail(exc.format_message(), exc.exit_code) from None
    except (SqsBatchError, CliError) as exc:
        raise fail(str(exc), 1) from None


def guarded_group(
    errors: Callable[[], AbstractContextManager[None]] = user_errors,
) -> type[TyperGroup]:
    """typer's group class for an app: `errors()` around parsing and around every command, so
    that a user's mistake is one line and an exit code, never a traceback; the global options
    read before or after the command (`options.hoist`); help printed as written."""

    class Group(TyperGroup):
        def make_context(
            self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
        ) -> Any:
            with errors():
                return super().make_context(info_name, args, parent, **extra)

        def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
            self._tidy(ctx)
            reordered = hoist(
                args, arity(self.get_params(ctx)), lambda name: self._arity(ctx, name)
            )
            return list(super().parse_args(ctx, reordered))

        def invoke(self, ctx: Any) -> Any:
            with errors():
                return super().invoke(ctx)

        def _arity(self, ctx: Any, name: str) -> dict[str, int] | None:
            command = self.get_command(ctx, name)
            return None if command is None else arity(command.get_params(ctx))

        def _tidy(self, ctx: Any) -> None:
            tidy_help(self, ctx)
            for name in self.list_commands(ctx):
                tidy_help(self.get_command(ctx, name), ctx)

    return Group
