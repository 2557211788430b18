"""Large payloads in S3, in the format of AWS's extended client libraries. Pure: no I/O.

Matched against `amazon-sqs-extended-client` 1.0.1 (PyPI, `sqs_extended_client/client.py`) and
the Java `payloadoffloading` library it follows:

- an offloaded message's body is the JSON array `[class, {"s3BucketName": b, "s3Key": k}]` (Java's
  Jackson "default typing" as a wrapper array: the class is the writer's Java class name). sqsbatch
  writes `software.amazon.payloadoffloading.PayloadS3Pointer` (payloadoffloading 2.x, the Python
  client) with `json.dumps`'s default separators, as the Python client does (Jackson writes none:
  both parse alike); it reads any class named `...S3Pointer`: also
  `com.amazonaws.payloadoffloading.PayloadS3Pointer` (payloadoffloading 1.x) and
  `com.amazon.sqs.javamessaging.MessageS3Pointer` (the first Java clients). The Python client
  checks no class at all;
- it carries the attribute `ExtendedPayloadSize` (older clients, and Java's by default:
  `SQSLargePayloadSize`), `{"DataType": "Number", "StringValue": str(bytes in S3)}`; no other
  attribute is written; a message is a pointer when either attribute is present;
- the S3 object is the body's UTF-8 bytes, under a key that is a uuid4 string (made by the
  shell: the core has no randomness);
- a message goes to S3 when its size (body + attributes, as SQS counts it) is above the
  threshold (262144 by default; exactly at it stays in SQS), or always when asked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from sqsbatch._core.attributes import ATTRIBUTE as META
from sqsbatch._core.attributes import AttributeValue, payload_size
from sqsbatch._core.entries import Outbound
from sqsbatch.errors import ConfigError, MessageError, PointerError
from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = [
    "DEFAULT_THRESHOLD",
    "LEGACY_POINTER_CLASS",
    "LEGACY_SIZE_ATTRIBUTE",
    "POINTER_CLASS",
    "SIZE_ATTRIBUTE",
    "Offload",
    "Pointer",
    "Upload",
    "check_threshold",
    "is_pointer",
    "offload",
    "parse_pointer",
    "pointer_body",
    "size_attribute",
]

SIZE_ATTRIBUTE = "ExtendedPayloadSize"
LEGACY_SIZE_ATTRIBUTE = "SQSLargePayloadSize"
POINTER_CLASS = "software.amazon.payloadoffloading.PayloadS3Pointer"
LEGACY_POINTER_CLASS = "com.amazon.sqs.javamessaging.MessageS3Pointer"
DEFAULT_THRESHOLD = 262_144
"""The extended clients' default: 256 KiB, SQS's limit until 2025."""
_RESERVED = (SIZE_ATTRIBUTE, LEGACY_SIZE_ATTRIBUTE)


@dataclass(frozen=True)
class Pointer:
    """Where a received message's payload is, and the message as SQS carried it (`body`, the
    size attribute's name and value), so that a re-send copies the pointer, not the payload."""

    bucket: str
    key: str
    body: str
    attribute: str
    value: AttributeValue

    def attributes(self) -> dict[str, AttributeValue]:
        """The size attribute, as received: what a copy of the pointer carries."""
        return {self.attribute: self.value}


@dataclass(frozen=True)
class Offload:
    """A producer's choice: which messages go to S3, and where."""

    bucket: str
    threshold: int = DEFAULT_THRESHOLD
    always: bool = False

    def wanted(self, size: int) -> bool:
        """Offload a message of `size` bytes (body + attributes)? Above the threshold, or all."""
        return self.always or size > self.threshold


@dataclass(frozen=True)
class Upload:
    """A payload to put in S3 before its pointer is sent; `index` is its message's in the send."""

    index: int
    bucket: str
    key: str
    data: bytes


def check_threshold(threshold: object, limits: SqsLimits = SQS_LIMITS) -> int:
    """A threshold in bytes, 1..SQS's message limit, or a one-line `ConfigError`."""
    number = isinstance(threshold, int) and not isinstance(threshold, bool)
    if number and 1 <= threshold <= limits.max_payload_bytes:  # type: ignore[operator]
        return threshold  # type: ignore[return-value]
    raise ConfigError(
        f"threshold={threshold!r} is invalid: bytes 1..{limits.max_payload_bytes} (SQS's limit)"
    )


def is_pointer(attributes: Mapping[str, Any] | None) -> bool:
    """Whether a received message's attributes mark it as a payload in S3."""
    return bool(attributes) and any(name in attributes for name in _RESERVED)  # type: ignore[operator]


def parse_pointer(body: str, attributes: Mapping[str, AttributeValue]) -> Pointer:
    """The pointer of a message `is_pointer` accepted; `PointerError` in one line if malformed."""
    attribute = SIZE_ATTRIBUTE if SIZE_ATTRIBUTE in attributes else LEGACY_SIZE_ATTRIBUTE
    shown = f"{body!r:.80}"
    try:
        parsed = json.loads(body)
    except (ValueError, TypeError):
        raise PointerError(f"{attribute} is set but the body is not JSON: {shown}") from None
    if not (isinstance(parsed, list) and len(parsed) == 2 and isinstance(parsed[1], dict)):
        raise PointerError(
            f"{attribute} is set but the body is not [class, {{s3BucketName, s3Key}}]: {shown}"
        )
    kind, where = parsed
    if not isinstance(kind, str) or not kind.endswith("S3Pointer"):
        raise PointerError(f"{attribute} is set but the pointer's class is {kind!r:.80}")
    bucket, key = where.get("s3BucketName"), where.get("s3Key")
    for name, value in (("s3BucketName", bucket), ("s3Key", key)):
        if not isinstance(value, str) or not value:
            raise PointerError(f"{attribute} is set but the pointer's {name} is {value!r:.80}")
    return Pointer(bucket, key, body, attribute, dict(attributes[attribute]))  # type: ignore[arg-type]


def pointer_body(bucket: str, key: str, kind: str = POINTER_CLASS) -> str:
    """The body of an offloaded message, byte for byte as the Python extended client writes it."""
    return json.dumps([kind, {"s3BucketName": bucket, "s3Key": key}])


def size_attribute(size: int) -> AttributeValue:
    """`ExtendedPayloadSize`'s value for `size` bytes in S3, as the extended client writes it."""
    return {"DataType": "Number", "StringValue": str(size)}


def offload(
    index: int, message: Outbound, offload: Offload, new_key: Callable[[], str]
) -> tuple[Outbound, Upload | None]:
    """The message to send and its upload: a pointer and its payload when `offload` wants it
    (size counted with sqsbatch's envelope attribute, as SQS will count it), else as it was."""
    reserved = [name for name in _RESERVED if name in message.attributes]
    if reserved:
        raise MessageError(
            f"message attribute {reserved[0]!r} is reserved for payloads in S3 (S3Payloads)"
        )
    envelope = {META: message.envelope.to_attribute()}
    if not offload.wanted(payload_size(message.body, {**message.attributes, **envelope})):
        return message, None
    data = message.body.encode("utf-8")
    key = new_key()
    attributes = {**message.attributes, SIZE_ATTRIBUTE: size_attribute(len(data))}
    pointer = replace(message, body=pointer_body(offload.bucket, key), attributes=attributes)
    return pointer, Upload(index, offload.bucket, key, data)
