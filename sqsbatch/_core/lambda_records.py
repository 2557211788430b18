"""A Lambda event's records as the messages a handler reads and the deliveries the core reads.

`record_batch` is the hot path: one `RecordMessage` per record, reading its record directly,
with the delivery the core needs made only when something reads it (an all-acked batch makes
none). `deliveries` makes a `RecordDelivery` per record, for the screened path (deadlines,
typed bodies) and for delay hops (`delay_hops`). `EventRecords` is the event as intake reads it
(`sqsbatch._core.intake`). `parse_event` (`lambda_event`) checks the records first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from itertools import repeat
from typing import Any, Protocol, cast, overload

from sqsbatch._core.bodies import decode_body
from sqsbatch._core.envelope import FOREIGN, DecodedMessage, Envelope, decode
from sqsbatch._core.lambda_event import ParsedEvent, _received
from sqsbatch._core.ledger import Ledger
from sqsbatch._core.message import Message, MessageBatch, _Delivery
from sqsbatch._core.payloads import is_pointer

__all__ = [
    "Arrival",
    "EnvelopedMessage",
    "EventRecords",
    "RecordDelivery",
    "RecordLedger",
    "RecordMessage",
    "delay_hops",
    "deliveries",
    "plain_batch",
    "record_batch",
]


class RecordDelivery(_Delivery):
    """A checked record as a delivery, read lazily: what a handler never touches (attributes,
    the timestamp as a datetime, the full decoding that re-sends need) costs nothing.

    Reads the same as `decode` of the record in boto3's shape (`ParsedEvent.messages`).
    """

    __slots__ = ("_envelope", "body", "record")
    body: Any
    """The body: set at once for a foreign message (text as it came), else decoded on first
    read (`__getattr__`: a slot not yet set is read through it), once."""

    def __init__(
        self,
        record: Mapping[str, Any],
        received_at: float,
        hidden_until: float,
        envelope: Envelope = FOREIGN,
    ) -> None:
        self.record = record
        self._decoded = None
        self.receipt_handle = record["receiptHandle"]
        self.received_at = received_at
        self.hidden_until = hidden_until
        self.at_ceiling = False
        self._envelope = envelope
        if envelope is FOREIGN:
            self.body = record["body"]

    @property
    def decoded(self) -> DecodedMessage:
        if self._decoded is None:
            self._decoded = decode(_received("record", self.record))
        return self._decoded

    @property
    def item_identifier(self) -> str:
        """SQS's message id: what `batchItemFailures` names."""
        return str(self.record["messageId"])

    @property
    def raw_body(self) -> str:
        return str(self.record["body"])

    @property
    def id(self) -> str:
        return _message_id(self.record, self._envelope)

    def __getattr__(self, name: str) -> Any:
        if name != "body":
            raise AttributeError(name)
        self.body = decode_body(self.record["body"], self._envelope.content_type)
        return self.body

    @property
    def timestamp(self) -> datetime:
        return _timestamp(self.record, self._envelope)

    @property
    def attempts(self) -> int:
        return _attempts(self.record, self._envelope)

    @property
    def group_id(self) -> str | None:
        group = self.record["attributes"].get("MessageGroupId")
        return None if group is None else str(group)

    @property
    def envelope(self) -> Envelope:
        return self._envelope

    def validated(self, body: Any) -> None:
        self.body = body
        if self._decoded is not None:
            self._decoded = replace(self._decoded, body=body)

    def trace_headers(self) -> tuple[Envelope, str | None]:
        return self._envelope, _trace_header(self.record)


def _trace_header(record: Mapping[str, Any]) -> str | None:
    header = record["attributes"].get("AWSTraceHeader")
    return header if isinstance(header, str) else None


def _message_id(record: Mapping[str, Any], envelope: Envelope) -> str:
    return envelope.id or str(record["messageId"])


def _timestamp(record: Mapping[str, Any], envelope: Envelope) -> datetime:
    seconds = envelope.timestamp
    if seconds is None:
        seconds = int(record["attributes"]["SentTimestamp"]) / 1000
    return datetime.fromtimestamp(seconds, UTC)


def _attempts(record: Mapping[str, Any], envelope: Envelope) -> int:
    return envelope.base_attempts + int(record["attributes"]["ApproximateReceiveCount"])


def deliveries(
    parsed: ParsedEvent, *, received_at: float, hidden_until: float
) -> list[RecordDelivery]:
    """A delivery per record of a parsed event."""
    records, at, until = parsed.records, repeat(received_at), repeat(hidden_until)
    if parsed.envelopes is None:
        return list(map(RecordDelivery, records, at, until))
    return list(map(RecordDelivery, records, at, until, parsed.envelopes))


