"""The contenders of bench/poller.py: hand-written loops and the two pollers, each a drain.

Every contender drains a queue of `{"n": i}` bodies with the same trivial handler (json-decode
each body, succeed) on a client of its own to the `Target` (a local SQS, maybe behind a delaying
proxy, or the in-process stub), and says what the drain cost: client CPU, seconds to the last
handler call, requests, and the server's CPU meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import aioboto3
import boto3
from _local import Server, async_hand_round, hand_round
from _stub_sqs import AsyncStubSqs, StubSqs
from botocore.config import Config

from sqsbatch import AsyncConsumer, Consumer, ConsumerConfig, MessageBatch, Producer
from sqsbatch._core.receiving import connections_for
from sqsbatch._core.shapes import RECEIVE_SYSTEM_ATTRIBUTES
from sqsbatch._shell.botocore import client_config
from sqsbatch.dev.server import LOCAL_CREDENTIALS

RECEIVE = {
    "MaxNumberOfMessages": 10,
    "WaitTimeSeconds": 1,
    "MessageSystemAttributeNames": RECEIVE_SYSTEM_ATTRIBUTES,
    "MessageAttributeNames": ["All"],
}


@dataclass(frozen=True)
class Target:
    """What the contenders drain: the server (its CPU read from /proc), the endpoint their
    clients use (the server's, or a delaying proxy's), or the stub instead of both."""

    server: Server
    endpoint: str
    stub: StubSqs | None


def credentials(endpoint: str) -> dict[str, Any]:
    return {
        "endpoint_url": endpoint,
        "region_name": LOCAL_CREDENTIALS["AWS_DEFAULT_REGION"],
        "aws_access_key_id": LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    }


def fill(client: Any, queue: str, count: int, bodies: str) -> None:
    """`count` messages `{"n": i, ...}` in a fresh queue, 10 per SendMessageBatch (or the
    stub's queue of `count`)."""
    if isinstance(client, StubSqs):
        client.create(queue, count)
        return
    url = client.create_queue(QueueName=queue)["QueueUrl"]
    payloads = [{"n": n, "order": f"o-{n:06d}", "amount": n % 997} for n in range(count)]
    for start in range(0, count, 10):
        chunk = payloads[start : start + 10]
        if bodies == "sqsbatch":
            Producer(queue, client=client).send_batch([{"body": p} for p in chunk])
        else:
            entries = [{"Id": str(i), "MessageBody": json.dumps(p)} for i, p in enumerate(chunk)]
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


def consumer_config(concurrency: int) -> ConsumerConfig:
    return ConsumerConfig(max_batch_size=10, max_batch_timeout=0, max_concurrency=concurrency)


class Contender:
    name = ""
    baseline = "boto3 loop"
    """The loop its "vs loop" ratios divide by: the hand-written loop of its own flavour."""

    def __init__(self, where: Target, concurrency: int) -> None:
        self.where = where
        self.concurrency = concurrency
        self.runs: list[Drain] = []
        self.counts: Counter[str] = Counter()

    def drain(self, queue: str, tally: Tally) -> None:
        raise NotImplementedError

    def measure(self, queue: str, count: int) -> Drain:
        server, requests = self.where.server, sum(self.counts.values())
        server_cpu, cpu = server.cpu_seconds(), time.process_time()
        tally = Tally(count)
        self.drain(queue, tally)
        cpu = time.process_time() - cpu
        assert len(tally.seen) == count, f"{self.name}: {len(tally.seen)} of {count} handled"
        return Drain(
            cpu,
            tally.last - tally.started,
            sum(self.counts.values()) - requests,
            server.cpu_seconds() - server_cpu,
        )

    def client(self, config: Config | None) -> Any:
        """A boto3 client to the target (requests counted), or the stub."""
        if self.where.stub is not None:
            self.counts = self.where.stub.calls
            return self.where.stub
        made = boto3.session.Session().client(
            "sqs", **credentials(self.where.endpoint), config=config
        )
        made.meta.events.register("before-send.sqs", self._count)
        return made

    def _count(self, **kwargs: Any) -> None:
        self.counts[kwargs["event_name"].rsplit(".", 1)[-1]] += 1

    def close(self) -> None:
        pass


class Loop(Contender):
    """The loop on the pollers' own client config: what the ratios compare with."""

    name = "boto3 loop"

    def __init__(self, where: Target, concurrency: int) -> None:
        super().__init__(where, concurrency)
        self.sqs = self.client(self.config())

    def config(self) -> Config | None:
        return client_config(validate=False)

    def drain(self, queue: str, tally: Tally) -> None:
        url = self.sqs.get_queue_url(QueueName=queue)["QueueUrl"]
        while len(tally.seen) < tally.expected and hand_round(self.sqs, url, tally.handle):
            pass


class LegacyLoop(Loop):
    """The loop on botocore's default client (legacy retries, validation): a loop written
    without a `Config`."""

    name = "loop, legacy"

    def config(self) -> Config | None:
        return None


class ValidatingLoop(Loop):
    """The loop with client-side validation on: what the pollers' clients save without it."""

    name = "loop, validating"

    def config(self) -> Config | None:
        return client_config()


class ThreadedLoop(Loop):
    """N threads, each the loop, on one client with a connection per thread."""

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


class OverlappedLoop(Loop):
    """The loop sending each batch's deletes on a thread of one worker while it receives the
    next (at most one out)."""

    name = "boto3, deletes beside"

    def drain(self, queue: str, tally: Tally) -> None:
        url = self.sqs.get_queue_url(QueueName=queue)["QueueUrl"]
        out: Future[Any] | None = None
        with ThreadPoolExecutor(1) as pool:
            while len(tally.seen) < tally.expected:
                messages = self.sqs.receive_message(QueueUrl=url, **RECEIVE).get("Messages", [])
                if not messages:
                    break
                for message in messages:
                    tally.handle(message["Body"])
                if out is not None:
                    out.result()
                out = pool.submit(
                    self.sqs.delete_message_batch, QueueUrl=url, Entries=deletes(messages)
                )
            if out is not None:
                out.result()


def deletes(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]


class Threads(Contender):
    name = "Consumer"

    def __init__(self, where: Target, concurrency: int) -> None:
        super().__init__(where, concurrency)
        self.config = consumer_config(concurrency)
        pool = connections_for(self.config)
        self.sqs = self.client(client_config(max_pool_connections=pool, validate=False))

    def drain(self, queue: str, tally: Tally) -> None:
        consumers: list[Consumer] = []

        def handler(batch: MessageBatch) -> None:
            for message in batch.messages:
                if tally.handle(message.body):
                    consumers[0].stop()

        consumers.append(Consumer(queue, handler, self.config, client=self.sqs))
        consumers[0].run_until_idle(1.0)


class AsyncContender(Contender):
    """A contender on an aiobotocore client (or the async stub), entered once."""

    baseline = "aioboto3 loop"

    def __init__(self, where: Target, concurrency: int, pool: int = 10) -> None:
        super().__init__(where, concurrency)
        self.runner = asyncio.Runner()
        self.stack = AsyncExitStack()
        if where.stub is not None:
            self.counts = where.stub.calls
            made: Any = AsyncStubSqs(where.stub)
        else:
            config = client_config(max_pool_connections=pool, validate=False)
            made = aioboto3.Session().client("sqs", **credentials(where.endpoint), config=config)
        self.sqs = self.runner.run(self.stack.enter_async_context(made))
        if where.stub is None:
            self.sqs.meta.events.register("before-send.sqs", self._count)

    def drain(self, queue: str, tally: Tally) -> None:
        self.runner.run(self.adrain(queue, tally))

    async def adrain(self, queue: str, tally: Tally) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.runner.run(self.stack.aclose())
        self.runner.close()


class AsyncLoop(AsyncContender):
    """The same loop written for aioboto3: the async flavour's own baseline."""

    name = "aioboto3 loop"

    async def adrain(self, queue: str, tally: Tally) -> None:
        url = (await self.sqs.get_queue_url(QueueName=queue))["QueueUrl"]
        while len(tally.seen) < tally.expected and await async_hand_round(
            self.sqs, url, tally.handle
        ):
            pass


class OverlappedAsyncLoop(AsyncContender):
    """The aioboto3 loop sending each batch's deletes as a task beside its next receive."""

    name = "aioboto3, deletes beside"

    async def adrain(self, queue: str, tally: Tally) -> None:
        url = (await self.sqs.get_queue_url(QueueName=queue))["QueueUrl"]
        out: asyncio.Future[Any] | None = None
        while len(tally.seen) < tally.expected:
            messages = (await self.sqs.receive_message(QueueUrl=url, **RECEIVE)).get("Messages", [])
            if not messages:
                break
            for message in messages:
                tally.handle(message["Body"])
            if out is not None:
                await out
            out = asyncio.ensure_future(
                self.sqs.delete_message_batch(QueueUrl=url, Entries=deletes(messages))
            )
        if out is not None:
            await out


class Tasks(AsyncContender):
    name = "AsyncConsumer"

    def __init__(self, where: Target, concurrency: int) -> None:
        self.config = consumer_config(concurrency)
        super().__init__(where, concurrency, connections_for(self.config))

    async def adrain(self, queue: str, tally: Tally) -> None:
        consumers: list[AsyncConsumer] = []

        async def handler(batch: MessageBatch) -> None:
            for message in batch.messages:
                if tally.handle(message.body):
                    consumers[0].stop()

        consumers.append(AsyncConsumer(queue, handler, self.config, client=self.sqs))
        await consumers[0].run_until_idle(1.0)


CONTENDERS: dict[str, type[Contender]] = {
    kind.name: kind
    for kind in (
        Loop,
        ThreadedLoop,
        Threads,
        AsyncLoop,
        Tasks,
        LegacyLoop,
        ValidatingLoop,
        OverlappedLoop,
        OverlappedAsyncLoop,
    )
}
