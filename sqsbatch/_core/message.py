"""`Message` and `MessageBatch`: what a handler receives, the same on every front end."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar, overload

from sqsbatch._core.attributes import UserAttribute
from sqsbatch._core.envelope import Death, DecodedMessage, Envelope, check_reason
from sqsbatch._core.ledger import Delivered, Ledger, Verdict
from sqsbatch.errors import MessageError

T = TypeVar("T")

__all__ = ["LazyView", "Message", "MessageBatch", "check_delay", "deliveries_of", "ledger_of"]

log = logging.getLogger("sqsbatch")
MAX_DELAY_SECONDS = 86_400


def check_delay(name: str, value: object) -> int | None:
    """A delay in whole seconds, 0..86400, or None for "not given"; a clear error otherwise."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        whole = int(value)
        if whole == value and 0 <= whole <= MAX_DELAY_SECONDS:
            return whole
    raise MessageError(f"{name}={value!r} is invalid: must be whole seconds 0..{MAX_DELAY_SECONDS}")


class _Delivery:
    """The shell's view of one received message.

    A plain class with `__slots__`: a batch holds one per message, and few containers per
    message keep the cyclic GC's share small. What `Message` shows is read through it, so that
    a front end may read its fields lazily (the Lambda adapter's records do).
    """

    __slots__ = (
        "_decoded",
        "_outer",
        "at_ceiling",
        "hidden_until",
        "receipt_handle",
        "received_at",
    )

    def __init__(
        self,
        decoded: DecodedMessage,
        receipt_handle: str,
        received_at: float,
        hidden_until: float,
        at_ceiling: bool = False,
    ) -> None:
        self._decoded: DecodedMessage | None = decoded
        self.receipt_handle = receipt_handle
        self.received_at = received_at
        self.hidden_until = hidden_until
        """Monotonic time until which SQS keeps it hidden (extended by the heartbeat)."""
        self.at_ceiling = at_ceiling
        """No further extension is possible (12 h ceiling reached, or the receipt is gone)."""

    @property
    def decoded(self) -> DecodedMessage:
        assert self._decoded is not None, "a subclass that reads lazily overrides this"
        return self._decoded

    @property
    def id(self) -> str:
        return self.decoded.id

    @property
    def body(self) -> Any:
        return self.decoded.body

    @property
    def timestamp(self) -> datetime:
        return self.decoded.timestamp

    @property
    def attempts(self) -> int:
        return self.decoded.attempts

    @property
    def attributes(self) -> dict[str, UserAttribute]:
        return self.decoded.attributes

    @property
    def group_id(self) -> str | None:
        return self.decoded.group_id

    @property
    def envelope(self) -> Envelope:
        """sqsbatch's attribute, read (`FOREIGN` without one); a lazy delivery reads it apart
        from the rest of the decoding, and the three properties below read it here."""
        return self.decoded.envelope

    @property
    def due_at(self) -> float | None:
        """Wall-clock epoch seconds before which it must not be delivered (a delay hop)."""
        return self.envelope.due_at

    @property
    def deaths(self) -> tuple[Death, ...]:
        return self.envelope.deaths

    @property
    def idempotency_key(self) -> str:
        return self.envelope.idempotency_key or self.id

    @property
    def expires_at(self) -> float | None:
        """The producer's deadline, wall-clock epoch seconds (None: it has none)."""
        return self.envelope.expires_at

    def trace_headers(self) -> tuple[Envelope, str | None]:
        """Its envelope (the producer's W3C trace context) and SQS's `AWSTraceHeader`: what
        `sqsbatch._shell.tracing` links a batch's span to."""
        decoded = self.decoded
        return decoded.envelope, decoded.trace_header

    def validated(self, body: Any) -> None:
        """`body_model` validated the body: the handler sees `body` (re-sends keep the raw)."""
        self._decoded = replace(self.decoded, body=body)

    @property
    def raw_body(self) -> str:
        """The body as SQS holds it (what re-sends send)."""
        return self.decoded.raw_body

    @property
    def text(self) -> str:
        """The body as its producer sent it: `raw_body`, but a large payload's, fetched from S3
        (`_core.fetching.FetchedDelivery`), where `raw_body` is its pointer. An envelope is
        unwrapped from it."""
        return self.raw_body

    @property
    def outer(self) -> Mapping[str, Any] | None:
        """The SNS or EventBridge envelope's fields, once unwrapped (`unwrapped`); else None."""
        return getattr(self, "_outer", None)  # a slot set only by `unwrapped`

    def unwrapped(self, body: Any, fields: Mapping[str, Any]) -> None:
        """An envelope was opened (`_core.unwrap`): the handler sees its inner `body` and its
        `fields` (re-sends keep the raw body, envelope and all)."""
        self.validated(body)
        self._outer = fields

    def message(self, ledger: Ledger, index: int) -> Message:
        """Its `Message` in a batch, message `index` of `ledger`'s."""
        return Message(self, ledger, index)

    def __repr__(self) -> str:
        return f"<_Delivery id={self.id!r} receipt_handle={self.receipt_handle!r}>"


