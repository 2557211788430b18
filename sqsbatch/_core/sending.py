"""A send, planned: every request checked and encoded into entries before any call, so that a
refused batch costs no request. No I/O, no clock: the producers (`sqsbatch._shell.producer_base`)
pass the wall time and the sender's trace context in.

Delay precedence: per-message > batch-level > the producer's `delivery_delay` > the queue's
`DelaySeconds`; an explicit 0 overrides every default. `ttl_seconds` (a deadline: past it the
consumer dead-letters the message as `expired`) follows the same precedence, without a queue
default. Delays past SQS's 900 s travel in hops.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

from sqsbatch._core.attributes import SendAttribute, check_unicode, encode_attributes
from sqsbatch._core.bodies import encode_body
from sqsbatch._core.calls import BatchRun, Entry
from sqsbatch._core.entries import Outbound, hop_delay, send_entry
from sqsbatch._core.envelope import ContentType, Envelope
from sqsbatch._core.message import check_delay
from sqsbatch._core.payloads import Offload, Upload, offload
from sqsbatch._core.shapes import is_fifo, queue_name
from sqsbatch.config import MAX_TTL_SECONDS
from sqsbatch.errors import FifoError, MessageError, SendError
from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = [
    "MAX_SEND_BATCH",
    "MessageSendRequest",
    "SendPlan",
    "as_request",
    "check_idempotency_key",
    "check_ttl",
    "content_dedup_query",
    "has_content_dedup",
]

MAX_SEND_BATCH = 100
MAX_IDEMPOTENCY_KEY = 256
T = TypeVar("T")


@dataclass(frozen=True)
class MessageSendRequest:
    """One message for `send_batch`. Fields left as None fall back to the batch's defaults."""

    body: Any
    delay_seconds: int | None = None
    content_type: ContentType | None = None
    attributes: Mapping[str, SendAttribute] | None = None
    group_id: str | None = None
    deduplication_id: str | None = None
    ttl_seconds: float | None = None
    """A deadline, seconds from the send (1..1209600): past it the consumer dead-letters the
    message with reason `expired` instead of handling it."""
    idempotency_key: str | None = None
    """What makes two sends one piece of work for an idempotency guard (1..256 characters);
    None: the message's own id (`message.idempotency_key`)."""


_REQUEST_FIELDS = frozenset(f.name for f in fields(MessageSendRequest))


def as_request(item: MessageSendRequest | Mapping[str, Any]) -> MessageSendRequest:
    """A `MessageSendRequest` from itself or from a mapping with a `body` key."""
    if isinstance(item, MessageSendRequest):
        return item
    if not isinstance(item, Mapping) or "body" not in item:
        raise MessageError(f"send_batch items need a body: got {item!r:.80}")
    unknown = sorted(set(item) - _REQUEST_FIELDS)
    if unknown:
        raise MessageError(f"unknown send field {unknown[0]!r} (known: {sorted(_REQUEST_FIELDS)})")
    return MessageSendRequest(**item)


