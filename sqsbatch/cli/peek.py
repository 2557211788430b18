"""Peeking: receive with a short visibility, then release at once (`ChangeMessageVisibility` 0).

SQS has no read-only look at a queue: a peek IS a receive. Each peeked message's
`ApproximateReceiveCount` goes up by one, so its `attempts` (and the count a RedrivePolicy's
`maxReceiveCount` compares against) grows by one, and while the peek lasts the messages are hidden
from consumers. The release is best effort: if it fails, a message reappears after `HOLD_SECONDS`.

The receive limit. SQS moves a message to the DLQ on the receive that would take its count past
`maxReceiveCount`. A peek that brings a message's count to `maxReceiveCount` has taken its last
delivery: the consumer's next receive moves it to the DLQ without processing it. Nobody can
know a message's count before receiving it, so on a queue with a RedrivePolicy a peek (unless
forced) receives one message at a time and stops at the first one it brought to the limit:
at most one message is used up, and it is named (`Peeked.at_limit`). On a FIFO queue it
receives ten at a time (SQS holds back the rest of a group while one of its messages is in
flight) and stops after the first receive that brought one to the limit. A forced peek
receives ten at a time and does not stop; it still reports every message it brought there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqsbatch._core.envelope import decode
from sqsbatch._core.intake import receive_messages
from sqsbatch._core.shapes import is_fifo
from sqsbatch._sync.door import SyncSqs
from sqsbatch.cli.escape import printable
from sqsbatch.errors import SqsBatchError

__all__ = [
    "HOLD_SECONDS",
    "Peeked",
    "at_limit_line",
    "max_receive_count",
    "peek",
    "peek_note",
    "receive_count",
    "release",
]

HOLD_SECONDS = 20
"""How long a peeked message stays hidden if the release fails (a crash, a network error)."""


@dataclass
class Peeked:
    """What a peek received (released again), and which of those it brought to the limit."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    at_limit: list[dict[str, Any]] = field(default_factory=list)
    """Messages whose receive count this peek brought to the queue's `maxReceiveCount`."""
    stopped: bool = False
    """The peek stopped early, at a message it brought to the limit."""


def max_receive_count(attributes: Mapping[str, str]) -> int | None:
    """The `maxReceiveCount` of a queue's RedrivePolicy (from its attributes), or None."""
    count = json.loads(attributes.get("RedrivePolicy") or "{}").get("maxReceiveCount")
    return int(count) if count is not None else None


def receive_count(message: Mapping[str, Any]) -> int:
    """A received message's `ApproximateReceiveCount`: this receive included."""
    return int(message.get("Attributes", {}).get("ApproximateReceiveCount", 0))


def peek(
    sqs: SyncSqs,
    url: str,
    limit: int,
    *,
    wait_seconds: int = 1,
    max_receives: int | None = None,
    force: bool = False,
) -> Peeked:
    """Up to `limit` visible messages of the queue at `url`, released again before returning.

    `max_receives` is the queue's `maxReceiveCount` (None: no RedrivePolicy); unless `force`,
    the peek then goes one message at a time (FIFO: ten) and stops at the first receive that
    brings a message to that count.
    """
    careful = max_receives is not None and not force
    one_by_one = careful and not is_fifo(url)
    peeked = Peeked()
    received: list[dict[str, Any]] = []  # every receipt handle, so that all are released
    seen: set[str] = set()
    try:
        while len(peeked.messages) < limit and not peeked.stopped:
            asked = 1 if one_by_one else min(10, limit - len(peeked.messages))
            flow = receive_messages(
                url, asked=asked, wait_seconds=wait_seconds, visibility=HOLD_SECONDS
            )
            batch = sqs.run(flow)
            received.extend(batch)
            fresh = [m for m in batch if m["MessageId"] not in seen]
            if not fresh:
                break
            seen.update(m["MessageId"] for m in fresh)
            peeked.messages.extend(fresh)
            if max_receives is not None:
                reached = [m for m in fresh if receive_count(m) >= max_receives]
                peeked.at_limit.extend(reached)
                peeked.stopped = careful and bool(reached)
    finally:
        release(sqs, url, received)
    return peeked


def peek_note(max_receives: int | None, *, force: bool) -> str:
    """What a command says on stderr before it peeks."""
    note = "a peek is a receive: each message peeked gets its receive count (attempts) raised by 1"
    if max_receives is None:
        return note
    if force:
        return f"{note}; --force: even to maxReceiveCount ({max_receives})"
    return (
        f"{note}; maxReceiveCount is {max_receives}: one message at a time, stopping at one "
        f"this peek brings to {max_receives}"
    )


def at_limit_line(queue: str, peeked: Peeked, max_receives: int, *, force: bool) -> str:
    """Which messages a peek brought to the receive limit, why that matters, what to do."""
    ids = ", ".join(printable(decode(m).id) for m in peeked.at_limit)
    one = len(peeked.at_limit) == 1
    which, it = (f"message {ids}", "it") if one else (f"messages {ids}", "them")
    what = (
        f"this peek brought {which} of {queue} to the queue's maxReceiveCount ({max_receives}): "
        f"the next receive moves {it} to the dead-letter queue without processing {it}"
    )
    if force:
        return what
    return f"stopped peeking: {what}; --force peeks anyway and does not stop"


def release(sqs: SyncSqs, url: str, messages: list[dict[str, Any]]) -> int:
    """Make `messages` visible again; returns how many SQS refused (they come back later)."""
    refused = 0
    for start in range(0, len(messages), 10):
        chunk = messages[start : start + 10]
        entries = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
            for i, m in enumerate(chunk)
        ]
        try:
            answer = sqs.call(
                "change_message_visibility_batch", {"QueueUrl": url, "Entries": entries}
            )
        except SqsBatchError:
            refused += len(chunk)
            continue
        refused += len(answer.get("Failed", []))
    return refused
