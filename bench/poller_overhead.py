"""The pollers' own client CPU per message, apart from botocore's.

    .venv/bin/python bench/poller_overhead.py [--messages 2000] [--rounds 7] [--concurrency 1 4]
        [--delay 0.001] [--instructions [--jobs 2]]

`bench/poller_cpu.py` compares the pollers with a hand-written loop on a real (local) SQS; there
botocore spends about 90 % of the client's CPU, and this machine's medians move by 10 % from run
to run, so a change of a few µs per message in the poller is lost in the noise. Here both drain
a stub client instead: it answers `ReceiveMessage` (10 messages, the attributes SQS sends) and
`DeleteMessageBatch` from memory, after a 1 ms sleep per call (`--delay`) that stands for the
round trip (the calling thread blocks and lets the others run, as on a socket). What is left is
the poller's own work: its threads, its flows, its bookkeeping. `--delay 0` answers at once,
without sleeping at all: what is left is the pollers' Python alone, in a warm tight loop (a
thread waking after each sleep runs colder, so the default delay shows more than that).

Printed per `max_concurrency`: the loop's and the Consumer's client CPU µs/message (median and
min over `--rounds` drains, alternating), and the Consumer's overhead (Consumer - loop); then
the same for `AsyncConsumer` against the same loop written for asyncio on an `async def` stub.

`--instructions` counts instead of timing: each contender drains in a child process of its own
under `valgrind --tool=callgrind` (instructions retired, the same count run after run whatever
else this machine does, where CPU seconds move 5-10 %; no hardware counter needed, unlike
`bench/poller_instructions.py`'s `perf stat`; `--jobs` children at once), once `--messages`
(10,000 unless given) and once a tenth of that, after the same warm-up; the difference over the
messages between is its instructions per message, without what a process and a drain cost once
(imports, the poller's start-up). `--delay` is 0 and `--concurrency` 1 unless given (at 4
without a delay, threads that never block fight for the GIL: a figure of the stub). Under
valgrind a process runs many times slower, so the pollers' timed wake-ups (the loop looks at its
slots every 0.5 s, the watcher at its heap every 1 s) come more often per message than
natively: they are counted against the pollers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from _local import async_hand_round, command, hand_round

from sqsbatch import AsyncConsumer, Consumer, ConsumerConfig, MessageBatch

EMPTY_POLL_SECONDS = 0.05
"""How long a receive from the drained stub waits before it answers empty: as a long poll does
(without it, receivers left without messages at the end of a drain would spin on the stub)."""


class StubSqs:
    """`count` messages `{"n": i}`, served 10 at a time; every call sleeps `delay` first."""

    def __init__(self, count: int, delay: float) -> None:
        self.count = count
        self.delay = delay
        self.taken = 0
        self.lock = threading.Lock()

    def pause(self) -> None:
        if self.delay:
            time.sleep(self.delay)

    def get_queue_url(self, QueueName: str) -> dict[str, str]:
        return {"QueueUrl": f"http://127.0.0.1:1/123456789012/{QueueName}"}

    def get_queue_attributes(self, **params: Any) -> dict[str, Any]:
        self.pause()
        return {"Attributes": {}}

    def receive_message(self, **params: Any) -> dict[str, Any]:
        self.pause()
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
        if not messages:  # a long poll on an empty queue: it waits, at no CPU cost
            time.sleep(EMPTY_POLL_SECONDS)
            return {}
        return {"Messages": messages}

    def delete_message_batch(self, QueueUrl: str, Entries: list[dict[str, str]]) -> Any:
        self.pause()
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


class AsyncStubSqs:
    """`StubSqs` for aiobotocore's `async def` calls; each call awaits its `delay` first."""

    def __init__(self, count: int, delay: float) -> None:
        self.stub = StubSqs(count, 0.0)
        self.delay = delay

    async def get_queue_url(self, **params: Any) -> dict[str, str]:
        return self.stub.get_queue_url(**params)

    async def get_queue_attributes(self, **params: Any) -> dict[str, Any]:
        await self.pause()
        return self.stub.get_queue_attributes(**params)

    async def receive_message(self, **params: Any) -> dict[str, Any]:
        await self.pause()
        if self.stub.taken >= self.stub.count:  # a long poll on an empty queue
            await asyncio.sleep(EMPTY_POLL_SECONDS)
            return {}
        return self.stub.receive_message(**params)

    async def delete_message_batch(self, **params: Any) -> Any:
        await self.pause()
        return self.stub.delete_message_batch(**params)

    async def pause(self) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)


def async_loop(count: int, delay: float, concurrency: int) -> None:
    """The aioboto3 loop of `bench/poller_cpu.py` (sequential), on the async stub."""

    async def drain() -> None:
        client = AsyncStubSqs(count, delay)
        url = (await client.get_queue_url(QueueName="stub"))["QueueUrl"]
        seen: set[int] = set()
        while len(seen) < count and await async_hand_round(
            client, url, lambda body: seen.add(json.loads(body)["n"])
        ):
            pass

    asyncio.run(drain())


