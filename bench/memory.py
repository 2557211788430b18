"""Resident memory of each poller over a long run: 100,000 messages through `Consumer` and
`AsyncConsumer`, RSS after warm-up and at the end.

    .venv/bin/python bench/memory.py [--messages 100000] [--warmup 10000] [--pollers sync async]

The local SQS (moto's server, `bench/_local.py`) and a feeder run in processes of their own; the
feeder keeps the queue shallow (moto's receive slows with depth): it sends waves of 1,000 (calls
of 10) whenever fewer than 2,000 are waiting, until `--messages` were sent. Each poller runs in a
fresh child process of its own (`max_concurrency` 4, batches of 10, `max_batch_timeout` 0, a
handler that json-decodes each body and counts it), so that one poller's memory is not the
other's. The child reads its resident set size (`VmRSS`, /proc/self/status) once `--warmup`
messages were handled (clients, pools and threads are up by then) and again once all were, after
`gc.collect()` both times, and prints both. Growth under 10 MB is the bar (issue 14).
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import os
import time
from typing import Any

from _local import command, local_sqs

from sqsbatch.dev.server import LOCAL_CREDENTIALS

WAVE = 1_000
SHALLOW = 2_000
SERVER_LIFETIME_SECONDS = 3_600


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def client(endpoint: str) -> Any:
    import boto3  # noqa: PLC0415 - in each child

    return boto3.session.Session().client(
        "sqs", endpoint_url=endpoint, region_name=LOCAL_CREDENTIALS["AWS_DEFAULT_REGION"]
    )


def feed(endpoint: str, queue: str, count: int) -> None:
    """Send `count` messages in waves, keeping the queue shallow."""
    sqs = client(endpoint)
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    sent = 0
    while sent < count:
        attributes = sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        if int(attributes["ApproximateNumberOfMessages"]) >= SHALLOW:
            time.sleep(0.2)
            continue
        for start in range(sent, min(count, sent + WAVE), 10):
            entries = [
                {"Id": str(i), "MessageBody": json.dumps({"n": start + i})}
                for i in range(min(10, count - start))
            ]
            sqs.send_message_batch(QueueUrl=url, Entries=entries)
        sent = min(count, sent + WAVE)


def consume(endpoint: str, queue: str, poller: str, *, count: int, warmup: int, out: Any) -> None:
    """Run one poller until `count` messages were handled; send back RSS figures."""
    import asyncio  # noqa: PLC0415

    import aioboto3  # noqa: PLC0415

    from sqsbatch import AsyncConsumer, Consumer, ConsumerConfig, MessageBatch  # noqa: PLC0415

    os.environ.update(LOCAL_CREDENTIALS)
    config = ConsumerConfig(max_batch_size=10, max_batch_timeout=0, max_concurrency=4)
    seen = 0
    figures: dict[str, float] = {}

    def count_batch(batch: MessageBatch) -> bool:
        nonlocal seen
        for message in batch.messages:
            json.loads(message.body)
        before, seen = seen, seen + len(batch.messages)
        if before < warmup <= seen:
            gc.collect()
            figures["after_warmup_mb"] = rss_mb()
        return seen >= count

    if poller == "sync":
        consumer: Any = None

        def handler(batch: MessageBatch) -> None:
            if count_batch(batch):
                consumer.stop()

        consumer = Consumer(queue, handler, config, client=client(endpoint))
        started = time.perf_counter()
        consumer.run()
    else:
        async_consumer: Any = None

        async def async_handler(batch: MessageBatch) -> None:
            if count_batch(batch):
                async_consumer.stop()

        async def main() -> None:
            nonlocal async_consumer
            session = aioboto3.Session()
            async with session.client(
                "sqs",
                endpoint_url=endpoint,
                region_name=LOCAL_CREDENTIALS["AWS_DEFAULT_REGION"],
            ) as aio:
                async_consumer = AsyncConsumer(queue, async_handler, config, client=aio)
                await async_consumer.run()

        started = time.perf_counter()
        asyncio.run(main())
    gc.collect()
    figures["end_mb"] = rss_mb()
    figures["seconds"] = time.perf_counter() - started
    figures["handled"] = seen
    out.send(figures)


def run(endpoint: str, poller: str, count: int, warmup: int) -> dict[str, float]:
    queue = f"memory-{poller}-{os.getpid()}"
    client(endpoint).create_queue(QueueName=queue)
    context = multiprocessing.get_context("spawn")
    feeder = context.Process(target=feed, args=(endpoint, queue, count))
    receive, send = context.Pipe(duplex=False)
    child = context.Process(
        target=consume,
        args=(endpoint, queue, poller),
        kwargs={"count": count, "warmup": warmup, "out": send},
    )
    feeder.start()
    child.start()
    figures: dict[str, float] = receive.recv()
    child.join()
    feeder.join()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--warmup", type=int, default=10_000)
    parser.add_argument("--pollers", nargs="+", default=["sync", "async"])
    args = parser.parse_args()
    os.environ.update(LOCAL_CREDENTIALS)
    with local_sqs(SERVER_LIFETIME_SECONDS) as server:
        print(server.versions("sqsbatch", "boto3", "aioboto3", "moto"))
        print(f"{args.messages:,} messages per poller; RSS after {args.warmup:,} and at the end")
        print("  poller   after warm-up MB   end MB   growth MB   msg/s")
        for poller in args.pollers:
            found = run(server.endpoint, poller, args.messages, args.warmup)
            growth = found["end_mb"] - found["after_warmup_mb"]
            rate = found["handled"] / found["seconds"]
            print(
                f"  {poller:<7} {found['after_warmup_mb']:17.1f} {found['end_mb']:8.1f} "
                f"{growth:11.1f} {rate:7.0f}",
                flush=True,
            )
    print(f"command: {command()}")


if __name__ == "__main__":
    main()