class Receives(Protocol):
    """What `Arrival` reads of an event: a `ParsedEvent`, or the Lambda hot path's records."""

    @property
    def first_receive(self) -> float: ...


class Arrival:
    """When a batch's records were received, as a delivery tells it (`times`): worked out when
    the first delivery is made, as the 12-hour ceiling counts from the earliest first receive
    of the batch (`ParsedEvent.first_receive`, a look at every record)."""

    __slots__ = ("_now", "_parsed", "_times", "_visibility_timeout", "_wall_now")

    def __init__(
        self, parsed: Receives, *, now: float, wall_now: float, visibility_timeout: float
    ) -> None:
        self._parsed = parsed
        self._now = now
        self._wall_now = wall_now
        self._visibility_timeout = visibility_timeout
        self._times: tuple[float, float] | None = None

    def times(self) -> tuple[float, float]:
        """(received_at, hidden_until), monotonic: no later than the earliest receive, and
        hidden for the queue's visibility timeout from then."""
        if self._times is None:
            received_at = self._now - max(0.0, self._wall_now - self._parsed.first_receive)
            self._times = (received_at, received_at + self._visibility_timeout)
        return self._times


class RecordLedger(Ledger):
    """The ledger of a batch of records, which also holds the records, in order, and when they
    arrived (`Arrival`): what its messages read, held once per batch, not per message."""

    def __init__(self, records: list[Mapping[str, Any]], arrival: Arrival) -> None:
        super().__init__(len(records))
        self.records = records
        self.arrival = arrival


class RecordMessage(Message):
    """A record as the handler's `Message`, one object per record. Its delivery (`_delivery`,
    what settlement and `Message`'s other properties and methods read) is made on first use,
    so an all-acked batch makes none; `id`, `attempts` and `timestamp` are read from the
    record, and `body` is held: the bulk check read it (`ParsedEvent.bodies`), and a handler
    reads it from the message, warm, rather than from its record, which a batch of thousands
    has long pushed out of the CPU's caches (`bench/lambda_cpu.py`, all acked: 0.81-0.84
    times Powertools before, 0.77-0.79 since).

    Sets `Message`'s slots itself (but `_delivery`), as `Message.__init__` would. Few slots,
    and none that holds the record (its batch's ledger holds it): each costs every message a
    write and a reference to count, and a visit whenever the cyclic GC looks at it. No
    `__getattr__`: with one, every attribute read is a slow one.
    """

    __slots__ = ("_made", "body")
    _ledger: RecordLedger
    _made: _Delivery
    _envelope: Envelope = FOREIGN
    """Without sqsbatch's attribute (`EnvelopedMessage` has its own)."""
    body: Any
    """As `Message.body`: a foreign message's is its text as it came."""

    def __init__(self, ledger: RecordLedger, index: int, body: str) -> None:
        self._ledger = ledger
        self._index = index
        self.body = body

    @property
    def _record(self) -> Mapping[str, Any]:
        return self._ledger.records[self._index]

    @property  # shadows `Message`'s slot, unused here
    def _delivery(self) -> _Delivery:
        try:
            return self._made
        except AttributeError:  # not made yet
            received_at, hidden_until = self._ledger.arrival.times()
            self._made = RecordDelivery(self._record, received_at, hidden_until, self._envelope)
            return self._made

    @_delivery.setter
    def _delivery(self, delivery: _Delivery) -> None:
        self._made = delivery

    @property
    def id(self) -> str:
        return _message_id(self._record, self._envelope)

    @property
    def attempts(self) -> int:
        return _attempts(self._record, self._envelope)

    @property
    def timestamp(self) -> datetime:
        return _timestamp(self._record, self._envelope)

    @property
    def item_identifier(self) -> str:
        """SQS's message id: what `batchItemFailures` names."""
        return str(self._record["messageId"])

    def _trace_headers(self) -> tuple[Envelope, str | None]:
        """As `Message`'s, read from the record: no delivery is made."""
        return self._envelope, _trace_header(self._record)


class EnvelopedMessage(RecordMessage):
    """A `RecordMessage` of an event where records carry message attributes, and so perhaps
    sqsbatch's envelope: then its body is decoded on first read, once (its `body` is this
    property, not `RecordMessage`'s slot, which it leaves unset)."""

    __slots__ = ("_body", "_envelope")

    def __init__(self, ledger: RecordLedger, index: int, envelope: Envelope) -> None:
        self._ledger = ledger
        self._index = index
        self._envelope = envelope
        self._body: Any = _UNREAD

    @property
    def body(self) -> Any:
        body = self._body
        if body is _UNREAD:
            body = self._body = decode_body(self._record["body"], self._envelope.content_type)
        return body


_UNREAD = object()


