"""The one `sqsbatch` message attribute that carries the library's metadata (bodies themselves
are `sqsbatch._core.bodies`).

A message keeps SQS's `MessageId` and `SentTimestamp` as its id and timestamp until sqsbatch
re-sends it (to a DLQ, back from one, or in delay hops); a re-sent copy carries them in the
attribute so that `message.id` and `message.timestamp` never change. `attempts` is the carried
base (failed deliveries before this copy) plus SQS's `ApproximateReceiveCount`.

The user's own message attributes are `sqsbatch._core.attributes` (re-exported here). Everything
here is pure: no I/O, no clock (times come in as arguments).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqsbatch._core.attributes import (
    ATTRIBUTE,
    AttributeValue,
    SendAttribute,
    UserAttribute,
    encode_attributes,
    payload_size,
    user_value,
)
from sqsbatch._core.bodies import CONTENT_TYPES, ContentType, decode_body
from sqsbatch._core.trace_headers import xray_traceparent
from sqsbatch.errors import MessageError

__all__ = [
    "ATTRIBUTE",
    "FOREIGN",
    "MAX_DEATHS",
    "MAX_REASON_CHARS",
    "MOVED_BY_SQS",
    "MOVED_BY_SQS_TEXT",
    "PAYLOAD_MISSING",
    "AttributeValue",
    "ContentType",
    "Death",
    "DecodedMessage",
    "Envelope",
    "ErrorInfo",
    "SendAttribute",
    "carry",
    "check_reason",
    "death_reason",
    "decode",
    "encode_attributes",
    "payload_size",
    "read_envelope",
]

T = TypeVar("T")
VERSION = 1
MAX_ERROR_CHARS = 1024
MAX_REASON_CHARS = 1024
"""The longest reason `dead_letter(reason)` takes."""
MAX_DEATHS = 10
"""How many dead-letterings a message's history keeps (the latest ones)."""
RETRIES_EXHAUSTED = "retries_exhausted"
EXPIRED = "expired"
INVALID_BODY = "invalid_body"
PAYLOAD_MISSING = "payload_missing"
"""A large payload's S3 object is gone (`sqsbatch._core.fetching`)."""
MOVED_BY_SQS = "moved_by_sqs"
"""The reason of a message on a DLQ that SQS's RedrivePolicy moved there (no sqsbatch entry:
a consumer crashed, or a consumer that is not sqsbatch gave up)."""
MOVED_BY_SQS_TEXT = "moved by SQS (maxReceiveCount)"
"""How `MOVED_BY_SQS` is shown."""


@dataclass(frozen=True)
class ErrorInfo:
    """Why a message was dead-lettered."""

    type: str
    message: str
    at: float
    """Wall-clock epoch seconds of the failure."""


@dataclass(frozen=True)
class Death:
    """One dead-lettering in a message's history (like an entry of RabbitMQ's `x-death`)."""

    reason: str
    """`retries_exhausted`, `expired`, `invalid_body`, or the text given to `dead_letter()`."""
    queue: str
    """The queue it died on."""
    attempts: int
    """The failed deliveries it had on that queue (an expired or invalid body costs none)."""
    at: float
    """Wall-clock epoch seconds of the dead-lettering."""
    error_type: str | None = None
    error_message: str | None = None
    """The error when a handler raised or timed out (or why the body was invalid)."""

    @property
    def when(self) -> datetime:
        """`at` as an aware UTC datetime."""
        return datetime.fromtimestamp(self.at, UTC)

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"r": self.reason, "q": self.queue, "a": self.attempts}
        data["t"] = self.at
        if self.error_type is not None:
            data["et"] = self.error_type
            data["em"] = self.error_message or ""
        return data

    @classmethod
    def from_data(cls, data: Any) -> Death:
        if not isinstance(data, dict):
            raise ValueError("a death entry is an object")
        kind = data.get("et")
        return cls(
            reason=str(data["r"]),
            queue=str(data["q"]),
            attempts=int(data["a"]),
            at=_seconds(data["t"]),
            error_type=None if kind is None else str(kind),
            error_message=None if kind is None else str(data.get("em", "")),
        )


def check_reason(value: object) -> str:
    """A dead-letter reason: a non-empty str of at most 1,024 characters; a clear error else."""
    if not isinstance(value, str):
        raise MessageError(f"reason={value!r} is invalid: must be a str of 1..{MAX_REASON_CHARS}")
    if not value.strip() or len(value) > MAX_REASON_CHARS:
        raise MessageError(
            f"reason of {len(value)} characters is invalid: must be 1..{MAX_REASON_CHARS} "
            "characters, not blank"
        )
    return value


