"""What the daemon does with one message it received from a DLQ. Pure: time comes in as `now`.

For each message, in this order:

0. Its reason (`redrive.reasons`: by default `expired` and `invalid_body`) is not brought back:
   KEPT (it stays, hidden between two reports), or PARK when a parking queue is configured.
1. Redriven `max_redrives` times already: EXHAUSTED (it stays, hidden between two reports), or
   PARK when a parking queue is configured.
2. No queue to go back to: UNROUTABLE (it stays, hidden between two reports).
3. Due (`dead-lettered-at + delay(redrives) <= now`): MOVE to its source.
4. Otherwise: HIDE until it is due, at most up to SQS's 12 h ceiling counted from the receive.

The source is, first found wins: the queue in the sqsbatch metadata (the consumer that
dead-lettered it wrote it), the `DeadLetterQueueSourceArn` system attribute (set by SQS when its
own RedrivePolicy moved the message), the DLQ's only source queue (`ListDeadLetterSourceQueues`),
then the daemon's fallback (`to`). Dead-lettered-at is the failure time in the metadata, else
the first time the DLQ handed the message out (`ApproximateFirstReceiveTimestamp`).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redrive.policy import BackoffPolicy
from redrive.reasons import BRING_BACK_DEFAULT, Reasons
from sqsbatch._core.attributes import ATTRIBUTE
from sqsbatch._core.delays import Uniform
from sqsbatch._core.envelope import DecodedMessage, death_reason, decode
from sqsbatch._core.ledger import visibility_allowed
from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = ["Disposition", "DlqMessage", "Kind", "decide", "read", "route"]


@dataclass(frozen=True)
class DlqMessage:
    """One message as received from a DLQ: decoded, with what routing and timing need."""

    message: DecodedMessage
    receipt_handle: str
    message_id: str
    """SQS's `MessageId` of this copy (the decoded `id` is the original, stable one)."""
    first_received_at: float | None = None
    """`ApproximateFirstReceiveTimestamp`, epoch seconds."""
    source_arn: str | None = None
    """`DeadLetterQueueSourceArn`: only set when SQS's own RedrivePolicy moved the message."""

    @property
    def redrives(self) -> int:
        return self.message.envelope.redrives

    @property
    def dead_lettered_at(self) -> float:
        """The failure time in the metadata, else the DLQ's first receive, else the send time."""
        error = self.message.envelope.error
        if error is not None:
            return error.at
        if self.first_received_at is not None:
            return self.first_received_at
        return self.message.timestamp.timestamp()

    @property
    def reason(self) -> str:
        """Why it is on the DLQ: its last death's reason, or `moved_by_sqs`."""
        return death_reason(self.message.envelope)

    @property
    def known_source(self) -> str | None:
        """The source queue's name from the metadata or the system attribute, if any."""
        if self.message.envelope.source_queue:
            return self.message.envelope.source_queue
        if self.source_arn:
            return self.source_arn.rsplit(":", 1)[-1]
        return None


def read(raw: Mapping[str, Any]) -> DlqMessage:
    """A `ReceiveMessage` entry (with `RECEIVE_SYSTEM_ATTRIBUTES` and all message attributes)."""
    system: Mapping[str, str] = raw.get("Attributes") or {}
    first = system.get("ApproximateFirstReceiveTimestamp")
    try:
        decoded = decode(raw)
    except (TypeError, ValueError, KeyError):
        # A `sqsbatch` attribute that claims our version but does not parse: read the message
        # as foreign (routed by SQS's attributes) rather than let one message stop the daemon.
        attributes = dict(raw.get("MessageAttributes") or {})
        attributes.pop(ATTRIBUTE, None)
        decoded = decode({**raw, "MessageAttributes": attributes})
    return DlqMessage(
        message=decoded,
        receipt_handle=str(raw["ReceiptHandle"]),
        message_id=str(raw["MessageId"]),
        first_received_at=int(first) / 1000 if first else None,
        source_arn=system.get("DeadLetterQueueSourceArn") or None,
    )


def route(message: DlqMessage, *, only_source: str | None, fallback: str | None) -> str | None:
    """The queue (name or URL) the message goes back to, or None when nothing says."""
    return message.known_source or only_source or fallback


class Kind(enum.Enum):
    MOVE = "moved"
    """Due: sent to its source, then deleted from the DLQ."""
    HIDE = "delayed"
    """Not due yet: hidden in the DLQ until it is (`ChangeMessageVisibility`)."""
    EXHAUSTED = "exhausted"
    """Redriven `max_redrives` times: it stays in the DLQ, reported."""
    PARK = "parked"
    """Redriven `max_redrives` times: sent to the parking queue, then deleted from the DLQ."""
    UNROUTABLE = "unroutable"
    """No source known and no fallback: it stays in the DLQ, reported."""
    KEPT = "kept"
    """Its reason is not brought back (`expired`, `invalid_body` by default): it stays in the
    DLQ, reported."""


@dataclass(frozen=True)
class Disposition:
    kind: Kind
    target: str | None = None
    """Where a MOVE or PARK sends it (a name or URL)."""
    hide_seconds: int = 0
    """For the kinds that leave it in the DLQ: how long it stays hidden."""
    due_at: float | None = None


def decide(
    message: DlqMessage,
    policy: BackoffPolicy,
    *,
    target: str | None,
    parking_queue: str | None,
    now: float,
    random: Uniform,
    held_for: float = 0.0,
    limits: SqsLimits = SQS_LIMITS,
    reasons: Reasons = BRING_BACK_DEFAULT,
) -> Disposition:
    """The disposition of `message`; `target` comes from `route`, `now` is wall time (epoch s).

    `random` draws the jitter: `redrive.daemon.jitter_random(message.message.id, message.redrives)`
    makes it the same on every receive. `held_for` is how long ago (seconds) the receive that
    returned the message started: visibility can only be set up to 12 h after that.
    """
    allowed = visibility_allowed(0.0, held_for, limits)
    hold = min(policy.hold_seconds, allowed)
    if not reasons.brings_back(message.reason):
        if parking_queue is not None:
            return Disposition(Kind.PARK, target=parking_queue)
        return Disposition(Kind.KEPT, hide_seconds=hold)
    if policy.exhausted(message.redrives):
        if parking_queue is not None:
            return Disposition(Kind.PARK, target=parking_queue)
        return Disposition(Kind.EXHAUSTED, hide_seconds=hold)
    if target is None:
        return Disposition(Kind.UNROUTABLE, hide_seconds=hold)
    due = policy.due_at(message.dead_lettered_at, message.redrives, random)
    if due <= now:
        return Disposition(Kind.MOVE, target=target, due_at=due)
    wait = max(1, math.ceil(due - now))
    return Disposition(Kind.HIDE, target=target, hide_seconds=min(wait, allowed), due_at=due)
