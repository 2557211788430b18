"""What a poller asks SQS while its queue is paused: requests per minute, by operation.

    .venv/bin/python bench/paused.py [--seconds 60] [--every 5] [--flavour sync|async]

A local SQS (moto, `sqsbatch.dev.server.LocalSqs`), a queue with 20 messages waiting, paused
with `sqsbatch.pause_queue`; a poller (`pause_check_seconds = --every`) runs on it for
`--seconds`, then stops. Printed: its requests by operation, per minute, and what the queue
still holds (the messages are to be untouched: none in flight, none received).
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from typing import Any

import aioboto3
import boto3

from sqsbatch import (
    AsyncConsumer,
    Consumer,
    ConsumerConfig,
    MessageBatch,
    create_queue,
    pause_queue,
)
from sqsbatch._shell.botocore import client_config
from sqsbatch.dev.server import LocalSqs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--every", type=float, default=5.0, help="pause_check_seconds")
    parser.add_argument("--flavour", choices=["sync", "async"], default="sync")
    args = parser.parse_args()
    with LocalSqs() as server:
        options = {"endpoint_url": server.endpoint_url, "region_name": "us-east-1"}
        options |= {"aws_access_key_id": "x", "aws_secret_access_key": "x"}
        sqs = boto3.client("sqs", **options)
        url = create_queue("paused-bench", client=sqs)
        for start in range(0, 20, 10):
            entries = [{"Id": str(i), "MessageBody": f"m{i}"} for i in range(start, start + 10)]
            sqs.send_message_batch(QueueUrl=url, Entries=entries)
        pause_queue(url, reason="bench", client=sqs, lambda_client=False)
        config = ConsumerConfig(pause_check_seconds=args.every)
        requests = run(args.flavour, config, sqs, options, args.seconds)
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        left = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    minutes = args.seconds / 60
    print(f"{args.flavour} poller, paused {args.seconds:g} s, pause_check_seconds={args.every:g}")
    for op in sorted(requests):
        print(f"  {op}: {requests[op]} ({requests[op] / minutes:.1f} per minute)")
    print(f"  receive_message: {requests.get('receive_message', 0)}")
    print(f"  queue: {left[names[0]]} visible, {left[names[1]]} in flight")


def run(
    flavour: str, config: ConsumerConfig, sqs: Any, options: dict[str, Any], seconds: float
) -> dict[str, int]:
    def handler(batch: MessageBatch) -> None:
        raise AssertionError("received from a paused queue")

    if flavour == "sync":
        consumer = Consumer("paused-bench", handler, config, client=sqs)
        thread = threading.Thread(target=consumer.run)
        thread.start()
        time.sleep(seconds)  # a bench: the wall time it reports on
        consumer.stop()
        thread.join()
        return consumer.requests_by_operation

    async def handle(batch: MessageBatch) -> None:
        handler(batch)

    async def amain() -> dict[str, int]:
        session = aioboto3.Session()
        async with session.client("sqs", config=client_config(), **options) as aio:
            consumer = AsyncConsumer("paused-bench", handle, config, client=aio)
            task = asyncio.create_task(consumer.run())
            await asyncio.sleep(seconds)
            consumer.stop()
            await task
            return consumer.requests_by_operation

    return asyncio.run(amain())


if __name__ == "__main__":
    main()