@dataclass(frozen=True)
class Envelope:
    """What sqsbatch knows about a message beyond its body. All times are epoch seconds."""

    id: str | None = None
    timestamp: float | None = None
    content_type: ContentType = "json"
    base_attempts: int = 0
    redrives: int = 0
    source_queue: str | None = None
    error: ErrorInfo | None = None
    due_at: float | None = None
    deaths: tuple[Death, ...] = ()
    """The dead-letter history, oldest first, at most `MAX_DEATHS` entries."""
    expires_at: float | None = None
    """The producer's deadline (sent time + `ttl_seconds`)."""
    dead_count: int = 0
    """How many times sqsbatch dead-lettered it in all (the history keeps the last 10)."""
    dead_count_at_redrive: int | None = None
    """`dead_count` when it was last redriven (None: never redriven, or by an older sqsbatch)."""
    idempotency_key: str | None = None
    """The producer's key for "the same piece of work" (`send(..., idempotency_key=)`); None:
    `message.id` is the key."""
    traceparent: str | None = None
    tracestate: str | None = None
    """The W3C trace context of the producer's span (`sqsbatch._shell.tracing`); kept by
    re-sends."""

    def to_attribute(self) -> AttributeValue:
        data: dict[str, Any] = {"v": VERSION, "ct": self.content_type}
        optional = {
            "id": self.id,
            "ts": self.timestamp,
            "a": self.base_attempts or None,
            "rd": self.redrives or None,
            "q": self.source_queue,
            "err": asdict(self.error) if self.error else None,
            "due": self.due_at,
            "dh": [death.to_data() for death in self.deaths] or None,
            "exp": self.expires_at,
            "dc": self.dead_count or None,
            "dcr": self.dead_count_at_redrive,
            "ik": self.idempotency_key,
            "tp": self.traceparent,
            "tst": self.tracestate,
        }
        data.update({key: value for key, value in optional.items() if value is not None})
        return {"DataType": "String", "StringValue": json.dumps(data, separators=(",", ":"))}

    @classmethod
    def from_attribute(cls, raw: str) -> Envelope | None:
        """The envelope in `raw`, or None when it is not one of ours (a foreign attribute)."""
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            return None
        if not isinstance(data, dict) or data.get("v") != VERSION:
            return None
        try:
            return cls._from_data(data)
        except (KeyError, TypeError, ValueError, OverflowError):
            return None  # corrupt: read as a foreign message rather than crash a consumer

    @classmethod
    def _from_data(cls, data: dict[str, Any]) -> Envelope:
        error = data.get("err")
        content_type = data.get("ct", "text")
        history = data.get("dh") or []
        if not isinstance(history, list):
            raise ValueError("dh is a list")
        deaths = tuple(Death.from_data(entry) for entry in history[-MAX_DEATHS:])
        return cls(
            id=_optional(str, data.get("id")),
            timestamp=_epoch(data.get("ts")),
            content_type=content_type if content_type in CONTENT_TYPES else "text",
            base_attempts=int(data.get("a", 0)),
            redrives=int(data.get("rd", 0)),
            source_queue=_optional(str, data.get("q")),
            error=ErrorInfo(str(error["type"]), str(error["message"]), _seconds(error["at"]))
            if isinstance(error, dict)
            else None,
            due_at=_epoch(data.get("due")),
            deaths=deaths,
            expires_at=_epoch(data.get("exp")),
            dead_count=int(data.get("dc", len(deaths))),
            dead_count_at_redrive=_optional(int, data.get("dcr")),
            idempotency_key=_text(data.get("ik")),
            traceparent=_text(data.get("tp")),
            tracestate=_text(data.get("tst")),
        )

    def died(self, death: Death) -> Envelope:
        """This envelope with `death` appended to its history (the last `MAX_DEATHS` kept)."""
        deaths = (*self.deaths, death)[-MAX_DEATHS:]
        return replace(self, deaths=deaths, dead_count=max(self.dead_count, len(self.deaths)) + 1)

    @property
    def died_since_redrive(self) -> bool:
        """Whether sqsbatch dead-lettered it since its last redrive (or ever, if never redriven).
        False for a message that SQS's RedrivePolicy moved after its last redrive."""
        if not self.deaths:
            return False
        since = self.dead_count_at_redrive
        if since is None:  # never redriven, or by a version that did not record it
            since = self.redrives
        return max(self.dead_count, len(self.deaths)) > since


