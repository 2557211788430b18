"""A handler that returns an awaitable, and one that raises KeyboardInterrupt/SystemExit/
BaseException, on every front end against the local SQS (issue 27, items 1 and 10).

A sync callable that returns a coroutine (an `async def` under a plain decorator) must never
count as done while its code never ran: where an event loop is at hand it is awaited; where
none is (`Consumer`, `run_handler`'s sync path) the batch fails, one ERROR line says how to run
it, and the coroutine is closed (no "never awaited" warning).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import warnings
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from sqsbatch import (
    AsyncConsumer,
    Consumer,
    ConsumerConfig,
    MessageBatch,
    Producer,
    create_queue,
    lambda_handler,
)
from sqsbatch._core.envelope import decode
from sqsbatch.errors import ConfigError
from sqsbatch.limits import SqsLimits
from sqsbatch.testing import run_handler, run_handler_async
from tests.support.front_ends import (
    FRONT_ENDS,
    EventSourceMapping,
    FrontEnd,
    aio_client,
    as_async,
    run_async,
)
from tests.support.sqs_helpers import depth, drain

AsyncHandler = Callable[[MessageBatch], Awaitable[None]]


def logged(function: AsyncHandler) -> Callable[[MessageBatch], Awaitable[None]]:
    """The issue's plain decorator: a sync wrapper that returns the coroutine unawaited."""

    @functools.wraps(function)
    def wrapper(batch: MessageBatch) -> Any:  # unannotated, as the issue's
        return function(batch)

    return wrapper


def config(**values: Any) -> ConsumerConfig:
    return ConsumerConfig.load(**{"max_batch_timeout": 0.2, **values})


def fill(sqs: Any, name: str, bodies: list[int], **options: Any) -> None:
    create_queue(name, client=sqs, **options)
    Producer(name, client=sqs).send_batch([{"body": b} for b in bodies])


