"""SNS and EventBridge envelopes (issue 31 item 4) on every front end, against moto's server.

SNS is real here: moto's SNS (the same server) publishes to a topic that the queue subscribes
to, with raw message delivery off (the body is an SNS notification) and on (the body is the
message itself). EventBridge's events are sent as bodies, shaped as a rule's SQS target
receives them: moto's EventBridge-to-SQS target needs `jsonpath_ng`, which the test
environment does not install (its PutEvents answers 500).
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from pydantic import BaseModel

from sqsbatch import ConsumerConfig, MessageBatch, create_queue
from sqsbatch._core.envelope import decode
from tests.core.test_unwrap import EVENTBRIDGE_EVENT, SNS_NOTIFICATION
from tests.support.front_ends import FRONT_ENDS, FrontEnd
from tests.support.sqs_helpers import depth, drain


class Order(BaseModel):
    order: int


class Seen:
    """What the handler saw of each message: its body, envelope and attributes."""

    def __init__(self) -> None:
        self.messages: list[tuple[Any, dict[str, Any] | None, dict[str, Any]]] = []

    def handler(self, batch: MessageBatch) -> None:
        for message in batch.messages:
            envelope = None if message.envelope is None else dict(message.envelope)
            self.messages.append((message.body, envelope, dict(message.attributes)))
            if message.body == "dead-letter me":
                message.dead_letter("asked")

    def envelope_of(self, body: Any) -> dict[str, Any]:
        [found] = [envelope for seen, envelope, _ in self.messages if seen == body]
        assert found is not None
        return found


def subscribed(sqs: Any, name: str, *, raw: bool) -> tuple[Any, str]:
    """An SNS client and a topic to which queue `name` subscribes (raw delivery or not)."""
    sns = boto3.client("sns", endpoint_url=sqs.meta.endpoint_url, region_name=sqs.meta.region_name)
    topic = sns.create_topic(Name=f"{name}-topic")["TopicArn"]
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=arn["Attributes"]["QueueArn"],
        Attributes={"RawMessageDelivery": "true" if raw else "false"},
    )
    return sns, topic


def config(dlq: str, **values: Any) -> ConsumerConfig:
    return ConsumerConfig(max_batch_timeout=0.5, dead_letter_queue=dlq, **values)


def dead(sqs: Any, dlq: str) -> dict[str, tuple[str, str | None, str | None]]:
    """Each DLQ copy's body: its last death's reason, error type and error message."""
    found = {}
    for raw in drain(sqs, dlq):
        last = decode(raw).envelope.deaths[-1]
        found[raw["Body"]] = (last.reason, last.error_type, last.error_message)
    return found


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_sns_notifications_reach_the_handler_unwrapped(
    front_end: FrontEnd, sqs: Any, name: str
) -> None:
    # Given a queue subscribed to a topic (no raw delivery), two notifications and a body that
    # is not one
    dlq = f"{name}-dlq"
    url = create_queue(name, dead_letter_queue=dlq, client=sqs)
    sns, topic = subscribed(sqs, name, raw=False)
    tenant = {"tenant": {"DataType": "String", "StringValue": "acme"}}
    sns.publish(TopicArn=topic, Message='{"order": 1}', Subject="new", MessageAttributes=tenant)
    sns.publish(TopicArn=topic, Message="dead-letter me")
    sqs.send_message(QueueUrl=url, MessageBody="not a notification")
    # When consumed with envelope = "sns"
    seen = Seen()
    front_end.consume(name, seen.handler, config(dlq, envelope="sns"), sqs)
    # Then the handler saw each notification's message (JSON text as its value), with the
    # envelope's fields on message.envelope
    assert sorted(map(str, (body for body, _, _ in seen.messages))) == [
        "dead-letter me",
        "{'order': 1}",
    ]
    first = seen.envelope_of({"order": 1})
    assert (first["Type"], first["TopicArn"], first["Subject"]) == ("Notification", topic, "new")
    assert first["MessageAttributes"] == {"tenant": {"Type": "String", "Value": "acme"}}
    assert "Message" not in first and seen.messages[0][2] == {}  # no SQS attributes of its own
    # And the other body was dead-lettered before the handler as invalid_body, while the copy
    # of the notification the handler dead-lettered kept its envelope (re-sends keep the raw)
    copies = dead(sqs, dlq)
    assert copies.pop("not a notification") == (
        "invalid_body",
        "EnvelopeError",
        "not an SNS notification: the body is not JSON",
    )
    [(wrapped, why)] = copies.items()
    assert json.loads(wrapped)["Message"] == "dead-letter me" and why[0] == "asked"
    assert depth(sqs, name) == 0


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_raw_message_delivery_needs_no_envelope(front_end: FrontEnd, sqs: Any, name: str) -> None:
    # Given a queue subscribed with raw message delivery: SNS sends the message as the body
    # and its attributes as the message's attributes
    create_queue(name, client=sqs)
    sns, topic = subscribed(sqs, name, raw=True)
    tenant = {"tenant": {"DataType": "String", "StringValue": "acme"}}
    sns.publish(TopicArn=topic, Message="raw text", MessageAttributes=tenant)
    # When consumed without an envelope
    seen = Seen()
    front_end.consume(name, seen.handler, ConsumerConfig(max_batch_timeout=0.5), sqs)
    # Then the handler got the message as any foreign message, its attributes as they were sent
    assert [(body, envelope) for body, envelope, _ in seen.messages] == [("raw text", None)]
    assert seen.messages[0][2] == {"tenant": "acme"}


def event(detail: Any, **changes: Any) -> str:
    return json.dumps(json.loads(EVENTBRIDGE_EVENT) | {"detail": detail} | changes)


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_eventbridge_details_reach_the_handler_and_body_model(
    front_end: FrontEnd, sqs: Any, name: str
) -> None:
    # Given EventBridge events as a rule's SQS target receives them, one whose detail is not an
    # Order, and an SNS notification (not an EventBridge event)
    dlq = f"{name}-dlq"
    url = create_queue(name, dead_letter_queue=dlq, client=sqs)
    bad = event({"order": "x"})
    for body in (event({"order": 7}, source="shop.orders"), bad, SNS_NOTIFICATION):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    # When consumed with envelope = "eventbridge" and body_model = Order
    seen = Seen()
    cfg = config(dlq, envelope="eventbridge")
    front_end.consume(name, seen.handler, cfg, sqs, body_model=Order)
    # Then the handler got the detail, validated, and the event's fields
    assert [body for body, _, _ in seen.messages] == [Order(order=7)]
    fields = seen.envelope_of(Order(order=7))
    assert (fields["source"], fields["detail-type"]) == (
        "shop.orders",
        "EC2 Instance State-change Notification",
    )
    # And the others were dead-lettered before it, each as invalid_body, saying why
    copies = dead(sqs, dlq)
    assert copies[bad][:2] == ("invalid_body", "ValidationError")
    assert copies[SNS_NOTIFICATION] == (
        "invalid_body",
        "EnvelopeError",
        "not an EventBridge event: detail-type is missing",
    )
    assert depth(sqs, name) == 0
