"""What every command shares: the connection options, the consoles, output helpers, errors.

Tables and progress go through rich; `--json` output is plain JSON on stdout, never rich markup.
Messages for people (notes, errors) go to stderr so that stdout stays parseable.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from sqsbatch.sqs_sync import SyncSqs
from sqsbatch.transport import client_config, queue_name, sqs_errors

__all__ = [
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
    "sqs_for",
]

out = Console(highlight=False, soft_wrap=False)
"""Tables and results (stdout)."""
err = Console(stderr=True, highlight=False)
"""Notes, progress and errors (stderr)."""


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

    def client(self, *, max_pool_connections: int = 10) -> Any:
        import boto3  # noqa: PLC0415 - slow to import; `--help` should not pay for it

        with sqs_errors():
            session = boto3.session.Session(profile_name=self.profile, region_name=self.region)
            return session.client(
                "sqs",
                endpoint_url=self.endpoint_url,
                config=client_config(max_pool_connections=max_pool_connections),
            )


def connection(ctx: typer.Context) -> Connection:
    """The connection options of the running command (set by the app's callback)."""
    found = ctx.find_object(Connection)
    return found if found is not None else Connection()


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
    line = " ".join(message.split())
    err.print(f"[bold red]error:[/] {line}", markup=True, highlight=False, soft_wrap=True)
    return typer.Exit(code)


def print_json(data: Any) -> None:
    """Plain JSON on stdout, for scripts."""
    sys.stdout.write(json.dumps(data, indent=2, default=_jsonable) + "\n")
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
    """A yes/no question on stderr; no answer (end of input) is no."""
    try:
        return bool(typer.confirm(question, err=True))
    except typer.Abort:
        return False


def guarded_group(user_errors: Callable[[], AbstractContextManager[None]]) -> type[TyperGroup]:
    """typer's group class with `user_errors()` around parsing and around every command, so
    that a user's mistake is one line and an exit code, never a traceback."""

    class Group(TyperGroup):
        def make_context(
            self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
        ) -> Any:
            with user_errors():
                return super().make_context(info_name, args, parent, **extra)

        def invoke(self, ctx: Any) -> Any:
            with user_errors():
                return super().invoke(ctx)

    return Group
