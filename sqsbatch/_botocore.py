"""The boundary with botocore: client configuration and error translation.

botocore's exceptions are translated here, and only here, into the tree of `sqsbatch.errors`
(most specific class first, `raise ... from` so the original stays on `__cause__`), with what
SQS says `redact`ed (`sqsbatch._core.shapes`). The doors (`sqsbatch._sync.door`,
`sqsbatch._async.door`) call SQS inside `sqs_errors`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

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

from sqsbatch._core.shapes import redact
from sqsbatch.errors import CredentialsError, QueueNotFound, SqsBatchError, SqsError

__all__ = ["client_config", "sqs_errors", "translate"]

log = logging.getLogger("sqsbatch")

_QUEUE_MISSING = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})
_BAD_CREDENTIALS = frozenset(
    {"InvalidClientTokenId", "UnrecognizedClientException", "SignatureDoesNotMatch"}
)
_NETWORK = (EndpointConnectionError, ConnectionClosedError, ReadTimeoutError, ConnectTimeoutError)


def client_config(*, max_pool_connections: int = 10) -> Config:
    """botocore's standard retry mode (throttling and 5xx, with backoff) and a pool that fits."""
    return Config(
        retries={"mode": "standard", "max_attempts": 5},
        max_pool_connections=max(10, max_pool_connections),
        read_timeout=70,  # longer than the longest long poll
    )


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
