"""`sqsbatch.testing`: handlers run on given bodies, settled by the real decision code, no SQS."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from sqsbatch import ConsumerConfig, MessageBatch
from sqsbatch.errors import ConfigError, FifoError, MessageError, SqsBatchError
from sqsbatch.testing import HandlerResult, TestMessage, run_handler, run_handler_async
from tests.support.front_ends import load_example

Handler = Callable[[MessageBatch], None]
DLQ = ConsumerConfig(max_retries=3, dead_letter_queue="test-dlq")


class Boom(Exception):
    pass


def fates(result: HandlerResult) -> list[tuple[str, int | None, bool]]:
    return [(o.fate, o.delay_seconds, o.explicit) for o in result.outcomes]


# -- precedence (SPEC 2.3, 2.4), through a real handler -------------------------------------------


def calls(*steps: Callable[[MessageBatch], None], then_raise: bool = False) -> Handler:
    def handle(batch: MessageBatch) -> None:
        for step in steps:
            step(batch)
        if then_raise:
            raise Boom("after the calls")

    return handle


def ack(i: int) -> Handler:
    return lambda batch: batch.messages[i].ack()


def retry(i: int, delay: int | None = None) -> Handler:
    return lambda batch: batch.messages[i].retry(delay)


def ack_all(batch: MessageBatch) -> None:
    batch.ack_all()


def retry_all(delay: int | None = None) -> Handler:
    return lambda batch: batch.retry_all(delay)


# (case, handler, expected (fate, delay, explicit) per message of 3), retry_delay=30
PRECEDENCE: list[tuple[str, Handler, list[tuple[str, int | None, bool]]]] = [
    ("returns, no calls: all acked", calls(), [("acked", None, False)] * 3),
    ("raises, no calls: all retried", calls(then_raise=True), [("retried", 30, False)] * 3),
    (
        "an explicit ack holds on a raise",
        calls(ack(0), then_raise=True),
        [("acked", None, True), ("retried", 30, False), ("retried", 30, False)],
    ),
    (
        "an explicit retry keeps its delay on a raise",
        calls(retry(2, 5), then_raise=True),
        [("retried", 30, False), ("retried", 30, False), ("retried", 5, True)],
    ),
    (
        "first call on a message wins: ack then retry",
        calls(ack(0), retry(0, 5)),
        [("acked", None, True), ("acked", None, False), ("acked", None, False)],
    ),
    (
        "first call on a message wins: retry then ack",
        calls(retry(0, 5), ack(0)),
        [("retried", 5, True), ("acked", None, False), ("acked", None, False)],
    ),
    (
        "retry_all covers messages with no call before it",
        calls(ack(1), retry_all(9)),
        [("retried", 9, True), ("acked", None, True), ("retried", 9, True)],
    ),
    (
        "a message call after a batch call is ignored",
        calls(retry_all(9), ack(0)),
        [("retried", 9, True)] * 3,
    ),
    (
        "ack_all then retry_all: ack_all wins",
        calls(ack_all, retry_all(9)),
        [("acked", None, True)] * 3,
    ),
    (
        "retry_all then ack_all: retry_all wins",
        calls(retry_all(), ack_all),
        [("retried", 30, True)] * 3,
    ),
    (
        "delay precedence: message > batch > retry_delay, explicit 0 is 0",
        calls(retry(0, 0), retry(1), retry_all(7)),
        [("retried", 0, True), ("retried", 30, True), ("retried", 7, True)],
    ),
]


@pytest.mark.parametrize(
    ("case", "handler", "expected"), PRECEDENCE, ids=[p[0] for p in PRECEDENCE]
)
def test_precedence(
    case: str, handler: Handler, expected: list[tuple[str, int | None, bool]]
) -> None:
    result = run_handler(handler, [1, 2, 3], config=ConsumerConfig(retry_delay=30))
    assert fates(result) == expected


def test_the_result_names_what_the_handler_raised_and_groups_messages_by_fate() -> None:
    # Given a handler that acks 0, retries 1 in 5 s, then raises
    boom = Boom("card service down")

    def handle(batch: MessageBatch) -> None:
        batch.messages[0].ack()
        batch.messages[1].retry(delay_seconds=5)
        raise boom

    # When it runs on four messages, the last on its final delivery
    final = TestMessage("last", attempts=4)
    result = run_handler(handle, ["a", "b", "c", final], config=DLQ)
    # Then
    assert result.raised is boom and not result.timed_out
    assert result.acked == [0]
    assert result.retried == {1: 5, 2: 0}
    assert result.dead_lettered == [3] and result.dropped == []
    assert [(o.index, o.id, o.body, o.attempts) for o in result.outcomes] == [
        (0, "message-0", "a", 1),
        (1, "message-1", "b", 1),
        (2, "message-2", "c", 1),
        (3, "message-3", "last", 4),
    ]


def test_a_returning_handler_raises_nothing() -> None:
    result = run_handler(calls(), ["a"])
    assert result.raised is None and result.acked == [0]


# -- the last delivery (SPEC 2.6) -----------------------------------------------------------------


def test_delivery_max_retries_plus_one_is_dead_lettered_with_the_error() -> None:
    messages = [TestMessage(n, attempts=a) for n, a in enumerate([3, 4, 5])]
    result = run_handler(calls(then_raise=True), messages, config=DLQ)
    assert fates(result)[0] == ("retried", 0, False)  # attempt 3 of 4: one more to go
    assert result.dead_lettered == [1, 2]
    error = result.outcomes[1].error
    assert error is not None and (error.type, error.message) == ("Boom", "after the calls")
    assert result.outcomes[0].error is None


def test_an_explicit_retry_on_the_last_delivery_is_dead_lettered_as_a_retry() -> None:
    result = run_handler(calls(retry(0, 5)), [TestMessage("x", attempts=4)], config=DLQ)
    error = result.outcomes[0].error
    assert result.dead_lettered == [0]
    assert error is not None and error.type == "Retry"


def test_an_ack_on_the_last_delivery_is_an_ack() -> None:
    result = run_handler(calls(), [TestMessage("x", attempts=4)], config=DLQ)
    assert result.acked == [0] and result.dead_lettered == []


def test_without_a_dead_letter_queue_the_last_failure_is_dropped() -> None:
    config = ConsumerConfig(max_retries=0)
    result = run_handler(calls(then_raise=True), ["x"], config=config)
    assert result.dropped == [0] and result.dead_lettered == []


# -- FIFO (SPEC 2.8) ------------------------------------------------------------------------------


def test_on_fifo_a_retry_holds_back_the_rest_of_its_group() -> None:
    # Given a FIFO batch: g, g, h, g; the handler retries message 0 and acks message 3
    queues: list[str] = []

    def handle(batch: MessageBatch) -> None:
        queues.append(batch.queue)
        batch.messages[0].retry(delay_seconds=4)
        batch.messages[3].ack()

    groups = ["g", "g", "h", "g"]
    messages = [TestMessage(n, group_id=g) for n, g in enumerate(groups)]
    # When it returns
    result = run_handler(handle, messages)
    # Then message 1 (undecided, group g) retries behind 0; h and the explicit ack are kept
    assert queues == ["test-queue.fifo"]
    assert fates(result) == [
        ("retried", 4, True),
        ("retried", 4, False),
        ("acked", None, False),
        ("acked", None, True),
    ]


def test_a_standard_queue_keeps_no_group_order() -> None:
    result = run_handler(calls(retry(0, 4)), [1, 2], queue="orders")
    assert result.acked == [1]


def test_on_fifo_a_delay_past_the_visibility_ceiling_is_clamped() -> None:
    standard = run_handler(calls(retry(0, 86_400)), [1])
    fifo = run_handler(calls(retry(0, 86_400)), [TestMessage(1, group_id="g")])
    assert standard.retried == {0: 86_400}  # re-sent in hops
    assert 43_190 <= fifo.retried[0] <= 43_200  # 12 h from the receive, at most


# -- handler_timeout (SPEC 1, 2.3) ----------------------------------------------------------------


def test_a_sync_handler_past_its_timeout_fails_the_batch_and_its_acks_hold() -> None:
    release = threading.Event()

    def handle(batch: MessageBatch) -> None:
        batch.messages[0].ack()
        release.wait(5)
        batch.messages[1].ack()  # too late: ignored

    config = ConsumerConfig(handler_timeout=0.2, retry_delay=3)
    try:
        result = run_handler(handle, ["a", "b"], config=config)
    finally:
        release.set()
    assert result.timed_out and result.raised is None
    assert fates(result) == [("acked", None, True), ("retried", 3, False)]
    error_free = [o.error for o in result.outcomes]
    assert error_free == [None, None]


def test_an_async_handler_past_its_timeout_is_cancelled() -> None:
    cancelled: list[bool] = []

    async def handle(batch: MessageBatch) -> None:
        batch.messages[0].ack()
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    config = ConsumerConfig(handler_timeout=0.2)
    started = time.monotonic()
    result = run_handler(handle, ["a", "b"], config=config)
    assert time.monotonic() - started < 3
    assert result.timed_out and cancelled == [True]
    assert result.acked == [0] and result.retried == {1: 0}


def test_the_last_delivery_past_the_timeout_records_a_handler_timeout() -> None:
    async def handle(batch: MessageBatch) -> None:
        await asyncio.sleep(5)

    config = ConsumerConfig(handler_timeout=0.1, max_retries=0, dead_letter_queue="d")
    result = run_handler(handle, ["a"], config=config)
    error = result.outcomes[0].error
    assert error is not None and error.type == "HandlerTimeout"


# -- async handlers -------------------------------------------------------------------------------


async def async_handle(batch: MessageBatch) -> None:
    await asyncio.sleep(0)
    batch.messages[0].retry(delay_seconds=2)
    if batch.messages[-1].body == "fail":
        raise Boom("async")


def test_run_handler_runs_an_async_handler() -> None:
    result = run_handler(async_handle, ["a", "b"])
    assert result.retried == {0: 2} and result.acked == [1]


def test_an_async_handler_that_raises() -> None:
    result = run_handler(async_handle, ["a", "fail"])
    assert isinstance(result.raised, Boom)
    assert fates(result) == [("retried", 2, True), ("retried", 0, False)]


def test_run_handler_async_runs_async_and_sync_handlers_in_a_loop() -> None:
    async def both() -> tuple[HandlerResult, HandlerResult]:
        first = await run_handler_async(async_handle, ["a", "b"])
        second = await run_handler_async(calls(ack(1), then_raise=True), ["a", "b"])
        return first, second

    first, second = asyncio.run(both())
    assert first.retried == {0: 2} and first.acked == [1]
    assert isinstance(second.raised, Boom) and second.acked == [1] and second.retried == {0: 0}


def test_run_handler_in_a_running_loop_points_to_the_async_twin() -> None:
    async def inside() -> None:
        run_handler(async_handle, ["a"])

    with pytest.raises(SqsBatchError, match="await run_handler_async"):
        asyncio.run(inside())


def test_an_async_callable_object_counts_as_async() -> None:
    class Handler:
        async def __call__(self, batch: MessageBatch) -> None:
            batch.retry_all(1)

    assert run_handler(Handler(), ["a"]).retried == {0: 1}


# -- bodies, ids, attempts, timestamps, attributes ------------------------------------------------


def seen(messages: list[object], **kwargs: Any) -> list[MessageBatch]:
    """The batch the handler received (its messages are read after the run)."""
    batches: list[MessageBatch] = []
    run_handler(batches.append, messages, **kwargs)
    return batches


def test_bodies_come_back_as_a_consumer_sees_them() -> None:
    (batch,) = seen(
        [
            {"order": 1, 2: "two"},
            (1, "x"),
            "text",
            b"\x00raw",
            bytearray(b"ba"),
            3.5,
            TestMessage("quoted", content_type="json"),
        ]
    )
    bodies = [m.body for m in batch.messages]
    assert bodies == [{"order": 1, "2": "two"}, [1, "x"], "text", b"\x00raw", b"ba", 3.5, "quoted"]
    assert [type(b) for b in bodies[2:5]] == [str, bytes, bytes]


def test_ids_attempts_timestamps_and_attributes_are_settable() -> None:
    sent = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
    item = TestMessage(
        "x", id="m-1", attempts=4, timestamp=sent, attributes={"k": "v", "n": 3, "b": b"\x01"}
    )
    (batch,) = seen([item, "y"])
    first, second = batch.messages
    assert (first.id, first.attempts) == ("m-1", 4)
    assert first.timestamp == sent.replace(microsecond=123000)  # SQS keeps milliseconds
    assert first.attributes == {"k": "v", "n": "3", "b": b"\x01"}  # a Number reads as its text
    assert (second.id, second.attempts, second.attributes) == ("message-1", 1, {})
    assert abs(second.timestamp - datetime.now(UTC)) < timedelta(seconds=5)


def test_the_queue_is_named_as_given() -> None:
    (by_name,) = seen(["x"], queue="orders")
    (by_url,) = seen(["x"], queue="https://sqs.eu-west-1.amazonaws.com/123456789012/jobs")
    (default,) = seen(["x"])
    assert (by_name.queue, by_url.queue, default.queue) == ("orders", "jobs", "test-queue")


def test_nothing_reaches_sqs_boto3_or_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("sqsbatch.testing reached out")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(boto3.session.Session, "client", refuse)
    result = run_handler(calls(retry(0, 10), then_raise=True), ["a", TestMessage("b", attempts=4)])
    assert result.retried == {0: 10} and result.dropped == [1]


# -- bad input: one clear line --------------------------------------------------------------------


def nothing(batch: MessageBatch) -> None:
    pass


BAD_INPUT: list[tuple[str, Callable[[], object], type[Exception], str]] = [
    ("no messages", lambda: run_handler(nothing, []), MessageError, "never empty"),
    ("a str, not a list", lambda: run_handler(nothing, "abc"), MessageError, "not str"),
    (
        "more than max_batch_size",
        lambda: run_handler(nothing, [1] * 11),
        MessageError,
        "11 messages: a batch holds at most max_batch_size=10",
    ),
    (
        "more than 100",
        lambda: run_handler(nothing, [1] * 101, config=ConsumerConfig(max_batch_size=100)),
        MessageError,
        "101 messages",
    ),
    (
        "attempts 0",
        lambda: run_handler(nothing, ["a", TestMessage("b", attempts=0)]),
        MessageError,
        "message #1: attempts=0 is invalid",
    ),
    (
        "attempts True",
        lambda: run_handler(nothing, [TestMessage("b", attempts=True)]),
        MessageError,
        "attempts=True",
    ),
    ("an empty id", lambda: run_handler(nothing, [TestMessage("b", id="")]), MessageError, "id=''"),
    (
        "a naive timestamp",
        lambda: run_handler(nothing, [TestMessage("b", timestamp=datetime(2024, 1, 1))]),
        MessageError,
        "timezone-aware",
    ),
    (
        "a None body",
        lambda: run_handler(nothing, ["a", None]),
        MessageError,
        "message #1: body is None",
    ),
    (
        "a reserved attribute",
        lambda: run_handler(nothing, [TestMessage("b", attributes={"sqsbatch": "x"})]),
        MessageError,
        "reserved",
    ),
    (
        "a group id SQS would refuse",
        lambda: run_handler(nothing, [TestMessage("b", group_id="a b")], queue="orders"),
        MessageError,
        "group_id holds ' '",
    ),
    (
        "a FIFO message without a group id",
        lambda: run_handler(nothing, [TestMessage("a", group_id="g"), "b"]),
        FifoError,
        "message #1: sending to a FIFO queue needs group_id=",
    ),
    ("a handler that is not callable", lambda: run_handler(42, ["a"]), ConfigError, "not callable"),  # type: ignore[arg-type]
    (
        "a handler with no batch argument",
        lambda: run_handler(lambda: None, ["a"]),  # type: ignore[arg-type]
        ConfigError,
        "cannot take the batch",
    ),
    (
        "the queue as its own DLQ",
        lambda: run_handler(nothing, ["a"], config=ConsumerConfig(dead_letter_queue="test-queue")),
        ConfigError,
        "is the queue itself",
    ),
]


@pytest.mark.parametrize(
    ("case", "call", "error", "text"), BAD_INPUT, ids=[b[0] for b in BAD_INPUT]
)
def test_bad_input_is_one_clear_line(
    case: str, call: Callable[[], object], error: type[Exception], text: str
) -> None:
    with pytest.raises(error) as raised:
        call()
    assert text in str(raised.value)
    assert "\n" not in str(raised.value)


def test_the_handler_does_not_run_on_bad_input() -> None:
    ran: list[MessageBatch] = []
    with pytest.raises(MessageError):
        run_handler(ran.append, ["a", None])
    assert ran == []


# -- the example ----------------------------------------------------------------------------------


def test_the_testing_example_passes_its_own_tests(capsys: pytest.CaptureFixture[str]) -> None:
    example = load_example("testing_handlers")
    example.main()
    printed = capsys.readouterr().out
    tests = [name for name in vars(example) if name.startswith("test_")]
    assert len(tests) == 3
    for name in tests:
        assert f"passed: {name}" in printed
