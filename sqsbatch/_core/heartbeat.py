"""The heartbeat: a running batch's messages stay hidden, never past the 12 h ceiling; no I/O.

`Watch` supervises a running handler: it wakes for the next heartbeat (half a visibility timeout
before the first message would show again) or at `handler_timeout`, whichever comes first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sqsbatch._core.calls import BatchRun, Entry
from sqsbatch._core.ledger import visibility_allowed
from sqsbatch._core.message import _Delivery
from sqsbatch.config import ConsumerConfig
from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = ["Extended", "Watch", "extended", "heartbeat_entries", "next_heartbeat"]


def _margin(visibility_timeout: int) -> float:
    """How long before a message would show again the heartbeat extends it."""
    return visibility_timeout / 2


def next_heartbeat(deliveries: Iterable[_Delivery], visibility_timeout: int) -> float:
    """When the heartbeat is next due: half a visibility timeout before the first expiry of a
    message that can still be extended (`math.inf` when none can)."""
    first = min([d.hidden_until for d in deliveries if not d.at_ceiling], default=math.inf)
    return first - _margin(visibility_timeout)


def heartbeat_entries(
    deliveries: Sequence[_Delivery],
    *,
    queue_url: str,
    now: float,
    visibility_timeout: int,
    limits: SqsLimits = SQS_LIMITS,
) -> list[Entry]:
    """Visibility extensions due now, never past the ceiling counted from each receive.

    Every message of a running batch stays hidden, acked ones too: they are deleted only when the
    batch settles, and must not be redelivered before. An extension clamped by the ceiling is the
    message's last (it is marked `at_ceiling`); one that would gain nothing is not sent.
    """
    entries = []
    for index, delivery in enumerate(deliveries):
        if delivery.at_ceiling or delivery.hidden_until - now > _margin(visibility_timeout):
            continue
        seconds = min(visibility_timeout, visibility_allowed(delivery.received_at, now, limits))
        if seconds < visibility_timeout:
            delivery.at_ceiling = True
            if seconds <= 0 or now + seconds <= delivery.hidden_until:
                continue  # SQS will show it again at the ceiling; nothing can stop that
        params = {"ReceiptHandle": delivery.receipt_handle, "VisibilityTimeout": seconds}
        key = f"{index}:{seconds}"
        entries.append(Entry(key, "change_message_visibility_batch", queue_url, params))
    return entries


@dataclass(frozen=True)
class Extended:
    """What one heartbeat concluded: receipts found expired, and extensions SQS refused."""

    expired: int = 0
    refused: list[str] = field(default_factory=list)
    """`code message` per refused extension (its message may show again while it runs)."""


def extended(deliveries: Sequence[_Delivery], run: BatchRun, now: float) -> Extended:
    """Record the extensions SQS accepted. A message whose extension failed is not extended
    again in this run (`at_ceiling`): an expired receipt cannot be, and asking again at once
    for one SQS refused would only repeat the call until the handler ends."""
    for result in run.ok():
        index, seconds = result.key.split(":")
        deliveries[int(index)].hidden_until = now + int(seconds)
    failed = run.failed()
    for result in failed:
        deliveries[int(result.key.split(":")[0])].at_ceiling = True
    refused = [f"{r.code} {r.message or ''}".strip() for r in failed if not r.gone]
    return Extended(sum(1 for r in failed if r.gone), refused)


@dataclass(slots=True)
class Watch:
    """A running handler's supervisor: when it next wakes (heartbeat) and when it gives up."""

    deadline: float
    visibility_timeout: int

    @classmethod
    def start(cls, now: float, config: ConsumerConfig) -> Watch:
        return cls(now + config.handler_timeout, config.visibility_timeout)

    def timed_out(self, now: float) -> bool:
        return now >= self.deadline

    def wake_at(self, deliveries: Iterable[_Delivery]) -> float:
        """The next heartbeat, or the deadline when it comes first."""
        return min(self.deadline, next_heartbeat(deliveries, self.visibility_timeout))