def async_consumer(count: int, delay: float, concurrency: int) -> None:
    """`AsyncConsumer` as `bench/poller_cpu.py` runs it, on the async stub."""
    seen: set[int] = set()
    consumers: list[AsyncConsumer] = []

    async def handler(batch: MessageBatch) -> None:
        for message in batch.messages:
            seen.add(json.loads(message.body)["n"])
        if len(seen) >= count:
            consumers[0].stop()

    config = ConsumerConfig(max_batch_size=10, max_batch_timeout=0, max_concurrency=concurrency)
    client = AsyncStubSqs(count, delay)
    consumers.append(AsyncConsumer("stub", handler, config, client=client))
    asyncio.run(consumers[0].run_until_idle(1.0))
    assert len(seen) == count, f"{len(seen)} of {count} handled"


Drain = Callable[[int, float, int], None]


def cpu_per_message(drain: Drain, count: int, delay: float, concurrency: int) -> float:
    cpu = time.process_time()
    drain(count, delay, concurrency)
    return (time.process_time() - cpu) / count * 1e6


DRAINS: dict[str, Drain] = {
    "loop": loop,
    "Consumer": consumer,
    "aio loop": async_loop,
    "AsyncConsumer": async_consumer,
}
BASELINE = {"Consumer": "loop", "AsyncConsumer": "aio loop"}
WARMUP = 200


def timed(args: argparse.Namespace) -> None:
    """CPU seconds per message, each poller alternating with its loop."""
    for concurrency in args.concurrency:
        for mine_name, base_name in BASELINE.items():
            drains = {name: DRAINS[name] for name in (base_name, mine_name)}
            runs: dict[str, list[float]] = {name: [] for name in drains}
            for drain in drains.values():  # warm-up: imports, first-use costs
                drain(WARMUP, args.delay, concurrency)
            for _ in range(args.rounds):
                for name, drain in drains.items():
                    runs[name].append(
                        cpu_per_message(drain, args.messages, args.delay, concurrency)
                    )
            mine, base = runs[mine_name], runs[base_name]
            print(
                f"max_concurrency {concurrency}: {base_name} {statistics.median(base):.1f} "
                f"(min {min(base):.1f}), {mine_name} {statistics.median(mine):.1f} "
                f"(min {min(mine):.1f}) µs/msg; overhead "
                f"{statistics.median(mine) - statistics.median(base):.1f} "
                f"(min {min(mine) - min(base):.1f}) µs/msg"
            )


def counted(args: argparse.Namespace, name: str, messages: int, concurrency: int) -> int:
    """Instructions retired by a child that warms `name` up, then drains `messages`."""
    argv = [sys.executable, __file__, "--child", name, "--messages", str(messages)]
    argv += ["--delay", str(args.delay), "--concurrency", str(concurrency)]
    valgrind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    done = subprocess.run(valgrind + argv, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count: {done.stderr[-300:]}")
    return int(found.group(1))


def instructions(args: argparse.Namespace) -> None:
    """Instructions per message under callgrind: the slope between two drain sizes."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt install valgrind)")
    many, few = args.messages, args.messages // 10
    runs = [(n, m, c) for c in args.concurrency for n in DRAINS for m in (few, many)]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:  # counts do not mind company
        counts = dict(zip(runs, pool.map(lambda run: counted(args, *run), runs), strict=True))
    for concurrency in args.concurrency:
        per = {
            name: (counts[name, many, concurrency] - counts[name, few, concurrency]) / (many - few)
            for name in DRAINS
        }
        print(f"max_concurrency {concurrency}, instructions per message:")
        for name, mine in per.items():
            base = BASELINE.get(name)
            over = f"; overhead {mine - per[base]:,.0f}" if base else ""
            print(f"  {name:14} {mine:9,.0f}{over}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, help="messages per drain (2000; 10000 counted)")
    parser.add_argument("--rounds", type=int, default=7, help="timed drains of each")
    parser.add_argument("--delay", type=float, help="seconds each call sleeps (0.001; 0 counted)")
    parser.add_argument(
        "--concurrency", type=int, nargs="+", help="max_concurrency (1 4; 1 counted)"
    )
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions under valgrind instead"
    )
    parser.add_argument("--jobs", type=int, default=2, help="children at once (--instructions)")
    parser.add_argument("--child", choices=list(DRAINS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.messages is None:
        args.messages = 10_000 if args.instructions else 2000
    if args.instructions and args.messages < 10:
        parser.error(f"--messages {args.messages} is too few to count: at least 10")
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: at least 1 child at a time")
    if args.delay is None:
        args.delay = 0.0 if args.instructions else 0.001
    if args.concurrency is None:
        args.concurrency = [1] if args.instructions else [1, 4]
    if args.child:
        drain, concurrency = DRAINS[args.child], args.concurrency[0]
        drain(WARMUP, args.delay, concurrency)
        drain(args.messages, args.delay, concurrency)
        return
    if args.instructions:
        instructions(args)
    else:
        timed(args)
    print(f"\ncommand: {command()}")


if __name__ == "__main__":
    main()