class Message:
    """One message of a batch. Call `ack()`, `retry()` or `dead_letter()` at most once; the
    first call wins."""

    __slots__ = ("_delivery", "_index", "_ledger")

    def __init__(self, delivery: _Delivery, ledger: Ledger, index: int) -> None:
        self._delivery = delivery
        self._ledger = ledger
        self._index = index

    @property
    def id(self) -> str:
        """Stable across redeliveries, dead-lettering and re-sends."""
        return self._delivery.id

    @property
    def group_id(self) -> str | None:
        """Its `MessageGroupId`: on a FIFO queue the group whose order it keeps; on a standard
        (fair) queue its tenant. None when the producer gave none."""
        return self._delivery.group_id

    @property
    def idempotency_key(self) -> str:
        """What makes two messages one piece of work: the key the producer gave
        (`send(..., idempotency_key=)`), else `id`. Kept through DLQ copies, delay hops and
        redrives; pass it to a downstream API that takes one."""
        return self._delivery.idempotency_key

    @property
    def body(self) -> Any:
        """The body as sent: a JSON value, a `str` or `bytes` (with `body_model`: the
        validated value)."""
        return self._delivery.body

    @property
    def envelope(self) -> Mapping[str, Any] | None:
        """With `envelope = "sns"` or `"eventbridge"`: the envelope's fields but the inner
        message (SNS's `Type`, `MessageId`, `TopicArn`, `Subject`, `Timestamp`,
        `MessageAttributes`...; EventBridge's `id`, `source`, `detail-type`, `time`, `region`,
        `resources`...), read-only. None without an envelope."""
        return self._delivery.outer

    @property
    def timestamp(self) -> datetime:
        """When the message was first sent (aware, UTC)."""
        return self._delivery.timestamp

    @property
    def attempts(self) -> int:
        """1 on the first delivery, one more per failed delivery."""
        return self._delivery.attempts

    @property
    def attributes(self) -> dict[str, UserAttribute]:
        """The sender's message attributes (sqsbatch's own is not among them)."""
        return self._delivery.attributes

    @property
    def deaths(self) -> tuple[Death, ...]:
        """Its dead-letter history, oldest first (the last 10): empty until it is first
        dead-lettered by sqsbatch (a message SQS's RedrivePolicy moved has no entry)."""
        return self._delivery.deaths

    @property
    def expires_at(self) -> datetime | None:
        """The producer's deadline (`ttl_seconds`), aware UTC; None when it has none."""
        deadline = self._delivery.expires_at
        return None if deadline is None else datetime.fromtimestamp(deadline, UTC)

    def _trace_headers(self) -> tuple[Envelope, str | None]:
        return self._delivery.trace_headers()

    def ack(self) -> None:
        """Done with this message: it will be deleted, whatever happens to the rest."""
        self._call(Verdict.ACK, None)

    def dead_letter(self, reason: str) -> None:
        """Send this message to the dead-letter queue now, whatever its attempts, with `reason`
        (1..1,024 characters) in its history. Without a DLQ it is deleted and logged."""
        reason = check_reason(reason)
        if not self._ledger.on_message(self._index, Verdict.DEAD_LETTER, None, reason):
            log.warning("ignored dead_letter() on message %s: it is already settled", self.id)

    def retry(self, delay_seconds: int | None = None) -> None:
        """Deliver this message again, after `delay_seconds` (default: the `retry_delay`)."""
        self._call(Verdict.RETRY, check_delay("delay_seconds", delay_seconds))

    def _call(self, verdict: Verdict, delay: int | None) -> None:
        if not self._ledger.on_message(self._index, verdict, delay):
            log.warning("ignored %s() on message %s: it is already settled", verdict.value, self.id)

    def __repr__(self) -> str:
        return f"<Message id={self.id!r} attempts={self.attempts}>"


