"""Intake's step 2: large payloads fetched from S3, and deleted once their message is acked.
Pure: no I/O; the S3 calls are `Outside` calls of a `PayloadStore` (the shell's:
`sqsbatch._shell.payload_store`), which both doors run.

A message whose attribute `ExtendedPayloadSize` (or `SQSLargePayloadSize`) is set carries a
pointer to its payload in S3, in the format of AWS's extended clients (`_core.payloads`). Each
costs one `GetObject`; a message that is not one costs nothing. A fetched message reaches the
handler as a `FetchedDelivery`: its body is the payload, decoded as the body would have been,
and its attributes lack the size attribute (as AWS's clients hand it over); what re-sends copy
(`DecodedMessage.raw_body`, `raw_attributes`) stays the pointer and its size attribute, so a
retry, a DLQ copy, a delay hop, a redrive or parking never re-sends (or deletes) the payload.

- the object is gone (`PayloadMissing`): dead-lettered with reason `payload_missing`, unless
  it rests in the queue it died in of that (`screening.resting_death`): then it reaches the
  handler as it came, the pointer as its body;
- a marked message whose body is not a pointer, or whose payload is not UTF-8: dead-lettered
  with reason `invalid_body` and the one-line reason;
- S3 would not answer (throttled, denied, unreachable: `PayloadError`): `unread`, neither handed
  over nor settled, so that SQS delivers it again (Lambda: reported in `batchItemFailures`); on
  a FIFO queue the later messages of its group in the same receive too, to keep their order.

Once settled, `delete_acked` deletes the objects of the acked messages whose SQS delete was
accepted (Lambda: those it will delete), one `DeleteObjects` per bucket and 1000 keys, unless
the store keeps them (`keep_payloads`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from sqsbatch._core.bodies import decode_body
from sqsbatch._core.envelope import INVALID_BODY, PAYLOAD_MISSING, ErrorInfo
from sqsbatch._core.flows import Flow, Line, Outside, Settled
from sqsbatch._core.ledger import ActionKind
from sqsbatch._core.message import MessageBatch, _Delivery, deliveries_of
from sqsbatch._core.payloads import Pointer, is_pointer, parse_pointer
from sqsbatch._core.screening import Doomed, resting_death
from sqsbatch.errors import PayloadError, PayloadMissing, PointerError

__all__ = ["FetchedDelivery", "Fetching", "PayloadStore", "acked_pointers", "delete_acked", "fetch"]


class PayloadStore(Protocol):
    """The S3 calls of a consumer's large payloads (`sqsbatch._shell.payload_store`)."""

    @property
    def keep(self) -> bool:
        """An acked message's object stays in S3."""
        ...

    def get(self, bucket: str, key: str) -> bytes:
        """The object's bytes; `PayloadMissing` when it is gone, `PayloadError` otherwise."""
        ...

    def delete(self, objects: Sequence[tuple[str, str]]) -> list[str]:
        """Delete (bucket, key) pairs; one line per object S3 refused to delete."""
        ...


class FetchedDelivery(_Delivery):
    """A received pointer with its payload: reads as the message the producer sent, while its
    decoding's `raw_body` and `raw_attributes` (what a re-send copies) stay the pointer's."""

    __slots__ = ("inner", "payload", "pointer")

    def __init__(self, inner: _Delivery, payload: str, pointer: Pointer) -> None:
        decoded = inner.decoded
        attributes = {k: v for k, v in decoded.attributes.items() if k != pointer.attribute}
        body = decode_body(payload, decoded.envelope.content_type)
        made = replace(decoded, body=body, attributes=attributes)
        super().__init__(made, inner.receipt_handle, inner.received_at, inner.hidden_until)
        self.at_ceiling = inner.at_ceiling
        self.inner = inner
        self.payload = payload
        self.pointer = pointer

    @property
    def text(self) -> str:
        """The payload (an SNS or EventBridge envelope is unwrapped from it, not the pointer)."""
        return self.payload

    @property
    def item_identifier(self) -> str:
        """A Lambda record's `messageId` (what `batchItemFailures` names)."""
        return str(self.inner.item_identifier)  # type: ignore[attr-defined]


@dataclass
class Fetching:
    """What step 2 concluded."""

    live: list[_Delivery]
    doomed: list[Doomed] = field(default_factory=list)
    unread: list[_Delivery] = field(default_factory=list)
    """Left for SQS to deliver again (S3 did not answer, or held behind one of its group)."""
    counts: dict[str, int] = field(default_factory=dict)
    lines: list[Line] = field(default_factory=list)


