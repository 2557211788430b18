"""The boundary with botocore: clients, request shapes and error translation.

botocore's exceptions are translated here, and only here, into the tree of `sqsbatch.errors`
(most specific class first, `raise ... from` so the original stays on `__cause__`). Request
parameters are built here too, once for the sync and the async shells.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ReadTimeoutError,
)

from sqsbatch.errors import CredentialsError, QueueNotFound, SqsBatchError, SqsError

__all__ = [
    "RECEIVE_SYSTEM_ATTRIBUTES",
    "client_config",
    "is_fifo",
    "is_transient",
    "queue_name",
    "receive_params",
    "sqs_errors",
    "translate",
]

log = logging.getLogger("sqsbatch")

RECEIVE_SYSTEM_ATTRIBUTES = [
    "SentTimestamp",
    "ApproximateReceiveCount",
    "ApproximateFirstReceiveTimestamp",
    "MessageGroupId",
    "MessageDeduplicationId",
    "DeadLetterQueueSourceArn",
]
_QUEUE_MISSING = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})
_BAD_CREDENTIALS = frozenset(
    {"InvalidClientTokenId", "UnrecognizedClientException", "SignatureDoesNotMatch"}
)
_PERMANENT = frozenset({"AccessDenied", "AccessDeniedException", "InvalidAddress", "InvalidAction"})
_NETWORK = (EndpointConnectionError, ConnectionClosedError, ReadTimeoutError, ConnectTimeoutError)


def client_config(*, max_pool_connections: int = 10) -> Config:
    """botocore's standard retry mode (throttling and 5xx, with backoff) and a pool that fits."""
    return Config(
        retries={"mode": "standard", "max_attempts": 5},
        max_pool_connections=max(10, max_pool_connections),
        read_timeout=70,  # longer than the longest long poll
    )


def queue_name(queue: str) -> str:
    """The queue's name, from a name or a URL."""
    return queue.rstrip("/").rsplit("/", 1)[-1]


def is_fifo(queue: str) -> bool:
    return queue_name(queue).endswith(".fifo")


def is_url(queue: str) -> bool:
    return queue.startswith(("http://", "https://"))


def receive_params(
    queue_url: str, *, max_messages: int, wait_seconds: int, visibility_timeout: int
) -> dict[str, Any]:
    return {
        "QueueUrl": queue_url,
        "MaxNumberOfMessages": max_messages,
        "WaitTimeSeconds": wait_seconds,
        "VisibilityTimeout": visibility_timeout,
        "MessageSystemAttributeNames": RECEIVE_SYSTEM_ATTRIBUTES,
        "MessageAttributeNames": ["All"],
    }


def translate(exc: BaseException, *, queue: str | None = None) -> SqsBatchError:
    """The sqsbatch error for a botocore exception."""
    where = f" ({queue})" if queue else ""
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return CredentialsError(f"no AWS credentials found{where}: {exc}", code="NoCredentials")
    if isinstance(exc, NoRegionError):
        hint = "set AWS_REGION or --region"
        return CredentialsError(f"no AWS region configured ({hint})", code="NoRegion")
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "Unknown"))
        message = str(error.get("Message", "")) or code
        if code in _QUEUE_MISSING:
            return QueueNotFound(f"queue does not exist{where}", code=code)
        if code in _BAD_CREDENTIALS:
            return CredentialsError(f"AWS refused the credentials{where}: {message}", code=code)
        return SqsError(f"SQS error {code}{where}: {message}", code=code)
    if isinstance(exc, _NETWORK):
        return SqsError(f"cannot reach SQS{where}: {exc}", code="NetworkError")
    if isinstance(exc, BotoCoreError):
        return SqsError(f"SQS client error{where}: {exc}", code=type(exc).__name__)
    raise TypeError(f"not a botocore error: {exc!r}")


@contextmanager
def sqs_errors(queue: str | None = None) -> Iterator[None]:
    """Translate botocore's exceptions raised inside the block."""
    try:
        yield
    except (ClientError, BotoCoreError) as exc:
        raise translate(exc, queue=queue) from exc


def is_transient(error: SqsBatchError) -> bool:
    """Whether a loop should back off and try again rather than give up."""
    if isinstance(error, QueueNotFound | CredentialsError):
        return False
    return isinstance(error, SqsError) and error.code not in _PERMANENT
