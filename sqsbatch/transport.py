"""The boundary with botocore: clients, request shapes and error translation.

botocore's exceptions are translated here, and only here, into the tree of `sqsbatch.errors`
(most specific class first, `raise ... from` so the original stays on `__cause__`). Request
parameters are built here too, once for the sync and the async shells.

What SQS says goes through `redact` on its way into our errors and log lines: SQS quotes a
refused receipt handle in full ('The input receipt handle "AQEB..." is not a valid receipt
handle.'), and a receipt handle lets whoever holds it delete or hide the message.
"""

from __future__ import annotations

import logging
import re
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
    "redact",
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
_RECEIPT_LIKE = re.compile(r"[A-Za-z0-9+/=_-]{96,}")
"""A receipt handle (SQS's are hundreds of base64 characters; moto's 185 letters): longer than
any queue name (80), message id (36) or MD5 that an error message may quote."""


def redact(text: str) -> str:
    """`text` with every receipt handle in it cut to its first 8 and last 4 characters
    (`AQEBzx1c…k3Q=`): enough to tell two apart in a log, not enough to use one."""
    return _RECEIPT_LIKE.sub(lambda found: f"{found[0][:8]}…{found[0][-4:]}", text)


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
        message = redact(str(error.get("Message", ""))) or code
        if code in _QUEUE_MISSING:
            return QueueNotFound(f"queue does not exist{where}", code=code)
        if code in _BAD_CREDENTIALS:
            return CredentialsError(f"AWS refused the credentials{where}: {message}", code=code)
        return SqsError(f"SQS error {code}{where}: {message}", code=code)
    if isinstance(exc, _NETWORK):
        return SqsError(f"cannot reach SQS{where}: {redact(str(exc))}", code="NetworkError")
    if isinstance(exc, BotoCoreError):
        return SqsError(f"SQS client error{where}: {redact(str(exc))}", code=type(exc).__name__)
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
