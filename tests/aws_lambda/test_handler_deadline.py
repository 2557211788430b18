"""A sync handler's deadline on Lambda: called on the main thread (where Lambda's runtime calls
the function) and interrupted there by SIGALRM (`sqsbatch._shell.handler_alarm`), or on a thread
where that cannot be; through `lambda_handler` on moto's server.

No sleep decides an outcome: a handler that must run past its budget blocks (`time.sleep`, an
event) until it is interrupted, or its invoker stops waiting, and the function's time left
(1.5 s, so about 1.2 s for the handler) is the only clock.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from sqsbatch import ConsumerConfig, MessageBatch, Producer, create_queue, lambda_handler
from sqsbatch._shell.handler_alarm import _alarm, can_interrupt, run_sync_handler
from sqsbatch.errors import HandlerTimeout
from tests.support.front_ends import EventSourceMapping
from tests.support.sqs_helpers import drain, fill

NO_TIMER = (0.0, 0.0)


@pytest.fixture(autouse=True)
def sigalrm_left_as_found() -> Iterator[None]:
    """Every test starts and must end with SIGALRM at its default and no timer armed."""
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL
    assert signal.getitimer(signal.ITIMER_REAL) == NO_TIMER
    yield
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL
    assert signal.getitimer(signal.ITIMER_REAL) == NO_TIMER


def mapping_of(sqs: Any, name: str, bodies: list[int]) -> EventSourceMapping:
    fill(sqs, name, bodies)
    return EventSourceMapping(sqs, name, window=0.2, function_timeout=1.5)


def config() -> ConsumerConfig:
    return ConsumerConfig.load(max_batch_timeout=0.2)


def left_on(sqs: Any, name: str) -> list[int]:
    return sorted(int(m["Body"]) for m in drain(sqs, name))


def failed_bodies(mapping: EventSourceMapping, function: Any) -> set[int]:
    messages = mapping.receive(wait_seconds=1)
    by_id = {m["MessageId"]: int(m["Body"]) for m in messages}
    return {by_id[i] for i in mapping.invoke(function, messages)}


def test_a_sync_handler_past_its_budget_is_interrupted_on_the_main_thread_and_acks_hold(
    sqs: Any, name: str
) -> None:
    # Given three messages and a sync handler that acks the first, then blocks for a minute
    mapping = mapping_of(sqs, name, [0, 1, 2])
    seen: dict[str, Any] = {}

    @lambda_handler(config=config(), client=sqs)
    def handler(batch: MessageBatch) -> None:
        seen["main thread"] = threading.current_thread() is threading.main_thread()
        batch.messages[0].ack()
        try:
            time.sleep(60)
        except HandlerTimeout:
            seen["interrupted"] = True
            raise

    # When it is invoked with 1.5 s left
    failed = failed_bodies(mapping, handler)
    # Then it ran on the main thread and was interrupted there (it is not running on); the
    # undecided messages are reported and stay on the queue, the ack held
    assert seen == {"main thread": True, "interrupted": True}
    assert failed == {1, 2}
    assert left_on(sqs, name) == [1, 2]


def test_a_handler_that_swallows_the_interrupt_is_interrupted_again_and_its_batch_timed_out(
    sqs: Any, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a handler that catches HandlerTimeout and goes on blocking, twice, then returns
    mapping = mapping_of(sqs, name, [0, 1])
    caught: list[str] = []

    @lambda_handler(config=config(), client=sqs)
    def handler(batch: MessageBatch) -> None:
        batch.messages[0].ack()
        for _ in range(2):
            try:
                threading.Event().wait(60)
            except BaseException as exc:
                caught.append(type(exc).__name__)

    # When it is invoked past its budget
    failed = failed_bodies(mapping, handler)
    # Then it was interrupted again after swallowing it, and although it returned in the end,
    # its batch counts as timed out: the undecided message is retried, the ack held
    assert caught == ["HandlerTimeout", "HandlerTimeout"]
    assert failed == {1}
    assert left_on(sqs, name) == [1]
    assert "ran past" in caplog.text


def until_the_deadline_passed() -> None:
    """Block until the handler's deadline came (SIGALRM, deferred meanwhile: the sleep goes on)."""
    give_up = time.monotonic() + 30  # a hang guard, not a measure
    while not _alarm.fired and time.monotonic() < give_up:
        time.sleep(0.01)


