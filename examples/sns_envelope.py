"""Consume a queue subscribed to an SNS topic, without raw message delivery (docs/envelopes.md).

Each body is an SNS notification; with `envelope="sns"` the handler gets the notification's
`Message` (JSON text as its value, then validated by `body_model`), and `message.envelope` the
notification's other fields (`TopicArn`, `Subject`, `MessageAttributes`, ...). A body that is not
a notification goes to the DLQ with reason `invalid_body`. The same works for a rule's
EventBridge events with `envelope="eventbridge"` (the handler gets their `detail`).

Run on AWS, or with `AWS_ENDPOINT_URL` set to a local endpoint serving SQS and SNS (moto's
server): `python examples/sns_envelope.py shop-orders`.
"""

from __future__ import annotations

import sys

import boto3
from pydantic import BaseModel

from sqsbatch import Consumer, ConsumerConfig, MessageBatch, create_queue


class Order(BaseModel):
    id: int
    tenant: str


def handle(batch: MessageBatch) -> None:
    for message in batch.messages:
        order: Order = message.body  # the notification's Message, validated
        notification = message.envelope  # its other fields, read-only
        assert notification is not None
        print(f"order {order.id} of {order.tenant}: {notification['Subject']}")


def subscribe(queue: str) -> str:
    """The queue, its DLQ and a topic it subscribes to; the topic's ARN. (On AWS, the queue's
    policy must also let the topic send to it.)"""
    sqs, sns = boto3.client("sqs"), boto3.client("sns")
    url = create_queue(queue, dead_letter_queue=f"{queue}-dlq", client=sqs)
    queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    topic_arn: str = sns.create_topic(Name=f"{queue}-topic")["TopicArn"]
    endpoint = queue_arn["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=endpoint)  # raw delivery off
    return topic_arn


def main(queue: str, idle_seconds: float = 2.0) -> None:
    topic_arn = subscribe(queue)
    sns = boto3.client("sns")
    for order in (Order(id=1, tenant="acme"), Order(id=2, tenant="globex")):
        sns.publish(TopicArn=topic_arn, Message=order.model_dump_json(), Subject="order placed")
    config = ConsumerConfig(envelope="sns", max_batch_timeout=0.5)
    Consumer(queue, handle, config, body_model=Order).run_until_idle(idle_seconds)


if __name__ == "__main__":
    main(sys.argv[1])