@pytest.fixture
def no_unawaited() -> Iterator[list[warnings.WarningMessage]]:
    """The warnings seen meanwhile; none may say a coroutine was never awaited."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]


# -- at construction ------------------------------------------------------------------------------


def test_consumer_refuses_an_async_def_under_a_decorator_in_one_line() -> None:
    @logged
    async def handle(batch: MessageBatch) -> None:
        pass

    with pytest.raises(ConfigError, match="wraps an `async def`") as raised:
        Consumer("q", handle, client=object())
    assert "AsyncConsumer" in str(raised.value) and "\n" not in str(raised.value)


def test_async_consumer_and_lambda_accept_an_async_def_under_a_decorator() -> None:
    @logged
    async def handle(batch: MessageBatch) -> None:
        pass

    AsyncConsumer("q", handle, client=object())
    assert lambda_handler(handle)._is_async


# -- where no event loop runs it: the batch fails, nothing is lost ---------------------------------


def test_consumer_fails_a_batch_whose_handler_returns_a_coroutine(
    sqs: Any, name: str, caplog: pytest.LogCaptureFixture, no_unawaited: list[Any]
) -> None:
    # Given a sync handler (no decorator to read through) that acks message 0, then returns
    # a coroutine that would record the batch
    dlq = f"{name}-dlq"
    fill(sqs, name, [0, 1, 2], dead_letter_queue=dlq, max_retries=1)
    ran: list[int] = []
    seen: list[tuple[int, int]] = []

    async def work(batch: MessageBatch) -> None:
        ran.extend(m.body for m in batch.messages)

    def handle(batch: MessageBatch) -> Any:  # says nothing
        seen.extend((m.body, m.attempts) for m in batch.messages)
        for message in batch.messages:
            if message.body == 0:
                message.ack()
        return work(batch)

    # When the sync poller runs until idle
    consumer = Consumer(name, handle, config(), client=sqs)
    consumer.run_until_idle(1.0)

    # Then the coroutine never ran, and nothing was counted done but the explicit ack:
    # 1 and 2 were retried once, then dead-lettered with what went wrong
    assert ran == []
    assert sorted(seen) == [(0, 1), (1, 1), (1, 2), (2, 1), (2, 2)]
    assert consumer.stats.acked == 1 and consumer.stats.handler_errors == 2
    assert depth(sqs, name) == 0
    copies = drain(sqs, dlq)
    assert sorted(int(c["Body"]) for c in copies) == [1, 2]
    assert {decode(c).envelope.deaths[-1].error_type for c in copies} == {"AwaitableReturned"}
    # and each failed batch said so in ONE line at ERROR, naming how to run it
    lines = [r for r in caplog.records if "nothing awaits" in r.getMessage()]
    assert len(lines) == 2
    assert all(r.levelno == logging.ERROR and r.exc_info is None for r in lines)
    assert all("AsyncConsumer" in r.getMessage() for r in lines)
    assert all("\n" not in r.getMessage() for r in lines)


def test_run_handler_fails_a_sync_handler_that_returns_a_coroutine(
    no_unawaited: list[Any],
) -> None:
    ran: list[int] = []

    async def work(batch: MessageBatch) -> None:
        ran.extend(m.body for m in batch.messages)

    def handle(batch: MessageBatch) -> Any:  # says nothing
        batch.messages[0].ack()
        return work(batch)

    result = run_handler(handle, [0, 1, 2])
    assert ran == []
    assert result.acked == [0] and result.retried == {1: 0, 2: 0}
    assert type(result.raised).__name__ == "AwaitableReturned"
    assert "AsyncConsumer" in str(result.raised)


# -- where an event loop is at hand: what it returned is awaited -----------------------------------


def decorated(ran: list[tuple[int, int]]) -> Callable[[MessageBatch], Awaitable[None]]:
    """An `async def` under a plain decorator that retries body 1 on its first delivery."""

    @logged
    async def handle(batch: MessageBatch) -> None:
        await asyncio.sleep(0)
        for message in batch.messages:
            ran.append((message.body, message.attempts))
            if (message.body, message.attempts) == (1, 1):
                message.retry()

    return handle


def returning(ran: list[tuple[int, int]]) -> Callable[[MessageBatch], Awaitable[None]]:
    """A sync callable with no decorator to read through that returns the coroutine."""
    inner = decorated(ran).__wrapped__  # type: ignore[attr-defined]

    def handle(batch: MessageBatch) -> Any:  # says nothing
        return inner(batch)

    return handle


def annotated(ran: list[tuple[int, int]]) -> Callable[[MessageBatch], Awaitable[None]]:
    """A sync callable, no decorator, whose return annotation says it returns an awaitable."""
    inner = decorated(ran).__wrapped__  # type: ignore[attr-defined]

    def handle(batch: MessageBatch) -> Awaitable[None]:
        return inner(batch)  # type: ignore[no-any-return]

    return handle


SHAPES = [decorated, annotated, returning]


def test_consumer_refuses_a_def_annotated_to_return_an_awaitable_in_one_line() -> None:
    with pytest.raises(ConfigError, match="annotated to return an awaitable") as raised:
        Consumer("q", annotated([]), client=object())
    assert "AsyncConsumer" in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize("shape", [decorated, annotated], ids=["decorated", "annotated"])
def test_async_consumer_awaits_what_the_handler_returns(
    sqs: Any, name: str, shape: Callable[[list[tuple[int, int]]], Any]
) -> None:
    fill(sqs, name, [0, 1, 2])
    ran: list[tuple[int, int]] = []
    consumer = run_async(name, shape(ran), config(), sqs)
    assert sorted(ran) == [(0, 1), (1, 1), (1, 2), (2, 1)]
    assert consumer.stats.handler_errors == 0
    assert depth(sqs, name) == 0


@pytest.mark.parametrize(
    "shape", [decorated, annotated, returning], ids=["decorated", "annotated", "returning"]
)
def test_lambda_awaits_what_the_handler_returns(
    sqs: Any, name: str, shape: Callable[[list[tuple[int, int]]], Any]
) -> None:
    fill(sqs, name, [0, 1, 2])
    ran: list[tuple[int, int]] = []
    function = lambda_handler(config=config(), client=sqs)(shape(ran))
    try:
        EventSourceMapping(sqs, name, window=0.2).run_until_idle(function, idle_seconds=1.0)
    finally:
        function.close()
    assert sorted(ran) == [(0, 1), (1, 1), (1, 2), (2, 1)]
    assert depth(sqs, name) == 0


@pytest.mark.parametrize(
    "shape", [decorated, annotated, returning], ids=["decorated", "annotated", "returning"]
)
def test_run_handler_awaits_what_the_handler_returns_where_a_loop_is_at_hand(
    shape: Callable[[list[tuple[int, int]]], Any],
) -> None:
    ran: list[tuple[int, int]] = []
    result = asyncio.run(run_handler_async(shape(ran), [0, 1, 2]))
    assert sorted(ran) == [(0, 1), (1, 1), (2, 1)]
    assert result.raised is None and result.acked == [0, 2] and result.retried == {1: 0}
    if shape is not returning:  # read through the decorator or the annotation: `async def`
        assert run_handler(shape(ran), [0]).acked == [0]


# -- a handler raising KeyboardInterrupt, SystemExit or another BaseException ----------------------


class Custom(BaseException):
    pass


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit, Custom])
def test_a_handler_raising_a_base_exception_fails_its_batch_and_the_loop_goes_on(
    front_end: FrontEnd,
    raised: type[BaseException],
    sqs: Any,
    name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given three messages, and a handler that acks message 0 and raises on its first delivery
    fill(sqs, name, [0, 1, 2])
    seen: list[tuple[int, int]] = []

    def script(batch: MessageBatch) -> None:
        seen.extend((m.body, m.attempts) for m in batch.messages)
        if batch.messages[0].attempts == 1:
            next(m for m in batch.messages if m.body == 0).ack()
            raise raised()

    # When the front end consumes until idle: it returns, as for any failure
    front_end.consume(name, script, config(max_batch_size=3), sqs)

    # Then the batch was retried (explicit acks hold) and the loop went on to the redelivery
    assert sorted(seen) == [(0, 1), (1, 1), (1, 2), (2, 1), (2, 2)]
    assert depth(sqs, name) == 0
    assert f"raised {raised.__name__}()" in caplog.text


def test_a_cancelled_async_poller_still_stops(sqs: Any, name: str) -> None:
    # Given a handler under way, and the poller's own task cancelled meanwhile
    fill(sqs, name, [0])
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def handler(batch: MessageBatch) -> None:
        started.set()
        await cancelled.wait()  # under way until the poller's task is cancelled

    async def main() -> bool:
        async with aio_client(sqs) as aio:
            short_polls = SqsLimits(max_wait_seconds=1)  # a stop waits for the poll under way
            consumer = AsyncConsumer(name, handler, config(), client=aio, limits=short_polls)
            task = asyncio.create_task(consumer.run())
            await asyncio.wait_for(started.wait(), 30)
            task.cancel()
            cancelled.set()
            # Then it stops as stop() stops it (the batch in flight settles), and says cancelled
            done, _ = await asyncio.wait({task}, timeout=30)  # a hang guard, not a timing
            return bool(done) and task.cancelled()

    assert asyncio.run(main())
    assert depth(sqs, name) == 0


@pytest.mark.parametrize("flavour", ["sync", "async"])
@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit, Custom])
def test_run_handler_reports_a_base_exception_as_the_handler_s_failure(
    flavour: str, raised: type[BaseException]
) -> None:
    def script(batch: MessageBatch) -> None:
        batch.messages[0].ack()
        raise raised()

    handler = script if flavour == "sync" else as_async(script)
    result = run_handler(handler, [0, 1])
    assert result.acked == [0] and result.retried == {1: 0}
    assert isinstance(result.raised, raised)
