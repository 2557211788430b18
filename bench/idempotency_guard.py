"""What the idempotency guard adds to a poller (issue 29): CPU per message, DynamoDB requests
and write units per message, on the happy path (every message new, every batch acked).

    .venv/bin/python bench/idempotency_guard.py [--messages 2000] [--poller sync|async]

The local SQS (moto's, which serves DynamoDB too) runs in a child process, so that its CPU is
not the poller's (bench/_local.py). The same queue load is consumed three ways: no guard, a
`MemoryStore` (the guard's own CPU, no network) and a `DynamoDBStore` on moto's DynamoDB (the
guard with its requests). CPU is this process's (`time.process_time`: the poller's threads and
botocore), per message; requests and write units as bench/idempotency_cost.py counts them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import boto3
from _local import command, local_sqs
from idempotency_cost import Meter, client_for, new_table

from sqsbatch import AsyncConsumer, Consumer, ConsumerConfig, Producer, create_queue
from sqsbatch.dev.server import LOCAL_CREDENTIALS
from sqsbatch.idempotency import DynamoDBStore, MemoryStore

CONFIG = ConsumerConfig(max_batch_size=10, max_batch_timeout=0.05, max_concurrency=1)


def aio_client(sync_client: Any) -> Any:
    """An aiobotocore client at the endpoint of a boto3 one (to enter with `async with`)."""
    import aioboto3  # noqa: PLC0415 - only the async poller needs it

    endpoint = sync_client.meta.endpoint_url
    return aioboto3.Session().client("sqs", endpoint_url=endpoint, **_credentials())


def handle(batch: Any) -> None:
    for message in batch.messages:
        message.ack()


async def ahandle(batch: Any) -> None:
    handle(batch)


def consume(poller: str, queue: str, sqs: Any, store: Any) -> dict[str, int]:
    if poller == "sync":
        consumer = Consumer(queue, handle, CONFIG, client=sqs, idempotency=store)
        consumer.run_until_idle(1.0)
        return consumer.stats.as_dict()

    async def main() -> dict[str, int]:
        async with aio_client(sqs) as aio:
            consumer = AsyncConsumer(queue, ahandle, CONFIG, client=aio, idempotency=store)
            await consumer.run_until_idle(1.0)
            return consumer.stats.as_dict()

    return asyncio.run(main())


def run(poller: str, mode: str, messages: int, endpoint: str) -> dict[str, Any]:
    sqs = boto3.session.Session().client("sqs", endpoint_url=endpoint, **_credentials())
    queue = f"guard-{mode}-{uuid.uuid4().hex[:8]}"
    create_queue(queue, client=sqs)
    producer = Producer(queue, client=sqs)
    for start in range(0, messages, 100):
        producer.send_batch([{"body": n} for n in range(start, min(messages, start + 100))])
    store: Any = None
    meter = None
    if mode == "memory":
        store = MemoryStore()
    elif mode == "dynamodb":
        client = client_for(endpoint)
        meter = Meter(client)
        store = DynamoDBStore(new_table(client), client=client)
        meter.requests.clear()
        meter.write_units = 0
    cpu = time.process_time()
    stats = consume(poller, queue, sqs, store)
    cpu = time.process_time() - cpu
    assert stats["acked"] == messages, stats
    row: dict[str, Any] = {"mode": mode, "cpu_us_per_message": round(cpu / messages * 1e6, 1)}
    if meter is not None:
        row["requests_per_message"] = round(sum(meter.requests.values()) / messages, 3)
        row["write_units_per_message"] = round(meter.write_units / messages, 2)
        row["requests"] = dict(meter.requests)
    return row


def _credentials() -> dict[str, str]:
    return {
        "region_name": LOCAL_CREDENTIALS["AWS_DEFAULT_REGION"],
        "aws_access_key_id": LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--poller", choices=["sync", "async"], default="sync")
    args = parser.parse_args()
    print(command(), flush=True)
    with local_sqs(lifetime_seconds=1800) as server:
        for mode in _MODES:  # each row as it is measured
            print(json.dumps(run(args.poller, mode, args.messages, server.endpoint)), flush=True)


_MODES = ["none", "memory", "dynamodb", "none", "memory"]
"""`none` and `memory` twice: the first run of a process pays its imports and warm-up."""

if __name__ == "__main__":
    main()
