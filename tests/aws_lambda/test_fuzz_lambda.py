"""Property tests: Lambda's SQS event parser, fuzzed record by record."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import event as outcome
from hypothesis import example, given
from hypothesis import strategies as st

from sqsbatch._core.envelope import ATTRIBUTE
from sqsbatch._core.lambda_event import parse_event
from sqsbatch._core.lambda_records import deliveries
from sqsbatch.errors import EventError
from tests.support.fuzzing import FUZZ, values

ARN = "arn:aws:sqs:eu-west-1:123456789012:orders"
digits = st.integers(min_value=0, max_value=2_000_000_000_000).map(str)
# What a field may hold: a well-formed value most often, anything at times.
odd = values | st.sampled_from(["", "²", "٣", "9" * 30, "-1", "1.5"])


MISSING = object()


def field(good: st.SearchStrategy[Any], odds: int = 3) -> st.SearchStrategy[Any]:
    """`good` `odds` times in `odds` + 1, else an odd value or none at all."""
    bad = odd | st.just(MISSING)
    return st.sampled_from(range(odds + 1)).flatmap(lambda i: bad if i == odds else good)


def present(fields: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not MISSING}


envelope_text = st.one_of(
    st.just(json.dumps({"v": 1, "ct": "json"})),
    st.dictionaries(st.sampled_from(["v", "ct", "ts", "a", "due", "id", "err"]), values).map(
        lambda d: json.dumps({"v": 1, **d}, default=repr)
    ),
    st.text(),
)
attribute = st.fixed_dictionaries(
    {"dataType": field(st.sampled_from(["String", "Number", "Binary"]))},
    optional={
        "stringValue": field(st.text()),
        "binaryValue": field(st.binary().map(lambda b: base64.b64encode(b).decode())),
    },
)
message_attributes = st.one_of(
    st.dictionaries(st.text(max_size=6), attribute, max_size=3),
    envelope_text.map(lambda t: {ATTRIBUTE: {"dataType": "String", "stringValue": t}}),
    odd,
)
system = st.fixed_dictionaries(
    {
        "ApproximateReceiveCount": field(digits, 10),
        "SentTimestamp": field(digits, 10),
        "ApproximateFirstReceiveTimestamp": field(digits, 10),
        "MessageGroupId": field(st.sampled_from(["a", "b"])),
    }
).map(present)


def records(arn: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "messageId": field(st.text(min_size=1, max_size=8), 30),
            "receiptHandle": field(st.text(min_size=1, max_size=8), 10),
            "body": field(st.text(), 10),
            "attributes": field(system, 10),
            "messageAttributes": field(message_attributes, 5),
            "eventSource": field(st.just("aws:sqs"), 30),
            "eventSourceARN": field(st.just(arn), 20),
        }
    ).map(present)


events = st.one_of(
    *[
        st.sampled_from([ARN, ARN + ".fifo"]).flatmap(
            lambda arn: st.fixed_dictionaries(
                {"Records": st.lists(records(arn), min_size=1, max_size=6)}
            )
        )
    ]
    * 9,
    values,
)

POWERTOOLS_RECORD = {
    "messageId": "059f36b4",
    "receiptHandle": "AQEBwJnK",
    "body": "Test message.",
    "attributes": {
        "ApproximateReceiveCount": "1",
        "SentTimestamp": "1545082649183",
        "ApproximateFirstReceiveTimestamp": "1545082649185",
    },
    "messageAttributes": {
        "testAttr": {"stringValue": "100", "binaryValue": "base64Str", "dataType": "Number"}
    },
    "eventSource": "aws:sqs",
    "eventSourceARN": ARN,
}


@FUZZ
@given(events)
@example({"Records": [POWERTOOLS_RECORD, {**POWERTOOLS_RECORD, "messageAttributes": {}}]})
@example(
    {
        "Records": [
            {
                **POWERTOOLS_RECORD,
                "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "²"},
            }
        ]
    }
)
def test_any_event_parses_or_raises_one_event_error(event: Any) -> None:
    try:
        parsed = parse_event(event)
    except EventError as exc:
        assert "\n" not in str(exc)
        outcome("refused: EventError")
        return
    outcome(
        "all kept"
        if not parsed.set_aside
        else "some set aside"
        if parsed.records
        else "all set aside"
    )
    # Then every record is either kept or set aside (reported), never both, never neither
    given = event["Records"]
    kept = {id(record) for record in parsed.records}
    aside = {entry.index for entry in parsed.set_aside}
    assert all((id(record) in kept) != (i in aside) for i, record in enumerate(given))
    for entry in parsed.set_aside:
        assert entry.message_id == given[entry.index]["messageId"] and entry.message_id
        assert "\n" not in entry.reason
    # And whatever a handler reads of a kept record reads without an error
    for delivery in deliveries(parsed, received_at=0.0, hidden_until=30.0):
        read = (delivery.id, delivery.body, delivery.timestamp, delivery.attempts)
        assert read is not None and isinstance(delivery.group_id, str | None)
        assert isinstance(delivery.decoded.attributes, dict)
    assert len(parsed.messages) == len(parsed.records)