class SlowSends:
    """A real client whose SendMessageBatch waits until the handler's deadline has passed."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.sent: list[str] = []

    def __getattr__(self, op: str) -> Any:
        return getattr(self._client, op)

    def send_message_batch(self, **params: Any) -> Any:
        until_the_deadline_passed()
        answer = self._client.send_message_batch(**params)
        self.sent += [entry["MessageId"] for entry in answer["Successful"]]
        return answer


def test_the_interrupt_waits_until_a_call_into_sqsbatch_returns(sqs: Any, name: str) -> None:
    # Given a handler that sends with sqsbatch's Producer, whose send lasts past the deadline
    mapping = mapping_of(sqs, name, [0, 1])
    create_queue(f"{name}-out", client=sqs)
    slow = SlowSends(sqs)
    producer = Producer(f"{name}-out", client=slow)
    steps: list[str] = []

    @lambda_handler(config=config(), client=sqs)
    def handler(batch: MessageBatch) -> None:
        batch.messages[0].ack()
        steps.append(f"sent {producer.send({'n': 0})}")
        try:
            time.sleep(60)
        except HandlerTimeout:
            steps.append("interrupted")
            raise

    # When the deadline comes while the Producer's send is under way
    failed = failed_bodies(mapping, handler)
    # Then the send ended whole (the message is on its queue), and the interrupt came after it
    assert len(slow.sent) == 1
    assert steps == [f"sent {slow.sent[0]}", "interrupted"]
    assert [m["Body"] for m in drain(sqs, f"{name}-out")] == ['{"n":0}']
    assert failed == {1}
    assert left_on(sqs, name) == [1]


class Blocking(logging.Handler):
    """A log handler that holds each record until the handler's deadline has passed."""

    def __init__(self) -> None:
        super().__init__()
        self.finished: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        until_the_deadline_passed()
        self.finished.append(record.getMessage())


def test_the_interrupt_waits_until_a_log_call_returns(sqs: Any, name: str) -> None:
    # Given a handler that logs through a log handler that holds the line past the deadline
    mapping = mapping_of(sqs, name, [0, 1])
    blocking = Blocking()
    logger = logging.getLogger(f"app.{name}")
    logger.addHandler(blocking)
    steps: list[str] = []

    @lambda_handler(config=config(), client=sqs)
    def handler(batch: MessageBatch) -> None:
        batch.messages[0].ack()
        logger.warning("working on it")
        steps.append("logged")
        try:
            time.sleep(60)
        except HandlerTimeout:
            steps.append("interrupted")
            raise

    # When the deadline comes while the log call holds its handler's lock
    try:
        failed = failed_bodies(mapping, handler)
    finally:
        logger.removeHandler(blocking)
    # Then the log call ended whole (its lock let go), and the interrupt came right after it
    assert blocking.finished == ["working on it"]
    assert steps == ["logged", "interrupted"]
    assert failed == {1}


def test_called_from_another_thread_the_handler_runs_on_a_thread_of_its_own(
    sqs: Any, name: str
) -> None:
    # Given a handler that blocks until released, invoked from a thread that is not the main one
    mapping = mapping_of(sqs, name, [0, 1])
    release = threading.Event()
    ran_on: list[threading.Thread] = []
    result: list[set[int]] = []

    @lambda_handler(config=config(), client=sqs)
    def handler(batch: MessageBatch) -> None:
        ran_on.append(threading.current_thread())
        batch.messages[0].ack()
        release.wait(30)

    invoker = threading.Thread(target=lambda: result.append(failed_bodies(mapping, handler)))
    # When it runs past its budget
    try:
        invoker.start()
        invoker.join(60)
    finally:
        release.set()
    # Then the invoker stopped waiting at the deadline (the handler's thread ran on), without
    # touching SIGALRM (the fixture checks); the undecided message is reported, the ack held
    assert not invoker.is_alive()
    assert result == [{1}]
    assert ran_on and ran_on[0] is not invoker and ran_on[0] is not threading.main_thread()
    assert left_on(sqs, name) == [1]


