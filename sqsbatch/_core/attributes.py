"""A message's user attributes: checked and shaped for SQS on send, read back as values.

sqsbatch uses one attribute of its own (`ATTRIBUTE`, the envelope: `sqsbatch._core.envelope`), so a
message takes 9 of the user's. Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, TypedDict

from sqsbatch.errors import MessageError
from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = [
    "ATTRIBUTE",
    "AttributeValue",
    "SendAttribute",
    "UserAttribute",
    "check_unicode",
    "encode_attributes",
    "payload_size",
    "user_value",
]

ATTRIBUTE = "sqsbatch"
"""The message attribute that carries sqsbatch's envelope."""
UserAttribute = str | bytes | int | float
"""A message attribute's value as a consumer reads it."""
_DATA_TYPES = frozenset({"String", "Number", "Binary"})
_ATTRIBUTE_NAME = re.compile(r"^(?!\.)(?!.*\.\.)(?!.*\.$)[A-Za-z0-9_.-]{1,256}$")
_RESERVED_PREFIXES = ("aws.", "amazon.")


class AttributeValue(TypedDict, total=False):
    """One SQS message attribute, in the shape boto3 sends and receives."""

    DataType: str
    StringValue: str
    BinaryValue: bytes


SendAttribute = UserAttribute | AttributeValue
"""A message attribute as `send` takes it: a plain value, or boto3's own shape."""


def encode_attributes(
    attributes: Mapping[str, SendAttribute] | None, limits: SqsLimits = SQS_LIMITS
) -> dict[str, AttributeValue]:
    """The user's attributes in SQS's shape, checked: 9 at most (sqsbatch uses the 10th)."""
    if not attributes:
        return {}
    if len(attributes) > limits.max_attributes - 1:
        raise MessageError(
            f"{len(attributes)} message attributes given: at most {limits.max_attributes - 1} "
            f"(SQS allows {limits.max_attributes}, sqsbatch uses one)"
        )
    encoded: dict[str, AttributeValue] = {}
    for name, value in attributes.items():
        _check_name(name)
        if isinstance(value, Mapping):
            encoded[name] = _boto3_attribute(name, value)  # as copied from boto3 code
        elif isinstance(value, bool) or not isinstance(value, str | bytes | int | float):
            raise MessageError(
                f"message attribute {name!r} must be str, bytes, a number or boto3's "
                '{"DataType": ..., "StringValue": ...}'
            )
        elif isinstance(value, bytes):
            encoded[name] = {"DataType": "Binary", "BinaryValue": value}
        elif isinstance(value, str):
            encoded[name] = {"DataType": "String", "StringValue": value}
        else:
            encoded[name] = {"DataType": "Number", "StringValue": repr(value)}
    return encoded


def _check_name(name: object) -> None:
    if not isinstance(name, str):
        raise MessageError(f"message attribute name {name!r} is not a str")
    if name == ATTRIBUTE or name.lower().startswith(_RESERVED_PREFIXES):
        raise MessageError(f"message attribute name {name!r} is reserved")
    if not _ATTRIBUTE_NAME.match(name):
        raise MessageError(f"message attribute name {name!r} is invalid for SQS")


def _boto3_attribute(name: str, value: Mapping[str, Any]) -> AttributeValue:
    """An attribute already in boto3's shape (`{"DataType": "String", "StringValue": "1"}`),
    checked as SQS would check it."""
    data_type = value.get("DataType")
    unknown = sorted(set(value) - {"DataType", "StringValue", "BinaryValue"})
    if unknown:
        raise MessageError(f"message attribute {name!r} has unknown key {unknown[0]!r}")
    if not isinstance(data_type, str) or data_type.split(".", 1)[0] not in _DATA_TYPES:
        raise MessageError(
            f"message attribute {name!r} has DataType={data_type!r} "
            "(accepted: String, Number or Binary, optionally with a .suffix)"
        )
    key = "BinaryValue" if data_type.startswith("Binary") else "StringValue"
    kind = bytes if key == "BinaryValue" else str
    given = value.get(key)
    if not isinstance(given, kind) or set(value) != {"DataType", key}:
        raise MessageError(
            f"message attribute {name!r} of DataType {data_type} needs {key} "
            f"({kind.__name__}) and nothing else"
        )
    if data_type.startswith("Number") and not _is_number(given):
        raise MessageError(f"message attribute {name!r}: {given!r} is not a Number")
    return {"DataType": data_type, key: given}  # type: ignore[misc]


def _is_number(text: object) -> bool:
    try:
        return math.isfinite(float(str(text)))
    except ValueError:
        return False


def check_unicode(text: str, what: str) -> None:
    """A `str` that UTF-8 cannot encode (a lone surrogate, e.g. from a bad decode) is refused
    in one line naming `what` and where, before any call."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        raise MessageError(
            f"{what} has a lone surrogate {bad!r} at character {exc.start}: it is not Unicode "
            "text SQS can carry (decode the source with errors='replace', or send bytes)"
        ) from None


def payload_size(body: str, attributes: Mapping[str, AttributeValue]) -> int:
    """Bytes SQS counts against its size limit: body, attribute names, types and values."""
    size = len(body.encode("utf-8"))
    for name, value in attributes.items():
        try:
            size += len(name.encode()) + len(value.get("DataType", "").encode())
            size += len(value.get("StringValue", "").encode()) + len(value.get("BinaryValue", b""))
        except UnicodeEncodeError:
            raise MessageError(
                f"message attribute {name!r} has a lone surrogate: it is not Unicode text SQS "
                "can carry"
            ) from None
    return size


def user_value(value: AttributeValue) -> UserAttribute:
    """A received attribute's value: bytes for a Binary one, else its text."""
    if value.get("DataType", "").startswith("Binary"):
        return value.get("BinaryValue", b"")
    return value.get("StringValue", "")
