"""Bodies: what a sent value becomes on SQS (JSON by default, `str` as text, `bytes` as base64,
a pydantic model as its JSON), and what a received body becomes for the handler. Pure."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Literal

from pydantic import BaseModel

from sqsbatch._core.attributes import check_unicode
from sqsbatch.errors import MessageError

__all__ = ["CONTENT_TYPES", "ContentType", "decode_body", "encode_body"]

ContentType = Literal["json", "text", "bytes"]
CONTENT_TYPES: tuple[ContentType, ...] = ("json", "text", "bytes")


def encode_body(body: object, content_type: ContentType | None = None) -> tuple[str, ContentType]:
    """The SQS body for `body`: JSON by default, `str` as text, `bytes` as base64."""
    if body is None:
        raise MessageError("body is None: send a value, a str or bytes")
    body = _model_json(body, content_type)
    content_type = content_type or _content_type_of(body)
    if content_type not in CONTENT_TYPES:
        accepted = ", ".join(CONTENT_TYPES)
        raise MessageError(f"content_type={content_type!r} is invalid (accepted: {accepted})")
    if content_type == "bytes":
        if not isinstance(body, bytes | bytearray):
            raise MessageError(f"content_type='bytes' needs bytes, not {type(body).__name__}")
        return base64.b64encode(bytes(body)).decode("ascii"), content_type
    if content_type == "text":
        if not isinstance(body, str):
            raise MessageError(f"content_type='text' needs str, not {type(body).__name__}")
        text = body
    else:
        try:
            text = json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise MessageError(f"body is not JSON-serialisable: {exc}") from None
    if not text:
        raise MessageError("body is empty: SQS refuses empty messages")
    check_unicode(text, "body")
    return text, content_type


def _model_json(body: object, content_type: ContentType | None) -> object:
    """A pydantic model instance as its JSON value; any other body as it is."""
    if not isinstance(body, BaseModel):
        return body
    if content_type not in (None, "json"):
        raise MessageError(f"content_type={content_type!r}: a pydantic model is sent as json")
    return body.model_dump(mode="json")


def _content_type_of(body: object) -> ContentType:
    if isinstance(body, bytes | bytearray):
        return "bytes"
    return "text" if isinstance(body, str) else "json"


def decode_body(text: str, content_type: ContentType) -> Any:
    """A received body as its content type says: JSON or base64 that do not parse stay text."""
    if content_type == "json":
        try:
            return json.loads(text)
        except ValueError:
            return text
    if content_type == "bytes":
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            return text
    return text
