"""Lambda's events and partial batch responses: the pure decisions, without SQS."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from sqsbatch import EventError
from sqsbatch.envelope import decode
from sqsbatch.lambda_event import handler_budget, parse_event, queue_url_from_arn, report
from sqsbatch.settlement import ActionKind

ARN = "arn:aws:sqs:eu-west-1:123456789012:orders"
H, D, R, L, X = (
    ActionKind.HIDE,
    ActionKind.DELETE,
    ActionKind.DEAD_LETTER,
    ActionKind.DROP,
    ActionKind.RESEND,
)


def record(index: int = 0, **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "messageId": f"m{index}",
        "receiptHandle": f"r{index}",
        "body": "hello",
        "attributes": {
            "ApproximateReceiveCount": "2",
            "SentTimestamp": "1700000000000",
            "ApproximateFirstReceiveTimestamp": "1700000001000",
        },
        "messageAttributes": {
            "kind": {"stringValue": "a", "dataType": "String", "stringListValues": []},
            "raw": {"binaryValue": base64.b64encode(b"\x00\x01").decode(), "dataType": "Binary"},
        },
        "eventSource": "aws:sqs",
        "eventSourceARN": ARN,
        "awsRegion": "eu-west-1",
    }
    return base | changes


def test_records_become_received_messages_that_decode_like_a_receive() -> None:
    # Given an event of two records  When it is parsed
    parsed = parse_event({"Records": [record(0), record(1)]})
    # Then the queue URL comes from the ARN and the messages read as a ReceiveMessage answer
    assert parsed.queue_url == "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"
    message = decode(parsed.messages[0])
    assert (message.id, message.body, message.attempts) == ("m0", "hello", 2)
    assert message.attributes == {"kind": "a", "raw": b"\x00\x01"}
    assert parsed.first_receive == 1_700_000_001.0
    assert parsed.message_ids == {"r0": "m0", "r1": "m1"}


@pytest.mark.parametrize(
    ("event", "says"),
    [
        ([], "not a mapping"),
        ({"Records": []}, "no Records"),
        ({"detail": {}}, "no Records"),
        ({"Records": ["x"]}, "record 0 is a str"),
        ({"Records": [record(eventSource="aws:kinesis")]}, "'aws:kinesis', not 'aws:sqs'"),
        ({"Records": [record(messageId="")]}, "record 0 has no messageId"),
        ({"Records": [record(0), record(1, messageId=None)]}, "record 1 has no messageId"),
        ({"Records": [record(receiptHandle=None)]}, "no receiptHandle"),
        ({"Records": [record(body=None)]}, "no body"),
        ({"Records": [record(attributes={})]}, "ApproximateReceiveCount"),
        ({"Records": [record(eventSourceARN="arn:aws:sns:x:1:t")]}, "not an SQS queue ARN"),
        ({"Records": [record(messageAttributes={"a": {"stringValue": "x"}})]}, "no dataType"),
        (
            {"Records": [record(messageAttributes={"a": {"binaryValue": "@@", "dataType": "B"}})]},
            "not base64",
        ),
    ],
)
def test_a_malformed_event_is_refused_naming_what_is_wrong(event: Any, says: str) -> None:
    with pytest.raises(EventError, match=says):
        parse_event(event)


def test_records_from_several_queues_are_refused() -> None:
    other = record(1, eventSourceARN=ARN.replace("orders", "invoices"))
    with pytest.raises(EventError, match="2 queues in one event"):
        parse_event({"Records": [record(0), other]})


@pytest.mark.parametrize(
    ("arn", "endpoint", "url"),
    [
        (ARN, None, "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"),
        (ARN, "http://127.0.0.1:5000/", "http://127.0.0.1:5000/123456789012/orders"),
        (
            "arn:aws-cn:sqs:cn-north-1:1:q.fifo",
            None,
            "https://sqs.cn-north-1.amazonaws.com.cn/1/q.fifo",
        ),
    ],
)
def test_queue_url_from_arn(arn: str, endpoint: str | None, url: str) -> None:
    assert queue_url_from_arn(arn, endpoint) == url


@pytest.mark.parametrize(
    ("handler_timeout", "remaining", "budget"),
    [
        (900.0, None, 900.0),  # no context: the setting
        (900.0, 60.0, 55.0),  # 5 s kept back to settle
        (900.0, 3.0, 2.4),  # a short function keeps a fifth back
        (10.0, 60.0, 10.0),  # a shorter handler_timeout holds
        (900.0, 0.0, 0.0),
    ],
)
def test_the_handler_budget_leaves_time_to_settle(
    handler_timeout: float, remaining: float | None, budget: float
) -> None:
    assert handler_budget(handler_timeout, remaining) == pytest.approx(budget)


def test_report_lists_retries_and_unsent_copies_only() -> None:
    # Given: hidden, acked, dead-lettered (sent), dead-lettered (not sent), dropped, re-sent
    kinds = [H, D, R, R, L, X]
    # When the copies of 2 and 5 were accepted
    decided = report(kinds, {2, 5}, [None] * 6, fifo=False)
    # Then only the hidden retry and the unsent copy are reported; Lambda deletes the rest
    assert decided.listed == [0, 3]
    assert decided.delete == []


def test_fifo_never_reports_a_later_message_of_a_failed_group_as_done() -> None:
    # Given a FIFO batch: group a retried first, then acked and dead-lettered; group b all acked
    kinds = [D, H, D, R, D]
    groups = ["a", "a", "a", "a", "b"]
    # When the dead-letter copy was accepted
    decided = report(kinds, {3}, groups, fifo=True)
    # Then everything after the failure in group a is reported, and deleted here when settled
    assert decided.listed == [1, 2, 3]
    assert decided.delete == [2, 3]