def fetch(
    deliveries: Sequence[_Delivery],
    store: PayloadStore,
    *,
    queue: str,
    wall_now: float,
    fifo: bool = False,
) -> Flow[Fetching]:
    """Each pointer's payload, one `GetObject` each (an `Outside` call), in order."""
    found = Fetching([])
    held: set[str] = set()  # FIFO groups with a message left unread
    for delivery in deliveries:
        group = delivery.group_id if fifo else None
        if group is not None and group in held:
            found.unread.append(delivery)
            continue
        decoded = delivery.decoded
        if not is_pointer(decoded.raw_attributes):
            found.live.append(delivery)
            continue
        outcome = yield from _fetch_one(delivery, store, queue=queue, wall_now=wall_now)
        if isinstance(outcome, _Delivery):
            found.live.append(outcome)
            found.counts["payloads_fetched"] = found.counts.get("payloads_fetched", 0) + 1
        elif isinstance(outcome, Doomed):
            found.doomed.append(outcome)
        else:
            found.unread.append(delivery)
            found.lines.append((logging.WARNING, outcome))
            if group is not None:
                held.add(group)
    if found.unread:
        found.counts["payloads_unread"] = len(found.unread)
    return found


def _fetch_one(
    delivery: _Delivery, store: PayloadStore, *, queue: str, wall_now: float
) -> Flow[_Delivery | Doomed | str]:
    """The delivery with its payload; or why it is dead-lettered; or a line: left for SQS."""
    decoded = delivery.decoded
    died = resting_death(delivery.envelope, queue)
    try:
        pointer = parse_pointer(decoded.raw_body, decoded.raw_attributes)
    except PointerError as exc:
        if died is not None and died.reason == INVALID_BODY:
            return delivery  # it died of that already: its handler reads it as it came
        return Doomed(delivery, INVALID_BODY, ErrorInfo("PointerError", str(exc), wall_now))
    try:
        data = yield Outside(_getter(store, pointer))
    except PayloadMissing as exc:
        if died is not None and died.reason == PAYLOAD_MISSING:
            return delivery
        return Doomed(delivery, PAYLOAD_MISSING, ErrorInfo("PayloadMissing", str(exc), wall_now))
    except PayloadError as exc:
        return f"{queue}: message {delivery.id} left for SQS to deliver again: {exc}"
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        why = f"payload s3://{pointer.bucket}/{pointer.key} is not UTF-8 text"
        return Doomed(delivery, INVALID_BODY, ErrorInfo("PayloadError", why, wall_now))
    return FetchedDelivery(delivery, text, pointer)


def _getter(store: PayloadStore, pointer: Pointer) -> Callable[[], Any]:
    return lambda: store.get(pointer.bucket, pointer.key)


# -- after the settle ------------------------------------------------------------------------------


def acked_pointers(
    batch: MessageBatch, kinds: Sequence[ActionKind], settled: Settled
) -> list[Pointer]:
    """The pointers of the batch's acked messages whose delete SQS accepted (Lambda: those it
    deletes itself, left out of `batchItemFailures`): never a retried, dead-lettered or
    re-sent one's, nor one whose delete SQS refused (it may come back)."""
    deliveries = deliveries_of(batch)
    if not isinstance(deliveries, list):  # a Lambda event's lazy records: none was fetched
        return []
    skipped = set(settled.listed) | settled.undeleted
    pointers = []
    for index, delivery in enumerate(deliveries):
        acked = kinds[index] is ActionKind.DELETE and index not in skipped
        if acked and isinstance(delivery, FetchedDelivery):
            pointers.append(delivery.pointer)
    return pointers


def delete_acked(
    settled: Settled,
    batch: MessageBatch,
    kinds: Sequence[ActionKind],
    store: PayloadStore | None,
) -> Flow[Settled]:
    """After `batch` was settled (`settled`), its acked messages' objects deleted (one `Outside`
    call: `DeleteObjects` per bucket); a refusal or failure is a line in `settled` (the object
    stays: an S3 lifecycle rule removes it), never an error of the settle. No call at all when
    no acked message had its payload in S3, or the store keeps them."""
    if store is None or store.keep:
        return settled
    pointers = acked_pointers(batch, kinds, settled)
    if not pointers:
        return settled
    objects = [(pointer.bucket, pointer.key) for pointer in pointers]
    try:
        refused: list[str] = yield Outside(lambda: store.delete(objects))
        deleted = len(objects) - len(refused)
    except PayloadError as exc:
        refused, deleted = [str(exc)], 0
    settled.counts["payloads_deleted"] = deleted
    if refused:
        text = f"payloads of acked messages left in S3: {'; '.join(refused[:5])}"
        settled.lines.append((logging.WARNING, text))
    return settled
