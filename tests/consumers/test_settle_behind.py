"""Settling behind the next receive: a poller sends an all-acked batch's deletes while its slot
receives again, on a standard queue (asyncio always, threads once deletes are slow enough to be
worth a thread); everything else settles before the slot receives again.

A log around the client records, in order, when each call starts and ends. To see an overlap
without relying on timing, it holds each delete's answer (at most `HOLD_SECONDS`) until the
slot's next receive has started: a slot that settles first never starts one meanwhile, so the
hold runs out and the delete is recorded as alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

from sqsbatch import AsyncConsumer, Consumer, ConsumerConfig, MessageBatch, Producer, create_queue
from sqsbatch._core.closing import SETTLES_OUT_PER_SLOT
from tests.support.front_ends import aio_client
from tests.support.sqs_helpers import depth

HOLD_SECONDS = 10.0
CONFIG = ConsumerConfig.load(max_batch_size=10, max_batch_timeout=0)
WATCHED = ("receive_message", "delete_message_batch", "change_message_visibility_batch")


class Log:
    """What both call logs share: the client proxied, each watched call's start and end, in
    order (`events`), and `overlapped`, per delete, whether a receive was out at the same time;
    a delete that started alone has its answer held until a receive starts (at most
    `HOLD_SECONDS`), but the first `unheld` deletes."""

    def __init__(self, client: Any, *, unheld: int = 0) -> None:
        self._client = client
        self._unheld = unheld
        self.events: list[tuple[str, str]] = []
        self.overlapped: list[bool] = []
        self._receives = self._receiving = 0

    def __getattr__(self, op: str) -> Any:
        target = getattr(self._client, op)
        return self._watched(op, target) if op in WATCHED else target

    def _watched(self, op: str, target: Any) -> Any:
        raise NotImplementedError


class CallLog(Log):
    """Proxies a boto3 client (threads). `delete_seconds`: each delete takes that much longer,
    as behind a remote endpoint."""

    def __init__(self, client: Any, *, delete_seconds: float = 0.0, unheld: int = 0) -> None:
        super().__init__(client, unheld=unheld)
        self._delete_seconds = delete_seconds
        self._changed = threading.Condition()

    def _watched(self, op: str, target: Any) -> Any:
        def call(**params: Any) -> Any:
            receive = op == "receive_message"
            with self._changed:
                self.events.append(("start", op))
                self._receives += receive
                self._receiving += receive
                before, alone = self._receives, not self._receiving
                self._changed.notify_all()
            try:
                if op == "delete_message_batch":
                    time.sleep(self._delete_seconds)
                answer = target(**params)
                if op == "delete_message_batch":
                    with self._changed:
                        if alone and len(self.overlapped) >= self._unheld:
                            self._changed.wait_for(lambda: self._receives > before, HOLD_SECONDS)
                        self.overlapped.append(not alone or self._receives > before)
                return answer
            finally:
                with self._changed:
                    self._receiving -= receive
                    self.events.append(("end", op))

        return call


class AsyncCallLog(Log):
    """Proxies an aiobotocore client: the same log, kept on its event loop."""

    def __init__(self, client: Any, *, unheld: int = 0) -> None:
        super().__init__(client, unheld=unheld)
        self._changed = asyncio.Condition()

    def _watched(self, op: str, target: Any) -> Any:
        async def call(**params: Any) -> Any:
            self.events.append(("start", op))
            receive = op == "receive_message"
            self._receives += receive
            self._receiving += receive
            before, alone = self._receives, not self._receiving
            async with self._changed:
                self._changed.notify_all()
            try:
                answer = await target(**params)
                if op == "delete_message_batch":
                    if alone and len(self.overlapped) >= self._unheld:
                        async with self._changed:
                            received = self._changed.wait_for(lambda: self._receives > before)
                            with contextlib.suppress(TimeoutError):
                                await asyncio.wait_for(received, HOLD_SECONDS)
                    self.overlapped.append(not alone or self._receives > before)
                return answer
            finally:
                self._receiving -= receive
                self.events.append(("end", op))

        return call


def settled_apart(events: list[tuple[str, str]]) -> bool:
    """Whether no receive was out at the same time as a delete or a visibility change."""
    out = {"receive": 0, "settle": 0}
    for when, op in events:
        kind, other = ("receive", "settle") if op == "receive_message" else ("settle", "receive")
        if when == "start" and out[other]:
            return False
        out[kind] += 1 if when == "start" else -1
    return True


def fill(sqs: Any, name: str, count: int, *, fifo: bool = False) -> None:
    create_queue(name, client=sqs)
    producer = Producer(name, client=sqs)
    group = {"group_id": "g"} if fifo else {}
    for start in range(0, count, 100):
        producer.send_batch([{"body": n, **group} for n in range(start, min(count, start + 100))])


def run_async(
    name: str, sqs: Any, handler: Any, *, unheld: int = 0
) -> tuple[AsyncCallLog, AsyncConsumer]:
    async def main() -> tuple[AsyncCallLog, AsyncConsumer]:
        async with aio_client(sqs) as aio:
            log = AsyncCallLog(aio, unheld=unheld)
            consumer = AsyncConsumer(name, handler, CONFIG, client=log)
            await consumer.run_until_idle(1.0)
            return log, consumer

    return asyncio.run(main())


def test_asyncio_deletes_an_acked_batch_while_its_slot_receives_again(sqs: Any, name: str) -> None:
    # Given 30 messages on a standard queue and a handler that acks them all (by returning)
    fill(sqs, name, 30)
    seen: list[int] = []

    async def handler(batch: MessageBatch) -> None:
        seen.extend(m.body for m in batch.messages)

    # When the asyncio poller drains it, one receive per batch
    log, consumer = run_async(name, sqs, handler)
    # Then every batch's deletes were still out when the slot's next receive started
    assert log.overlapped and all(log.overlapped)
    assert not settled_apart(log.events)
    # And yet the run returned only once all was settled: each message handled once, deleted
    assert sorted(seen) == list(range(30))
    assert consumer.stats.acked == 30 and depth(sqs, name) == 0


def test_asyncio_lands_a_retrys_visibility_change_before_it_receives_again(
    sqs: Any, name: str
) -> None:
    # Given a handler that retries message 0 on its first delivery, without a delay
    fill(sqs, name, 5)
    deliveries: list[int] = []

    async def handler(batch: MessageBatch) -> None:
        for message in batch.messages:
            deliveries.append(message.body)
            if message.body == 0 and message.attempts == 1:
                message.retry()

    # When the asyncio poller drains the queue
    log, _ = run_async(name, sqs, handler, unheld=99)  # the order of calls alone
    # Then that first batch's visibility change (one receive: 4 acked, 1 retried) ended before
    # the next receive started (a receive made meanwhile would miss the message); its deletes
    # go beside that receive (phase two, `deletes_behind`); the message came back at once
    receives = [i for i, event in enumerate(log.events) if event == ("start", "receive_message")]
    first_batch = log.events[: receives[1]]
    assert ("end", "change_message_visibility_batch") in first_batch
    assert ("start", "delete_message_batch") not in first_batch
    assert ("end", "delete_message_batch") in log.events
    assert sorted(deliveries) == [0, 0, 1, 2, 3, 4]
    assert depth(sqs, name) == 0


def test_asyncio_settles_before_receiving_on_a_fifo_queue(sqs: Any, name: str) -> None:
    # Given 25 messages of one group on a FIFO queue
    fifo = f"{name}.fifo"
    fill(sqs, fifo, 25, fifo=True)
    seen: list[int] = []

    async def handler(batch: MessageBatch) -> None:
        seen.extend(m.body for m in batch.messages)

    # When the asyncio poller drains it
    log, _ = run_async(fifo, sqs, handler, unheld=99)  # the order of calls alone
    # Then each batch's deletes ended before the next receive started, and the order held
    assert settled_apart(log.events)
    assert seen == list(range(25)) and depth(sqs, fifo) == 0


def test_threads_delete_an_acked_batch_behind_the_next_receive_once_deletes_are_slow(
    sqs: Any, name: str
) -> None:
    # Given 40 messages on a standard queue, deletes that take 10 ms longer (a remote endpoint's
    # round trip), and a handler that acks them all
    fill(sqs, name, 40)
    seen: list[int] = []

    def handler(batch: MessageBatch) -> None:
        seen.extend(m.body for m in batch.messages)

    # When the sync poller drains it
    log = CallLog(sqs, delete_seconds=0.010, unheld=1)
    consumer = Consumer(name, handler, CONFIG, client=log)
    consumer.run_until_idle(1.0)
    # Then the first batch was settled in the slot (nothing was known of the endpoint yet), and
    # the next ones' deletes were still out when the slot received again
    assert log.overlapped[0] is False and all(log.overlapped[1:])
    # And the run returned only once all was settled
    assert sorted(seen) == list(range(40))
    assert consumer.stats.acked == 40 and depth(sqs, name) == 0


def test_threads_settle_a_batch_with_a_retry_before_they_receive_again(sqs: Any, name: str) -> None:
    # Given slow deletes, and a handler that retries message 0 of the second batch once
    fill(sqs, name, 15)
    deliveries: list[int] = []

    def handler(batch: MessageBatch) -> None:
        for message in batch.messages:
            deliveries.append(message.body)
            if message.body == 10 and message.attempts == 1:
                message.retry()

    # When the sync poller drains the queue
    log = CallLog(sqs, delete_seconds=0.010, unheld=99)  # the order of calls alone
    Consumer(name, handler, CONFIG, client=log).run_until_idle(1.0)
    # Then the batch with the retry was settled before the next receive started
    receives = [i for i, event in enumerate(log.events) if event == ("start", "receive_message")]
    second_batch = log.events[receives[1] : receives[2]]
    assert ("end", "change_message_visibility_batch") in second_batch
    assert settled_apart(second_batch)
    assert sorted(deliveries) == [*range(11), *range(10, 15)]
    assert depth(sqs, name) == 0


# -- several settles out per slot ------------------------------------------------------------


class HeldDeletes:
    """Proxies a boto3 client (threads): deletes number 2 to `SETTLES_OUT_PER_SLOT` (of the
    first batches, settled behind the slot) are answered only once receive number
    `SETTLES_OUT_PER_SLOT + 2` has started, at most `HOLD_SECONDS` later; `released` says, per
    delete held, whether that receive had started by then. A slot that had to wait for one of
    them before it received again never gets there: its hold runs out."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._deletes = self._receives = 0
        self._changed = threading.Condition()
        self.released: list[bool] = []

    def __getattr__(self, op: str) -> Any:
        target = getattr(self._client, op)
        if op not in ("receive_message", "delete_message_batch"):
            return target

        def call(**params: Any) -> Any:
            with self._changed:
                if op == "receive_message":
                    self._receives += 1
                    self._changed.notify_all()
                else:
                    self._deletes += 1
                held = op != "receive_message" and 2 <= self._deletes <= SETTLES_OUT_PER_SLOT
            if op == "receive_message":
                return target(**params)
            time.sleep(0.010)  # a remote endpoint's round trip: threads settle behind
            answer = target(**params)
            if held:
                with self._changed:
                    self.released.append(
                        self._changed.wait_for(self._released, HOLD_SECONDS) is True
                    )
            return answer

        return call

    def _released(self) -> bool:
        return self._receives >= SETTLES_OUT_PER_SLOT + 2


