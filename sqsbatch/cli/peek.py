"""Peeking: receive with a short visibility, then release at once (`ChangeMessageVisibility` 0).

SQS has no read-only look at a queue: a peek IS a receive. Each peeked message's
`ApproximateReceiveCount` goes up by one, so its `attempts` (and the count a RedrivePolicy's
`maxReceiveCount` compares against) grows by one, and while the peek lasts the messages are hidden
from consumers. The release is best effort: if it fails, a message reappears after `HOLD_SECONDS`.
"""

from __future__ import annotations

from typing import Any

from sqsbatch.errors import SqsBatchError
from sqsbatch.sqs_sync import SyncSqs
from sqsbatch.transport import receive_params

__all__ = ["HOLD_SECONDS", "peek"]

HOLD_SECONDS = 20
"""How long a peeked message stays hidden if the release fails (a crash, a network error)."""


def peek(sqs: SyncSqs, url: str, limit: int, *, wait_seconds: int = 1) -> list[dict[str, Any]]:
    """Up to `limit` visible messages of the queue at `url`, released again before returning."""
    found: list[dict[str, Any]] = []
    seen: set[str] = set()
    try:
        while len(found) < limit:
            params = receive_params(
                url,
                max_messages=min(10, limit - len(found)),
                wait_seconds=wait_seconds,
                visibility_timeout=HOLD_SECONDS,
            )
            batch = sqs.call("receive_message", params).get("Messages", [])
            fresh = [m for m in batch if m["MessageId"] not in seen]
            if not fresh:
                break
            seen.update(m["MessageId"] for m in fresh)
            found.extend(fresh)
    finally:
        release(sqs, url, found)
    return found


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
