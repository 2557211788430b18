"""SNS and EventBridge envelopes: the inner message of a body that one of them wrapped. Pure.

With `envelope = "sns"`, a message's body is an SNS notification (a topic's subscription
without raw message delivery): a JSON object whose `Type` is `Notification` and whose `Message`
string is what the publisher sent. With `envelope = "eventbridge"` it is an EventBridge event
(a rule's SQS target): a JSON object whose `detail` is the event's payload. `unwrap` returns
the inner message (SNS's `Message` decoded as a JSON body is: its JSON value when it parses,
else the text itself; EventBridge's `detail` as it is) and the envelope's other fields, as a
read-only mapping. A body that is not the named envelope raises `EnvelopeError` with one line
saying why: screening dead-letters it with reason `invalid_body`
(`sqsbatch._core.screening`).

`wrap` is the reverse, for `sqsbatch.testing` and the tests: a body as SNS or EventBridge would
deliver it, shaped as AWS's documentation shows them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Literal, get_args

from sqsbatch.errors import MessageError

__all__ = ["ENVELOPES", "EnvelopeError", "EnvelopeKind", "Opened", "unwrap", "wrap"]

EnvelopeKind = Literal["sns", "eventbridge"]
ENVELOPES: tuple[EnvelopeKind, ...] = get_args(EnvelopeKind)
_NAMES: dict[str, str] = {"sns": "an SNS notification", "eventbridge": "an EventBridge event"}
_INNER: dict[str, str] = {"sns": "Message", "eventbridge": "detail"}
_REQUIRED: dict[str, tuple[str, ...]] = {
    "sns": ("Type", "MessageId", "TopicArn", "Message"),
    "eventbridge": ("detail-type", "source"),
}
"""The string fields without which a body is not the envelope (`detail` is any JSON value)."""


class EnvelopeError(ValueError):
    """A body that is not the named envelope; its text is one line saying why."""


@dataclass(frozen=True, slots=True)
class Opened:
    """An envelope opened: the inner message, and the envelope's other fields."""

    body: Any
    fields: Mapping[str, Any]


def unwrap(kind: EnvelopeKind, text: str) -> Opened:
    """The inner message of `text`, a body that `kind` wrapped; `EnvelopeError` when it is not
    one (not JSON, not an object, a field missing or of the wrong type, an SNS `Type` other than
    `Notification`)."""
    what = _NAMES[kind]
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise EnvelopeError(f"not {what}: the body is not JSON") from None
    if not isinstance(data, dict):
        raise EnvelopeError(f"not {what}: the body is JSON but not an object")
    for key in _REQUIRED[kind]:
        if not isinstance(data.get(key), str):
            found = "missing" if key not in data else f"not a string ({type(data[key]).__name__})"
            raise EnvelopeError(f"not {what}: {key} is {found}")
    inner = _INNER[kind]
    if kind == "sns":
        if data["Type"] != "Notification":
            raise EnvelopeError(f"not {what}: Type is {data['Type']!r}, not 'Notification'")
        body = _json_or_text(data["Message"])
    elif inner not in data:
        raise EnvelopeError(f"not {what}: detail is missing")
    else:
        body = data["detail"]
    fields = MappingProxyType({key: value for key, value in data.items() if key != inner})
    return Opened(body, fields)


def _json_or_text(text: str) -> Any:
    """SNS's `Message` as a JSON body is read (`bodies.decode_body`): its value when it parses,
    else the text (also when it nests past the parser's depth)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


_EXAMPLE_ARN = "arn:aws:sns:us-east-1:123456789012:sqsbatch-test"
_SNS: dict[str, Any] = {
    "Type": "Notification",
    "TopicArn": _EXAMPLE_ARN,
    "SignatureVersion": "1",
    "Signature": "EXAMPLE",
    "SigningCertURL": "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-EXAMPLE.pem",
    "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe"
    f"&SubscriptionArn={_EXAMPLE_ARN}:EXAMPLE",
}
_EVENTBRIDGE: dict[str, Any] = {
    "version": "0",
    "detail-type": "sqsbatch test",
    "source": "sqsbatch.testing",
    "account": "123456789012",
    "region": "us-east-1",
    "resources": [],
}


def wrap(
    kind: EnvelopeKind,
    body: object,
    *,
    message_id: str,
    sent_at: float,
    fields: Mapping[str, Any] | None = None,
) -> str:
    """`body` as `kind` delivers it to a queue: an SNS notification whose `Message` is `body`
    (a `str` as it is, any other value as its JSON text), or an EventBridge event whose `detail`
    is `body` (a JSON value). `message_id` and `sent_at` (epoch seconds) are the envelope's id
    and time; `fields` add to or replace the others. `MessageError` for a kind it does not know
    or a body it cannot carry."""
    if kind not in ENVELOPES:
        raise MessageError(f"envelope={kind!r} is invalid (accepted: 'sns' or 'eventbridge')")
    if isinstance(body, bytes | bytearray):
        raise MessageError(f"{_NAMES[kind]} carries text or a JSON value, not bytes")
    when = datetime.fromtimestamp(sent_at, UTC).isoformat(timespec="milliseconds")
    time = when.replace("+00:00", "Z")
    if kind == "sns":
        message = body if isinstance(body, str) else _json(body)
        data = _SNS | {"MessageId": message_id, "Timestamp": time, "Message": message}
    else:
        _json(body)  # checked: EventBridge's detail is JSON
        data = _EVENTBRIDGE | {"id": message_id, "time": time, "detail": body}
    return _json(data | dict(fields or {}))


def _json(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise MessageError(f"body is not JSON-serialisable: {exc}") from None
