"""Message commands: `inspect` (peek with metadata) and `send`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from sqsbatch import MessageSendRequest, Producer
from sqsbatch._core.attributes import UserAttribute, payload_size
from sqsbatch._core.envelope import (
    MOVED_BY_SQS,
    MOVED_BY_SQS_TEXT,
    ContentType,
    Envelope,
    death_reason,
    decode,
)
from sqsbatch._core.shapes import queue_name
from sqsbatch._sync.door import SyncSqs
from sqsbatch.cli.common import (
    CliError,
    err,
    format_age,
    out,
    print_json,
    queue_attributes,
    sqs_for,
    wants_json,
)
from sqsbatch.cli.escape import preview, printable
from sqsbatch.cli.filters import parse_filters
from sqsbatch.cli.peek import (
    Peeked,
    at_limit_line,
    max_receive_count,
    peek,
    peek_note,
    receive_count,
)
from sqsbatch.cli.sending import Line, check_lines, read_input, read_lines, send_lines
from sqsbatch.errors import SqsBatchError

__all__ = ["app", "describe"]

app = typer.Typer()

PREVIEW_CHARS = 60


@app.command("inspect")
def inspect_queue(  # noqa: PLR0917 - typer options are parameters
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="Queue name or URL.")],
    limit: Annotated[int, typer.Option(min=1, max=100, help="Messages to peek at.")] = 10,
    filters: Annotated[
        list[str] | None,
        typer.Option(
            "--filter",
            help="Show only the peeked messages that match, as redrive --filter: TEXT, re:REGEX, "
            "attr:NAME=VALUE, error:TYPE, reason:REASON, !EXPR; repeat to require all.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Peek even if that brings messages to the queue's maxReceiveCount (their next "
            "receive then moves them to the DLQ unprocessed); ten at a time, no stop.",
        ),
    ] = False,
) -> None:
    """Peek at messages with their metadata, without consuming them.

    A peek is a receive: messages are received with a 20 s visibility and released at once
    (visibility 0). SQS counts it: each peeked message's receive count, and so its `attempts`,
    goes up by one, which uses up one of its deliveries before max_retries (and the
    RedrivePolicy) dead-letters it. Only visible messages can be peeked; in-flight ones (being
    processed, or in a DLQ waiting for their redrive) and delayed ones are counted, not shown.

    On a queue with a RedrivePolicy, a peek that brings a message's receive count to
    maxReceiveCount has taken its last delivery: the next receive moves it to the DLQ without
    processing it. So there inspect peeks one message at a time and stops at the first such
    message: it shows what it peeked, names that message and exits 1. --force peeks ten at a
    time without stopping, names such messages and exits 0.

    --filter shows only the peeked messages that match (the grammar of redrive --filter): the
    others were peeked all the same.
    """
    select = parse_filters(filters or [])
    sqs = sqs_for(ctx)
    attributes = queue_attributes(sqs, queue)
    counts = {
        "visible": int(attributes.get("ApproximateNumberOfMessages", 0)),
        "in_flight": int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
        "delayed": int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)),
    }
    limit_count = max_receive_count(attributes)
    wanted = min(limit, counts["visible"])  # no peek (no receive) when nothing is visible
    peeked = Peeked()
    if wanted:
        err.print(f"note: {peek_note(limit_count, force=force)}", markup=False, soft_wrap=True)
        peeked = peek(sqs, sqs.queue_url(queue), wanted, max_receives=limit_count, force=force)
    reached = {m["MessageId"] for m in peeked.at_limit}
    on_dlq = bool(peeked.messages) and is_dead_letter_queue(sqs, sqs.queue_url(queue))
    rows = [
        describe(m, on_dlq=on_dlq) | {"at_receive_limit": m["MessageId"] in reached}
        for m in peeked.messages
        if select is None or select(decode(m))
    ]
    name = queue_name(queue)
    if as_json:
        print_json(
            {"queue": name, **counts, "max_receive_count": limit_count}
            | {"peeked": len(peeked.messages), "shown": len(rows), "messages": rows}
        )
    else:
        out.print(_table(name, rows, counts, limit_count, peeked=len(peeked.messages)))
    if limit_count is not None and peeked.at_limit:
        line = at_limit_line(name, peeked, limit_count, force=force)
        if not force:
            raise CliError(line)
        err.print(f"note: {line}", markup=False, soft_wrap=True)


def is_dead_letter_queue(sqs: SyncSqs, url: str) -> bool:
    """Some queue names it in its RedrivePolicy (one `ListDeadLetterSourceQueues` call)."""
    try:
        answer = sqs.call("list_dead_letter_source_queues", {"QueueUrl": url, "MaxResults": 1})
    except SqsBatchError:
        return False  # cannot tell: reasons are shown only where a history says
    return bool(answer.get("queueUrls"))


def _shown(reason: str | None) -> str:
    return MOVED_BY_SQS_TEXT if reason == MOVED_BY_SQS else (reason or "")


def _reason(envelope: Envelope, *, on_dlq: bool) -> str | None:
    """The last dead-letter reason; on a DLQ, `moved_by_sqs` when sqsbatch did not put it there."""
    if on_dlq:
        return death_reason(envelope)
    return envelope.deaths[-1].reason if envelope.deaths else None


def describe(raw: dict[str, Any], *, on_dlq: bool = False) -> dict[str, Any]:
    """One received message, as `inspect` shows it (`on_dlq`: the queue is a DLQ)."""
    decoded = decode(raw)
    envelope = decoded.envelope
    error = envelope.error
    return {
        "id": decoded.id,
        "sqs_message_id": raw["MessageId"],
        "attempts": decoded.attempts,
        "group_id": decoded.group_id,
        "idempotency_key": envelope.idempotency_key or decoded.id,
        "receive_count": receive_count(raw),
        "timestamp": decoded.timestamp,
        "redrives": envelope.redrives,
        "source_queue": envelope.source_queue,
        "error": None if error is None else {"type": error.type, "message": error.message},
        "reason": _reason(envelope, on_dlq=on_dlq),
        "deaths": max(envelope.dead_count, len(envelope.deaths)),
        "due_at": envelope.due_at,
        "size": payload_size(raw.get("Body", ""), raw.get("MessageAttributes") or {}),
        "content_type": envelope.content_type,
        "attributes": decoded.attributes,
        "body": decoded.raw_body,
    }


def _table(
    name: str,
    rows: list[dict[str, Any]],
    counts: dict[str, int],
    limit_count: int | None,
    *,
    peeked: int,
) -> Table:
    """Everything from the queue is escaped (`escape.printable`): no control character or
    terminal escape sequence of a body, attribute, id or error reaches the terminal."""
    hidden = counts["in_flight"] + counts["delayed"]
    notes = [
        f"not shown: {counts['in_flight']} in flight (being processed or waiting for "
        f"a redrive), {counts['delayed']} delayed. attempts include this peek."
        if hidden
        else "attempts include this peek's receive."
    ]
    if any(row["at_receive_limit"] for row in rows):
        notes.append(
            f"* this peek brought it to maxReceiveCount ({limit_count}): "
            "the next receive moves it to the DLQ unprocessed."
        )
    table = Table(
        title=f"{name}: peeked {peeked} of ~{counts['visible']} visible"
        + (f", {len(rows)} match --filter" if len(rows) != peeked else ""),
        title_justify="left",
        caption=" ".join(notes),
        caption_justify="left",
    )
    columns = ["id", "attempts", "age", "redrives", "deaths", "last reason", "last error"]
    columns += ["size", "body"]
    with_attributes = any(row["attributes"] for row in rows)
    if with_attributes:
        columns.insert(-1, "attributes")
    with_groups = any(row["group_id"] for row in rows)  # FIFO order, or a fair queue's tenant
    if with_groups:
        columns.insert(1, "group")
    for column in columns:
        justify = "right" if column in ("attempts", "age", "redrives", "deaths", "size") else "left"
        table.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for row in rows:
        error = row["error"]
        cells = [
            Text(printable(row["id"]) + (" *" if row["at_receive_limit"] else "")),
            Text(str(row["attempts"])),
            Text(format_age(time.time() - row["timestamp"].timestamp())),
            Text(str(row["redrives"])),
            Text(str(row["deaths"])),
            Text(preview(_shown(row["reason"]), PREVIEW_CHARS)),
            Text(preview(f"{error['type']}: {error['message']}", PREVIEW_CHARS) if error else ""),
            Text(str(row["size"])),
            Text(preview(row["body"], PREVIEW_CHARS)),
        ]
        if with_attributes:
            pairs = ", ".join(f"{key}={value}" for key, value in row["attributes"].items())
            cells.insert(-1, Text(preview(pairs, PREVIEW_CHARS)))
        if with_groups:
            cells.insert(1, Text(preview(printable(row["group_id"] or ""), PREVIEW_CHARS)))
        table.add_row(*cells)
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
    ttl: Annotated[
        float | None,
        typer.Option(
            min=1,
            max=1_209_600,
            metavar="SECONDS",
            help="A deadline from now: past it the consumer dead-letters the message (reason "
            "expired) instead of handling it (default: the queue's [[queues.producers]] "
            "ttl_seconds, else none).",
            show_default=False,
        ),
    ] = None,
    text: Annotated[bool, typer.Option("--text", help="Send the body as text.")] = False,
    json_body: Annotated[
        bool, typer.Option("--json-body", help="The body is JSON: parse it, refuse it if not.")
    ] = False,
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="Read the body from a file ('-': stdin).")
    ] = None,
    lines: Annotated[
        bool,
        typer.Option("--lines", help="With --file: one message per line (JSON lines)."),
    ] = False,
    attribute: Annotated[
        list[str] | None,
        typer.Option(
            "--attribute",
            "-a",
            metavar="NAME=VALUE",
            help="A message attribute (repeatable).",
        ),
    ] = None,
    group_id: Annotated[str | None, typer.Option(help="MessageGroupId (FIFO queues).")] = None,
    deduplication_id: Annotated[
        str | None,
        typer.Option(help="MessageDeduplicationId (FIFO queues without content-based dedup)."),
    ] = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            metavar="KEY",
            help="What makes two sends one piece of work for a consumer's idempotency guard "
            "(message.idempotency_key; default: the message id).",
        ),
    ] = None,
) -> None:
    """Send one message, or one per line of a file with --lines; prints the message ids.

    Without --text or --json-body, a body that parses as JSON is sent as JSON and anything else
    as text; a --file that is not UTF-8 is sent as bytes. The consumer gets the same type back.

    With --file F --lines, each non-blank line of F is a JSON value (with --text: a line of
    text) and one message, sent in batches (10 per SQS call). Every line is checked first: a
    bad line is one error naming it, and nothing is sent. --json prints {"message_id": ...}
    (with --lines: {"message_ids": [...]}).
    """
    if text and json_body:
        raise typer.BadParameter("--text and --json-body exclude each other")
    options: dict[str, Any] = {
        "delay_seconds": delay,
        "ttl_seconds": ttl,
        "attributes": _attributes(attribute or []),
        "group_id": group_id,
        "deduplication_id": deduplication_id,
        "idempotency_key": idempotency_key,
    }
    producer = Producer(queue, client=sqs_for(ctx).client)
    if lines:
        _send_lines(ctx, producer, body, file, text=text, options=options)
        return
    value, content_type = _body(body, file, text=text, as_json=json_body)
    message_id = producer.send(value, content_type=content_type, **options)
    if wants_json(ctx):
        print_json({"message_id": message_id})
    else:
        typer.echo(message_id)


def _send_lines(
    ctx: typer.Context,
    producer: Producer,
    body: str | None,
    file: Path | None,
    *,
    text: bool,
    options: dict[str, Any],
) -> None:
    if file is None or body is not None:
        raise typer.BadParameter("--lines reads --file FILE (or '-': stdin), and takes no BODY")
    if options["deduplication_id"] is not None:
        raise typer.BadParameter(
            "--deduplication-id would make every line a duplicate of the first: with --lines, "
            "use a queue with content-based deduplication"
        )
    if options["idempotency_key"] is not None:
        raise typer.BadParameter(
            "--idempotency-key would make every line the same piece of work as the first: with "
            "--lines, each message is its own (its id is its key)"
        )
    found = read_lines(file, text=text)

    def request(line: Line) -> MessageSendRequest:
        return MessageSendRequest(line[1], content_type=line[2], **options)

    def show(ids: list[str]) -> None:
        if wants_json(ctx):
            print_json({"message_ids": ids})
        else:
            typer.echo("\n".join(ids))

    check_lines(producer, found, request)
    show(send_lines(producer, found, request, show))


def _body(
    body: str | None, file: Path | None, *, text: bool, as_json: bool
) -> tuple[Any, ContentType]:
    if (body is None) == (file is None):
        raise typer.BadParameter("give BODY or --file, not both and not neither")
    if file is not None:
        data = read_input(file)
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
            raise typer.BadParameter("the body is not valid JSON (or drop --json-body)") from None
        return body, "text"


def _attributes(pairs: list[str]) -> dict[str, UserAttribute]:
    attributes: dict[str, UserAttribute] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"--attribute {pair!r}: expected NAME=VALUE")
        attributes[name] = value
    return attributes
