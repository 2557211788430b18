"""Property tests: the `sqsbatch` attribute decoder and message attribute values, fuzzed."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from sqsbatch._core.envelope import ATTRIBUTE, Envelope, decode, encode_attributes
from sqsbatch._core.ledger import Ledger
from sqsbatch._core.receiving import ReceivedDelivery
from sqsbatch.errors import MessageError
from tests.support.fuzzing import FUZZ, values

# Envelopes as sqsbatch writes them, each field possibly of the wrong type or out of range.
FIELDS = ("id", "ts", "ct", "a", "rd", "q", "err", "due", "exp", "dc", "dh", "tp", "tst")
death = st.fixed_dictionaries(
    {"r": values, "q": values, "a": values, "t": values},
    optional={"et": values, "em": values},
)
envelopes = st.fixed_dictionaries(
    {"v": st.sampled_from([1, 1, 1, 2, "1", None])},
    optional={
        field: values
        | st.floats(allow_nan=True, allow_infinity=True)
        | st.fixed_dictionaries({"type": values, "message": values, "at": values})
        | st.lists(death, max_size=12)
        for field in FIELDS
    },
)


def as_json(data: Any) -> str:
    return json.dumps(data, default=repr)


@FUZZ
@given(st.text() | envelopes.map(as_json))
@example('{"v":1,"a":1e400}')  # an attempt count int() cannot take (OverflowError)
@example('{"v":1,"ts":1e300}')  # a timestamp no datetime holds
@example('{"v":1,"due":NaN}')
@example('{"v":1,"dh":[{"r":"x","q":"q","a":1,"t":1e400}]}')  # a death at no datetime
@example('{"v":1,"exp":-1}')
@example("[" * 2000)  # nesting deep enough for RecursionError in json
def test_any_attribute_text_reads_as_an_envelope_or_as_foreign(text: str) -> None:
    envelope = Envelope.from_attribute(text)
    assert envelope is None or isinstance(envelope, Envelope)
    # And decoding a message that carries it never raises either
    message = decode(
        {
            "MessageId": "m",
            "ReceiptHandle": "r",
            "Body": text,
            "Attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000"},
            "MessageAttributes": {ATTRIBUTE: {"DataType": "String", "StringValue": text}},
        }
    )
    assert (message.id, message.timestamp, message.attempts) is not None


boto3_shapes = st.dictionaries(
    st.sampled_from(["DataType", "StringValue", "BinaryValue", "StringListValues", "other"]),
    values | st.sampled_from(["String", "Number", "Binary", "Number.int", "String.x", "1", "x"]),
    max_size=3,
)


@FUZZ
@given(
    st.none()
    | st.dictionaries(
        st.text(max_size=12) | st.integers() | st.none(),
        values | boto3_shapes,
        max_size=10,
    )
)
@example({1: "x"})  # a name that is not a string
@example({"n": {"DataType": "Number", "StringValue": "1e999"}})
def test_any_attribute_values_encode_or_raise_one_message_error(attributes: Any) -> None:
    try:
        encoded = encode_attributes(attributes)
    except MessageError as exc:
        assert "\n" not in str(exc)
    else:
        for value in encoded.values():
            assert isinstance(value["DataType"], str)


@FUZZ
@given(
    st.text() | envelopes.map(as_json),
    st.sampled_from(["{}", '{"n": 1}', "text", "aGVsbG8="]),
    st.sampled_from([None, "g1"]),
    st.booleans(),
    st.booleans(),
)
@example('{"v":1,"ct":"json","id":"x","a":2}', '{"n": 1}', None, True, True)
@example('{"v":1,"ct":"bytes"}', "aGVsbG8=", "g1", True, False)
@example("", "text", None, False, False)
def test_a_received_delivery_reads_as_the_decoded_message(
    text: str, body: str, group: str | None, ours: bool, theirs: bool
) -> None:
    # Given a received message, with sqsbatch's attribute (any text) or without it, with an
    # attribute of its sender's or not (then SQS's answer has no MessageAttributes at all)
    attributes = {"ApproximateReceiveCount": "2", "SentTimestamp": "1700000000000"}
    if group is not None:
        attributes["MessageGroupId"] = group
    user = {"colour": {"DataType": "String", "StringValue": "red"}} if theirs else {}
    if ours:
        user[ATTRIBUTE] = {"DataType": "String", "StringValue": text}
    raw = {"MessageId": "m", "ReceiptHandle": "r", "Body": body, "Attributes": attributes}
    if user:
        raw["MessageAttributes"] = user
    # When the poller reads it lazily
    delivery = ReceivedDelivery(raw, 1.0, 31.0)
    decoded = decode(raw)
    # Then every field reads as the eager decoding, before and after the full decoding is made
    for _ in range(2):
        assert delivery.body == decoded.body
        assert delivery.id == decoded.id
        assert delivery.timestamp == decoded.timestamp
        assert delivery.attempts == decoded.attempts
        assert delivery.group_id == decoded.group_id
        assert delivery.due_at == decoded.envelope.due_at
        assert delivery.expires_at == decoded.envelope.expires_at
        assert delivery.deaths == decoded.envelope.deaths
        assert delivery.decoded == decoded
        assert delivery.attributes == decoded.attributes
        # and the handler's message reads the same body, held or decoded on first read
        message = delivery.message(Ledger(1), 0)
        assert message.body == decoded.body and message.id == decoded.id
    # And a validated body is what both read afterwards, the message too
    delivery.validated({"valid": True})
    assert delivery.body == delivery.decoded.body == {"valid": True}
    assert delivery.message(Ledger(1), 0).body == {"valid": True}
    # Also when it is validated before its full decoding is made
    fresh = ReceivedDelivery(raw, 1.0, 31.0)
    fresh.validated({"valid": True})
    assert fresh.decoded.body == fresh.body == {"valid": True}
    assert fresh.decoded.raw_body == body
