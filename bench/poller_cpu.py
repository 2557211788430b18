"""Client CPU per consumed message and throughput: `Consumer`, `AsyncConsumer`, a boto3 loop.

    .venv/bin/python bench/poller_cpu.py [--messages 1000] [--rounds 5] [--concurrency 1 4]
        [--bodies foreign|sqsbatch] [--server moto|lean]

The local SQS runs in a child process, so the CPU of this process is the client's alone:
`time.process_time()` (every thread) from the start of a drain to its end. `--server moto`
(the default) is moto's server, `sqsbatch.local.LocalSqs`, with sqsbatch's moto speed-up as
`LocalSqs.start()` applies it; `--server lean` is bench/_lean_sqs.py, a bench-only in-memory
SQS that answers in a few tens of µs and keeps connections alive (moto's closes each one after
its answer): the client's CPU then varies far less with the server's, run to run.

Each round fills a fresh queue with `--messages` messages (SendMessageBatch of 10, not timed;
the queue never gets deeper than that: moto's receive slows with depth) and drains it with each
contender in turn (the order rotates from round to round), after one untimed warm-up drain of
`--warmup` messages each. The handler does the same trivial work everywhere: json-decode each
body (a body sqsbatch's Producer sent as JSON is decoded by sqsbatch itself) and succeed.

- loop: a hand-written boto3 loop asking SQS for what the pollers ask for: ReceiveMessage of 10
  (`MessageSystemAttributeNames` = `sqsbatch._core.shapes.RECEIVE_SYSTEM_ATTRIBUTES`,
  `MessageAttributeNames=["All"]`, WaitTimeSeconds 1), handle, DeleteMessageBatch. Its client
  has the `Config` the pollers give their own (`sqsbatch._botocore.client_config(validate=
  False)`: botocore's standard retry mode, no client-side parameter validation), so that the
  ratios compare the same botocore work. Printed beside: "loop, legacy", the same loop on
  botocore's default client (legacy retry mode, parameters validated: a loop written without
  a `Config`), and "loop, validating", the loop with validation on (what turning it off saves).
- boto3 threads (above `max_concurrency` 1): N threads, each that loop, on one client with a
  connection per thread: what threads themselves cost in CPython, the like-for-like reference
  for `Consumer` there (its ratio is to the sequential loop too).
- aioboto3 loop: the same loop written for aioboto3, the async flavour's own baseline
  (aiobotocore costs more CPU per call than botocore).
- Consumer / AsyncConsumer: `ConsumerConfig(max_batch_size=10, max_batch_timeout=0,
  max_concurrency=N)`, `run_until_idle(1)`; the handler calls `stop()` once every message is
  handled, so no idle tail is timed. Their start (GetQueueUrl, GetQueueAttributes) is counted;
  building the client (boto3 or aiobotocore, entered once) and the `ConsumerConfig` (settings
  read once at start-up, ~0.9 ms in pydantic-settings) is not.

Printed per contender: client CPU us/message (min and median over rounds) and its ratio to the
loop of its flavour (boto3 for Consumer, aioboto3 for AsyncConsumer; both also against the boto3
loops): of the mins, of the medians, and paired (the median of each round's own ratio, which a
slow minute of this shared machine moves least; its quartiles, and how many rounds were at or
under 1.10, are printed below the table); messages/s (from the start of a drain to the
end of the last handler call) and its paired ratio to the loop's; requests per message
(botocore's `before-send`, retries included) and the local SQS's CPU per message (the child's
utime+stime from /proc; the server's cost, not the client's).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import aioboto3
import boto3
from _lean_sqs import lean_sqs
from _local import Server, async_hand_round, command, hand_round, local_sqs
from botocore.config import Config

from sqsbatch import AsyncConsumer, Consumer, ConsumerConfig, MessageBatch, Producer
from sqsbatch._botocore import client_config
from sqsbatch._core.receiving import connections_for
from sqsbatch.local import LOCAL_CREDENTIALS

REGION = LOCAL_CREDENTIALS["AWS_DEFAULT_REGION"]
SERVER_LIFETIME_SECONDS = 1800
TARGET = 1.10
"""The most client CPU per message a poller should spend, as a ratio to its loop's."""


def credentials(endpoint: str) -> dict[str, Any]:
    return {
        "endpoint_url": endpoint,
        "region_name": REGION,
        "aws_access_key_id": LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    }


def count_requests(client: Any) -> Counter[str]:
    """Every HTTP request the client sends (boto3 or aiobotocore), per operation."""
    requests: Counter[str] = Counter()

    def count(**kwargs: Any) -> None:
        requests[kwargs["event_name"].rsplit(".", 1)[-1]] += 1

    client.meta.events.register("before-send.sqs", count)
    return requests