def test_an_application_s_own_sigalrm_and_timer_are_left_alone(sqs: Any, name: str) -> None:
    # Given an application that installed its own SIGALRM handler and armed a timer
    mapping = mapping_of(sqs, name, [0])
    alarms: list[int] = []
    ran_on: list[bool] = []

    def application_alarm(signum: int, frame: object) -> None:
        alarms.append(signum)

    @lambda_handler(config=config(), client=sqs)
    def handler(batch: MessageBatch) -> None:
        ran_on.append(threading.current_thread() is threading.main_thread())

    signal.signal(signal.SIGALRM, application_alarm)
    signal.setitimer(signal.ITIMER_REAL, 600)
    try:
        # When a batch is handled
        failed = failed_bodies(mapping, handler)
        # Then the handler ran on a thread, and the application's handler and timer are as
        # they were: not replaced, not fired, not disarmed
        assert ran_on == [False]
        assert signal.getsignal(signal.SIGALRM) is application_alarm
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 600
        assert alarms == []
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
    assert failed == set()
    assert left_on(sqs, name) == []


def test_an_application_s_watchdog_timer_is_left_armed(sqs: Any, name: str) -> None:
    # Given an application that armed ITIMER_REAL with SIGALRM at its default (a watchdog
    # that ends the process when it fires)
    mapping = mapping_of(sqs, name, [0])
    ran_on: list[bool] = []

    @lambda_handler(config=config(), client=sqs)
    def handler(batch: MessageBatch) -> None:
        ran_on.append(threading.current_thread() is threading.main_thread())

    signal.setitimer(signal.ITIMER_REAL, 600)
    try:
        # When a batch is handled
        failed = failed_bodies(mapping, handler)
        # Then the handler ran on a thread, and the watchdog is still armed, SIGALRM default
        assert ran_on == [False]
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 600
        assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    assert failed == set()


def test_an_async_handler_is_cancelled_by_its_loop_and_sigalrm_is_not_used(
    sqs: Any, name: str
) -> None:
    # Given an async handler that notes SIGALRM's state, acks the first message and blocks
    mapping = mapping_of(sqs, name, [0, 1])
    seen: list[tuple[object, tuple[float, float]]] = []
    cancelled: list[bool] = []

    @lambda_handler(config=config(), client=sqs)
    async def handler(batch: MessageBatch) -> None:
        seen.append((signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)))
        batch.messages[0].ack()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    # When it runs past its budget
    try:
        failed = failed_bodies(mapping, handler)
    finally:
        handler.close()
    # Then it was cancelled by the event loop, as before: no SIGALRM, no timer
    assert seen == [(signal.SIG_DFL, NO_TIMER)]
    assert cancelled == [True]
    assert failed == {1}


# -- run_sync_handler itself -----------------------------------------------------------------


def test_a_handler_that_ends_in_time_leaves_sigalrm_as_it_was_and_its_result_stands() -> None:
    assert can_interrupt()
    assert run_sync_handler(lambda batch: None, None, budget=30) == (False, None)
    error = ValueError("bad")

    def raising(batch: object) -> None:
        raise error

    assert run_sync_handler(raising, None, budget=30) == (False, error)


def test_no_time_left_the_handler_is_not_started() -> None:
    called: list[object] = []
    assert run_sync_handler(called.append, "batch", budget=0) == (True, None)
    assert called == []


def test_off_the_main_thread_it_cannot_interrupt() -> None:
    seen: list[bool] = []
    thread = threading.Thread(target=lambda: seen.append(can_interrupt()))
    thread.start()
    thread.join(10)
    assert seen == [False]
