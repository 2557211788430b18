"""`Overloaded` under Lambda (behind the simulated event source mapping, on moto's server) and in
`sqsbatch.testing`: the batch is retried after `retry_after`; opt-in, the invocation fails."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sqsbatch import (
    ConsumerConfig,
    MessageBatch,
    Overloaded,
    Producer,
    create_queue,
    lambda_handler,
)
from sqsbatch.testing import TestMessage, run_handler
from tests.aws_lambda.test_lambda_adapter import Recording
from tests.support.front_ends import EventSourceMapping, FakeContext


def overloaded_after_acking_the_first(kind: str) -> Any:
    def handler(batch: MessageBatch) -> None:
        batch.messages[0].ack()
        raise Overloaded(retry_after=7)

    async def handler_async(batch: MessageBatch) -> None:
        await asyncio.sleep(0)
        handler(batch)

    return handler if kind == "sync" else handler_async


def received(sqs: Any, name: str) -> tuple[EventSourceMapping, list[dict[str, Any]]]:
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": n} for n in range(3)])
    mapping = EventSourceMapping(sqs, name, window=0.5)
    messages = mapping.receive(wait_seconds=1)
    assert len(messages) == 3
    return mapping, messages


def changes(recording: Recording) -> list[int]:
    return [
        entry["VisibilityTimeout"]
        for op, params in recording.calls
        if op == "change_message_visibility_batch"
        for entry in params["Entries"]
    ]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_overloaded_retries_the_undecided_messages_after_retry_after(
    kind: str, sqs: Any, name: str
) -> None:
    mapping, messages = received(sqs, name)
    recording = Recording(sqs)
    config = ConsumerConfig(max_batch_timeout=0.5)
    function = lambda_handler(config=config, client=recording)(
        overloaded_after_acking_the_first(kind)
    )
    try:
        failed = mapping.invoke(function, messages)
    finally:
        function.close()
    assert failed == {m["MessageId"] for m in messages[1:]}  # the ack stands: Lambda deletes it
    assert changes(recording) == [7, 7]
    assert not [op for op, _ in recording.calls if op == "delete_message_batch"]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_opt_in_it_fails_the_invocation_once_its_acks_are_deleted(
    kind: str, sqs: Any, name: str
) -> None:
    mapping, messages = received(sqs, name)
    recording = Recording(sqs)
    config = ConsumerConfig(max_batch_timeout=0.5, overloaded_fails_invocation=True)
    function = lambda_handler(config=config, client=recording)(
        overloaded_after_acking_the_first(kind)
    )
    try:
        with pytest.raises(Overloaded, match="retry after 7 s"):
            function(mapping.event(messages), FakeContext())  # Lambda deletes nothing
    finally:
        function.close()
    deleted = [
        entry["ReceiptHandle"]
        for op, params in recording.calls
        if op == "delete_message_batch"
        for entry in params["Entries"]
    ]
    assert deleted == [messages[0]["ReceiptHandle"]]  # the acked message, deleted by the adapter
    assert changes(recording) == [7, 7]
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attributes = sqs.get_queue_attributes(QueueUrl=mapping.url, AttributeNames=names)
    assert [attributes["Attributes"][n] for n in names] == ["0", "2"]


def test_sqsbatch_testing_holds_an_overloaded_batch_as_a_poller_does() -> None:
    """No attempt spent: a last delivery that raised `Overloaded` is retried, not dead-lettered;
    what the handler decided itself stands."""

    def handler(batch: MessageBatch) -> None:
        batch.messages[0].ack()
        raise Overloaded(retry_after=5)

    last = TestMessage("b", attempts=4)  # max_retries=3: its last delivery
    result = run_handler(handler, ["a", last, "c"], config=ConsumerConfig(max_retries=3))
    assert result.acked == [0]
    assert result.retried == {1: 5, 2: 5} and result.dead_lettered == result.dropped == []
    assert isinstance(result.raised, Overloaded)


def test_overloaded_without_retry_after_waits_circuit_open_seconds(sqs: Any, name: str) -> None:
    mapping, messages = received(sqs, name)
    recording = Recording(sqs)
    config = ConsumerConfig(max_batch_timeout=0.5, circuit_open_seconds=12)

    def handler(batch: MessageBatch) -> None:
        raise Overloaded

    function = lambda_handler(config=config, client=recording)(handler)
    try:
        failed = mapping.invoke(function, messages)
    finally:
        function.close()
    assert failed == {m["MessageId"] for m in messages}
    assert changes(recording) == [12, 12, 12]


def test_sqsbatch_testing_holds_for_circuit_open_seconds_without_retry_after() -> None:
    def handler(batch: MessageBatch) -> None:
        raise Overloaded

    result = run_handler(handler, ["a", "b"], config=ConsumerConfig(circuit_open_seconds=45))
    assert result.retried == {0: 45, 1: 45}