def fill(client: Any, queue: str, count: int, bodies: str) -> None:
    """`count` messages `{"n": i, ...}` in a fresh queue, 10 per SendMessageBatch."""
    client.create_queue(QueueName=queue)
    payloads = [{"n": n, "order": f"o-{n:06d}", "amount": n % 997} for n in range(count)]
    if bodies == "sqsbatch":
        producer = Producer(queue, client=client)
        for start in range(0, count, 10):
            producer.send_batch([{"body": p} for p in payloads[start : start + 10]])
        return
    url = client.get_queue_url(QueueName=queue)["QueueUrl"]
    for start in range(0, count, 10):
        entries = [
            {"Id": str(i), "MessageBody": json.dumps(p)}
            for i, p in enumerate(payloads[start : start + 10])
        ]
        client.send_message_batch(QueueUrl=url, Entries=entries)


@dataclass
class Drain:
    """What one drain cost: client CPU, wall seconds to the last handler call, requests."""

    cpu: float
    seconds: float
    requests: int
    server_cpu: float


@dataclass
class Tally:
    """Messages handled in one drain (ids, so that a duplicate from moto counts once)."""

    expected: int
    started: float = field(default_factory=time.perf_counter)
    seen: set[int] = field(default_factory=set)
    last: float = 0.0

    def handle(self, body: Any) -> bool:
        """Handle one body; True once every expected message was handled."""
        value = json.loads(body) if isinstance(body, str) else body
        self.seen.add(value["n"])
        self.last = time.perf_counter()
        return len(self.seen) >= self.expected


class Contender:
    name = ""
    baseline = "boto3 loop"
    """The loop its "vs loop" ratio divides by: the hand-written loop of its own flavour."""

    def __init__(self, server: Server, concurrency: int) -> None:
        self.server = server
        self.concurrency = concurrency
        self.runs: list[Drain] = []

    def drain(self, queue: str, tally: Tally) -> None:
        raise NotImplementedError

    def requests(self) -> int:
        raise NotImplementedError

    def measure(self, queue: str, count: int) -> Drain:
        requests, server_cpu = self.requests(), self.server.cpu_seconds()
        cpu = time.process_time()
        tally = Tally(count)
        self.drain(queue, tally)
        cpu = time.process_time() - cpu
        assert len(tally.seen) == count, f"{self.name}: {len(tally.seen)} of {count} handled"
        return Drain(
            cpu,
            tally.last - tally.started,
            self.requests() - requests,
            self.server.cpu_seconds() - server_cpu,
        )

    def close(self) -> None:
        pass


class Loop(Contender):
    """The loop on a client configured as the pollers' own (`client_config(validate=False)`:
    botocore's standard retry mode, no client-side validation): what the ratios compare with."""

    name = "boto3 loop"

    def __init__(self, server: Server, concurrency: int) -> None:
        super().__init__(server, concurrency)
        self.client = boto3.session.Session().client(
            "sqs", **credentials(server.endpoint), config=self.config()
        )
        self.counts = count_requests(self.client)

    def config(self) -> Config | None:
        return client_config(validate=False)

    def requests(self) -> int:
        return sum(self.counts.values())

    def drain(self, queue: str, tally: Tally) -> None:
        client = self.client
        url = client.get_queue_url(QueueName=queue)["QueueUrl"]
        while len(tally.seen) < tally.expected and hand_round(client, url, tally.handle):
            pass


class LegacyLoop(Loop):
    """The same loop on botocore's default client (its legacy retry mode): what a loop written
    without a `Config` gets. Its standard-mode twin costs 5-8 % more CPU per call here."""

    name = "loop, legacy"

    def config(self) -> Config | None:
        return None


class ValidatingLoop(Loop):
    """The loop with botocore's client-side parameter validation on (`client_config()`, as the
    producers' clients have it): what the pollers' own clients save by turning it off."""

    name = "loop, validating"

    def config(self) -> Config | None:
        return client_config()


