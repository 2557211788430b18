"""`AsyncConsumer` on moto's server: what the scenario table cannot show.

Timeouts, graceful shutdown on SIGTERM, faults around a real client, concurrency, heartbeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from typing import Any

import pytest

from sqsbatch import (
    AsyncConsumer,
    ConfigError,
    Consumer,
    ConsumerConfig,
    MessageBatch,
    Producer,
    QueueNotFound,
    create_queue,
)
from tests.support.faults import throttled, unreachable
from tests.support.front_ends import AsyncFaulty, aio_client, run_async
from tests.support.sqs_helpers import depth, drain, fill
from tests.support.sqs_helpers import quick as config
from tests.support.waiting import GUARD_SECONDS, telling


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_past_handler_timeout_undecided_messages_retry_and_acks_hold(
    kind: str, sqs: Any, name: str
) -> None:
    # Given three messages and a handler that acks one, then hangs on its first delivery
    fill(sqs, name, [0, 1, 2])
    cfg = config(handler_timeout=0.5)
    seen: list[tuple[int, int]] = []
    release = threading.Event()
    cancelled: list[bool] = []

    def stuck(batch: MessageBatch) -> None:
        seen.extend((m.body, m.attempts) for m in batch.messages)
        if batch.messages[0].attempts == 1:
            next(m for m in batch.messages if m.body == 0).ack()
            release.wait(10)

    async def stuck_async(batch: MessageBatch) -> None:
        seen.extend((m.body, m.attempts) for m in batch.messages)
        if batch.messages[0].attempts == 1:
            next(m for m in batch.messages if m.body == 0).ack()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append(True)
                raise

    # When the poller runs until idle
    try:
        if kind == "sync":
            consumer: Consumer | AsyncConsumer = Consumer(name, stuck, cfg, client=sqs)
            consumer.run_until_idle(1.0)
        else:
            consumer = run_async(name, stuck_async, cfg, sqs)
    finally:
        release.set()
    # Then the timed-out batch counted as failed: 1 and 2 came back once, 0 stayed acked
    assert sorted(seen) == [(0, 1), (1, 1), (1, 2), (2, 1), (2, 2)]
    assert consumer.stats.handler_timeouts == 1
    assert cancelled == ([True] if kind == "async" else [])
    assert depth(sqs, name) == 0


def test_an_async_handler_that_ignores_its_cancellation_is_settled_without_it(
    sqs: Any, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given two messages in batches of one, one slot, and a handler that ignores its
    # cancellation on the first delivery of message 0 until message 1 has been handled
    fill(sqs, name, [0, 1])
    cfg = config(max_batch_size=1, max_concurrency=1, handler_timeout=0.3)
    seen: list[tuple[int, int]] = []
    stuck: list[str] = []
    handled_1: list[asyncio.Event] = []

    async def handler(batch: MessageBatch) -> None:
        message = batch.messages[0]
        seen.append((message.body, message.attempts))
        if not handled_1:
            handled_1.append(asyncio.Event())
        if message.body == 1:
            handled_1[0].set()
        if (message.body, message.attempts) != (0, 1):
            return
        while not handled_1[0].is_set():
            try:
                await asyncio.wait_for(handled_1[0].wait(), 10)
            except asyncio.CancelledError:
                stuck.append("cancelled, ignored")
            except TimeoutError:
                stuck.append("the slot waited for me")
                return
        message.ack()  # long past its batch's settlement: ignored
        stuck.append("ended")

    # When the poller runs until idle
    consumer = run_async(name, handler, cfg, sqs, idle_seconds=1.0)

    # Then the batch settled as timed out without it, and the slot went on meanwhile
    assert stuck == ["cancelled, ignored", "ended"]
    assert consumer.stats.handler_timeouts == 1
    assert sorted(seen) == [(0, 1), (0, 2), (1, 1)]
    assert "ignores cancellation; settling without it" in caplog.text
    assert depth(sqs, name) == 0


def test_sigterm_finishes_the_batch_in_flight_and_receives_no_more(sqs: Any, name: str) -> None:
    # Given three messages, batches of one, and a handler that gets SIGTERM mid-batch
    fill(sqs, name, [0, 1, 2])
    handled: list[int] = []
    stopped = threading.Event()

    async def handler(batch: MessageBatch) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        # still running when the signal is handled
        assert await asyncio.to_thread(stopped.wait, GUARD_SECONDS)
        handled.extend(m.body for m in batch.messages)

    async def main() -> None:
        async with aio_client(sqs) as aio:
            consumer = AsyncConsumer(name, handler, config(max_batch_size=1), client=aio)
            consumer.stop = telling(consumer.stop, stopped)  # type: ignore[method-assign]
            await consumer.run()

    before = signal.getsignal(signal.SIGTERM)
    # When run() gets the signal
    asyncio.run(main())
    # Then the batch finished and was acked; the rest was never received (no attempt burned)
    assert len(handled) == 1
    rest = drain(sqs, name)
    assert len(rest) == 2
    assert all(m["Attributes"]["ApproximateReceiveCount"] == "1" for m in rest)  # drain's own
    assert signal.getsignal(signal.SIGTERM) == before


def test_throttling_and_network_errors_do_not_stop_the_loop(sqs: Any, name: str) -> None:
    # Given faults around a real client: failed receives, a throttled delete, a lost connection
    fill(sqs, name, [0, 1, 2])
    handled: list[tuple[int, int]] = []
    consumers: list[AsyncConsumer] = []

    async def handler(batch: MessageBatch) -> None:
        handled.extend((m.body, m.attempts) for m in batch.messages)
        for message in batch.messages:
            if message.body == 0 and message.attempts == 1:
                message.retry(delay_seconds=0)
        if len(handled) >= 4:
            consumers[0].stop()

    async def main() -> AsyncConsumer:
        async with aio_client(sqs) as aio:
            faulty = AsyncFaulty(aio)
            faulty.fail("receive_message", 1, throttled)
            faulty.fail("receive_message", 1, unreachable)
            faulty.fail("change_message_visibility_batch", 1, unreachable)
            faulty.fail("delete_message_batch", 1, throttled)
            consumers.append(AsyncConsumer(name, handler, config(), client=faulty))
            await asyncio.wait_for(consumers[0].run(), 60)
            assert len(faulty.failed) == 4
            return consumers[0]

    # When the consumer runs through them
    result = asyncio.run(main())
    # Then every message was handled and settled: 0 retried once, the rest acked
    assert sorted(handled) == [(0, 1), (0, 2), (1, 1), (2, 1)]
    assert result.stats.receive_errors == 2
    assert depth(sqs, name) == 0


def test_max_concurrency_batches_run_at_once(sqs: Any, name: str) -> None:
    # Given three messages in batches of one, and room for three batches in flight
    fill(sqs, name, [0, 1, 2])
    running: list[int] = []
    peak: list[int] = []
    all_running = asyncio.Event()

    async def handler(batch: MessageBatch) -> None:
        running.append(batch.messages[0].body)
        peak.append(len(running))
        if len(running) == 3:
            all_running.set()
        with contextlib.suppress(TimeoutError):  # wait for the others to be running too
            await asyncio.wait_for(all_running.wait(), GUARD_SECONDS)

    # When the poller runs until idle
    run_async(name, handler, config(max_batch_size=1, max_concurrency=3), sqs)
    # Then the three handlers overlapped
    assert max(peak) == 3
    assert depth(sqs, name) == 0


def test_the_heartbeat_keeps_a_slow_batch_hidden(sqs: Any, name: str) -> None:
    # Given a 2 s visibility timeout and a handler that takes 3.5 s, with a second slot free
    fill(sqs, name, [0])
    seen: list[int] = []

    async def slow(batch: MessageBatch) -> None:
        seen.extend(m.attempts for m in batch.messages)
        await asyncio.sleep(3.5)

    # When the poller runs until idle
    consumer = run_async(name, slow, config(visibility_timeout=2, max_concurrency=2), sqs)
    # Then the message was extended, never redelivered meanwhile, and acked
    assert seen == [1]
    assert consumer.requests_by_operation["change_message_visibility_batch"] >= 1
    assert depth(sqs, name) == 0


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_heartbeat_that_fails_by_a_bug_is_logged_and_not_tried_again(
    kind: str, sqs: Any, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a poller whose heartbeat raises (a bug of ours), and a handler that waits for it
    fill(sqs, name, [0])
    tried = threading.Event()
    beats: list[int] = []

    def broken_heartbeat(batch: MessageBatch) -> None:
        beats.append(len(batch))
        tried.set()
        raise RuntimeError("a bug in the heartbeat")

    async def broken_heartbeat_async(batch: MessageBatch) -> None:
        broken_heartbeat(batch)

    def handler(batch: MessageBatch) -> None:
        assert tried.wait(10)

    async def handler_async(batch: MessageBatch) -> None:
        assert await asyncio.to_thread(tried.wait, GUARD_SECONDS), "no heartbeat came"

    # When it runs until idle, with a heartbeat due about 3 s after the receive
    cfg = config(visibility_timeout=4, max_concurrency=1)
    if kind == "sync":
        consumer: Consumer | AsyncConsumer = Consumer(name, handler, cfg, client=sqs)
        consumer._heartbeat = broken_heartbeat  # type: ignore[method-assign]
        consumer.run_until_idle(1.0)
    else:

        def patched(made: AsyncConsumer) -> None:
            made._heartbeat = broken_heartbeat_async  # type: ignore[method-assign]

        consumer = run_async(name, handler_async, cfg, sqs, prepare=patched)

    # Then it was tried once, logged with its traceback, and the batch settled as usual
    assert beats == [1]
    [record] = [r for r in caplog.records if r.getMessage() == f"a heartbeat of {name} failed"]
    assert record.exc_info is not None and "a bug in the heartbeat" in str(record.exc_info[1])
    assert (consumer.stats.acked, consumer.stats.handler_timeouts) == (1, 0)
    assert depth(sqs, name) == 0


def test_stop_from_a_handler_ends_run(sqs: Any, name: str) -> None:
    fill(sqs, name, [0])

    async def main() -> None:
        async with aio_client(sqs) as aio:

            async def handler(batch: MessageBatch) -> None:
                consumer.stop()

            consumer = AsyncConsumer(name, handler, config(), client=aio)
            await asyncio.wait_for(consumer.run(), 30)

    asyncio.run(main())
    assert depth(sqs, name) == 0


def test_refuses_a_sync_handler_and_a_dlq_that_is_the_queue() -> None:
    with pytest.raises(ConfigError, match="not `async def`"):
        AsyncConsumer("q", lambda batch: None, config())  # type: ignore[arg-type]

    async def handler(batch: MessageBatch) -> None:
        pass

    with pytest.raises(ConfigError, match="is the queue itself"):
        AsyncConsumer("q", handler, config(dead_letter_queue="q"))


def test_a_deleted_queue_ends_the_async_run_with_a_clear_error(sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send("last")
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]

    async def handler(batch: MessageBatch) -> None:
        sqs.delete_queue(QueueUrl=url)  # gone while the poller runs

    with pytest.raises(QueueNotFound, match="queue does not exist"):
        run_async(name, handler, ConsumerConfig(max_batch_timeout=0), sqs, idle_seconds=5)