def delay_hops(parsed: ParsedEvent, arrival: Arrival) -> dict[int, RecordDelivery]:
    """A delivery for each record that carries a due time (a delay hop), by index: what
    `split_deliveries` reads to set apart the early ones. Empty on a plain event."""
    envelopes = parsed.envelopes or []
    due = [index for index, envelope in enumerate(envelopes) if envelope.due_at is not None]
    if not due:
        return {}
    received_at, hidden_until = arrival.times()
    return {
        index: RecordDelivery(parsed.records[index], received_at, hidden_until, envelopes[index])
        for index in due
    }


class EventRecords:
    """A parsed event's records as intake's `Arrivals` (`sqsbatch._core.intake`): a delivery is
    made for a record only when a step reads it (the delay hops; every record when something is
    screened); else the handler gets `record_batch`'s lazy messages."""

    __slots__ = ("_arrival", "_hops", "_parsed", "_queue", "queue_url")

    def __init__(self, queue: str, parsed: ParsedEvent, arrival: Arrival) -> None:
        self._queue = queue
        self._parsed = parsed
        self._arrival = arrival
        self._hops = delay_hops(parsed, arrival)
        self.queue_url = parsed.queue_url

    def hops(self) -> list[_Delivery]:
        return list(self._hops.values())

    def deadlines(self) -> bool:
        envelopes = self._parsed.envelopes
        return envelopes is not None and any(e.expires_at is not None for e in envelopes)

    def offloaded(self) -> bool:
        if self._parsed.envelopes is None:  # plain: no record has message attributes
            return False
        return any(is_pointer(record.get("messageAttributes")) for record in self._parsed.records)

    def deliveries(self, early: Sequence[_Delivery]) -> list[_Delivery]:
        skipped = {id(delivery) for delivery in early}
        received_at, hidden_until = self._arrival.times()
        made = deliveries(self._parsed, received_at=received_at, hidden_until=hidden_until)
        hops = self._hops
        return [
            hops.get(index, record)
            for index, record in enumerate(made)
            if id(hops.get(index)) not in skipped
        ]

    def batch(self, live: list[_Delivery] | None, early: Sequence[_Delivery]) -> MessageBatch:
        if live is None:
            return record_batch(self._queue, self._parsed, self._arrival, self._hops, early)
        return MessageBatch(self._queue, live)


def record_batch(
    queue: str,
    parsed: ParsedEvent,
    arrival: Arrival,
    hops: Mapping[int, RecordDelivery] | None = None,
    early: Sequence[_Delivery] = (),
) -> MessageBatch:
    """The batch of a parsed event's records, less the `early` among its `hops` (re-sent, not
    handled): a `RecordMessage` per record, in order; the deliveries the core reads
    (`MessageBatch._deliveries`) are the messages' own, made as they are read."""
    records, envelopes = parsed.records, parsed.envelopes
    if envelopes is None:  # plain: one pass, nothing to set apart
        bodies = parsed.bodies
        if bodies is None:  # a ParsedEvent made without the bulk check
            bodies = [record["body"] for record in records]
        return plain_batch(queue, records, bodies, arrival)
    hops = hops or {}
    skipped = {id(delivery) for delivery in early}
    kept = [i for i in range(len(records)) if id(hops.get(i)) not in skipped]
    ledger = RecordLedger([records[original] for original in kept], arrival)
    messages: list[RecordMessage] = []
    for index, original in enumerate(kept):
        message = EnvelopedMessage(ledger, index, envelopes[original])
        if original in hops:
            message._delivery = hops[original]  # made (and decoded) already
        messages.append(message)
    return _batch(queue, ledger, messages)


def plain_batch(
    queue: str, records: list[Mapping[str, Any]], bodies: list[str], arrival: Arrival
) -> MessageBatch:
    """`record_batch` of a plain event (no record has message attributes): a `RecordMessage`
    per record, holding its body (`bodies`, in order)."""
    ledger = RecordLedger(records, arrival)
    plain = list(map(RecordMessage, repeat(ledger), range(len(records)), bodies))
    return _batch(queue, ledger, plain)


def _batch(queue: str, ledger: Ledger, messages: list[RecordMessage]) -> MessageBatch:
    return MessageBatch._made(queue, ledger, cast(list[Message], messages), _Deliveries(messages))


class _Deliveries(Sequence[_Delivery]):
    """The deliveries of a batch of `RecordMessage`s, each made when read."""

    __slots__ = ("_messages",)

    def __init__(self, messages: list[RecordMessage]) -> None:
        self._messages = messages

    def __len__(self) -> int:
        return len(self._messages)

    @overload
    def __getitem__(self, index: int) -> _Delivery: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[_Delivery]: ...
    def __getitem__(self, index: int | slice) -> _Delivery | Sequence[_Delivery]:
        if isinstance(index, slice):
            return [message._delivery for message in self._messages[index]]
        return self._messages[index]._delivery
