"""SQS and S3 requests per offloaded message, end to end (issue 31 item 2).

    .venv/bin/python bench/payload_cost.py [--messages 500] [--size 2000] [--batch-size 10]

On moto (`LocalSqs`, which serves S3 too): a `Producer` with `S3Payloads(bucket, always=True)`
sends `--messages` bodies of `--size` bytes in batches of 10 (every one offloaded, whatever its
size: the costs per message do not depend on it), then a `Consumer` drains the queue, acking
each batch, until idle. Every HTTP request botocore sends to S3 is counted (a `before-send` hook
on the consumer's own S3 client, which the consumer makes at its first offloaded message, and on
the producer's); SQS requests are the producer's and the consumer's own counts (the consumer's
last receive, the empty one that finds the queue idle, included).
"""

from __future__ import annotations

import argparse
import json
import os
import uuid
from collections import Counter
from typing import Any

import boto3

from sqsbatch import Consumer, ConsumerConfig, MessageBatch, Producer, S3Payloads, create_queue
from sqsbatch.dev.server import LOCAL_CREDENTIALS, LocalSqs


def counted(client: Any, into: Counter[str]) -> Any:
    """`client`, its S3 requests counted by operation in `into`."""

    def sent(request: Any, event_name: str, **_: Any) -> None:
        into[event_name.rsplit(".", 1)[-1]] += 1

    client.meta.events.register("before-send.s3", sent)
    return client


def run(server: LocalSqs, messages: int, size: int, batch_size: int) -> dict[str, Any]:
    sqs = server.client()
    name = f"bench-{uuid.uuid4().hex[:8]}"
    create_queue(name, client=sqs)
    s3_counts: Counter[str] = Counter()
    s3 = boto3.client(
        "s3", endpoint_url=server.endpoint_url, region_name=LOCAL_CREDENTIALS["AWS_DEFAULT_REGION"]
    )
    s3.create_bucket(Bucket=name)
    producer = Producer(
        name,
        client=sqs,
        large_payloads=S3Payloads(name, always=True, client=counted(s3, s3_counts)),
    )
    for start in range(0, messages, 10):
        producer.send_batch([{"body": "x" * size}] * min(10, messages - start))
    sent_s3 = dict(s3_counts)
    consumer_s3: Counter[str] = Counter()
    handled = 0

    def handler(batch: MessageBatch) -> None:
        nonlocal handled
        handled += sum(1 for message in batch.messages if len(message.body) == size)

    config = ConsumerConfig(max_batch_size=batch_size, max_batch_timeout=0.2)
    consumer = Consumer(name, handler, config, client=sqs)
    make = consumer._payloads._make_client
    consumer._payloads._make_client = lambda: counted(make(), consumer_s3)
    consumer.run_until_idle(1.0)
    left = len(s3.list_objects_v2(Bucket=name).get("Contents", []))
    return {
        "messages": messages,
        "handled": handled,
        "objects_left": left,
        "producer_sqs": producer.requests,
        "producer_s3": sent_s3,
        "consumer_sqs": consumer.requests_by_operation,
        "consumer_s3": dict(consumer_s3),
        "sqs_per_message": round((producer.requests + consumer.requests) / messages, 3),
        "s3_per_message": round((sum(sent_s3.values()) + sum(consumer_s3.values())) / messages, 3),
        "consumer_sqs_per_message": round(consumer.requests / messages, 3),
        "consumer_s3_per_message": round(sum(consumer_s3.values()) / messages, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--size", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=10, choices=range(1, 101))
    args = parser.parse_args()
    if args.messages < 1 or args.size < 1:
        parser.error("--messages and --size must be at least 1")
    os.environ.update(LOCAL_CREDENTIALS)  # the bench's clients, the consumer's S3 one too
    with LocalSqs() as server:
        print(json.dumps(run(server, args.messages, args.size, args.batch_size)))


if __name__ == "__main__":
    main()
