"""The one registry of front ends: `FRONT_ENDS`, every way sqsbatch runs a handler.

A front end runs a script (a plain function of the batch) on a queue until nothing arrives for
`idle_seconds` and nothing is in flight: the sync poller, the async poller, and the Lambda
adapter with a sync or an `async def` handler. The scenario table, the never-lose tests, the
delay and FIFO tests all run on every one of them.

`EventSourceMapping` does what Lambda's SQS event source mapping does, against moto's server:
receive a batch (up to `BatchSize`, within `MaximumBatchingWindowInSeconds`), hand it to the
function as an event in AWS's record shape, then delete every record that the response leaves
out of `batchItemFailures` and leave the rest to reappear after their visibility timeout.
`AsyncFaulty` injects faults around a REAL aiobotocore client.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import aioboto3

from sqsbatch import AsyncConsumer, Consumer, ConsumerConfig, MessageBatch, lambda_handler
from sqsbatch._shell.botocore import client_config
from sqsbatch._shell.guarding import FROM_CONFIG
from sqsbatch.lambda_adapter import LambdaAdapter
from sqsbatch.limits import SQS_LIMITS, SqsLimits
from tests.support.faults import throttled

Script = Callable[[MessageBatch], None]
LambdaFunction = Callable[[Mapping[str, Any], Any], Mapping[str, Any]]


def load_example(name: str) -> ModuleType:
    """A fresh copy of examples/NAME.py (its module-level state is the test's own)."""
    path = Path(__file__).resolve().parents[2] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def aio_client(sync_client: Any, *, max_pool_connections: int = 10) -> Any:
    """An aiobotocore client (to enter with `async with`) at the endpoint of a boto3 one."""
    return aioboto3.Session().client(
        "sqs",
        endpoint_url=sync_client.meta.endpoint_url,
        region_name=sync_client.meta.region_name,
        config=client_config(max_pool_connections=max_pool_connections),
    )


def run_async(
    queue: str,
    handler: Callable[[MessageBatch], Awaitable[None]],
    config: ConsumerConfig,
    client: Any,
    *,
    limits: SqsLimits = SQS_LIMITS,
    idle_seconds: float = 1.0,
    body_model: Any = None,
    prepare: Callable[[AsyncConsumer], None] | None = None,
    wall_clock: Callable[[], float] = time.time,
    idempotency: Any = FROM_CONFIG,
) -> AsyncConsumer:
    """An `AsyncConsumer` on an aiobotocore client to `client`'s endpoint, run until idle;
    `prepare` gets it first."""

    async def main() -> AsyncConsumer:
        async with aio_client(client) as aio:
            consumer = AsyncConsumer(
                queue,
                handler,
                config,
                client=aio,
                limits=limits,
                body_model=body_model,
                wall_clock=wall_clock,
                idempotency=idempotency,
            )
            if prepare is not None:
                prepare(consumer)
            await consumer.run_until_idle(idle_seconds)
            return consumer

    return asyncio.run(main())


def as_async(script: Script) -> Callable[[MessageBatch], Awaitable[None]]:
    async def handler(batch: MessageBatch) -> None:
        script(batch)

    return handler


@dataclass(frozen=True)
class Run:
    """How a front end runs a script: SQS's ceilings, the idle exit, the body model, the wall
    clock (a deadline passed without waiting for it: a clock ahead of SQS's)."""

    limits: SqsLimits
    idle_seconds: float
    body_model: Any
    wall_clock: Callable[[], float] = time.time
    idempotency: Any = FROM_CONFIG


class FrontEnd:
    """Runs a script on a queue the way one of sqsbatch's front ends does (`_run`)."""

    name = ""

    def consume(
        self,
        queue: str,
        script: Script,
        config: ConsumerConfig,
        client: Any,
        *,
        limits: SqsLimits = SQS_LIMITS,
        idle_seconds: float = 1.0,
        body_model: Any = None,
        wall_clock: Callable[[], float] = time.time,
        idempotency: Any = FROM_CONFIG,
    ) -> None:
        """Run `script` on `queue` until nothing arrives for `idle_seconds` and nothing is in
        flight (with SQS's ceilings as `limits` say, bodies validated by `body_model`, the
        time of day as `wall_clock` tells it, and the idempotency guard's store)."""
        how = Run(limits, idle_seconds, body_model, wall_clock, idempotency)
        self._run(queue, script, config, client, how)

    def _run(
        self, queue: str, script: Script, config: ConsumerConfig, client: Any, how: Run
    ) -> None:
        raise NotImplementedError


class SyncFrontEnd(FrontEnd):
    name = "sync"

    def _run(
        self, queue: str, script: Script, config: ConsumerConfig, client: Any, how: Run
    ) -> None:
        consumer = Consumer(
            queue,
            script,
            config,
            client=client,
            limits=how.limits,
            body_model=how.body_model,
            wall_clock=how.wall_clock,
            idempotency=how.idempotency,
        )
        consumer.run_until_idle(how.idle_seconds)


class AsyncFrontEnd(FrontEnd):
    name = "async"

    def _run(
        self, queue: str, script: Script, config: ConsumerConfig, client: Any, how: Run
    ) -> None:
        run_async(
            queue,
            as_async(script),
            config,
            client,
            limits=how.limits,
            idle_seconds=how.idle_seconds,
            body_model=how.body_model,
            wall_clock=how.wall_clock,
            idempotency=how.idempotency,
        )


class LambdaFrontEnd(FrontEnd):
    """The Lambda adapter behind a simulated event source mapping (sync or async handler)."""

    def __init__(self, *, async_handler: bool = False) -> None:
        self.async_handler = async_handler
        self.name = "lambda-async" if async_handler else "lambda"
        self.requests: dict[str, int] = {}
        """SQS requests the adapter made in the last `consume` (the mapping's are not counted)."""

    def _run(
        self, queue: str, script: Script, config: ConsumerConfig, client: Any, how: Run
    ) -> None:
        handler = as_async(script) if self.async_handler else script
        if how.wall_clock is time.time:  # the public decorator, as users write it
            wrap = lambda_handler(
                config=config,
                client=client,
                limits=how.limits,
                body_model=how.body_model,
                idempotency=how.idempotency,
            )
            function = wrap(handler)
        else:  # what the decorator makes, with another clock
            function = LambdaAdapter(
                handler,
                config,
                client=client,
                limits=how.limits,
                body_model=how.body_model,
                wall_clock=how.wall_clock,
                idempotency=how.idempotency,
            )
        mapping = EventSourceMapping(
            client, queue, batch_size=config.max_batch_size, window=config.max_batch_timeout
        )
        try:
            mapping.run_until_idle(function, idle_seconds=how.idle_seconds)
        finally:
            function.close()
            self.requests = dict(function._sqs.requests) if function._sqs is not None else {}


@dataclass
class FakeContext:
    """Lambda's context: only the remaining time is read."""

    timeout_seconds: float = 30.0
    started: float = 0.0

    def __post_init__(self) -> None:
        self.started = time.monotonic()

    def get_remaining_time_in_millis(self) -> int:
        return int(max(0.0, self.timeout_seconds - (time.monotonic() - self.started)) * 1000)


class EventSourceMapping:
    """Lambda's SQS poller, as AWS documents it, on a real (local) queue."""

    def __init__(
        self,
        client: Any,
        queue: str,
        *,
        batch_size: int = 10,
        window: float = 0.5,
        function_timeout: float = 30.0,
    ) -> None:
        self.client = client
        self.url = client.get_queue_url(QueueName=queue)["QueueUrl"]
        attributes = client.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])
        self.arn = attributes["Attributes"]["QueueArn"]
        self.batch_size = batch_size
        self.window = window
        self.function_timeout = function_timeout
        self.responses: list[Mapping[str, Any]] = []

    def receive(self, wait_seconds: int) -> list[dict[str, Any]]:
        """One batch: up to `batch_size` messages, within the batching window."""
        messages: list[dict[str, Any]] = []
        closes = None
        while len(messages) < self.batch_size:
            left = 0.0 if closes is None else closes - time.monotonic()
            if closes is not None and left <= 0:
                break
            answer = self.client.receive_message(
                QueueUrl=self.url,
                MaxNumberOfMessages=min(10, self.batch_size - len(messages)),
                WaitTimeSeconds=wait_seconds if closes is None else min(1, int(left + 0.999)),
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
            )
            got = answer.get("Messages", [])
            if not got and closes is None:
                break
            messages.extend(got)
            if closes is None:
                closes = time.monotonic() + self.window
        return messages

    def event(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        return {"Records": [record(m, self.arn) for m in messages]}

    def invoke(self, function: LambdaFunction, messages: list[dict[str, Any]]) -> set[str]:
        """Invoke with one batch; delete what succeeded; returns the ids reported as failed."""
        response = function(self.event(messages), FakeContext(self.function_timeout))
        self.responses.append(response)
        ids = {m["MessageId"] for m in messages}
        failed = {item["itemIdentifier"] for item in response["batchItemFailures"]}
        # Lambda fails the whole batch on an identifier it does not know: never acceptable here.
        assert all(isinstance(i, str) and i in ids for i in failed), response
        done = [m for m in messages if m["MessageId"] not in failed]
        for start in range(0, len(done), 10):
            entries = [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                for i, m in enumerate(done[start : start + 10])
            ]
            self.client.delete_message_batch(QueueUrl=self.url, Entries=entries)
        return failed

    def run_until_idle(self, function: LambdaFunction, idle_seconds: float = 1.0) -> None:
        last = time.monotonic()
        while time.monotonic() - last < idle_seconds:
            messages = self.receive(wait_seconds=1)
            if messages:
                self.invoke(function, messages)
                last = time.monotonic()


def record(message: Mapping[str, Any], arn: str) -> dict[str, Any]:
    """A received message as the event source mapping hands it to Lambda."""
    attributes = {}
    for name, value in (message.get("MessageAttributes") or {}).items():
        shaped: dict[str, Any] = {
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": value["DataType"],
        }
        if "StringValue" in value:
            shaped["stringValue"] = value["StringValue"]
        if "BinaryValue" in value:
            shaped["binaryValue"] = base64.b64encode(value["BinaryValue"]).decode()
        attributes[name] = shaped
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message["Attributes"]),
        "messageAttributes": attributes,
        "md5OfBody": message["MD5OfBody"],
        "md5OfMessageAttributes": message.get("MD5OfMessageAttributes"),
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
        "awsRegion": arn.split(":")[3],
    }


class AsyncFaulty:
    """Proxies an aiobotocore client; `fail(op, times, error)` makes the next calls raise."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._faults: dict[str, list[Callable[[str], Exception]]] = {}
        self.failed: list[str] = []

    def fail(self, op: str, times: int, error: Callable[[str], Exception] = throttled) -> None:
        self._faults.setdefault(op, []).extend([error] * times)

    def __getattr__(self, op: str) -> Any:
        target = getattr(self._client, op)
        if not callable(target):
            return target

        async def call(**params: Any) -> Any:
            pending = self._faults.get(op)
            if pending:
                self.failed.append(op)
                raise pending.pop(0)(op)
            return await target(**params)

        return call


FRONT_ENDS: list[FrontEnd] = [
    SyncFrontEnd(),
    AsyncFrontEnd(),
    LambdaFrontEnd(),
    LambdaFrontEnd(async_handler=True),
]
