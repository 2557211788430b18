"""Receiving: how a batch is assembled from receives, and what a receive answer holds, no I/O.

`Assembly` says how many messages to ask for and how long to wait, receive after receive, until
the batch window is due; `Answer` is a receive's answer as intake reads it (lazily:
`ReceivedDelivery`), and `split_deliveries` sets apart the delay hops that came early
(`Split.postpone` re-sends them for the time still to wait); `is_idle` is the idle exit of
`run_until_idle`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from sqsbatch._core.attributes import ATTRIBUTE
from sqsbatch._core.batching import BatchWindow
from sqsbatch._core.bodies import decode_body
from sqsbatch._core.closing import SETTLES_OUT_PER_SLOT
from sqsbatch._core.entries import TwoPhase, is_premature, postpone_entries
from sqsbatch._core.envelope import FOREIGN, DecodedMessage, Envelope, decode, read_envelope
from sqsbatch._core.ledger import Ledger
from sqsbatch._core.message import HeldMessage, Message, _Delivery
from sqsbatch._core.payloads import LEGACY_SIZE_ATTRIBUTE, SIZE_ATTRIBUTE
from sqsbatch.config import ConsumerConfig
from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = [
    "Answer",
    "Assembly",
    "ReceivedDelivery",
    "Split",
    "connections_for",
    "is_idle",
    "receive_visibility",
    "split_deliveries",
    "split_received",
]


@dataclass(slots=True)
class Split:
    """One receive, decoded: deliveries for a batch, and early hops (`early`) to postpone."""

    deliveries: list[_Delivery]
    postpone: TwoPhase | None
    early: list[_Delivery] = field(default_factory=list)
    plain: bool = False
    """No message carries sqsbatch's attribute: none has a deadline of its producer's either."""


def split_received(
    raw: Sequence[Mapping[str, Any]],
    *,
    queue_url: str,
    received_at: float,
    visibility: int,
    wall_now: float,
    limits: SqsLimits = SQS_LIMITS,
) -> Split:
    """A `ReceiveMessage` answer as deliveries, decoded as they are read (`ReceivedDelivery`);
    messages that are not due yet are not delivered."""
    answer = Answer(raw, queue_url=queue_url, received_at=received_at, visibility=visibility)
    return split_deliveries(
        answer.all, queue_url=queue_url, wall_now=wall_now, limits=limits, plain=answer.plain
    )


class Answer:
    """A `ReceiveMessage` answer as intake's `Arrivals` (`_core.intake`): a delivery per
    message, decoded as it is read (`ReceivedDelivery`)."""

    __slots__ = ("all", "plain", "queue_url")

    def __init__(
        self,
        raw: Sequence[Mapping[str, Any]],
        *,
        queue_url: str,
        received_at: float,
        visibility: int,
    ) -> None:
        hidden_until = received_at + visibility
        made: list[_Delivery] = [ReceivedDelivery(item, received_at, hidden_until) for item in raw]
        self.all = made
        self.plain = not [delivery for delivery in made if delivery.envelope is not FOREIGN]
        """No message carries sqsbatch's attribute: none is a hop or has a deadline."""
        self.queue_url = queue_url

    def hops(self) -> list[_Delivery]:
        return [] if self.plain else [d for d in self.all if d.due_at is not None]

    def deadlines(self) -> bool:
        return not self.plain and any(d.expires_at is not None for d in self.all)

    def offloaded(self) -> bool:
        for delivery in self.all:  # two lookups a message: this runs on every receive
            user = delivery.raw.get("MessageAttributes")  # type: ignore[attr-defined]
            if user and (SIZE_ATTRIBUTE in user or LEGACY_SIZE_ATTRIBUTE in user):
                return True
        return False

    def deliveries(self, early: Sequence[_Delivery]) -> list[_Delivery]:
        if not early:
            return self.all
        skipped = {id(delivery) for delivery in early}
        return [delivery for delivery in self.all if id(delivery) not in skipped]

    def batch(self, live: list[_Delivery] | None, early: Sequence[_Delivery]) -> list[_Delivery]:
        return live if live is not None else self.deliveries(early)


