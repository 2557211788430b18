"""`pause QUEUE [--for DURATION] [--reason TEXT]` and `resume QUEUE` (docs/pressure.md).

A pause is a queue tag (the pollers are to read it, once wired); a queue consumed by Lambda
also has its event source mappings disabled. Lambda is asked at boto3's Lambda endpoint
(`AWS_ENDPOINT_URL_LAMBDA`, `AWS_ENDPOINT_URL`, else AWS); when SQS is at an endpoint of its own
(`--endpoint-url`, `AWS_ENDPOINT_URL_SQS`) and Lambda at none, a local SQS, Lambda is left alone
and the output says so. `--no-lambda` leaves it alone always.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

from sqsbatch._core.pause_state import parse_duration
from sqsbatch.cli.common import Connection, connection, out, print_json, say, sqs_for, wants_json
from sqsbatch.pausing import Paused, pause_queue, resume_queue

__all__ = ["app"]

app = typer.Typer()

Queue = Annotated[str, typer.Argument(help="Queue name or URL.")]
NoLambda = Annotated[
    bool,
    typer.Option("--no-lambda", help="Leave Lambda event source mappings alone (no Lambda call)."),
]


@app.command()
def pause(
    ctx: typer.Context,
    queue: Queue,
    for_: Annotated[
        str | None,
        typer.Option("--for", metavar="DURATION", help="How long: 90s, 15m, 2h, 1d (max 14d)."),
    ] = None,
    reason: Annotated[
        str | None, typer.Option(help="Why, kept in the tag (letters, digits, _ . : / = + - @).")
    ] = None,
    no_lambda: NoLambda = False,
) -> None:
    """Pause a queue (a tag on it) until resumed or until --for has passed, and disable its
    Lambda event source mappings. The pollers do not read the tag yet (docs/pressure.md)."""
    seconds = None
    if for_ is not None:
        try:
            seconds = parse_duration(for_)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--for") from None
    sqs = sqs_for(ctx)
    lambdas = _lambda_client(connection(ctx), skip=no_lambda)
    done = pause_queue(
        queue, for_seconds=seconds, reason=reason, client=sqs.client, lambda_client=lambdas
    )
    _show(ctx, done, "paused")


@app.command()
def resume(ctx: typer.Context, queue: Queue, no_lambda: NoLambda = False) -> None:
    """Resume a paused queue: its pause tags are removed and its disabled Lambda event source
    mappings enabled."""
    sqs = sqs_for(ctx)
    done = resume_queue(
        queue, client=sqs.client, lambda_client=_lambda_client(connection(ctx), skip=no_lambda)
    )
    _show(ctx, done, "resumed")


def _show(ctx: typer.Context, done: Paused, verb: str) -> None:
    if wants_json(ctx):
        state = done.state
        print_json(
            {
                "queue": done.queue,
                "paused": state.paused,
                "until": state.until_text() if state.paused else None,
                "reason": state.reason,
                "mappings_changed": done.mappings,
                "notes": done.notes,
            }
        )
        return
    until = f" until {done.state.until_text()}" if done.state.paused else ""
    why = f" ({done.state.reason})" if done.state.reason else ""
    out.print(f"{verb} {done.queue}{until}{why}", markup=False, highlight=False)
    switched = "disabled" if verb == "paused" else "enabled"
    for mapping in done.mappings:
        out.print(f"  {switched} event source mapping {mapping}", markup=False, highlight=False)
    for note in done.notes:
        say(f"note: {note}")


def _lambda_client(where: Connection, *, skip: bool) -> Any:
    """False (leave Lambda alone), or a boto3 Lambda client that gives up soon."""
    own_sqs = where.endpoint_url or os.environ.get("AWS_ENDPOINT_URL_SQS")
    lambda_endpoint = os.environ.get("AWS_ENDPOINT_URL_LAMBDA") or os.environ.get(
        "AWS_ENDPOINT_URL"
    )
    if skip or (own_sqs and not lambda_endpoint):
        return False
    import boto3  # noqa: PLC0415 - slow to import
    from botocore.config import Config  # noqa: PLC0415

    config = Config(connect_timeout=2, read_timeout=5, retries={"mode": "standard"})
    session = boto3.session.Session(profile_name=where.profile, region_name=where.region)
    return session.client("lambda", config=config)
