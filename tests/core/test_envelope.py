"""Bodies and the one metadata attribute (SPEC 3)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from sqsbatch import MessageError
from sqsbatch._core.bodies import encode_body
from sqsbatch._core.envelope import ATTRIBUTE, Envelope, ErrorInfo, decode, encode_attributes


def received(
    body: str, envelope: Envelope | None, receives: int = 1, **attributes: Any
) -> dict[str, Any]:
    message_attributes = dict(attributes)
    if envelope is not None:
        message_attributes[ATTRIBUTE] = envelope.to_attribute()
    return {
        "MessageId": "sqs-id",
        "ReceiptHandle": "r",
        "Body": body,
        "MessageAttributes": message_attributes,
        "Attributes": {"SentTimestamp": "1700000000123", "ApproximateReceiveCount": str(receives)},
    }


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ({"a": [1, 2.5, None, "é"]}, "json"),
        ([1, 2], "json"),
        (7, "json"),
        ("plain text", "text"),
        (b"\x00\xffbin", "bytes"),
    ],
)
def test_round_trip_keeps_the_type(body: Any, content_type: str) -> None:
    text, kind = encode_body(body)
    assert kind == content_type
    decoded = decode(received(text, Envelope(content_type=kind)))
    assert decoded.body == body and type(decoded.body) is type(body)


def test_a_str_can_be_sent_as_json() -> None:
    text, kind = encode_body("x", "json")
    assert (text, kind) == ('"x"', "json")


@pytest.mark.parametrize(
    ("body", "content_type", "error"),
    [
        (None, None, "body is None"),
        (object(), None, "not JSON-serialisable"),
        (float("nan"), None, "not JSON-serialisable"),
        ("", None, "empty"),
        (b"x", "text", "needs str"),
        ("x", "bytes", "needs bytes"),
        ("x", "pickle", "content_type='pickle'"),
    ],
)
def test_refused_bodies(body: Any, content_type: Any, error: str) -> None:
    with pytest.raises(MessageError, match=error):
        encode_body(body, content_type)


def test_foreign_message_reads_as_text_with_sqs_identity() -> None:
    decoded = decode(
        received(
            '{"not": "parsed"}',
            None,
            receives=3,
            color={"DataType": "String", "StringValue": "red"},
        )
    )
    assert decoded.body == '{"not": "parsed"}'
    assert decoded.id == "sqs-id" and decoded.attempts == 3
    assert decoded.timestamp == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    assert decoded.attributes == {"color": "red"}


def test_carried_identity_and_attempts() -> None:
    envelope = Envelope(
        id="orig",
        timestamp=1.5,
        content_type="text",
        base_attempts=2,
        redrives=1,
        error=ErrorInfo("E", "m", 9.0),
    )
    decoded = decode(received("b", envelope, receives=2))
    assert (decoded.id, decoded.timestamp.timestamp(), decoded.attempts) == ("orig", 1.5, 4)
    assert decoded.envelope == envelope and decoded.attributes == {}


def test_one_attribute_only_and_nine_left_for_users() -> None:
    assert Envelope(id="x").to_attribute()["DataType"] == "String"
    nine = {f"a{i}": i for i in range(9)}
    assert len(encode_attributes(nine)) == 9
    with pytest.raises(MessageError, match="at most 9"):
        encode_attributes({**nine, "a9": 1})
    with pytest.raises(MessageError, match="reserved"):
        encode_attributes({ATTRIBUTE: "x"})
    with pytest.raises(MessageError, match="invalid for SQS"):
        encode_attributes({"bad name": "x"})
    assert encode_attributes({"n": 1.5, "b": b"x"}) == {
        "n": {"DataType": "Number", "StringValue": "1.5"},
        "b": {"DataType": "Binary", "BinaryValue": b"x"},
    }


@pytest.mark.parametrize(
    "raw",
    [
        '{"v":1,"ct":"json","a":"many"}',
        '{"v":1,"ct":"json","err":{"type":"E"}}',
        '{"v":1,"ct":"json","err":{"type":"E","message":"m","at":"soon"}}',
        '{"v":1,"ct":"json","ts":[1]}',
        "not json",
        '{"v":99}',
    ],
)
def test_a_corrupt_or_foreign_attribute_reads_as_a_foreign_message(raw: str) -> None:
    message = received("body", None, receives=2)
    message["MessageAttributes"][ATTRIBUTE] = {"DataType": "String", "StringValue": raw}
    decoded = decode(message)
    assert (decoded.body, decoded.id, decoded.attempts) == ("body", "sqs-id", 2)
    assert decoded.attributes == {ATTRIBUTE: raw}  # kept as the sender's, not dropped