class ReceivedDelivery(_Delivery):
    """A message as boto3's `ReceiveMessage` returns it, as a delivery read lazily: it reads the
    same as `envelope.decode` of it, but a handler that reads only the body, of a message with
    no sqsbatch attribute, costs no decoding at all (decoding is most of a poller's own CPU per
    message). The full decoding (user attributes, what re-sends need) is made on first use."""

    __slots__ = ("_body", "_envelope", "raw")

    def __init__(self, raw: Mapping[str, Any], received_at: float, hidden_until: float) -> None:
        self.raw = raw
        self._decoded = None
        self.receipt_handle = str(raw["ReceiptHandle"])
        self.received_at = received_at
        self.hidden_until = hidden_until
        self.at_ceiling = False
        user = raw.get("MessageAttributes")
        self._envelope = _envelope_in(user) if user else FOREIGN
        self._body: Any = raw.get("Body", "") if self._envelope is FOREIGN else _UNREAD

    @property
    def decoded(self) -> DecodedMessage:
        if self._decoded is None:
            decoded = decode(self.raw)
            if self._body is not _UNREAD and self._body is not decoded.body:
                decoded = replace(decoded, body=self._body)  # validated (`body_model`)
            self._decoded = decoded
        return self._decoded

    @property
    def body(self) -> Any:
        body = self._body
        if body is _UNREAD:
            body = self._body = decode_body(self.raw.get("Body", ""), self._envelope.content_type)
        return body

    @property
    def raw_body(self) -> str:
        return str(self.raw.get("Body", ""))

    @property
    def id(self) -> str:
        return self._envelope.id or self.raw["MessageId"]

    @property
    def timestamp(self) -> datetime:
        seconds = self._envelope.timestamp
        if seconds is None:
            seconds = int(self._system().get("SentTimestamp", "0")) / 1000
        return datetime.fromtimestamp(seconds, UTC)

    @property
    def attempts(self) -> int:
        receives = int(self._system().get("ApproximateReceiveCount", "1"))
        return self._envelope.base_attempts + receives

    @property
    def group_id(self) -> str | None:
        return self._system().get("MessageGroupId")

    @property
    def envelope(self) -> Envelope:
        return self._envelope

    def validated(self, body: Any) -> None:
        self._body = body
        if self._decoded is not None:
            self._decoded = replace(self._decoded, body=body)

    def message(self, ledger: Ledger, index: int) -> Message:
        """A body already read is held by the message (`HeldMessage`); else the handler's
        first read of it decodes it."""
        body = self._body
        if body is _UNREAD:
            return Message(self, ledger, index)
        message = _new(HeldMessage)  # one call a message fewer than through `__init__`
        message._delivery = self
        message._ledger = ledger
        message._index = index
        message.body = body
        return message

    def _system(self) -> Mapping[str, str]:
        return self.raw.get("Attributes") or {}


_UNREAD = object()
_new = object.__new__


def _envelope_in(user: Mapping[str, Any]) -> Envelope:
    """The envelope `decode` reads from a message's attributes: sqsbatch's, else `FOREIGN`."""
    ours = user.get(ATTRIBUTE)
    if ours is None or "StringValue" not in ours:
        return FOREIGN
    return read_envelope(ours["StringValue"]) or FOREIGN


def split_deliveries(
    deliveries: Sequence[_Delivery],
    *,
    queue_url: str,
    wall_now: float,
    limits: SqsLimits = SQS_LIMITS,
    plain: bool = False,
) -> Split:
    """Received messages for a batch, and a re-send for those not due yet (delay hops).

    `plain`: no message carries sqsbatch's attribute, so none can be a hop (nothing to read).
    """
    if plain:
        return Split(list(deliveries), None, plain=True)
    early = [d for d in deliveries if d.due_at is not None and is_premature(d.decoded, wall_now)]
    if not early:
        return Split(list(deliveries), None)
    pairs = [(d.decoded, d.receipt_handle) for d in early]
    postpone = postpone_entries(pairs, queue_url=queue_url, wall_now=wall_now, limits=limits)
    held = {id(d) for d in early}
    return Split([d for d in deliveries if id(d) not in held], postpone, early)


def connections_for(config: ConsumerConfig) -> int:
    """HTTP connections a poller needs: per slot a long poll, a heartbeat and the settle calls
    it may have out (`SETTLES_OUT_PER_SLOT`); the room to spare is for `receivers` growing."""
    return config.max_concurrency * (2 + SETTLES_OUT_PER_SLOT) + 2


@dataclass
class Assembly:
    """The receives that fill one batch: how many to ask for, how long to wait, when to stop.

    `surplus`: the receiver assembling it is one more than demand allows now (`receivers`), so
    an empty receive ends assembly instead of waiting on; the shell sets it after each receive.
    `idle_seconds` (run until idle) caps the wait of an empty window by what is left before the
    poller counts as idle.
    """

    window: BatchWindow[_Delivery]
    idle_seconds: float | None
    surplus: bool = False

    def next_receive(
        self, now: float, idle_for: float, *, stopping: bool
    ) -> tuple[int, int] | None:
        """(MaxNumberOfMessages, WaitTimeSeconds) of the next receive; None: the batch goes now."""
        if self.window.is_due(now):
            return None
        if stopping and not self.window.is_open:
            return None  # stopped: receive nothing new (a partial batch is still delivered)
        cap = None
        if self.idle_seconds is not None:
            cap = self.idle_seconds - idle_for
            if not self.window.is_open and cap <= 0:
                return None
        return self.window.want(), self.window.wait_seconds(now, cap=cap)

    def add(self, received: list[_Delivery], *, asked: int, now: float, stopping: bool) -> bool:
        """Record one receive; False when assembly ends before the batch is due."""
        self.window.add(received, asked=asked, now=now)
        return not (stopping or (self.surplus and not self.window.is_open))


def receive_visibility(
    config: ConsumerConfig, window_left: float, limits: SqsLimits = SQS_LIMITS
) -> int:
    """Hidden through what is left of the batch window, then `visibility_timeout`."""
    hidden = config.visibility_timeout + math.ceil(window_left)
    return min(limits.visibility_ceiling_seconds, hidden)


def is_idle(idle_seconds: float | None, idle_for: float) -> bool:
    """`run_until_idle(idle_seconds)`: nothing arrived for that long (`run()`: never idle)."""
    return idle_seconds is not None and idle_for >= idle_seconds