def death_reason(envelope: Envelope) -> str:
    """Why a message on a dead-letter queue is there: its last death's reason, or
    `MOVED_BY_SQS` when sqsbatch did not put it there (no entry since its last redrive)."""
    if not envelope.died_since_redrive:
        return MOVED_BY_SQS
    return envelope.deaths[-1].reason


FOREIGN = Envelope(content_type="text")
"""The envelope of a message with no sqsbatch attribute: its body is text."""


@dataclass(frozen=True)
class DecodedMessage:
    """A received SQS message, decoded: the fields `Message` shows, plus what re-sends need."""

    id: str
    body: Any
    timestamp: datetime
    attempts: int
    attributes: dict[str, UserAttribute]
    envelope: Envelope
    raw_body: str
    raw_attributes: dict[str, AttributeValue] = field(repr=False)
    group_id: str | None = None
    trace_header: str | None = None
    """SQS's `AWSTraceHeader` system attribute (X-Ray), when the sender had one."""


def decode(raw: Mapping[str, Any], *, base_attempts_override: int | None = None) -> DecodedMessage:
    """Decode one message as boto3's `ReceiveMessage` returns it.

    Needs the system attributes `SentTimestamp` and `ApproximateReceiveCount` and the message
    attributes. A message with no sqsbatch attribute is foreign and reads as text.
    """
    attributes: dict[str, AttributeValue] = dict(raw.get("MessageAttributes") or {})
    system: Mapping[str, str] = raw.get("Attributes") or {}
    ours = attributes.pop(ATTRIBUTE, None)
    envelope = None
    if ours is not None and "StringValue" in ours:
        envelope = read_envelope(ours["StringValue"])
    if envelope is None:
        envelope = FOREIGN
        if ours is not None:  # someone else's attribute of the same name: keep it as theirs
            attributes[ATTRIBUTE] = ours
    receives = int(system.get("ApproximateReceiveCount", "1"))
    sent_ms = int(system.get("SentTimestamp", "0"))
    timestamp = envelope.timestamp if envelope.timestamp is not None else sent_ms / 1000
    body_text: str = raw.get("Body", "")
    return DecodedMessage(
        id=envelope.id or raw["MessageId"],
        body=decode_body(body_text, envelope.content_type),
        timestamp=datetime.fromtimestamp(timestamp, UTC),
        attempts=envelope.base_attempts + receives,
        attributes={name: user_value(value) for name, value in attributes.items()},
        envelope=envelope,
        raw_body=body_text,
        raw_attributes=attributes,
        group_id=system.get("MessageGroupId"),
        trace_header=system.get("AWSTraceHeader"),
    )


@functools.lru_cache(maxsize=1024)
def read_envelope(raw: str) -> Envelope | None:
    """`Envelope.from_attribute`, remembered: a producer's messages often carry the same text
    (`{"v":1,"ct":"json"}`), and an `Envelope` is immutable."""
    return Envelope.from_attribute(raw)


def carry(message: DecodedMessage) -> Envelope:
    """The envelope a re-sent copy of `message` carries: its id, timestamp and producer's trace
    context kept (a foreign message's X-Ray `AWSTraceHeader` becomes its `traceparent`: SQS
    sets that header only on what an X-Ray-traced producer sent, not on our copy)."""
    envelope = message.envelope
    traceparent = envelope.traceparent
    if traceparent is None and message.trace_header is not None:
        traceparent = xray_traceparent(message.trace_header)
    return replace(
        envelope, id=message.id, timestamp=message.timestamp.timestamp(), traceparent=traceparent
    )


def _optional(kind: type[T], value: object) -> T | None:
    return None if value is None else kind(value)  # type: ignore[call-arg]


def _text(value: object) -> str | None:
    """A str as it is; anything else (a corrupt trace context) as missing."""
    return value if isinstance(value, str) else None


_LAST_EPOCH = 253_402_300_799.0
"""The end of the year 9999: the last second a datetime holds."""


def _seconds(value: object) -> float:
    """Epoch seconds a datetime can hold, or ValueError (NaN, infinity, out of range)."""
    seconds = float(value)  # type: ignore[arg-type]
    if not 0 <= seconds <= _LAST_EPOCH:
        raise ValueError(f"{value!r} is not an epoch in seconds")
    return seconds


def _epoch(value: object) -> float | None:
    return None if value is None else _seconds(value)
