"""Lambda: a record malformed in itself fails alone; the rest of its batch is handled as usual."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from sqsbatch import (
    ConsumerConfig,
    EventError,
    MessageBatch,
    Producer,
    create_queue,
    lambda_handler,
)
from tests.support.front_ends import EventSourceMapping
from tests.support.sqs_helpers import depth, drain

# Powertools' own sample SQS event (aws-powertools/powertools-lambda-python,
# tests/events/sqsEvent.json): its first record's binaryValue "base64Str" is not base64.
POWERTOOLS_ATTRIBUTES = {
    "testAttr": {"stringValue": "100", "binaryValue": "base64Str", "dataType": "Number"}
}

Fault = Callable[[dict[str, Any]], None]


def bad_binary(record: dict[str, Any]) -> None:
    record["messageAttributes"] = dict(POWERTOOLS_ATTRIBUTES)


def no_receipt_handle(record: dict[str, Any]) -> None:
    del record["receiptHandle"]


def body_not_a_string(record: dict[str, Any]) -> None:
    record["body"] = {"not": "a string"}


class Corrupting(EventSourceMapping):
    """An event source mapping whose records of one body always come malformed."""

    def __init__(self, *args: Any, bad_body: str, fault: Fault, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bad_body, self.fault = bad_body, fault

    def event(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        event = super().event(messages)
        for record in event["Records"]:
            if record["body"] == self.bad_body:
                self.fault(record)
        return event


def config() -> ConsumerConfig:
    return ConsumerConfig.load(max_batch_timeout=0.2)


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        (bad_binary, "message attribute 'testAttr' is not base64"),
        (no_receipt_handle, "has no receiptHandle"),
        (body_not_a_string, "has no body (a string)"),
    ],
)
def test_a_malformed_record_fails_alone_until_sqs_dead_letters_it(
    sqs: Any, name: str, fault: Fault, says: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a queue with a RedrivePolicy, and an event source whose record "1" is malformed
    dlq = f"{name}-dlq"
    create_queue(name, client=sqs, dead_letter_queue=dlq, max_retries=1, visibility_timeout=1)
    Producer(name, client=sqs).send_batch([{"body": "0"}, {"body": "1"}, {"body": "2"}])
    mapping = Corrupting(sqs, name, window=0.2, bad_body="1", fault=fault)
    seen: list[Any] = []

    @lambda_handler(config=config(), client=sqs)
    def handler(batch: MessageBatch) -> None:
        seen.extend(message.body for message in batch.messages)

    # When the first batch is handled
    caplog.set_level(logging.WARNING, logger="sqsbatch")
    messages = mapping.receive(wait_seconds=1)
    failed = mapping.invoke(handler, messages)
    # Then only the malformed record is reported, and the log line says why and what comes next
    bad_id = next(m["MessageId"] for m in messages if m["Body"] == "1")
    assert failed == {bad_id}
    assert sorted(seen) == ["0", "2"]
    [line] = [r.getMessage() for r in caplog.records if bad_id in r.getMessage()]
    assert says in line and "dead-letter queue after maxReceiveCount" in line
    # And redelivered until SQS moves it to the DLQ, the good ones are never handled again
    mapping.run_until_idle(handler, idle_seconds=2.5)
    assert sorted(seen) == ["0", "2"]
    assert depth(sqs, name) == 0
    assert [m["Body"] for m in drain(sqs, dlq)] == ["1"]


def test_powertools_sample_event_fails_only_its_bad_record(sqs: Any, name: str) -> None:
    # Given Powertools' sample event: record 0 has a non-base64 binaryValue, record 1 is fine
    create_queue(name, client=sqs)
    mapping = EventSourceMapping(sqs, name)
    records: list[dict[str, Any]] = [
        {
            "messageId": "059f36b4-87a3-44ab-83d2-661975830a7d",
            "receiptHandle": "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a...",
            "body": "Test message.",
            "attributes": {
                "ApproximateReceiveCount": "1",
                "SentTimestamp": "1545082649183",
                "SenderId": "AIDAIENQZJOLO23YVJ4VO",
                "ApproximateFirstReceiveTimestamp": "1545082649185",
            },
            "messageAttributes": POWERTOOLS_ATTRIBUTES,
            "md5OfBody": "e4e68fb7bd0e697a0ae8f1bb342846b3",
            "eventSource": "aws:sqs",
            "eventSourceARN": mapping.arn,
            "awsRegion": "us-east-2",
        },
        {
            "messageId": "2e1424d4-f796-459a-8184-9c92662be6da",
            "receiptHandle": "AQEBzWwaftRI0KuVm4tP+/7q1rGgNqicHq...",
            "body": '{"message": "foo1"}',
            "attributes": {
                "ApproximateReceiveCount": "1",
                "SentTimestamp": "1545082650636",
                "SenderId": "AIDAIENQZJOLO23YVJ4VO",
                "ApproximateFirstReceiveTimestamp": "1545082650649",
            },
            "messageAttributes": {},
            "md5OfBody": "e4e68fb7bd0e697a0ae8f1bb342846b3",
            "eventSource": "aws:sqs",
            "eventSourceARN": mapping.arn,
            "awsRegion": "us-east-2",
        },
    ]
    seen: list[Any] = []
    function = lambda_handler(config=config(), client=sqs)(
        lambda batch: seen.extend(m.body for m in batch.messages)
    )
    # When invoked
    response = function({"Records": records}, None)
    # Then the bad record alone is reported; the good one was handled (and is left out)
    assert response == {"batchItemFailures": [{"itemIdentifier": records[0]["messageId"]}]}
    assert seen == ['{"message": "foo1"}']


def test_when_every_record_is_malformed_no_call_is_made(sqs: Any, name: str) -> None:
    # Given an event whose only record has no receipt handle
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": 0}])
    mapping = Corrupting(sqs, name, bad_body="0", fault=no_receipt_handle)
    calls: list[str] = []

    class Watching:
        def __getattr__(self, op: str) -> Any:
            calls.append(op)
            return getattr(sqs, op)

    function = lambda_handler(config=config(), client=Watching())(lambda batch: None)
    # When invoked
    messages = mapping.receive(wait_seconds=1)
    failed = mapping.invoke(function, messages)
    # Then it is reported, and no SQS call was needed
    assert failed == {messages[0]["MessageId"]}
    assert [c for c in calls if c != "meta"] == []


def test_a_record_without_a_message_id_refuses_the_whole_batch(sqs: Any, name: str) -> None:
    # Given an event whose second record has no messageId (it cannot be reported alone)
    create_queue(name, client=sqs, visibility_timeout=1)
    Producer(name, client=sqs).send_batch([{"body": 0}, {"body": 1}])
    mapping = EventSourceMapping(sqs, name, window=0.2)
    messages = mapping.receive(wait_seconds=1)
    event = mapping.event(messages)
    del event["Records"][1]["messageId"]
    handled: list[Any] = []
    function = lambda_handler(config=config(), client=sqs)(
        lambda batch: handled.extend(batch.messages)
    )
    # When invoked, Then the invocation fails (Lambda retries the batch), nothing handled or lost
    with pytest.raises(EventError, match="record 1 has no messageId"):
        function(event, None)
    assert handled == []
    assert depth(sqs, name) == 2
