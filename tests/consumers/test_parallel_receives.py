"""Both pollers on moto's server: receives run in parallel while there is a backlog, one at a
time while the queue is quiet (issue 11, part 5).

A gauge around the client counts the receives in flight at once. moto answers a receive in a few
milliseconds, so two receives rarely overlap by chance: after the first receive, the gauge holds
each answer (at most 5 s) until another receive is in flight too. Under the old poller (one
receive at a time) the peak stays 1. moto is not thread-safe: a message may be handed out twice,
so the checks are "each processed at least once, all deleted".
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any

import pytest

from sqsbatch import AsyncConsumer, Consumer, ConsumerConfig, MessageBatch, Producer, create_queue
from tests.support.faults import ClientProxy
from tests.support.front_ends import aio_client
from tests.support.sqs_helpers import depth

HOLD_SECONDS = 5.0


class ReceiveGauge(ClientProxy):
    """Proxies a boto3 client; counts `receive_message` calls in flight at once."""

    def __init__(self, client: Any, *, hold: bool) -> None:
        super().__init__(client)
        self._hold = hold
        self._changed = threading.Condition()
        self.calls = self.active = self.peak = 0

    def _call(self, op: str, target: Callable[..., Any], params: dict[str, Any]) -> Any:
        if op != "receive_message":
            return target(**params)
        with self._changed:
            self.calls += 1
            later = self.calls > 1
            self.active += 1
            self.peak = max(self.peak, self.active)
            self._changed.notify_all()
        try:
            answer = target(**params)
            if self._hold and later:
                with self._changed:
                    self._changed.wait_for(lambda: self.peak >= 2, HOLD_SECONDS)
            return answer
        finally:
            with self._changed:
                self.active -= 1


class AsyncReceiveGauge:
    """Proxies an aiobotocore client; counts `receive_message` calls in flight at once."""

    def __init__(self, client: Any, *, hold: bool) -> None:
        self._client = client
        self._hold = hold
        self._changed = asyncio.Condition()
        self.calls = self.active = self.peak = 0

    def __getattr__(self, op: str) -> Any:
        target = getattr(self._client, op)
        if op != "receive_message":
            return target

        async def receive(**params: Any) -> Any:
            self.calls += 1
            later = self.calls > 1
            self.active += 1
            self.peak = max(self.peak, self.active)
            async with self._changed:
                self._changed.notify_all()
            try:
                answer = await target(**params)
                if self._hold and later:
                    async with self._changed:
                        peaked = self._changed.wait_for(lambda: self.peak >= 2)
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(peaked, HOLD_SECONDS)
                return answer
            finally:
                self.active -= 1

        return receive


def backlog(sqs: Any, name: str, count: int) -> None:
    create_queue(name, client=sqs)
    producer = Producer(name, client=sqs)
    for start in range(0, count, 100):
        producer.send_batch([{"body": i} for i in range(start, min(count, start + 100))])


def consume(kind: str, sqs: Any, name: str, config: ConsumerConfig, *, hold: bool) -> Any:
    """Run `kind`'s poller until idle behind a gauge; returns (gauge, bodies handled)."""
    seen: list[int] = []
    lock = threading.Lock()

    def handler(batch: MessageBatch) -> None:
        with lock:
            seen.extend(m.body for m in batch.messages)

    async def async_handler(batch: MessageBatch) -> None:
        seen.extend(m.body for m in batch.messages)

    if kind == "sync":
        gauge: Any = ReceiveGauge(sqs, hold=hold)
        Consumer(name, handler, config, client=gauge).run_until_idle(1.0)
        return gauge, seen

    async def main() -> Any:
        async with aio_client(sqs, max_pool_connections=20) as aio:
            gauge = AsyncReceiveGauge(aio, hold=hold)
            await AsyncConsumer(name, async_handler, config, client=gauge).run_until_idle(1.0)
            return gauge

    return asyncio.run(main()), seen


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_backlog_is_received_by_several_receivers_at_once(kind: str, sqs: Any, name: str) -> None:
    # Given a backlog of 80 messages and a poller with 4 slots, batches of 20 (two receives each)
    backlog(sqs, name, 80)
    config = ConsumerConfig.load(max_concurrency=4, max_batch_size=20, max_batch_timeout=5)
    # When it drains the queue
    gauge, seen = consume(kind, sqs, name, config, hold=True)
    # Then more than one receive was in flight at once, never more than the slots
    assert 2 <= gauge.peak <= 4
    # And each message was handled at least once, and all were deleted
    assert set(seen) == set(range(80))
    assert depth(sqs, name) == 0


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_quiet_queue_costs_one_long_poll_at_a_time(kind: str, sqs: Any, name: str) -> None:
    # Given an empty queue and a poller with 8 slots
    create_queue(name, client=sqs)
    config = ConsumerConfig.load(max_concurrency=8, max_batch_timeout=0)
    # When it runs until idle
    gauge, seen = consume(kind, sqs, name, config, hold=False)
    # Then it long-polled with one receiver only
    assert seen == [] and gauge.peak == 1


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_trickle_after_a_backlog_is_received_by_one_receiver_again(
    kind: str, sqs: Any, name: str
) -> None:
    # Given a backlog that makes the poller grow to its 4 slots
    backlog(sqs, name, 60)
    config = ConsumerConfig.load(max_concurrency=4, max_batch_size=10, max_batch_timeout=0)
    # When it drains the queue, then finds it empty until idle
    gauge, seen = consume(kind, sqs, name, config, hold=False)
    # Then all was handled and deleted, and the receivers shrank back: the extra ones ended
    # after one empty receive each instead of long-polling on (at most 4 empty receives, plus
    # the 6 full ones and the one long poll that ends the run)
    assert set(seen) == set(range(60)) and depth(sqs, name) == 0
    assert gauge.calls <= 6 + 4 + 1 + 2  # 2: moto may hand a message out twice


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_on_stop_every_receiver_delivers_what_it_received(kind: str, sqs: Any, name: str) -> None:
    # Given a backlog, 4 slots, batches of 20 with a long window, and a handler whose first
    # batch stops the poller while other receivers may hold partly filled windows
    backlog(sqs, name, 90)
    config = ConsumerConfig.load(max_concurrency=4, max_batch_size=20, max_batch_timeout=5)
    handled: list[int] = []
    consumers: list[Any] = []

    def handler(batch: MessageBatch) -> None:
        handled.extend(m.body for m in batch.messages)
        consumers[0].stop()

    async def async_handler(batch: MessageBatch) -> None:
        handler(batch)

    # When it runs until that stop
    if kind == "sync":
        consumers.append(Consumer(name, handler, config, client=sqs))
        consumers[0].run()
    else:

        async def main() -> None:
            async with aio_client(sqs, max_pool_connections=20) as aio:
                consumers.append(AsyncConsumer(name, async_handler, config, client=aio))
                await consumers[0].run()

        asyncio.run(main())
    # Then every message received was handed to the handler and acked, none was released
    stats = consumers[0].stats
    assert stats.received == len(handled) == stats.acked
    assert depth(sqs, name) == 90 - len(set(handled))
