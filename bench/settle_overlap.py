"""Whether a poller should delete a batch while it receives the next: the hand loop, both ways.

    .venv/bin/python bench/settle_overlap.py [--messages 1000] [--rounds 11] [--delay-ms 0]

The question behind `sqsbatch._core.closing.settles_behind`: at `max_concurrency` 1, sending a
batch's `DeleteMessageBatch` while the next `ReceiveMessage` is out saves a round trip per
batch, if running two calls side by side costs nothing. Each flavour's hand-written loop
(receive 10, handle, delete) is drained beside the same loop with its deletes overlapped (at
most one out: a thread of one worker for boto3, a task for aioboto3), on bench/_lean_sqs.py in a
child process (with `--delay-ms`, through bench/_proxy.py's proxy, which adds that much to
every request, as bench/latency.py does), in alternating order, `--rounds` drains of
`--messages` each. Printed: client CPU per message and msg/s (medians), and the overlapped
loop's paired ratios to the plain one (the median of each round's own ratio).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import aioboto3
import boto3
from _lean_sqs import lean_sqs
from _local import async_hand_round, command, hand_round
from _proxy import delay_proxy
from poller_cpu import credentials, fill, paired

from sqsbatch._botocore import client_config
from sqsbatch._core.shapes import RECEIVE_SYSTEM_ATTRIBUTES

RECEIVE = {
    "MaxNumberOfMessages": 10,
    "WaitTimeSeconds": 1,
    "MessageSystemAttributeNames": RECEIVE_SYSTEM_ATTRIBUTES,
    "MessageAttributeNames": ["All"],
}
Drain = Callable[[str, int], Awaitable[None]]


def deletes(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]


def sync_drains(client: Any, pool: ThreadPoolExecutor) -> dict[str, Drain]:
    async def plain(url: str, count: int) -> None:
        seen = [0]

        def handle(body: str) -> None:
            json.loads(body)
            seen[0] += 1

        while seen[0] < count and hand_round(client, url, handle):
            pass

    async def overlapped(url: str, count: int) -> None:
        seen, out = 0, None
        while seen < count:
            messages = client.receive_message(QueueUrl=url, **RECEIVE).get("Messages", [])
            if not messages:
                break
            for message in messages:
                json.loads(message["Body"])
            seen += len(messages)
            if out is not None:
                out.result()
            out = pool.submit(client.delete_message_batch, QueueUrl=url, Entries=deletes(messages))
        if out is not None:
            out.result()

    return {"boto3 loop": plain, "boto3, deletes on a thread": overlapped}


def async_drains(client: Any) -> dict[str, Drain]:
    async def plain(url: str, count: int) -> None:
        seen = [0]

        def handle(body: str) -> None:
            json.loads(body)
            seen[0] += 1

        while seen[0] < count and await async_hand_round(client, url, handle):
            pass

    async def overlapped(url: str, count: int) -> None:
        seen, out = 0, None
        while seen < count:
            answer = await client.receive_message(QueueUrl=url, **RECEIVE)
            messages = answer.get("Messages", [])
            if not messages:
                break
            for message in messages:
                json.loads(message["Body"])
            seen += len(messages)
            if out is not None:
                await out
            out = asyncio.ensure_future(
                client.delete_message_batch(QueueUrl=url, Entries=deletes(messages))
            )
        if out is not None:
            await out

    return {"aioboto3 loop": plain, "aioboto3, deletes as a task": overlapped}


async def compare(drains: dict[str, Drain], filler: Any, args: argparse.Namespace) -> None:
    queue = f"overlap-{time.monotonic_ns()}"
    url = filler.create_queue(QueueName=queue)["QueueUrl"]
    cpu: dict[str, list[float]] = {name: [] for name in drains}
    rate: dict[str, list[float]] = {name: [] for name in drains}
    names = list(drains)
    for round_ in range(args.rounds + 1):  # round 0 warms up, untimed
        for name in names if round_ % 2 else names[::-1]:
            fill(filler, queue, args.messages, "foreign")
            wall, used = time.perf_counter(), time.process_time()
            await drains[name](url, args.messages)
            used, wall = time.process_time() - used, time.perf_counter() - wall
            if round_:
                cpu[name].append(used / args.messages * 1e6)
                rate[name].append(args.messages / wall)
    plain, overlapped = names
    for name in names:
        print(
            f"  {name:28} {statistics.median(cpu[name]):7.1f} us/msg "
            f"{statistics.median(rate[name]):7.0f} msg/s"
        )
    print(
        f"  overlapped / plain, paired: CPU {paired(cpu[overlapped], cpu[plain]):.2f}, "
        f"msg/s {paired(rate[overlapped], rate[plain]):.2f}"
    )


async def main(args: argparse.Namespace) -> None:
    with lean_sqs(1800) as server, ExitStack() as stack:
        print(server.versions("boto3", "aioboto3"))
        filler = boto3.session.Session().client("sqs", **credentials(server.endpoint))
        endpoint = server.endpoint
        if args.delay_ms:
            delayed = delay_proxy(server.endpoint, args.delay_ms / 1000, 16, 1800)
            endpoint, _ = stack.enter_context(delayed)
            print(f"{args.delay_ms:g} ms added to every request (bench/_proxy.py)")
        where = credentials(endpoint)
        client = boto3.session.Session().client("sqs", **where, config=client_config())
        with ThreadPoolExecutor(1) as pool:
            await compare(sync_drains(client, pool), filler, args)
        client.close()
        async with aioboto3.Session().client("sqs", **where, config=client_config()) as aio:
            await compare(async_drains(aio), filler, args)
    print(f"\ncommand: {command()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000, help="messages per drain")
    parser.add_argument("--rounds", type=int, default=11, help="timed drains of each loop")
    parser.add_argument(
        "--delay-ms", type=float, default=0.0, help="through a proxy adding this to every request"
    )
    asyncio.run(main(parser.parse_args()))
