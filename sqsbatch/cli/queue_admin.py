"""Queue commands: `queues` (the overview), `create`, `purge` and `delete`."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer
from rich.table import Table

from sqsbatch._core.pause_state import PauseState, read_pause
from sqsbatch._core.shapes import queue_name
from sqsbatch._sync.door import SyncSqs
from sqsbatch.cli.common import (
    CliError,
    ask,
    err,
    fail,
    format_age,
    out,
    print_json,
    queue_attributes,
    sqs_for,
    wants_json,
)
from sqsbatch.cli.peek import at_limit_line, max_receive_count, peek, peek_note
from sqsbatch.errors import QueueNotFound, SqsError
from sqsbatch.queues import create_queue

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
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="With --age: peek even if that brings messages to their queue's "
            "maxReceiveCount (their next receive then moves them to the DLQ unprocessed).",
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """List queues: visible, in flight, delayed, oldest message, DLQ, max retries, paused.

    SQS reports the age of the oldest message only through CloudWatch, not through the queue's
    attributes, so 'oldest' shows '-' unless you pass --age (an estimate from a peek: the oldest
    SentTimestamp among the visible messages sampled). On a queue with a RedrivePolicy the peek
    goes one message at a time and stops at one it brings to maxReceiveCount (its next receive
    would move it to the DLQ unprocessed): the list is shown, that message named, exit 1.
    --force peeks ten at a time without stopping (see `sqsbatch inspect --help`).
    """
    sqs = sqs_for(ctx)
    ages = _Ages(force=force) if age else None
    found = [_row(sqs, url, ages) for url in _queue_urls(sqs, prefix)]
    rows = [row for row in found if row is not None]
    _link_sources(rows)
    if as_json:
        print_json(rows)
    else:
        out.print(_table(rows, age))
    if ages is not None and ages.at_limit:
        if not force:
            raise CliError("; ".join(ages.at_limit))
        for line in ages.at_limit:
            err.print(f"note: {line}", markup=False, soft_wrap=True)


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


def _row(sqs: SyncSqs, url: str, age: _Ages | None) -> dict[str, Any] | None:
    try:
        attributes = queue_attributes(sqs, url)
    except QueueNotFound:  # deleted since the listing
        return None
    policy = json.loads(attributes.get("RedrivePolicy") or "{}")
    target = policy.get("deadLetterTargetArn")
    count = policy.get("maxReceiveCount")
    visible = int(attributes.get("ApproximateNumberOfMessages", 0))
    try:
        pause = _pause(sqs, url)
    except QueueNotFound:
        return None
    return {
        "name": queue_name(url),
        "url": url,
        "fifo": attributes.get("FifoQueue") == "true",
        "visible": visible,
        "in_flight": int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
        "delayed": int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)),
        "oldest_age_seconds": _oldest_age(sqs, url, attributes, age) if age and visible else None,
        "dead_letter_queue": str(target).rsplit(":", 1)[-1] if target else None,
        "max_retries": int(count) - 1 if count is not None else None,
        "dead_letter_sources": [],
        "paused_until": pause.until_text() or None if pause else "?",
        "pause_reason": pause.reason if pause else None,
    }


def _pause(sqs: SyncSqs, url: str) -> PauseState | None:
    """The queue's pause (one `ListQueueTags`); None when these credentials may not read tags."""
    try:
        tags = sqs.call("list_queue_tags", {"QueueUrl": url}).get("Tags", {})
    except SqsError as exc:
        if exc.code not in ("AccessDenied", "AccessDeniedException"):
            raise
        return None
    return read_pause(tags, time.time())


@dataclass
class _Ages:
    """`queues --age`: says once, before the first peek, what a peek does; collects the
    messages the peeks brought to their queue's maxReceiveCount."""

    force: bool
    noted: bool = False
    at_limit: list[str] = field(default_factory=list)

    def note(self) -> None:
        if self.noted:
            return
        line = f"note: {peek_note(None, force=self.force)}"
        if not self.force:
            line += "; on a queue with a RedrivePolicy one at a time, stopping at one it brings "
            line += "to maxReceiveCount"
        err.print(line, markup=False, soft_wrap=True)
        self.noted = True


def _oldest_age(sqs: SyncSqs, url: str, attributes: dict[str, str], ages: _Ages) -> float | None:
    """The oldest SentTimestamp among up to 10 visible messages, peeked."""
    ages.note()
    limit = max_receive_count(attributes)
    peeked = peek(sqs, url, 10, wait_seconds=0, max_receives=limit, force=ages.force)
    if limit is not None and peeked.at_limit:
        ages.at_limit.append(at_limit_line(queue_name(url), peeked, limit, force=ages.force))
    sent = [int(m["Attributes"]["SentTimestamp"]) for m in peeked.messages]
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
    table.add_column("paused", overflow="fold")
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
            _paused_cell(row["paused_until"]),
        )
    if not age:
        table.caption = "oldest: '-' unless --age (SQS gives it only through CloudWatch)"
    return table


