"""Queue commands: `queues` (the overview), `create` and `purge`."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer
from rich.table import Table

from sqsbatch.cli.common import (
    ask,
    err,
    fail,
    format_age,
    out,
    print_json,
    queue_attributes,
    sqs_for,
)
from sqsbatch.cli.peek import peek
from sqsbatch.errors import QueueNotFound
from sqsbatch.queues import create_queue
from sqsbatch.sqs_sync import SyncSqs
from sqsbatch.transport import queue_name

__all__ = ["app"]

app = typer.Typer()

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON on stdout (for scripts).")]


@app.command("queues")
def list_queues(
    ctx: typer.Context,
    prefix: Annotated[str, typer.Option(help="Only queues whose name starts with this.")] = "",
    age: Annotated[
        bool,
        typer.Option(
            "--age",
            help="Fill the 'oldest' column by peeking at up to 10 visible messages per queue. "
            "A peek is a receive: it raises those messages' receive count (one attempt each).",
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """List queues: visible, in flight, delayed, oldest message, DLQ and max retries.

    SQS reports the age of the oldest message only through CloudWatch, not through the queue's
    attributes, so 'oldest' shows '-' unless you pass --age (an estimate from a peek: the oldest
    SentTimestamp among the visible messages sampled).
    """
    sqs = sqs_for(ctx)
    found = [_row(sqs, url, age) for url in _queue_urls(sqs, prefix)]
    rows = [row for row in found if row is not None]
    _link_sources(rows)
    if as_json:
        print_json(rows)
        return
    out.print(_table(rows, age))


def _queue_urls(sqs: SyncSqs, prefix: str) -> list[str]:
    urls: list[str] = []
    params: dict[str, Any] = {"MaxResults": 1000}
    if prefix:
        params["QueueNamePrefix"] = prefix
    while True:
        page = sqs.call("list_queues", params)
        urls.extend(page.get("QueueUrls", []))
        token = page.get("NextToken")
        if not token:
            return sorted(urls, key=queue_name)
        params["NextToken"] = token


def _row(sqs: SyncSqs, url: str, age: bool) -> dict[str, Any] | None:
    try:
        attributes = queue_attributes(sqs, url)
    except QueueNotFound:  # deleted since the listing
        return None
    policy = json.loads(attributes.get("RedrivePolicy") or "{}")
    target = policy.get("deadLetterTargetArn")
    count = policy.get("maxReceiveCount")
    visible = int(attributes.get("ApproximateNumberOfMessages", 0))
    return {
        "name": queue_name(url),
        "url": url,
        "fifo": attributes.get("FifoQueue") == "true",
        "visible": visible,
        "in_flight": int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
        "delayed": int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)),
        "oldest_age_seconds": _oldest_age(sqs, url) if age and visible else None,
        "dead_letter_queue": str(target).rsplit(":", 1)[-1] if target else None,
        "max_retries": int(count) - 1 if count is not None else None,
        "dead_letter_sources": [],
    }


def _oldest_age(sqs: SyncSqs, url: str) -> float | None:
    sent = [int(m["Attributes"]["SentTimestamp"]) for m in peek(sqs, url, 10, wait_seconds=0)]
    return time.time() - min(sent) / 1000 if sent else None


def _link_sources(rows: list[dict[str, Any]]) -> None:
    by_name = {row["name"]: row for row in rows}
    for row in rows:
        target = by_name.get(row["dead_letter_queue"] or "")
        if target is not None:
            target["dead_letter_sources"].append(row["name"])


def _table(rows: list[dict[str, Any]], age: bool) -> Table:
    table = Table(title=f"{len(rows)} queue{'s' if len(rows) != 1 else ''}", title_justify="left")
    table.add_column("queue", overflow="fold")
    for column in ("visible", "in flight", "delayed", "oldest"):
        table.add_column(column, justify="right")
    table.add_column("DLQ", overflow="fold")
    table.add_column("max retries", justify="right")
    for row in rows:
        dlq = row["dead_letter_queue"] or ""
        if row["dead_letter_sources"]:
            dlq = (dlq + " " if dlq else "") + "DLQ of " + ", ".join(row["dead_letter_sources"])
        retries = row["max_retries"]
        table.add_row(
            row["name"],
            str(row["visible"]),
            str(row["in_flight"]),
            str(row["delayed"]),
            format_age(row["oldest_age_seconds"]),
            dlq or "-",
            "-" if retries is None else str(retries),
        )
    if not age:
        table.caption = "oldest: '-' unless --age (SQS gives it only through CloudWatch)"
    return table


@app.command()
def create(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="Queue name (or URL).")],
    *,
    dlq: Annotated[
        str | None, typer.Option("--dlq", help="Dead-letter queue name (created if missing).")
    ] = None,
    max_retries: Annotated[
        int, typer.Option(min=0, max=100, help="Retries before dead-lettering (maxReceiveCount-1).")
    ] = 3,
    delivery_delay: Annotated[
        int, typer.Option(min=0, max=900, help="Queue DelaySeconds for every new message.")
    ] = 0,
    visibility_timeout: Annotated[
        int, typer.Option(min=0, max=43_200, help="Queue VisibilityTimeout, seconds.")
    ] = 30,
    fifo: Annotated[
        bool, typer.Option("--fifo", help="A FIFO queue (name ends in .fifo).")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Create a queue (and its DLQ) with a RedrivePolicy of maxReceiveCount = max retries + 1.

    An existing queue gets its attributes updated to match.
    """
    sqs = sqs_for(ctx)
    url = create_queue(
        queue_name(queue),
        dead_letter_queue=queue_name(dlq) if dlq else None,
        max_retries=max_retries,
        delivery_delay=delivery_delay,
        visibility_timeout=visibility_timeout,
        fifo=fifo,
        client=sqs.client,
    )
    dlq_url = sqs.queue_url(queue_name(dlq)) if dlq else None
    if as_json:
        print_json({"queue_url": url, "dead_letter_queue_url": dlq_url})
        return
    out.print(f"created {queue_name(url)}  {url}")
    if dlq_url:
        out.print(
            f"dead-letter queue {queue_name(dlq_url)}  {dlq_url}  (max retries {max_retries})"
        )


@app.command()
def purge(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="Queue name or URL.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Delete every message of a queue (asks first). SQS allows one purge per queue per 60 s."""
    sqs = sqs_for(ctx)
    attributes = queue_attributes(sqs, queue)
    total = sum(
        int(attributes.get(key, 0))
        for key in (
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        )
    )
    name = queue_name(queue)
    if not yes and not ask(f"Delete all ~{total} messages of {name}?"):
        raise fail("not purged (answer y, or pass --yes)")
    sqs.call("purge_queue", {"QueueUrl": sqs.queue_url(queue)})
    err.print(f"purged {name} (~{total} messages; SQS may take up to 60 s to finish)")
