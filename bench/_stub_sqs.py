"""A stub SQS client in this process, for `bench/poller.py --server stub`: no server, no botocore.

It answers what a drain asks (GetQueueUrl, GetQueueAttributes, ReceiveMessage of up to 10 with
the attributes SQS sends, DeleteMessageBatch) from memory, so that what is left of a drain's CPU
is the poller's own Python (or the hand loop's): its threads or tasks, its flows, its
bookkeeping. Each call first sleeps `delay` seconds, standing for the round trip (the calling
thread blocks and lets the others run, as on a socket; 0: no sleep at all, a warm tight loop).
A queue is only a count: `create(queue, count)` gives it messages `{"n": 0..count-1}`, served
10 at a time, each once (nothing comes back: every drain deletes all it gets).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from types import SimpleNamespace
from typing import Any

from botocore.hooks import HierarchicalEmitter

__all__ = ["AsyncStubSqs", "StubSqs"]

EMPTY_POLL_SECONDS = 0.05
"""How long a receive from a drained queue waits before it answers empty, as a long poll does
(without it, receivers left without messages at the end of a drain would spin on the stub)."""
URL = "http://127.0.0.1:1/123456789012/"


def stub_meta() -> SimpleNamespace:
    """What the pollers read of a client's `meta`: its events (hooks that are never called)."""
    return SimpleNamespace(
        events=HierarchicalEmitter(), endpoint_url=URL, region_name="us-east-1", config=None
    )


class StubSqs:
    """Queues of `{"n": i}` messages (`create`); every call sleeps `delay` first; thread-safe."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.lock = threading.Lock()
        self.queues: dict[str, tuple[int, int]] = {}  # url: (count, taken)
        self.calls: Counter[str] = Counter()
        self.meta = stub_meta()

    def create(self, queue: str, count: int) -> None:
        self.queues[URL + queue] = (count, 0)

    def pause(self, operation: str) -> None:
        self.calls[operation] += 1
        if self.delay:
            time.sleep(self.delay)

    def get_queue_url(self, QueueName: str) -> dict[str, str]:
        self.pause("GetQueueUrl")
        return {"QueueUrl": URL + QueueName}

    def get_queue_attributes(self, **params: Any) -> dict[str, Any]:
        self.pause("GetQueueAttributes")
        return {"Attributes": {}}

    def list_queue_tags(self, **params: Any) -> dict[str, Any]:
        self.pause("ListQueueTags")  # a poller's pause check: no tags, not paused
        return {}

    def receive_message(self, **params: Any) -> dict[str, Any]:
        self.pause("ReceiveMessage")
        messages = self.take(params["QueueUrl"], params.get("MaxNumberOfMessages", 1))
        if not messages:  # a long poll on an empty queue: it waits, at no CPU cost
            time.sleep(EMPTY_POLL_SECONDS)
            return {}
        return {"Messages": messages}

    def take(self, url: str, most: int) -> list[dict[str, Any]]:
        with self.lock:
            count, first = self.queues[url]
            taken = min(count, first + most)
            self.queues[url] = (count, taken)
        now = str(int(time.time() * 1000))
        attributes = {
            "SentTimestamp": now,
            "ApproximateReceiveCount": "1",
            "ApproximateFirstReceiveTimestamp": now,
            "SenderId": "AIDASTUB",
        }
        return [
            {
                "MessageId": f"m-{n}",
                "ReceiptHandle": f"rh-{n}",
                "MD5OfBody": "-",
                "Body": json.dumps({"n": n}),
                "Attributes": dict(attributes),
            }
            for n in range(first, taken)
        ]

    def delete_message_batch(self, QueueUrl: str, Entries: list[dict[str, str]]) -> Any:
        self.pause("DeleteMessageBatch")
        return {"Successful": [{"Id": entry["Id"]} for entry in Entries], "Failed": []}

    def close(self) -> None:
        pass


class AsyncStubSqs:
    """`StubSqs` for aiobotocore's `async def` calls (the same queues); each call awaits its
    `delay` first. An async context manager, as an aiobotocore client is."""

    def __init__(self, stub: StubSqs) -> None:
        self.stub = stub
        self.meta = stub_meta()

    async def __aenter__(self) -> AsyncStubSqs:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    async def pause(self, operation: str) -> None:
        self.stub.calls[operation] += 1
        if self.stub.delay:
            await asyncio.sleep(self.stub.delay)

    async def get_queue_url(self, QueueName: str) -> dict[str, str]:
        await self.pause("GetQueueUrl")
        return {"QueueUrl": URL + QueueName}

    async def get_queue_attributes(self, **params: Any) -> dict[str, Any]:
        await self.pause("GetQueueAttributes")
        return {"Attributes": {}}

    async def list_queue_tags(self, **params: Any) -> dict[str, Any]:
        await self.pause("ListQueueTags")
        return {}

    async def receive_message(self, **params: Any) -> dict[str, Any]:
        await self.pause("ReceiveMessage")
        messages = self.stub.take(params["QueueUrl"], params.get("MaxNumberOfMessages", 1))
        if not messages:  # a long poll on an empty queue
            await asyncio.sleep(EMPTY_POLL_SECONDS)
            return {}
        return {"Messages": messages}

    async def delete_message_batch(self, QueueUrl: str, Entries: list[dict[str, str]]) -> Any:
        await self.pause("DeleteMessageBatch")
        return {"Successful": [{"Id": entry["Id"]} for entry in Entries], "Failed": []}
