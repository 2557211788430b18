"""The sync `Consumer`'s own client CPU per message, apart from botocore's.

    .venv/bin/python bench/poller_overhead.py [--messages 2000] [--rounds 7] [--concurrency 1 4]

`bench/poller_cpu.py` compares the pollers with a hand-written loop on a real (local) SQS; there
botocore spends about 90 % of the client's CPU, and this machine's medians move by 10 % from run
to run, so a change of a few µs per message in the poller is lost in the noise. Here both drain
a stub client instead: it answers `ReceiveMessage` (10 messages, the attributes SQS sends) and
`DeleteMessageBatch` from memory, after a 1 ms sleep per call (`--delay`) that stands for the
round trip (the calling thread blocks and lets the others run, as on a socket). What is left is
the poller's own work: its threads, its flows, its bookkeeping.

Printed per `max_concurrency`: the loop's and the Consumer's client CPU µs/message (median and
min over `--rounds` drains, alternating), and the Consumer's overhead (Consumer - loop).
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from _local import hand_round

from sqsbatch import Consumer, ConsumerConfig, MessageBatch


class StubSqs:
    """`count` messages `{"n": i}`, served 10 at a time; every call sleeps `delay` first."""

    def __init__(self, count: int, delay: float) -> None:
        self.count = count
        self.delay = delay
        self.taken = 0
        self.lock = threading.Lock()

    def get_queue_url(self, QueueName: str) -> dict[str, str]:
        return {"QueueUrl": f"http://127.0.0.1:1/123456789012/{QueueName}"}

    def get_queue_attributes(self, **params: Any) -> dict[str, Any]:
        time.sleep(self.delay)
        return {"Attributes": {}}

    def receive_message(self, **params: Any) -> dict[str, Any]:
        time.sleep(self.delay)
        with self.lock:
            first = self.taken
            self.taken = min(self.count, first + params.get("MaxNumberOfMessages", 1))
        now = str(int(time.time() * 1000))
        attributes = {
            "SentTimestamp": now,
            "ApproximateReceiveCount": "1",
            "ApproximateFirstReceiveTimestamp": now,
            "SenderId": "AIDASTUB",
        }
        messages = [
            {
                "MessageId": f"m-{n}",
                "ReceiptHandle": f"rh-{n}",
                "MD5OfBody": "-",
                "Body": json.dumps({"n": n}),
                "Attributes": dict(attributes),
            }
            for n in range(first, self.taken)
        ]
        return {"Messages": messages} if messages else {}

    def delete_message_batch(self, QueueUrl: str, Entries: list[dict[str, str]]) -> Any:
        time.sleep(self.delay)
        return {"Successful": [{"Id": entry["Id"]} for entry in Entries], "Failed": []}


def loop(count: int, delay: float, concurrency: int) -> None:
    """The hand-written loop of `bench/poller_cpu.py`, on the stub."""
    client = StubSqs(count, delay)
    url = client.get_queue_url(QueueName="stub")["QueueUrl"]
    seen: set[int] = set()
    while len(seen) < count and hand_round(
        client, url, lambda body: seen.add(json.loads(body)["n"])
    ):
        pass


def consumer(count: int, delay: float, concurrency: int) -> None:
    """`Consumer` as `bench/poller_cpu.py` runs it, on the stub; it stops once all are handled."""
    seen: set[int] = set()
    consumers: list[Consumer] = []

    def handler(batch: MessageBatch) -> None:
        for message in batch.messages:
            seen.add(json.loads(message.body)["n"])
        if len(seen) >= count:
            consumers[0].stop()

    config = ConsumerConfig(max_batch_size=10, max_batch_timeout=0, max_concurrency=concurrency)
    consumers.append(Consumer("stub", handler, config, client=StubSqs(count, delay)))
    consumers[0].run_until_idle(1.0)
    assert len(seen) == count, f"{len(seen)} of {count} handled"


Drain = Callable[[int, float, int], None]


def cpu_per_message(drain: Drain, count: int, delay: float, concurrency: int) -> float:
    cpu = time.process_time()
    drain(count, delay, concurrency)
    return (time.process_time() - cpu) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000, help="messages per drain")
    parser.add_argument("--rounds", type=int, default=7, help="timed drains of each")
    parser.add_argument("--delay", type=float, default=0.001, help="seconds each call sleeps")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    for concurrency in args.concurrency:
        runs: dict[str, list[float]] = {"loop": [], "Consumer": []}
        drains: dict[str, Drain] = {"loop": loop, "Consumer": consumer}
        for drain in drains.values():  # warm-up: imports, first-use costs
            drain(200, args.delay, concurrency)
        for _ in range(args.rounds):
            for name, drain in drains.items():
                runs[name].append(cpu_per_message(drain, args.messages, args.delay, concurrency))
        mine, base = runs["Consumer"], runs["loop"]
        print(
            f"max_concurrency {concurrency}: loop {statistics.median(base):.1f} "
            f"(min {min(base):.1f}), Consumer {statistics.median(mine):.1f} "
            f"(min {min(mine):.1f}) µs/msg; overhead "
            f"{statistics.median(mine) - statistics.median(base):.1f} "
            f"(min {min(mine) - min(base):.1f}) µs/msg"
        )


if __name__ == "__main__":
    main()
