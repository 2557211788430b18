"""Entries to send, hide and delete: settlement, dead-lettering and delay hops, without I/O.

Settling runs in two phases (`TwoPhase`) so that nothing is lost: first the sends (dead-letter
copies and re-sent long delays) and the visibility changes, then one round of deletes for the
acked messages and for every message whose copy SQS accepted. A crash between the phases can
duplicate a message, never lose one.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqsbatch._core.attributes import ATTRIBUTE as META
from sqsbatch._core.attributes import AttributeValue, payload_size
from sqsbatch._core.calls import Entry
from sqsbatch._core.envelope import (
    MAX_ERROR_CHARS,
    Death,
    DecodedMessage,
    Envelope,
    ErrorInfo,
    carry,
)
from sqsbatch._core.ledger import Action, ActionKind
from sqsbatch._core.message import _Delivery
from sqsbatch.errors import FifoError, MessageError
from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = [
    "MAX_GROUP_ID",
    "Outbound",
    "TwoPhase",
    "check_group_id",
    "copy_of",
    "dead_envelope",
    "delete_entries",
    "hop_delay",
    "is_premature",
    "postpone_entries",
    "send_entry",
    "settle_entries",
]


@dataclass(frozen=True)
class Outbound:
    """One message to send, already encoded."""

    body: str
    envelope: Envelope
    attributes: Mapping[str, AttributeValue]
    delay_seconds: int | None = None
    group_id: str | None = None
    deduplication_id: str | None = None


def hop_delay(
    delay_seconds: int, *, wall_now: float, envelope: Envelope, limits: SqsLimits = SQS_LIMITS
) -> tuple[int, Envelope]:
    """`DelaySeconds` for a delay, and the envelope: past SQS's 900 s it carries a due time.

    A message whose envelope has a due time in the future is not handed to a handler: the
    consumer re-sends it for the time still to wait (another hop) without counting an attempt.
    """
    if delay_seconds <= limits.max_send_delay_seconds:
        return delay_seconds, replace(envelope, due_at=None)
    return limits.max_send_delay_seconds, replace(envelope, due_at=wall_now + delay_seconds)


MAX_GROUP_ID = 128
_GROUP_ID_CHARS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
)
"""What SQS takes in a `MessageGroupId`: letters, digits and ASCII punctuation."""


def check_group_id(value: object) -> str:
    """A `MessageGroupId`: 1..128 characters of letters, digits and punctuation (SQS's rule)."""
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_GROUP_ID:
        shown = f"{len(value)} characters" if isinstance(value, str) else type(value).__name__
        raise MessageError(f"group_id is invalid ({shown}): must be 1..{MAX_GROUP_ID} characters")
    bad = next((char for char in value if char not in _GROUP_ID_CHARS), None)
    if bad is not None:
        raise MessageError(
            f"group_id holds {bad!r}: SQS takes letters, digits and ASCII punctuation only"
        )
    return value


def remaining_delay(due_at: float, wall_now: float) -> int:
    return max(0, math.ceil(due_at - wall_now))


def send_entry(
    key: str, queue_url: str, message: Outbound, *, fifo: bool, limits: SqsLimits = SQS_LIMITS
) -> Entry:
    """A `SendMessageBatch` entry, checked against SQS's rules before any call."""
    attributes = {**message.attributes, META: message.envelope.to_attribute()}
    who = message.envelope.id or key  # a copy names its message's id; a new message, its index
    if len(attributes) > limits.max_attributes:
        raise MessageError(
            f"message {who} has {len(attributes) - 1} message attributes: with sqsbatch's it "
            f"would be {len(attributes)}, and SQS allows {limits.max_attributes}"
        )
    size = payload_size(message.body, attributes)
    if size > limits.max_payload_bytes:
        raise MessageError(
            f"message {who} is {size} bytes with its attributes: "
            f"SQS accepts at most {limits.max_payload_bytes}"
        )
    params: dict[str, Any] = {"MessageBody": message.body, "MessageAttributes": attributes}
    if fifo:
        if message.delay_seconds:
            raise FifoError(
                f"delay_seconds={message.delay_seconds} on a FIFO queue: SQS forbids per-message "
                "delays there (set the queue's DelaySeconds instead)"
            )
        if message.group_id is None:
            raise FifoError("sending to a FIFO queue needs group_id=")
        params["MessageGroupId"] = check_group_id(message.group_id)
        if message.deduplication_id is not None:
            params["MessageDeduplicationId"] = message.deduplication_id
    else:
        if message.deduplication_id is not None:
            raise FifoError("deduplication_id is for FIFO queues (.fifo) only")
        if message.group_id is not None:  # a fair queue's tenant: SQS keeps tenants fair
            params["MessageGroupId"] = check_group_id(message.group_id)
        if message.delay_seconds is not None:
            params["DelaySeconds"] = message.delay_seconds
    return Entry(key, "send_message_batch", queue_url, params, size)


def copy_of(
    message: DecodedMessage,
    envelope: Envelope,
    *,
    delay_seconds: int | None = None,
    fifo: bool = False,
) -> Outbound:
    """A re-sent copy of a received message: same body, user attributes and group (on a FIFO
    queue its order; on a standard one, its fair queue's tenant)."""
    return Outbound(
        body=message.raw_body,
        envelope=envelope,
        attributes=message.raw_attributes,
        delay_seconds=delay_seconds,
        group_id=message.group_id,
        deduplication_id=_dedup_id(envelope) if fifo else None,
    )


@dataclass
class TwoPhase:
    """Phase one (sends, visibility changes), then the deletes that may follow it."""

    first: list[Entry]
    always_delete: list[Entry]
    delete_after_send: dict[str, Entry]
    """Delete entries keyed by the send entry that must succeed first."""
    refused: dict[int, str] = field(default_factory=dict)
    """Messages whose copy cannot be sent (why): left alone, they reappear after their
    visibility, and the queue's RedrivePolicy is the safety net that moves them."""

    def second(self, sent_ok: set[str]) -> list[Entry]:
        after = [entry for key, entry in self.delete_after_send.items() if key in sent_ok]
        return self.always_delete + after


def settle_entries(
    messages: Sequence[_Delivery],
    actions: Sequence[Action],
    *,
    queue_url: str,
    queue: str,
    dlq_url: str | None,
    wall_now: float,
    fifo: bool = False,
    limits: SqsLimits = SQS_LIMITS,
) -> TwoPhase:
    """Entries for settling `messages` as `actions` say. A message's full decoding is read
    only for a copy: a visibility change or a delete needs its receipt handle alone (a
    Lambda record is decoded only when read)."""
    plan = TwoPhase([], [], {})
    for action in actions:
        message = messages[action.index]
        receipt = message.receipt_handle
        i = action.index
        if action.kind in (ActionKind.HIDE, ActionKind.LEAVE):
            params = {"ReceiptHandle": receipt, "VisibilityTimeout": action.delay_seconds}
            plan.first.append(Entry(f"h{i}", "change_message_visibility_batch", queue_url, params))
            continue
        delete = Entry(f"d{i}", "delete_message_batch", queue_url, {"ReceiptHandle": receipt})
        if action.kind in (ActionKind.DELETE, ActionKind.DROP):
            plan.always_delete.append(delete)
        else:
            to_dlq, copy = _copy_for(
                action, message.decoded, queue=queue, wall_now=wall_now, fifo=fifo, limits=limits
            )
            if to_dlq:
                assert dlq_url is not None, "DEAD_LETTER is only decided with a DLQ"
            target = dlq_url if to_dlq and dlq_url is not None else queue_url
            _add_send(plan, i, send_entry_or_reason(f"s{i}", target, copy, fifo, limits), delete)
    return plan


def delete_entries(messages: Sequence[_Delivery], *, queue_url: str) -> list[Entry]:
    """The delete entries of a batch acked as a whole, as `settle_entries` makes them."""
    op = "delete_message_batch"
    return [
        Entry(f"d{i}", op, queue_url, {"ReceiptHandle": message.receipt_handle})
        for i, message in enumerate(messages)
    ]


def postpone_entries(
    messages: Sequence[tuple[DecodedMessage, str]],
    *,
    queue_url: str,
    wall_now: float,
    limits: SqsLimits = SQS_LIMITS,
) -> TwoPhase:
    """Re-send messages received before they were due, for the time still to wait.

    The copy keeps the carried attempts, so an early receive costs no attempt.
    """
    plan = TwoPhase([], [], {})
    for i, (message, receipt) in enumerate(messages):
        assert message.envelope.due_at is not None
        envelope = carry(message)
        wait = remaining_delay(message.envelope.due_at, wall_now)
        delay, hopped = hop_delay(wait, wall_now=wall_now, envelope=envelope, limits=limits)
        copy = copy_of(message, hopped, delay_seconds=delay)
        delete = Entry(f"d{i}", "delete_message_batch", queue_url, {"ReceiptHandle": receipt})
        _add_send(plan, i, send_entry_or_reason(f"s{i}", queue_url, copy, False, limits), delete)
    return plan


def send_entry_or_reason(
    key: str, queue_url: str, message: Outbound, fifo: bool, limits: SqsLimits
) -> Entry | str:
    """The send entry of a copy, or why SQS would refuse it (too big, too many attributes)."""
    try:
        return send_entry(key, queue_url, message, fifo=fifo, limits=limits)
    except MessageError as exc:
        return str(exc)


def _add_send(plan: TwoPhase, index: int, send: Entry | str, delete: Entry) -> None:
    if isinstance(send, str):
        plan.refused[index] = send
        return
    plan.first.append(send)
    plan.delete_after_send[send.key] = delete


def is_premature(message: DecodedMessage, wall_now: float) -> bool:
    """Received before its due time (a delay hop that SQS handed out early)."""
    due = message.envelope.due_at
    return due is not None and due > wall_now


def _copy_for(
    action: Action,
    message: DecodedMessage,
    *,
    queue: str,
    wall_now: float,
    fifo: bool,
    limits: SqsLimits,
) -> tuple[bool, Outbound]:
    """(to the DLQ?, the copy) for a dead-letter or a re-sent long retry."""
    envelope = carry(message)
    if action.kind is ActionKind.DEAD_LETTER:
        return True, copy_of(message, dead_envelope(message, action, queue, wall_now), fifo=fifo)
    spent = message.attempts if action.costs_attempt else message.attempts - 1  # held: none
    retried = replace(envelope, base_attempts=max(0, spent))
    delay, hopped = hop_delay(
        action.delay_seconds, wall_now=wall_now, envelope=retried, limits=limits
    )
    return False, copy_of(message, hopped, delay_seconds=delay)


def dead_envelope(message: DecodedMessage, action: Action, queue: str, wall_now: float) -> Envelope:
    """The envelope of a dead-letter copy: id and timestamp kept, a fresh count of attempts on
    the DLQ, and one more entry in the dead-letter history."""
    error = action.error
    if error is not None:
        error = ErrorInfo(error.type, error.message[:MAX_ERROR_CHARS], error.at)
    attempts = message.attempts if action.costs_attempt else message.attempts - 1
    death = Death(
        reason=action.reason,
        queue=queue,
        attempts=max(0, attempts),
        at=error.at if error is not None else wall_now,
        error_type=None if error is None else error.type,
        error_message=None if error is None else error.message,
    )
    dead = replace(carry(message), base_attempts=0, source_queue=queue, due_at=None, error=error)
    return dead.died(death)


def _dedup_id(envelope: Envelope) -> str:
    deaths = len(envelope.deaths)
    seed = f"{envelope.id}:{envelope.base_attempts}:{envelope.redrives}:{envelope.error}:{deaths}"
    return hashlib.sha256(seed.encode()).hexdigest()
