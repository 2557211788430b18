"""Message commands: `inspect` (peek with metadata) and `send`."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from sqsbatch.cli.common import CliError, format_age, out, print_json, queue_attributes, sqs_for
from sqsbatch.cli.peek import peek
from sqsbatch.envelope import ContentType, UserAttribute, decode, payload_size
from sqsbatch.producer import Producer
from sqsbatch.transport import queue_name

__all__ = ["app", "describe"]

app = typer.Typer()

PREVIEW_CHARS = 60


@app.command("inspect")
def inspect_queue(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="Queue name or URL.")],
    limit: Annotated[int, typer.Option(min=1, max=100, help="Messages to peek at.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> None:
    """Peek at messages with their metadata, without consuming them.

    A peek is a receive: messages are received with a 20 s visibility and released at once
    (visibility 0). SQS counts it: each peeked message's receive count, and so its `attempts`,
    goes up by one, which uses up one of its deliveries before max_retries (and the
    RedrivePolicy) dead-letters it. Only visible messages can be peeked; in-flight ones (being
    processed, or in a DLQ waiting for their redrive) and delayed ones are counted, not shown.
    """
    sqs = sqs_for(ctx)
    attributes = queue_attributes(sqs, queue)
    counts = {
        "visible": int(attributes.get("ApproximateNumberOfMessages", 0)),
        "in_flight": int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
        "delayed": int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)),
    }
    wanted = min(limit, counts["visible"])  # no peek (no receive) when nothing is visible
    rows = [describe(item) for item in peek(sqs, sqs.queue_url(queue), wanted)] if wanted else []
    if as_json:
        print_json({"queue": queue_name(queue), **counts, "peeked": len(rows), "messages": rows})
        return
    out.print(_table(queue_name(queue), rows, counts))


def describe(raw: dict[str, Any]) -> dict[str, Any]:
    """One received message, as `inspect` shows it."""
    decoded = decode(raw)
    envelope = decoded.envelope
    error = envelope.error
    return {
        "id": decoded.id,
        "sqs_message_id": raw["MessageId"],
        "attempts": decoded.attempts,
        "receive_count": int(raw.get("Attributes", {}).get("ApproximateReceiveCount", 0)),
        "timestamp": decoded.timestamp,
        "redrives": envelope.redrives,
        "source_queue": envelope.source_queue,
        "error": None if error is None else {"type": error.type, "message": error.message},
        "due_at": envelope.due_at,
        "size": payload_size(raw.get("Body", ""), raw.get("MessageAttributes") or {}),
        "content_type": envelope.content_type,
        "attributes": decoded.attributes,
        "body": decoded.raw_body,
    }


def _table(name: str, rows: list[dict[str, Any]], counts: dict[str, int]) -> Table:
    hidden = counts["in_flight"] + counts["delayed"]
    table = Table(
        title=f"{name}: peeked {len(rows)} of ~{counts['visible']} visible",
        title_justify="left",
        caption=f"not shown: {counts['in_flight']} in flight (being processed or waiting for "
        f"a redrive), {counts['delayed']} delayed. attempts include this peek."
        if hidden
        else "attempts include this peek's receive.",
        caption_justify="left",
    )
    for column, justify in (
        ("id", "left"),
        ("attempts", "right"),
        ("age", "right"),
        ("redrives", "right"),
        ("last error", "left"),
        ("size", "right"),
        ("body", "left"),
    ):
        table.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for row in rows:
        error = row["error"]
        body = row["body"]
        table.add_row(
            row["id"],
            str(row["attempts"]),
            format_age(time.time() - row["timestamp"].timestamp()),
            str(row["redrives"]),
            f"{error['type']}: {error['message']}" if error else "",
            str(row["size"]),
            body if len(body) <= PREVIEW_CHARS else body[: PREVIEW_CHARS - 1] + "…",
        )
    return table


@app.command()
def send(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="Queue name or URL.")],
    body: Annotated[str | None, typer.Argument(help="The body (or use --file).")] = None,
    *,
    delay: Annotated[
        int | None, typer.Option(min=0, max=86_400, help="Delay in seconds (over 900: hops).")
    ] = None,
    text: Annotated[bool, typer.Option("--text", help="Send the body as text.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="The body is JSON: parse it.")] = False,
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="Read the body from a file ('-': stdin).")
    ] = None,
    attribute: Annotated[
        list[str] | None,
        typer.Option("--attribute", "-a", help="A message attribute NAME=VALUE (repeatable)."),
    ] = None,
    group_id: Annotated[str | None, typer.Option(help="MessageGroupId (FIFO queues).")] = None,
) -> None:
    """Send one message; prints its id.

    Without --text or --json, a body that parses as JSON is sent as JSON and anything else as
    text; a --file that is not UTF-8 is sent as bytes. The consumer gets the same type back.
    """
    if text and as_json:
        raise typer.BadParameter("--text and --json exclude each other")
    value, content_type = _body(body, file, text=text, as_json=as_json)
    producer = Producer(queue, client=sqs_for(ctx).client)
    message_id = producer.send(
        value,
        delay_seconds=delay,
        content_type=content_type,
        attributes=_attributes(attribute or []),
        group_id=group_id,
    )
    typer.echo(message_id)


def _body(
    body: str | None, file: Path | None, *, text: bool, as_json: bool
) -> tuple[Any, ContentType]:
    if (body is None) == (file is None):
        raise typer.BadParameter("give BODY or --file, not both and not neither")
    if file is not None:
        data = sys.stdin.buffer.read() if str(file) == "-" else _read(file)
        try:
            body = data.decode("utf-8")
        except UnicodeDecodeError:
            if text or as_json:
                raise CliError(f"{file} is not UTF-8 text") from None
            return data, "bytes"
    assert body is not None
    if text:
        return body, "text"
    try:
        return json.loads(body), "json"
    except ValueError:
        if as_json:
            raise typer.BadParameter("the body is not valid JSON (or drop --json)") from None
        return body, "text"


def _read(file: Path) -> bytes:
    try:
        return file.read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {file}: {exc.strerror}") from None


def _attributes(pairs: list[str]) -> dict[str, UserAttribute]:
    attributes: dict[str, UserAttribute] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"--attribute {pair!r}: expected NAME=VALUE")
        attributes[name] = value
    return attributes