class HeldMessage(Message):
    """A `Message` that holds its body, known when the message was made (a foreign message's
    text, or what `body_model` validated): a handler reads it from the message itself, not
    through two properties of its delivery (a poller's hot path; the Lambda adapter's messages
    hold theirs too). Made without `__init__`, by its delivery, which sets every slot."""

    __slots__ = ("body",)
    body: Any
    """As `Message.body`."""


class MessageBatch:
    """The messages handed to one handler call, from one queue."""

    def __init__(self, queue: str, deliveries: Sequence[_Delivery]) -> None:
        self.queue = queue
        ledger = self._ledger = Ledger(len(deliveries))
        self._deliveries: Sequence[_Delivery] = list(deliveries)
        self.messages: list[Message] = [
            delivery.message(ledger, index) for index, delivery in enumerate(self._deliveries)
        ]

    @classmethod
    def _made(
        cls,
        queue: str,
        ledger: Ledger,
        messages: list[Message],
        deliveries: Sequence[_Delivery],
    ) -> MessageBatch:
        """A batch of messages that a front end made itself (a `Message` subclass), one per
        delivery, in order, each on `ledger`: the Lambda adapter's, whose deliveries are made
        only when read. Sets what `__init__` sets."""
        assert len(messages) == len(deliveries)
        batch = cls.__new__(cls)
        batch.queue = queue
        batch._ledger = ledger
        batch._deliveries = deliveries
        batch.messages = messages
        return batch

    def ack_all(self) -> None:
        """Ack every message that has no `ack()`/`retry()` call before this one."""
        self._call(Verdict.ACK, None)

    def retry_all(self, delay_seconds: int | None = None) -> None:
        """Retry every message that has no `ack()`/`retry()` call before this one."""
        self._call(Verdict.RETRY, check_delay("delay_seconds", delay_seconds))

    def dead_letter_all(self, reason: str) -> None:
        """Dead-letter every message that has no call before this one, with `reason`."""
        self._call(Verdict.DEAD_LETTER, None, check_reason(reason))

    def _call(self, verdict: Verdict, delay: int | None, reason: str | None = None) -> None:
        if not self._ledger.on_batch(verdict, delay, reason):
            log.warning(
                "ignored %s_all() on a batch of %s: already settled", verdict.value, self.queue
            )

    def _settled(self) -> Sequence[Delivered]:
        """What settlement needs of each message, read only for the messages it looks at."""
        return LazyView(self._deliveries, _settled)

    def __len__(self) -> int:
        return len(self.messages)

    def __repr__(self) -> str:
        return f"<MessageBatch queue={self.queue!r} size={len(self)}>"


def deliveries_of(batch: MessageBatch) -> Sequence[_Delivery]:
    """The core's way in to a batch's deliveries (receipts, attempts, groups), by index: the
    handler's `MessageBatch` keeps them private."""
    return batch._deliveries


def ledger_of(batch: MessageBatch) -> Ledger:
    """The core's way in to a batch's ledger (what the handler decided, message by message)."""
    return batch._ledger


class LazyView(Sequence[T]):
    """`read(item)` per item of `items`, computed when asked for: an all-acked batch reads none."""

    __slots__ = ("_items", "_read")

    def __init__(self, items: Sequence[_Delivery], read: Callable[[_Delivery], T]) -> None:
        self._items = items
        self._read = read

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...
    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        if isinstance(index, slice):
            return [self._read(item) for item in self._items[index]]
        return self._read(self._items[index])


def _settled(delivery: _Delivery) -> Delivered:
    return Delivered(delivery.attempts, delivery.received_at, delivery.group_id)