class ThreadedLoop(Loop):
    """N threads, each the loop, on one boto3 client with a connection per thread (boto3 clients
    are thread-safe): what threads themselves cost in CPython (the GIL handed back and forth on
    every call), the like-for-like reference for `Consumer` above `max_concurrency` 1. Its
    ratio is to the sequential loop, as every other's."""

    name = "boto3 threads"

    def config(self) -> Config | None:
        return client_config(max_pool_connections=self.concurrency, validate=False)

    def drain(self, queue: str, tally: Tally) -> None:
        loop = super().drain
        threads = [
            threading.Thread(target=loop, args=(queue, tally)) for _ in range(self.concurrency)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def consumer_config(concurrency: int) -> ConsumerConfig:
    return ConsumerConfig(max_batch_size=10, max_batch_timeout=0, max_concurrency=concurrency)


class Threads(Contender):
    name = "Consumer"

    def __init__(self, server: Server, concurrency: int) -> None:
        super().__init__(server, concurrency)
        pool = connections_for(consumer_config(concurrency))
        self.client = boto3.session.Session().client(
            "sqs",
            **credentials(server.endpoint),
            config=client_config(max_pool_connections=pool, validate=False),
        )
        self.counts = count_requests(self.client)
        self.config = consumer_config(concurrency)

    def requests(self) -> int:
        return sum(self.counts.values())

    def drain(self, queue: str, tally: Tally) -> None:
        consumers: list[Consumer] = []

        def handler(batch: MessageBatch) -> None:
            for message in batch.messages:
                if tally.handle(message.body):
                    consumers[0].stop()

        consumers.append(Consumer(queue, handler, self.config, client=self.client))
        consumers[0].run_until_idle(1.0)


class AsyncLoop(Contender):
    """The same loop written for aioboto3 (the pollers' `Config`): the async flavour's own
    baseline, as aiobotocore costs more CPU per call than botocore."""

    name = "aioboto3 loop"

    def __init__(self, server: Server, concurrency: int) -> None:
        super().__init__(server, concurrency)
        self.runner = asyncio.Runner()
        self.stack = AsyncExitStack()
        client = aioboto3.Session().client(
            "sqs", **credentials(server.endpoint), config=client_config(validate=False)
        )
        self.client = self.runner.run(self.stack.enter_async_context(client))
        self.counts = count_requests(self.client)

    def requests(self) -> int:
        return sum(self.counts.values())

    def drain(self, queue: str, tally: Tally) -> None:
        self.runner.run(self._drain(queue, tally))

    async def _drain(self, queue: str, tally: Tally) -> None:
        client = self.client
        url = (await client.get_queue_url(QueueName=queue))["QueueUrl"]
        while len(tally.seen) < tally.expected and await async_hand_round(
            client, url, tally.handle
        ):
            pass

    def close(self) -> None:
        self.runner.run(self.stack.aclose())
        self.runner.close()


class Tasks(Contender):
    name = "AsyncConsumer"
    baseline = "aioboto3 loop"

    def __init__(self, server: Server, concurrency: int) -> None:
        super().__init__(server, concurrency)
        self.runner = asyncio.Runner()
        self.stack = AsyncExitStack()
        pool = connections_for(consumer_config(concurrency))
        client = aioboto3.Session().client(
            "sqs",
            **credentials(server.endpoint),
            config=client_config(max_pool_connections=pool, validate=False),
        )
        self.client = self.runner.run(self.stack.enter_async_context(client))
        self.counts = count_requests(self.client)
        self.config = consumer_config(concurrency)

    def requests(self) -> int:
        return sum(self.counts.values())

    def drain(self, queue: str, tally: Tally) -> None:
        consumers: list[AsyncConsumer] = []

        async def handler(batch: MessageBatch) -> None:
            for message in batch.messages:
                if tally.handle(message.body):
                    consumers[0].stop()

        consumers.append(AsyncConsumer(queue, handler, self.config, client=self.client))
        self.runner.run(consumers[0].run_until_idle(1.0))

    def close(self) -> None:
        self.runner.run(self.stack.aclose())
        self.runner.close()


def run(server: Server, args: argparse.Namespace, concurrency: int) -> list[Contender]:
    kinds: list[Callable[[Server, int], Contender]] = [
        Loop,
        Threads,
        AsyncLoop,
        Tasks,
        LegacyLoop,
        ValidatingLoop,
    ]
    if concurrency > 1:
        kinds.insert(1, ThreadedLoop)
    contenders = [kind(server, concurrency) for kind in kinds]
    drain_rounds(server, contenders, args)
    return contenders


def drain_rounds(server: Server, contenders: list[Contender], args: argparse.Namespace) -> None:
    """A warm-up drain of `args.warmup` messages each, then `args.rounds` timed drains of
    `args.messages` each (`args.bodies`), every one from a fresh queue, the order rotating from
    round to round; the contenders are closed at the end."""
    filler = boto3.session.Session().client("sqs", **credentials(server.endpoint))
    stamp = time.monotonic_ns()
    try:
        for index, contender in enumerate(contenders):  # first-use costs, connections
            queue = f"bench-warm-{stamp}-{index}"
            fill(filler, queue, args.warmup, args.bodies)
            contender.measure(queue, args.warmup)
        for round_ in range(args.rounds):
            shift = round_ % len(contenders)
            for index, contender in enumerate(contenders[shift:] + contenders[:shift]):
                queue = f"bench-{stamp}-{round_}-{index}"
                fill(filler, queue, args.messages, args.bodies)
                contender.runs.append(contender.measure(queue, args.messages))
    finally:
        for contender in contenders:
            contender.close()


def report(contenders: list[Contender], messages: int, concurrency: int) -> None:
    print(f"\nmax_concurrency {concurrency} (loops are sequential), {messages} messages a drain")
    print(
        "  every client has the pollers' own client_config (botocore's standard retry mode, "
        "no client-side validation) but 'loop, legacy' (botocore's default Config: legacy mode, "
        "validated) and 'loop, validating' (validated); vs loop: to the loop of the "
        "same flavour (boto3 or aioboto3); paired: the median of each round's own ratio (a "
        "contender and its loop drained within seconds of each other, so a slow minute of the "
        "machine counts for both)"
    )
    print(
        f"  {'':16} {'client CPU us/msg':>17} {'CPU vs loop':>20} {'msg/s':>15} "
        f"{'requests':>9} {'server CPU':>11}"
    )
    units = ("min", "median", "min", "median", "paired", "median", "paired", "/msg", "us/msg")
    widths = (7, 9, 6, 6, 6, 7, 7, 9, 11)
    print(f"  {'':16} " + " ".join(f"{u:>{w}}" for u, w in zip(units, widths, strict=True)))
    cpu = {c.name: cpu_per_message(c, messages) for c in contenders}
    rates = {c.name: [messages / d.seconds for d in c.runs] for c in contenders}
    for contender in contenders:
        name, base = contender.name, contender.baseline
        mine, loop = cpu[name], cpu[base]
        ratio = statistics.median(mine) / statistics.median(loop)
        runs = contender.runs
        requests = statistics.median(d.requests / messages for d in runs)
        server = statistics.median(d.server_cpu / messages * 1e6 for d in runs)
        print(
            f"  {name:16} {min(mine):7.1f} {statistics.median(mine):9.1f} "
            f"{min(mine) / min(loop):6.2f} {ratio:6.2f} {paired(mine, loop):6.2f} "
            f"{statistics.median(rates[name]):7.0f} {paired(rates[name], rates[base]):7.2f} "
            f"{requests:9.3f} {server:11.0f}"
        )
    print(
        "  paired CPU ratio, round by round (25 % / median / 75 %; "
        f"rounds at or under {TARGET:.2f}; 'loop, legacy' shows the machine's own spread):"
    )
    for contender in contenders:
        name, base = contender.name, contender.baseline
        if name != base:
            ratios = [m / b for m, b in zip(cpu[name], cpu[base], strict=True)]
            low, mid, high = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
            under = sum(ratio <= TARGET for ratio in ratios)
            print(f"    {name:16} {low:.2f} / {mid:.2f} / {high:.2f}; {under} of {len(ratios)}")
    for base in ("boto3 loop", "loop, legacy", "loop, validating"):
        against = ", ".join(
            f"{name} {statistics.median(cpu[name]) / statistics.median(cpu[base]):.2f}"
            for name in ("Consumer", "AsyncConsumer")
        )
        print(f"  vs {base} (median): {against}")


def paired(mine: list[float], base: list[float]) -> float:
    """The median of round-by-round ratios (round i of each: drained in the same minute)."""
    return statistics.median(m / b for m, b in zip(mine, base, strict=True))


def cpu_per_message(contender: Contender, messages: int) -> list[float]:
    """Client CPU microseconds per message, one figure per timed drain."""
    return [d.cpu / messages * 1e6 for d in contender.runs]


def drain_options(parser: argparse.ArgumentParser, *, rounds: int) -> None:
    """The options of `drain_rounds`: messages, rounds, warm-up, bodies."""
    parser.add_argument("--messages", type=int, default=1000, help="messages per drain")
    parser.add_argument("--rounds", type=int, default=rounds, help="timed drains per contender")
    parser.add_argument("--warmup", type=int, default=100, help="messages of the warm-up drain")
    parser.add_argument(
        "--bodies",
        choices=("foreign", "sqsbatch"),
        default="foreign",
        help="raw JSON text, or sent by sqsbatch's Producer (its attribute, JSON bodies)",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    drain_options(parser, rounds=5)
    parser.add_argument(
        "--concurrency", type=int, nargs="+", default=[1, 4], help="the pollers' max_concurrency"
    )
    parser.add_argument(
        "--server",
        choices=["moto", "lean"],
        default="moto",
        help="the local SQS: moto's, or bench/_lean_sqs.py's (in memory, far less CPU, keep-alive)",
    )
    args = parser.parse_args()
    start_server = lean_sqs if args.server == "lean" else local_sqs
    with start_server(SERVER_LIFETIME_SECONDS) as server:
        print(server.versions("sqsbatch", "boto3", "aioboto3", "moto"))
        print(f"bodies: {args.bodies}; local SQS in a child process at {server.endpoint}")
        for concurrency in args.concurrency:
            report(run(server, args, concurrency), args.messages, concurrency)
    print(f"\ncommand: {command()}")


if __name__ == "__main__":
    main()
