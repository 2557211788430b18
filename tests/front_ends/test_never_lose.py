"""Never lose a message by default (issue: a user's first hour), on every front end.

The queue is the source of truth: a DLQ and `max_retries` not given come from its RedrivePolicy;
when sqsbatch cannot know where a failed message belongs, it leaves it to SQS. A handler that
cannot take the batch fails at construction. A raising handler is logged for an operator.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sqsbatch import (
    AsyncConsumer,
    ConfigError,
    Consumer,
    ConsumerConfig,
    MessageBatch,
    Producer,
    create_queue,
    lambda_handler,
)
from tests.support.faults import Faulty, throttled
from tests.support.front_ends import (
    FRONT_ENDS,
    AsyncFaulty,
    EventSourceMapping,
    FrontEnd,
    aio_client,
    as_async,
)
from tests.support.scenarios import Recorder
from tests.support.sqs_helpers import depth, drain


def denied(op: str) -> Exception:
    error: Exception = ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, op)
    return error


def failing_on(body: Any, recorder: Recorder) -> Any:
    def handler(batch: MessageBatch) -> None:
        recorder.saw(batch)
        for message in batch.messages:
            if message.body != body:
                message.ack()
        if any(message.body == body for message in batch.messages):
            raise RuntimeError(f"cannot handle {body}")

    return handler


def poisoned(sqs: Any, name: str) -> None:
    """Queue `name`, whose RedrivePolicy moves a message to `name`-dlq after 2 receives, holding
    one message, `poison`."""
    create_queue(name, dead_letter_queue=f"{name}-dlq", max_retries=1, client=sqs)
    Producer(name, client=sqs).send("poison")


def moved_by_sqs(sqs: Any, name: str, recorder: Recorder) -> None:
    """`poison` failed on both deliveries, was never deleted, and SQS moved it to the DLQ."""
    assert recorder.attempts()["poison"] == [1, 2]
    assert [m["Body"] for m in drain(sqs, f"{name}-dlq")] == ["poison"]


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_a_failing_message_reaches_the_dlq_of_the_queues_redrive_policy(
    front_end: FrontEnd, sqs: Any, name: str
) -> None:
    # Given a queue made as the README shows, and a consumer configured with no DLQ at all
    # (before, the library deleted the message at delivery 4 = maxReceiveCount: SQS never could)
    create_queue(name, dead_letter_queue=f"{name}-dlq", max_retries=3, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": "poison"}, {"body": "fine"}])
    recorder = Recorder()
    # When a message fails on every delivery
    config = ConsumerConfig(max_batch_timeout=0.5)  # no dead_letter_queue, no max_retries
    front_end.consume(name, failing_on("poison", recorder), config, sqs)
    # Then it was delivered max_retries + 1 times (from maxReceiveCount) and is in the DLQ,
    # with sqsbatch's metadata: dead-lettered by the library, not deleted
    assert recorder.attempts()["poison"] == [1, 2, 3, 4]
    (copy,) = drain(sqs, f"{name}-dlq")
    assert copy["Body"] == "poison"
    assert copy["meta"]["err"]["type"] == "RuntimeError"
    assert depth(sqs, name) == 0


def test_a_refused_lookup_leaves_the_last_failure_to_sqs_sync(sqs: Any, name: str) -> None:
    # Given a queue whose RedrivePolicy moves after 2 receives, which the consumer cannot read
    poisoned(sqs, name)
    client = Faulty(sqs)
    client.fail("get_queue_attributes", 1, denied)
    recorder = Recorder()
    config = ConsumerConfig(max_retries=0, max_batch_timeout=0)
    # When its only allowed delivery fails
    consumer = Consumer(name, failing_on("poison", recorder), config, client=client)
    consumer.run_until_idle(1.0)
    # Then it was never deleted: SQS delivered it again and then moved it to the DLQ itself
    assert consumer.stats.left_to_redrive_policy == 2 and consumer.stats.dropped == 0
    moved_by_sqs(sqs, name, recorder)


def test_a_refused_lookup_leaves_the_last_failure_to_sqs_async(sqs: Any, name: str) -> None:
    poisoned(sqs, name)
    recorder = Recorder()
    config = ConsumerConfig(max_retries=0, max_batch_timeout=0)

    async def main() -> AsyncConsumer:
        async with aio_client(sqs) as aio:
            client = AsyncFaulty(aio)
            client.fail("get_queue_attributes", 1, denied)
            handler = as_async(failing_on("poison", recorder))
            consumer = AsyncConsumer(name, handler, config, client=client)
            await consumer.run_until_idle(1.0)
            return consumer

    consumer = asyncio.run(main())
    assert consumer.stats.left_to_redrive_policy == 2 and consumer.stats.dropped == 0
    moved_by_sqs(sqs, name, recorder)


def test_a_refused_lookup_leaves_the_last_failure_to_sqs_lambda(sqs: Any, name: str) -> None:
    poisoned(sqs, name)
    recorder = Recorder()
    client = Faulty(sqs)
    client.fail("get_queue_attributes", 10, denied)
    function = lambda_handler(config=ConsumerConfig(max_retries=0), client=client)(
        failing_on("poison", recorder)
    )
    mapping = EventSourceMapping(sqs, name, window=0)
    mapping.run_until_idle(function, idle_seconds=1.0)
    # Reported as failed each time (never left for Lambda to delete), then moved by SQS
    assert all(len(r["batchItemFailures"]) == 1 for r in mapping.responses)
    moved_by_sqs(sqs, name, recorder)
    # AccessDenied will not change: asked once per execution environment, as a success is
    assert [op for op, _ in client.calls].count("get_queue_attributes") == 1


def test_lambda_asks_again_after_a_passing_lookup_failure(sqs: Any, name: str) -> None:
    # Given a lookup that is throttled once (no botocore retry left), then answers
    create_queue(name, dead_letter_queue=f"{name}-dlq", max_retries=3, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": n} for n in range(3)])
    client = Faulty(sqs)
    client.fail("get_queue_attributes", 1, throttled)
    function = lambda_handler(client=client)(lambda batch: None)
    # When three invocations of one record each come
    mapping = EventSourceMapping(sqs, name, batch_size=1, window=0)
    mapping.run_until_idle(function, idle_seconds=1.0)
    # Then the failed lookup was not kept, and the answer that followed was
    assert len(mapping.responses) == 3
    assert [op for op, _ in client.calls].count("get_queue_attributes") == 2
    assert depth(sqs, name) == 0


def test_lambda_reads_the_policy_once_per_execution_environment(
    sqs: Any, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a function configured by the environment, with no DLQ named there
    monkeypatch.setenv("SQSBATCH_MAX_BATCH_TIMEOUT", "0")
    create_queue(name, dead_letter_queue=f"{name}-dlq", max_retries=1, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": "poison"}, {"body": "x"}])
    client = Faulty(sqs)
    recorder = Recorder()
    function = lambda_handler(client=client)(failing_on("poison", recorder))
    mapping = EventSourceMapping(sqs, name, batch_size=1, window=0)
    mapping.run_until_idle(function, idle_seconds=1.0)
    # Then the failing record went to the queue's DLQ, and the policy was asked for once
    assert [m["Body"] for m in drain(sqs, f"{name}-dlq")] == ["poison"]
    assert len(mapping.responses) >= 3
    assert [op for op, _ in client.calls].count("get_queue_attributes") == 1


async def _async_no_args() -> None:
    pass


class _NotCallable:
    pass


# Typed as Any: these calls are wrong on purpose, which is what is being tested.
_consumer: Any = Consumer
_async_consumer: Any = AsyncConsumer
_lambda: Any = lambda_handler


@pytest.mark.parametrize(
    ("build", "error"),
    [
        (lambda: _consumer("q", lambda: None, client=object()), r"cannot take the batch"),
        (lambda: _consumer("q", _NotCallable(), client=object()), r"is not callable"),
        (lambda: _consumer("q", as_async(print), client=object()), r"is `async def`"),
        (lambda: _async_consumer("q", _async_no_args), r"cannot take the batch"),
        (lambda: _lambda(lambda a, b: None), r"cannot take the batch"),
        (lambda: _lambda(_async_no_args), r"cannot take the batch"),
        (lambda: _lambda(_NotCallable()), r"is not callable"),
    ],
)
def test_a_handler_that_cannot_take_the_batch_fails_at_construction(build: Any, error: str) -> None:
    with pytest.raises(ConfigError, match=error) as raised:
        build()
    assert "\n" not in str(raised.value)


def test_handlers_that_can_take_the_batch_are_accepted() -> None:
    class Callable_:
        def __call__(self, batch: MessageBatch, extra: int = 0) -> None:
            pass

    def star(*args: Any) -> None:
        pass

    Consumer("q", Callable_(), client=object())
    Consumer("q", star, client=object())
    lambda_handler(lambda batch: None)


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_a_raising_handler_is_logged_with_traceback_queue_size_and_ids(
    front_end: FrontEnd, sqs: Any, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    create_queue(name, dead_letter_queue=f"{name}-dlq", max_retries=0, client=sqs)
    ids = Producer(name, client=sqs).send_batch([{"body": n} for n in range(7)])
    config = ConsumerConfig(max_batch_timeout=1)

    def handler(batch: MessageBatch) -> None:
        raise KeyError("boom")

    with caplog.at_level(logging.WARNING, logger="sqsbatch"):
        front_end.consume(name, handler, config, sqs)
    records = [r for r in caplog.records if "raised KeyError('boom')" in r.getMessage()]
    assert records and all(r.exc_info and r.exc_info[0] is KeyError for r in records)
    text = " ".join(r.getMessage() for r in records)
    assert name in text and "on a batch of" in text
    assert any(message_id in text for message_id in ids)
    seven = [r.getMessage() for r in records if "batch of 7 messages" in r.getMessage()]
    assert all("and 2 more" in line for line in seven)
