"""Queue names and request shapes: what every front end sends SQS, written once, no I/O.

`is_transient` reads an already translated `sqsbatch.errors` error: whether a loop should back
off and try again rather than give up. What SQS says goes through `redact` on its way into our
errors and log lines: SQS quotes a refused receipt handle in full ('The input receipt handle
"AQEB..." is not a valid receipt handle.'), and a receipt handle lets whoever holds it delete
or hide the message.
"""

from __future__ import annotations

import re
from typing import Any

from sqsbatch.errors import CredentialsError, QueueNotFound, SqsBatchError, SqsError

__all__ = [
    "RECEIVE_SYSTEM_ATTRIBUTES",
    "is_fifo",
    "is_transient",
    "is_url",
    "queue_name",
    "receive_params",
    "redact",
]

RECEIVE_SYSTEM_ATTRIBUTES = [
    "SentTimestamp",
    "ApproximateReceiveCount",
    "ApproximateFirstReceiveTimestamp",
    "MessageGroupId",
    "MessageDeduplicationId",
    "DeadLetterQueueSourceArn",
    "AWSTraceHeader",  # an X-Ray-traced producer's context: the batch span links to it
]
_PERMANENT = frozenset({"AccessDenied", "AccessDeniedException", "InvalidAddress", "InvalidAction"})
_RECEIPT_LIKE = re.compile(r"[A-Za-z0-9+/=_-]{96,}")
"""A receipt handle (SQS's are hundreds of base64 characters; moto's 185 letters): longer than
any queue name (80), message id (36) or MD5 that an error message may quote."""


def redact(text: str) -> str:
    """`text` with every receipt handle in it cut to its first 8 and last 4 characters
    (`AQEBzx1c…k3Q=`): enough to tell two apart in a log, not enough to use one."""
    return _RECEIPT_LIKE.sub(lambda found: f"{found[0][:8]}…{found[0][-4:]}", text)


def queue_name(queue: str) -> str:
    """The queue's name, from a name or a URL."""
    return queue.rstrip("/").rsplit("/", 1)[-1]


def is_fifo(queue: str) -> bool:
    return queue_name(queue).endswith(".fifo")


def is_url(queue: str) -> bool:
    return queue.startswith(("http://", "https://"))


def receive_params(
    queue_url: str,
    *,
    max_messages: int,
    wait_seconds: int,
    visibility_timeout: int,
    attempt_id: str | None = None,
) -> dict[str, Any]:
    """A `ReceiveMessage`'s parameters; `attempt_id`: FIFO's `ReceiveRequestAttemptId`
    (`_core.receive_attempts`)."""
    params: dict[str, Any] = {
        "QueueUrl": queue_url,
        "MaxNumberOfMessages": max_messages,
        "WaitTimeSeconds": wait_seconds,
        "VisibilityTimeout": visibility_timeout,
        "MessageSystemAttributeNames": RECEIVE_SYSTEM_ATTRIBUTES,
        "MessageAttributeNames": ["All"],
    }
    if attempt_id is not None:
        params["ReceiveRequestAttemptId"] = attempt_id
    return params


def is_transient(error: SqsBatchError) -> bool:
    """Whether a loop should back off and try again rather than give up."""
    if isinstance(error, QueueNotFound | CredentialsError):
        return False
    return isinstance(error, SqsError) and error.code not in _PERMANENT