def _paused_cell(until: str | None) -> str:
    if until is None:
        return "-"
    return "? (tags not readable)" if until == "?" else f"PAUSED until {until}"


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
) -> None:
    """Create a queue (and its DLQ) with a RedrivePolicy of maxReceiveCount = max retries + 1.

    An existing queue gets its attributes updated to match: it says `updated` and what changed
    (or `unchanged`). With --json: the URLs, and per queue what was done and changed.
    """
    sqs = sqs_for(ctx)
    names = [queue_name(queue)] + ([queue_name(dlq)] if dlq else [])
    before = {name: _attributes_if_any(sqs, name) for name in names}
    url = create_queue(
        names[0],
        dead_letter_queue=names[1] if dlq else None,
        max_retries=max_retries,
        delivery_delay=delivery_delay,
        visibility_timeout=visibility_timeout,
        fifo=fifo,
        client=sqs.client,
    )
    done = [_outcome(sqs, name, before[name]) for name in names]
    if wants_json(ctx):
        dlq_done = done[1] if dlq else None
        print_json(
            {
                "queue_url": url,
                "dead_letter_queue_url": dlq_done["url"] if dlq_done else None,
                "queue": done[0],
                "dead_letter_queue": dlq_done,
            }
        )
        return
    _print_outcome(done[0], "", f"  (max retries {max_retries}, DLQ {names[1]})" if dlq else "")
    if dlq:
        _print_outcome(done[1], "dead-letter queue ", "")


_VOLATILE = ("Approximate", "CreatedTimestamp", "LastModifiedTimestamp")


def _attributes_if_any(sqs: SyncSqs, name: str) -> dict[str, str] | None:
    try:
        return queue_attributes(sqs, name)
    except QueueNotFound:
        return None


def _outcome(sqs: SyncSqs, name: str, before: dict[str, str] | None) -> dict[str, Any]:
    """What `create` did to a queue: created, updated (with each changed attribute's value
    before and after) or unchanged."""
    url = sqs.queue_url(name)
    if before is None:
        return {"name": name, "url": url, "action": "created", "changes": {}}
    after = queue_attributes(sqs, url)
    changes = {
        key: {"before": before.get(key), "after": after.get(key)}
        for key in sorted(set(before) | set(after))
        if not key.startswith(_VOLATILE)
        and _comparable(key, before.get(key)) != _comparable(key, after.get(key))
    }
    action = "updated" if changes else "unchanged"
    return {"name": name, "url": url, "action": action, "changes": changes}


def _comparable(key: str, value: str | None) -> Any:
    """An attribute's value as compared: a policy's JSON by content, not by its spelling."""
    if value and key.endswith("Policy"):
        try:
            policy = json.loads(value)
        except ValueError:
            return value
        return {k: str(v) for k, v in policy.items()} if isinstance(policy, dict) else policy
    return value


def _print_outcome(outcome: dict[str, Any], what: str, note: str) -> None:
    out.print(f"{outcome['action']} {what}{outcome['name']}  {outcome['url']}{note}")
    for key, change in outcome["changes"].items():
        shown = [_shown(key, change[side]) for side in ("before", "after")]
        out.print(f"  {key}: {shown[0]} -> {shown[1]}")


def _shown(key: str, value: str | None) -> str:
    if value is None:
        return "(none)"
    if key == "RedrivePolicy":
        policy = json.loads(value)
        target = str(policy.get("deadLetterTargetArn", "?")).rsplit(":", 1)[-1]
        return f"DLQ {target}, max retries {int(policy.get('maxReceiveCount', 1)) - 1}"
    return value


def _message_count(attributes: dict[str, str]) -> int:
    """Visible, in flight and delayed: every message a purge or a delete removes (about)."""
    return sum(
        int(attributes.get(key, 0))
        for key in (
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        )
    )


@app.command()
def purge(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="Queue name or URL.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Delete every message of a queue (asks first). SQS allows one purge per queue per 60 s."""
    sqs = sqs_for(ctx)
    total = _message_count(queue_attributes(sqs, queue))
    name = queue_name(queue)
    if not yes and not ask(f"Delete all ~{total} messages of {name}?"):
        raise fail("not purged (answer y, or pass --yes)")
    url = sqs.queue_url(queue)
    sqs.call("purge_queue", {"QueueUrl": url})
    if wants_json(ctx):  # what scripts read: one document on stdout
        print_json({"purged": name, "url": url, "messages": total})
        return
    err.print(f"purged {name} (~{total} messages; SQS may take up to 60 s to finish)")


@app.command()
def delete(
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="Queue name or URL.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Delete a queue and every message in it (asks first); prints what it deleted.

    A queue that other queues dead-letter into is named as such in the question. SQS asks to
    wait 60 s before creating a queue of the same name again.
    """
    sqs = sqs_for(ctx)
    name = queue_name(queue)
    total = _message_count(queue_attributes(sqs, queue))
    url = sqs.queue_url(queue)
    sources = [queue_name(source) for source in _dead_letter_sources(sqs, url)]
    dlq_of = f"the dead-letter queue of {', '.join(sources)}" if sources else ""
    question = (
        f"Delete queue {name}{' (' + dlq_of + ')' if sources else ''} and its ~{total} messages?"
    )
    if not yes and not ask(question):
        raise fail("not deleted (answer y, or pass --yes)")
    sqs.call("delete_queue", {"QueueUrl": url}, queue=name)
    if wants_json(ctx):
        print_json({"deleted": name, "url": url, "messages": total, "dead_letter_of": sources})
        return
    out.print(f"deleted {name}  {url}  (~{total} messages{'; was ' + dlq_of if sources else ''})")


def _dead_letter_sources(sqs: SyncSqs, url: str) -> list[str]:
    urls: list[str] = []
    params: dict[str, Any] = {"QueueUrl": url, "MaxResults": 1000}
    while True:
        page = sqs.call("list_dead_letter_source_queues", params)
        urls.extend(page.get("queueUrls", []))
        if not page.get("NextToken"):
            return urls
        params["NextToken"] = page["NextToken"]
