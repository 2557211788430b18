"""FIFO groups in parallel (issue 31, item 3): drain time at max_concurrency 16 vs 1.

    .venv/bin/python bench/fifo_groups.py [--groups 20] [--per-group 10] [--io-ms 50]
        [--pollers sync async] [--rounds 1] [--idle 3]

A FIFO queue on the local moto server (bench/_local.py: a child process, with sqsbatch's moto
patch, which also mends moto's FIFO receives: without it, long polls spun and two receives at
once could take the same group, docs/cli.md) is filled with `--groups` groups of `--per-group`
messages each, sent round robin (g0, g1, ..., g19, g0, ...: traffic as it arrives, each group's
messages in order). The handler does `--io-ms` of I/O per message, in order (a sleep: I/O, not
CPU; a FIFO handler takes a group's messages one after the other), and records (group, seq) per
call. For each poller
(the sync `Consumer`, the `AsyncConsumer`, each on its own default client) and each setting,
a fresh queue is drained with batches of 10 and no batch window (`max_batch_timeout = 0`);
the drain time runs from `run_until_idle` starting to the last message handled.

Settings: max_concurrency 1 and 16 with `fifo_batches = "by_group"` (the default), and the same
with `mixed` (one batch with many groups, the behaviour before issue 31). Printed per run: the
drain time, messages per second, handler calls, SQS requests per message, the CPU seconds the
moto server spent in the drain (beside the drain time, it says when moto is the bound), the
speed-up over max_concurrency 1 of the same poller and fifo_batches, and whether every message
was handled, each group's in order (a message handled twice, moto's duplicate under concurrent
receives, counts apart). A JSON line per run follows the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import boto3
from _local import Server, command, local_sqs

from sqsbatch import AsyncConsumer, Consumer, ConsumerConfig, MessageBatch, Producer, create_queue
from sqsbatch.config import FifoBatches
from sqsbatch.dev.server import LOCAL_CREDENTIALS

SERVER_LIFETIME_SECONDS = 3600
IDLE_SECONDS = 3.0
"""`--idle`: each drain's idle exit; long enough to outlast a receive's pause after a failure."""
SETTINGS: list[tuple[FifoBatches, int]] = [
    ("by_group", 1),
    ("by_group", 16),
    ("mixed", 1),
    ("mixed", 16),
]


@dataclass
class Ledger:
    """(group, seq) per handler call, and when the last message was handled."""

    calls: list[list[tuple[int, int]]] = field(default_factory=list)
    last_done: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, batch: MessageBatch) -> list[tuple[int, int]]:
        pairs = [(m.body["g"], m.body["i"]) for m in batch.messages]
        with self.lock:
            self.calls.append(pairs)
        return pairs

    def done(self) -> None:
        with self.lock:
            self.last_done = time.perf_counter()

    def in_order(self, groups: int, per_group: int) -> tuple[bool, int]:
        """(every group's messages all handled, first in send order; how many were handled
        again)."""
        seen: dict[int, list[int]] = {}
        again = 0
        for pairs in self.calls:
            for group, seq in pairs:
                handled = seen.setdefault(group, [])
                if seq in handled:
                    again += 1
                else:
                    handled.append(seq)
        ordered = len(seen) == groups
        ordered = ordered and all(seqs == list(range(per_group)) for seqs in seen.values())
        return ordered, again


def fill(client: Any, groups: int, per_group: int) -> str:
    queue = f"fifo-bench-{uuid.uuid4().hex[:8]}.fifo"
    create_queue(queue, client=client)
    producer = Producer(queue, client=client)
    items = [
        {"body": {"g": g, "i": i}, "group_id": f"g{g}"}
        for i in range(per_group)
        for g in range(groups)
    ]
    for start in range(0, len(items), 100):
        producer.send_batch(items[start : start + 100])
    return queue


def drain(
    poller: str, queue: str, config: ConsumerConfig, io_seconds: float, idle: float
) -> dict[str, Any]:
    ledger = Ledger()
    if poller == "sync":

        def handler(batch: MessageBatch) -> None:
            for _ in ledger.record(batch):
                time.sleep(io_seconds)
            ledger.done()

        consumer: Consumer | AsyncConsumer = Consumer(queue, handler, config)
        started = time.perf_counter()
        consumer.run_until_idle(idle)
    else:

        async def ahandler(batch: MessageBatch) -> None:
            for _ in ledger.record(batch):
                await asyncio.sleep(io_seconds)
            ledger.done()

        consumer = AsyncConsumer(queue, ahandler, config)
        started = time.perf_counter()
        asyncio.run(consumer.run_until_idle(idle))
    return {
        "seconds": ledger.last_done - started,
        "calls": len(ledger.calls),
        "requests": consumer.requests,
        "ledger": ledger,
    }


def run(args: argparse.Namespace, client: Any, server: Server) -> list[dict[str, Any]]:
    results = []
    messages = args.groups * args.per_group
    for poller in args.pollers:
        for mode, concurrency in SETTINGS:
            config = ConsumerConfig(
                max_concurrency=concurrency, max_batch_timeout=0, fifo_batches=mode
            )
            best: dict[str, Any] | None = None
            for _ in range(args.rounds):
                queue = fill(client, args.groups, args.per_group)
                cpu = server.cpu_seconds()
                found = drain(poller, queue, config, args.io_ms / 1000, args.idle)
                found["server_cpu"] = server.cpu_seconds() - cpu
                if best is None or found["seconds"] < best["seconds"]:
                    best = found
            assert best is not None
            ordered, again = best.pop("ledger").in_order(args.groups, args.per_group)
            seconds = best["seconds"]
            results.append(
                {
                    "poller": poller,
                    "fifo_batches": mode,
                    "max_concurrency": concurrency,
                    "messages": messages,
                    "drain_seconds": round(seconds, 2),
                    "messages_per_second": round(messages / seconds, 1),
                    "handler_calls": best["calls"],
                    "requests_per_message": round(best["requests"] / messages, 2),
                    "server_cpu_seconds": round(best["server_cpu"], 2),
                    "groups_in_order": ordered,
                    "handled_again": again,
                }
            )
    return results


def speedups(results: list[dict[str, Any]]) -> None:
    """Each run's speed-up over max_concurrency 1 of the same poller and fifo_batches."""
    serial = {
        (r["poller"], r["fifo_batches"]): r["drain_seconds"]
        for r in results
        if r["max_concurrency"] == 1
    }
    for result in results:
        base = serial[(result["poller"], result["fifo_batches"])]
        result["speedup"] = round(base / result["drain_seconds"], 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--per-group", type=int, default=10)
    parser.add_argument("--io-ms", type=float, default=50.0)
    parser.add_argument("--rounds", type=int, default=1, help="the best of this many drains")
    parser.add_argument("--idle", type=float, default=IDLE_SECONDS, help="idle exit, seconds")
    parser.add_argument(
        "--pollers", nargs="+", choices=["sync", "async"], default=["sync", "async"]
    )
    args = parser.parse_args()
    for name in ("groups", "per_group", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.io_ms < 0:
        parser.error("--io-ms must be at least 0")
    if args.idle <= 0:
        parser.error("--idle must be more than 0")
    logging.basicConfig(level=logging.ERROR)
    with local_sqs(SERVER_LIFETIME_SECONDS) as server:
        os.environ.update(LOCAL_CREDENTIALS)
        os.environ["AWS_ENDPOINT_URL"] = server.endpoint
        client = boto3.client("sqs", endpoint_url=server.endpoint)
        results = run(args, client, server)
        print(f"$ {command()}")
        print(server.versions("boto3", "aioboto3", "moto"))
    speedups(results)
    print(
        f"{args.groups} groups x {args.per_group} messages, {args.io_ms:g} ms of I/O per "
        "message, batches of 10, max_batch_timeout 0"
    )
    print(
        "poller  fifo_batches  concurrency  drain s  msg/s  speed-up  calls  req/msg  "
        "server CPU s  in order"
    )
    for r in results:
        print(
            f"{r['poller']:<7} {r['fifo_batches']:<13} {r['max_concurrency']:>11} "
            f"{r['drain_seconds']:>8.2f} {r['messages_per_second']:>6.1f} {r['speedup']:>8.1f}x "
            f"{r['handler_calls']:>6} {r['requests_per_message']:>8.2f} "
            f"{r['server_cpu_seconds']:>13.2f}  "
            f"{'yes' if r['groups_in_order'] else 'NO'}"
            + (f" ({r['handled_again']} handled again)" if r["handled_again"] else "")
        )
    for result in results:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
