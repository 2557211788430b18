"""Filling queues in tests (sqsbatch's Producer), and looking at them (plain boto3 calls)."""

from __future__ import annotations

import json
from typing import Any

from sqsbatch import ConsumerConfig, Producer, create_queue


def fill(sqs: Any, name: str, bodies: list[Any], **queue: Any) -> Producer:
    """Create queue `name` (`queue`: create_queue's options) holding `bodies`, sent 100 a call."""
    create_queue(name, client=sqs, **queue)
    producer = Producer(name, client=sqs)
    for start in range(0, len(bodies), 100):
        producer.send_batch([{"body": b} for b in bodies[start : start + 100]])
    return producer


def quick(**values: Any) -> ConsumerConfig:
    """A consumer's settings that close a batch 0.2 s after its first message, `values` on top."""
    return ConsumerConfig.load(**{"max_batch_timeout": 0.2, **values})


def depth(sqs: Any, queue: str) -> int:
    """Visible + in flight + delayed messages."""
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return sum(int(attributes[n]) for n in names)


def visible(sqs: Any, queue: str) -> int:
    """Messages a receive could get now (not in flight, not delayed)."""
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    names = ["ApproximateNumberOfMessages"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def drain(sqs: Any, queue: str) -> list[dict[str, Any]]:
    """Every visible message, received (and left to reappear after 30 s), with parsed metadata."""
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    found: list[dict[str, Any]] = []
    while True:
        answer = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=0,
            VisibilityTimeout=30,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        )
        messages = answer.get("Messages", [])
        if not messages:
            return found
        for message in messages:
            meta = message.get("MessageAttributes", {}).get("sqsbatch")
            message["meta"] = json.loads(meta["StringValue"]) if meta else None
            found.append(message)
