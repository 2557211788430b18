"""The one error tree of sqsbatch.

    SqsBatchError                      every error this library raises on purpose
    ├── ConfigError (ValueError)       a setting out of range, of the wrong type, or unknown
    ├── MessageError (ValueError)      a body or send request refused before any call
    │   └── FifoError                  a request that SQS FIFO queues forbid (delays, no group id)
    ├── EventError (ValueError)        a Lambda event that is not one SQS batch of one queue
    ├── AwaitableReturned (TypeError)  a sync handler returned an awaitable that nothing ran
    ├── StoreUnavailable               the idempotency store cannot be reached (fail closed)
    ├── Overloaded                     raised by a handler: downstream is overloaded, hold back
    └── SqsError                       SQS said no (translated from botocore at one boundary)
        ├── QueueNotFound              the queue (or its DLQ) does not exist
        ├── CredentialsError           no AWS credentials could be found
        └── SendError                  some entries of a send were refused; says which went out

botocore's exceptions are translated at one boundary, `sqsbatch._core.shapes` (`translate`,
`sqs_errors`), always with `raise ... from` so the original stays on `__cause__`.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "AwaitableReturned",
    "ConfigError",
    "CredentialsError",
    "EventError",
    "FifoError",
    "HandlerTimeout",
    "MessageError",
    "Overloaded",
    "PayloadError",
    "PayloadMissing",
    "PointerError",
    "QueueNotFound",
    "SendError",
    "SqsBatchError",
    "SqsError",
    "StoreUnavailable",
]


class SqsBatchError(Exception):
    """Base of every error sqsbatch raises on purpose."""


class ConfigError(SqsBatchError, ValueError):
    """A setting is out of range, of the wrong type, or unknown."""


class MessageError(SqsBatchError, ValueError):
    """A message or send request was refused before any call to SQS."""


class FifoError(MessageError):
    """A request that SQS FIFO queues forbid, such as a per-message delay."""


class EventError(SqsBatchError, ValueError):
    """A Lambda event that is not a batch of SQS records from one queue."""


class AwaitableReturned(SqsBatchError, TypeError):
    """A handler called without an event loop (`Consumer`, a sync handler in `run_handler`)
    returned an awaitable: it never ran, so the batch failed. `awaitable` is it, where a front
    end with a loop is to await it (else None: it was closed)."""

    def __init__(self, returned: object, *, kept: bool = False) -> None:
        kind = type(returned).__name__
        what = "a coroutine" if kind == "coroutine" else f"an awaitable ({kind})"
        super().__init__(
            f"the handler returned {what} that nothing awaits: run it with AsyncConsumer "
            "(sqsbatch consume --async) or lambda_handler, or make it def"
        )
        self.awaitable = returned if kept else None


class StoreUnavailable(SqsBatchError):
    """The idempotency store (`sqsbatch.idempotency`) could not be reached or refused a call
    for a reason other than a key's condition: the guard fails closed (the batch is retried,
    nothing is skipped). The message names the store and what went wrong."""


class PayloadError(SqsBatchError):
    """A large payload could not be written to or read from S3 (`sqsbatch.payloads`): the
    message names the bucket, the key when there is one, and what S3 said."""


class PayloadMissing(PayloadError):
    """A pointer's S3 object does not exist (deleted, expired, or never written): the consumer
    dead-letters its message with reason `payload_missing`."""

    def __init__(self, bucket: str, key: str) -> None:
        super().__init__(f"payload s3://{bucket}/{key} does not exist")
        self.bucket = bucket
        self.key = key


class PointerError(SqsBatchError, ValueError):
    """A message marked as a large payload (`ExtendedPayloadSize` or `SQSLargePayloadSize`) whose
    body is not the extended client's S3 pointer."""


class Overloaded(SqsBatchError):
    """Raised by a handler when what it calls is overloaded: it opens the circuit breaker
    (`sqsbatch._core.circuit`) for `retry_after` seconds (None: the breaker's own open time),
    and receiving stops meanwhile; under Lambda its batch is retried after `retry_after`
    (docs/pressure.md says what each front end does)."""

    def __init__(self, retry_after: float | None = None, message: str = "") -> None:
        if retry_after is not None and (
            isinstance(retry_after, bool)
            or not isinstance(retry_after, int | float)
            or not 0 <= retry_after <= MAX_RETRY_AFTER
        ):
            raise ValueError(
                f"Overloaded(retry_after={retry_after!r}) is invalid "
                f"(accepted: seconds 0..{MAX_RETRY_AFTER}, or None)"
            )
        after = "" if retry_after is None else f": retry after {retry_after:g} s"
        super().__init__(message or f"overloaded{after}")
        self.retry_after = None if retry_after is None else float(retry_after)


MAX_RETRY_AFTER = 43_200
"""12 hours, SQS's longest visibility timeout: the longest a circuit holds back for one signal."""


class HandlerTimeout(BaseException):
    """Raised into a sync handler that `lambda_handler` runs on Lambda's main thread when its
    time is up (`handler_timeout`, or the function's time left): its batch is settled as timed
    out. A `BaseException`, as `KeyboardInterrupt` is, so that `except Exception` does not
    swallow it; a handler that swallows it anyway gets it again every second."""


class SqsError(SqsBatchError):
    """SQS refused a request. `code` is SQS's error code when it gave one."""

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class QueueNotFound(SqsError):
    """The queue does not exist (or is not visible to these credentials)."""


class CredentialsError(SqsError):
    """No AWS credentials could be found."""


class SendError(SqsError):
    """Some messages of a send were not accepted by SQS.

    `sent_ids` went out and must not be sent again; `failed` maps the ids that did not go out to
    SQS's reason.
    """

    def __init__(self, sent_ids: Sequence[str], failed: dict[str, str]) -> None:
        reasons = "; ".join(f"{mid}: {why}" for mid, why in failed.items())
        super().__init__(
            f"{len(failed)} of {len(sent_ids) + len(failed)} messages were not sent "
            f"(sent: {', '.join(sent_ids) or 'none'}; not sent: {reasons})",
            code="BatchEntryFailed",
        )
        self.sent_ids = list(sent_ids)
        self.failed = dict(failed)