class AsyncHeldDeletes(HeldDeletes):
    """The same, around an aiobotocore client, on its event loop."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self._news = asyncio.Condition()

    def __getattr__(self, op: str) -> Any:
        target = getattr(self._client, op)
        if op not in ("receive_message", "delete_message_batch"):
            return target

        async def call(**params: Any) -> Any:
            if op == "receive_message":
                self._receives += 1
                async with self._news:
                    self._news.notify_all()
                return await target(**params)
            self._deletes += 1
            held = 2 <= self._deletes <= SETTLES_OUT_PER_SLOT
            answer = await target(**params)
            if held:
                async with self._news:
                    released = self._news.wait_for(self._released)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(released, HOLD_SECONDS)
                self.released.append(self._released())
            return answer

        return call


MANY = (SETTLES_OUT_PER_SLOT + 3) * 10
"""Messages enough for the slot to receive past the late answers."""


def test_threads_receive_on_while_several_batches_deletes_are_late(sqs: Any, name: str) -> None:
    # Given one slot, and SQS answering the deletes of batches 2 to `SETTLES_OUT_PER_SLOT` (of
    # 10 each) only once the slot has started receiving batch `SETTLES_OUT_PER_SLOT + 2`
    fill(sqs, name, MANY)
    seen: list[int] = []

    def handler(batch: MessageBatch) -> None:
        seen.extend(m.body for m in batch.messages)

    # When the sync poller drains the queue
    client = HeldDeletes(sqs)
    consumer = Consumer(name, handler, CONFIG, client=client)
    consumer.run_until_idle(1.0)
    # Then the slot received on past the late answers (up to `SETTLES_OUT_PER_SLOT` batches'
    # settles are out at once), and every message was handled once and deleted
    assert client.released == [True] * (SETTLES_OUT_PER_SLOT - 1)
    assert sorted(seen) == list(range(MANY))
    assert consumer.stats.acked == MANY and depth(sqs, name) == 0


def test_asyncio_receives_on_while_several_batches_deletes_are_late(sqs: Any, name: str) -> None:
    # Given the same queue and late answers
    fill(sqs, name, MANY)
    seen: list[int] = []

    async def handler(batch: MessageBatch) -> None:
        seen.extend(m.body for m in batch.messages)

    # When the asyncio poller drains the queue
    async def main() -> tuple[AsyncHeldDeletes, AsyncConsumer]:
        async with aio_client(sqs) as aio:
            client = AsyncHeldDeletes(aio)
            consumer = AsyncConsumer(name, handler, CONFIG, client=client)
            await consumer.run_until_idle(1.0)
            return client, consumer

    client, consumer = asyncio.run(main())
    # Then, as on threads, the slot received on past the late answers, and nothing was lost
    assert client.released == [True] * (SETTLES_OUT_PER_SLOT - 1)
    assert sorted(seen) == list(range(MANY))
    assert consumer.stats.acked == MANY and depth(sqs, name) == 0