class SendPlan:
    """Checked, encoded entries for one `send`/`send_batch`, and the ids they got.

    Every check runs here, before any call: a refused batch costs no request.
    """

    def __init__(
        self,
        queue: str,
        requests: Iterable[MessageSendRequest | Mapping[str, Any]],
        *,
        batch_delay: int | None,
        default_delay: int | None,
        wall_now: float,
        batch_ttl: float | None = None,
        default_ttl: float | None = None,
        trace: tuple[str | None, str | None] = (None, None),
        limits: SqsLimits = SQS_LIMITS,
        large: tuple[Offload, Callable[[], str]] | None = None,
    ) -> None:
        """`large`: where payloads past a threshold go (`Offload`) and the new S3 key's maker;
        the payloads to put before the send are then `uploads`."""
        items = list(requests)
        if not items:
            raise MessageError("send_batch needs at least one message")
        if len(items) > MAX_SEND_BATCH:
            raise MessageError(
                f"send_batch takes at most {MAX_SEND_BATCH} messages, got {len(items)}"
            )
        checked = [as_request(item) for item in items]
        batch_delay = check_delay("delay_seconds", batch_delay)
        batch_ttl = check_ttl("ttl_seconds", batch_ttl)
        fifo = is_fifo(queue)
        self.size = len(checked)
        self.needs_content_dedup = fifo and any(r.deduplication_id is None for r in checked)
        self._entries: list[Entry] = []
        self.uploads: list[Upload] = []
        traceparent, tracestate = trace  # the sender's span, for the consumer's link
        for index, request in enumerate(checked):
            own = check_delay("delay_seconds", request.delay_seconds)
            delay = _first_given(own, batch_delay, default_delay)
            body, content_type = encode_body(request.body, request.content_type)
            envelope = Envelope(
                content_type=content_type,
                traceparent=traceparent,
                tracestate=tracestate,
                idempotency_key=check_idempotency_key(request.idempotency_key),
            )
            ttl = _first_given(
                check_ttl("ttl_seconds", request.ttl_seconds), batch_ttl, default_ttl
            )
            if ttl is not None:
                envelope = replace(envelope, expires_at=wall_now + ttl)
            if delay is not None:
                delay, envelope = hop_delay(
                    delay, wall_now=wall_now, envelope=envelope, limits=limits
                )
            outbound = Outbound(
                body=body,
                envelope=envelope,
                attributes=encode_attributes(request.attributes, limits),
                delay_seconds=delay,
                group_id=request.group_id,
                deduplication_id=request.deduplication_id,
            )
            if large is not None:
                outbound, upload = offload(index, outbound, *large)
                self.uploads += [upload] if upload else []
            self._entries.append(send_entry(str(index), queue, outbound, fifo=fifo, limits=limits))

    def entries(self, queue_url: str, *, content_dedup: bool) -> list[Entry]:
        """The entries for the queue at `queue_url` (FIFO: whose deduplication mode is known)."""
        if self.needs_content_dedup and not content_dedup:
            raise FifoError(
                f"{queue_name(queue_url)} has no content-based deduplication: "
                "pass deduplication_id="
            )
        return [replace(entry, queue_url=queue_url) for entry in self._entries]

    def ids(self, run: BatchRun) -> list[str]:
        """The message ids, in order; `SendError` naming what went out when some did not."""
        sent = {result.key: str(result.value["MessageId"]) for result in run.ok()}
        if len(sent) == self.size:
            return [sent[str(i)] for i in range(self.size)]
        failed = {
            f"message #{result.key}": f"{result.code}: {result.message or ''}".rstrip(": ")
            for result in run.failed()
            if result.key not in sent
        }
        raise SendError([sent[k] for k in sorted(sent, key=int)], failed)

    def orphans(self, run: BatchRun | None) -> list[Upload]:
        """The uploads whose pointer SQS did not accept (`run` None: the send raised, and what it
        did is unknown): their objects stay in S3, unreferenced unless the pointer went out."""
        sent = {result.key for result in run.ok()} if run is not None else set()
        return [upload for upload in self.uploads if str(upload.index) not in sent]


def _first_given(*values: T | None) -> T | None:
    return next((value for value in values if value is not None), None)


def check_idempotency_key(value: object) -> str | None:
    """An idempotency key: 1..256 characters of text SQS carries, or None for "not given"."""
    if value is None:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_IDEMPOTENCY_KEY:
        shown = f"{len(value)} characters" if isinstance(value, str) else type(value).__name__
        raise MessageError(
            f"idempotency_key is invalid ({shown}): must be a str of 1..{MAX_IDEMPOTENCY_KEY} "
            "characters"
        )
    check_unicode(value, "idempotency_key")
    return value


def check_ttl(name: str, value: object) -> float | None:
    """A deadline in seconds, 1..1209600 (SQS's longest retention), or None for "not given"."""
    if value is None:
        return None
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and 1 <= value <= MAX_TTL_SECONDS:  # type: ignore[operator]  # NaN: False
        return float(value)  # type: ignore[arg-type]
    raise MessageError(f"{name}={value!r} is invalid: must be seconds 1..{MAX_TTL_SECONDS}")


def content_dedup_query(url: str) -> dict[str, Any]:
    """`GetQueueAttributes` parameters that tell whether a FIFO queue dedups by content."""
    return {"QueueUrl": url, "AttributeNames": ["ContentBasedDeduplication"]}


def has_content_dedup(attributes: Mapping[str, str]) -> bool:
    return attributes.get("ContentBasedDeduplication") == "true"
