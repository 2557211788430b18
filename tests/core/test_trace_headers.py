"""Where a message's producer context travels: the `sqsbatch` attribute (W3C `traceparent` and
`tracestate`) and SQS's `AWSTraceHeader` (X-Ray's format), read without OpenTelemetry."""

from __future__ import annotations

import json

import pytest

from sqsbatch._core.envelope import ATTRIBUTE, Envelope, carry, decode
from sqsbatch._core.shapes import RECEIVE_SYSTEM_ATTRIBUTES, receive_params
from sqsbatch._core.trace_headers import xray_ids, xray_traceparent

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
            (0x5759E988BD862E3FE1BE46A994272793, 0x53995C3F42CD8AD8, True),
        ),
        (  # any order, spaces, other fields (Lineage), not sampled
            "Sampled=0; Lineage=a87bd80c:1|68fd508a:5 ;Parent=53995c3f42cd8ad8;"
            "Root=1-5759e988-bd862e3fe1be46a994272793",
            (0x5759E988BD862E3FE1BE46A994272793, 0x53995C3F42CD8AD8, False),
        ),
        (  # sampling left to the receiver: not sampled as far as the link says
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=?",
            (0x5759E988BD862E3FE1BE46A994272793, 0x53995C3F42CD8AD8, False),
        ),
        ("Root=1-5759e988-bd862e3fe1be46a994272793", None),  # no parent: no span to link to
        ("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=0000000000000000", None),
        ("Root=1-00000000-000000000000000000000000;Parent=53995c3f42cd8ad8", None),
        ("Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", None),  # version
        ("Root=1-5759e988-bd862e3fe1be46a99427279;Parent=53995c3f42cd8ad8", None),  # short
        ("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad", None),
        ("Root=1-5759e988-bd862e3fe1be46a99427279z;Parent=53995c3f42cd8ad8", None),  # not hex
        ("", None),
        ("garbage", None),
    ],
)
def test_an_x_ray_header_reads_as_w3c_ids(
    header: str, expected: tuple[int, int, bool] | None
) -> None:
    assert xray_ids(header) == expected


def test_the_receive_asks_sqs_for_the_x_ray_header() -> None:
    assert "AWSTraceHeader" in RECEIVE_SYSTEM_ATTRIBUTES
    params = receive_params("http://h/1/q", max_messages=1, wait_seconds=0, visibility_timeout=30)
    assert "AWSTraceHeader" in params["MessageSystemAttributeNames"]


def received(attribute: str | None, **system: str) -> dict[str, object]:
    raw: dict[str, object] = {
        "MessageId": "m",
        "ReceiptHandle": "r",
        "Body": '"hello"',
        "Attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000", **system},
    }
    if attribute is not None:
        raw["MessageAttributes"] = {ATTRIBUTE: {"DataType": "String", "StringValue": attribute}}
    return raw


def test_the_trace_context_round_trips_in_the_one_attribute() -> None:
    envelope = Envelope(traceparent=TRACEPARENT, tracestate="vendor=opaque")
    text = envelope.to_attribute()["StringValue"]
    assert json.loads(text) == {"v": 1, "ct": "json", "tp": TRACEPARENT, "tst": "vendor=opaque"}
    message = decode(received(text))
    assert (message.envelope.traceparent, message.envelope.tracestate) == (
        TRACEPARENT,
        "vendor=opaque",
    )
    assert message.body == "hello"


def test_without_a_trace_the_attribute_is_as_before_and_old_messages_read_as_ever() -> None:
    assert json.loads(Envelope().to_attribute()["StringValue"]) == {"v": 1, "ct": "json"}
    message = decode(received('{"v":1,"ct":"json","id":"kept"}'))
    assert (message.id, message.body) == ("kept", "hello")
    assert (message.envelope.traceparent, message.envelope.tracestate) == (None, None)


def test_a_trace_context_of_the_wrong_type_is_dropped_not_the_message() -> None:
    message = decode(received('{"v":1,"ct":"json","id":"kept","tp":7,"tst":["x"]}'))
    assert message.id == "kept"
    assert (message.envelope.traceparent, message.envelope.tracestate) == (None, None)


def test_the_x_ray_header_is_read_with_the_message() -> None:
    header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    assert decode(received(None, AWSTraceHeader=header)).trace_header == header
    assert decode(received(None)).trace_header is None


def test_an_x_ray_header_writes_as_the_traceparent_of_the_span_it_names() -> None:
    header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    assert xray_traceparent(header) == "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
    unsampled = header.replace("Sampled=1", "Sampled=0")
    assert xray_traceparent(unsampled) == "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-00"
    assert xray_traceparent("Root=1-5759e988-bd862e3fe1be46a994272793") is None


def test_a_re_sent_copy_keeps_its_producer_s_x_ray_context_in_the_attribute() -> None:
    header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    foreign = decode(received(None, AWSTraceHeader=header))
    assert carry(foreign).traceparent == "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
    # a context of sqsbatch's own wins over the header (the producer put it there)
    ours = decode(
        received(json.dumps({"v": 1, "ct": "json", "tp": TRACEPARENT}), AWSTraceHeader=header)
    )
    assert carry(ours).traceparent == TRACEPARENT
    assert carry(decode(received(None))).traceparent is None
