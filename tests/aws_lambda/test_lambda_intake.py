"""The Lambda adapter's intake (`sqsbatch._core.intake`, as the pollers'), on moto's server:
what SQS refuses at intake is reported in `batchItemFailures`, so Lambda never deletes it."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sqsbatch import ConsumerConfig, MessageBatch, create_queue, lambda_handler
from sqsbatch._core.envelope import ATTRIBUTE, Envelope
from tests.support.front_ends import EventSourceMapping
from tests.support.redrive import Faulty
from tests.support.sqs_helpers import depth


def refused(op: str) -> Exception:
    error: Exception = ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, op)
    return error


def test_an_early_hop_whose_re_send_sqs_refused_is_reported_not_deleted(
    sqs: Any, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a delay hop due in 10 minutes, received now, and SQS refusing its re-send
    create_queue(name, client=sqs)
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    hop = Envelope(id="hop-1", content_type="json", due_at=time.time() + 600)
    attributes = {ATTRIBUTE: dict(hop.to_attribute())}
    sqs.send_message(QueueUrl=url, MessageBody='{"n":1}', MessageAttributes=attributes)
    handled: list[Any] = []

    @lambda_handler(config=ConsumerConfig(), client=Faulty(sqs, "send_message_batch", refused))
    def handler(batch: MessageBatch) -> None:
        handled.extend(m.body for m in batch.messages)

    mapping = EventSourceMapping(sqs, name, window=0.2)
    messages = mapping.receive(wait_seconds=1)
    # When Lambda invokes the function with it
    with caplog.at_level(logging.ERROR, logger="sqsbatch"):
        failed = mapping.invoke(handler, messages)
    # Then it is not handled, it is reported (Lambda leaves it on the queue), and logged
    (received,) = messages
    assert failed == {received["MessageId"]} and handled == []
    assert depth(sqs, name) == 1
    assert f"re-sending early message {received['MessageId']} failed" in caplog.text


def test_an_expired_record_whose_dead_letter_copy_sqs_refused_is_reported_not_deleted(
    sqs: Any, name: str
) -> None:
    # Given a message past its producer's deadline, a DLQ, and SQS refusing the copy
    create_queue(name, client=sqs)
    create_queue(f"{name}-dlq", client=sqs)
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    late = Envelope(id="late-1", content_type="json", expires_at=time.time() - 1)
    attributes = {ATTRIBUTE: dict(late.to_attribute())}
    sqs.send_message(QueueUrl=url, MessageBody='{"n":1}', MessageAttributes=attributes)
    config = ConsumerConfig(dead_letter_queue=f"{name}-dlq")
    handled: list[Any] = []

    @lambda_handler(config=config, client=Faulty(sqs, "send_message_batch", refused))
    def handler(batch: MessageBatch) -> None:
        handled.extend(m.body for m in batch.messages)

    mapping = EventSourceMapping(sqs, name, window=0.2)
    messages = mapping.receive(wait_seconds=1)
    # When Lambda invokes the function with it
    failed = mapping.invoke(handler, messages)
    # Then it is neither handled nor lost: reported, so it stays on its queue, not in the DLQ
    (received,) = messages
    assert failed == {received["MessageId"]} and handled == []
    assert (depth(sqs, name), depth(sqs, f"{name}-dlq")) == (1, 0)
