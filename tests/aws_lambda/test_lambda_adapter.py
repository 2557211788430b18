"""`lambda_handler` behind a simulated event source mapping, on moto's server.

The semantic table runs on it from test_semantics.py; these are the Lambda-only cases.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from sqsbatch import (
    EventError,
    MessageBatch,
    Producer,
    SqsLimits,
    create_queue,
    lambda_handler,
)
from tests.support.front_ends import EventSourceMapping
from tests.support.sqs_helpers import depth, drain, fill
from tests.support.sqs_helpers import quick as config


def queue_with(sqs: Any, name: str, bodies: list[Any], **options: Any) -> EventSourceMapping:
    fill(sqs, name, bodies, **options)
    return EventSourceMapping(sqs, name, window=0.2)


class Recording:
    """Passes every call to a real boto3 client and keeps (operation, parameters)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, op: str) -> Any:
        target = getattr(self._client, op)
        if not callable(target):
            return target

        def call(**params: Any) -> Any:
            self.calls.append((op, params))
            return target(**params)

        return call


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_past_the_handler_budget_undecided_messages_are_reported_and_acks_hold(
    kind: str, sqs: Any, name: str
) -> None:
    # Given three messages and a function with 1.5 s left (so about 1.2 s for the handler)
    mapping = queue_with(sqs, name, [0, 1, 2])
    mapping.function_timeout = 1.5
    release = threading.Event()
    cancelled: list[bool] = []

    def stuck(batch: MessageBatch) -> None:
        batch.messages[0].ack()
        release.wait(10)

    async def stuck_async(batch: MessageBatch) -> None:
        batch.messages[0].ack()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    function = lambda_handler(config=config(), client=sqs)(stuck if kind == "sync" else stuck_async)
    # When the handler runs past its budget
    messages = mapping.receive(wait_seconds=1)
    try:
        failed = mapping.invoke(function, messages)
    finally:
        release.set()
        function.close()
    # Then the function returned in time, reporting the undecided messages; the ack held
    by_body = {int(m["Body"]): m["MessageId"] for m in messages}
    assert failed == {by_body[1], by_body[2]}
    assert sorted(int(m["Body"]) for m in drain(sqs, name)) == [1, 2]
    assert cancelled == ([True] if kind == "async" else [])


def test_an_async_handler_keeps_one_event_loop_across_invocations(sqs: Any, name: str) -> None:
    # Given an async handler that notes its event loop
    mapping = queue_with(sqs, name, [0, 1])
    mapping.batch_size = 1
    loops: list[asyncio.AbstractEventLoop] = []

    @lambda_handler(config=config(max_batch_size=1), client=sqs)
    async def handler(batch: MessageBatch) -> None:
        await asyncio.sleep(0)
        loops.append(asyncio.get_running_loop())

    # When two invocations run
    mapping.run_until_idle(handler)
    handler.close()
    # Then both ran on the same loop (clients bound to it stay usable), and both were acked
    assert len(loops) == 2 and loops[0] is loops[1]
    assert depth(sqs, name) == 0


def test_a_malformed_or_multi_queue_event_raises_a_clear_error(sqs: Any, name: str) -> None:
    # Given real records from two queues
    first = queue_with(sqs, name, [0])
    second = queue_with(sqs, f"{name}-b", [1])
    records = [
        *first.event(first.receive(1))["Records"],
        *second.event(second.receive(1))["Records"],
    ]
    function = lambda_handler(config=config(), client=sqs)(lambda batch: None)
    # When they come in one event, or an event is not SQS's, Then EventError says why
    with pytest.raises(EventError, match="2 queues in one event"):
        function({"Records": records}, None)
    with pytest.raises(EventError, match="not 'aws:sqs'"):
        function({"Records": [{**records[0], "eventSource": "aws:sns"}]}, None)
    with pytest.raises(EventError, match=r"no messageId .* cannot be reported alone"):
        function({"Records": [{**records[0], "messageId": ""}]}, None)


def test_retries_change_visibility_before_returning(sqs: Any, name: str) -> None:
    # Given two messages, one retried at once and one in ten minutes
    mapping = queue_with(sqs, name, [0, 1])
    recording = Recording(sqs)

    @lambda_handler(config=config(), client=recording)
    def handler(batch: MessageBatch) -> None:
        batch.messages[0].retry(delay_seconds=0 if batch.messages[0].body == 0 else 600)
        batch.messages[1].retry(delay_seconds=600 if batch.messages[0].body == 0 else 0)

    # When the batch is settled
    failed = mapping.invoke(handler, mapping.receive(1))
    # Then both are reported, after one ChangeMessageVisibilityBatch with each delay
    assert len(failed) == 2
    changes = [params for op, params in recording.calls if op == "change_message_visibility_batch"]
    assert len(changes) == 1
    assert sorted(e["VisibilityTimeout"] for e in changes[0]["Entries"]) == [0, 600]
    # and the one retried with 0 is visible again at once, the other hidden
    assert [int(m["Body"]) for m in drain(sqs, name)] == [0]


def test_a_dead_letter_copy_that_fails_to_send_is_reported_not_lost(sqs: Any, name: str) -> None:
    # Given a consumer whose DLQ does not exist, on the last delivery
    mapping = queue_with(sqs, name, [0, 1])
    cfg = config(max_retries=0, dead_letter_queue=f"{name}-missing")

    def fail(batch: MessageBatch) -> None:
        raise RuntimeError("boom")

    # When the handler fails
    failed = mapping.invoke(lambda_handler(config=cfg, client=sqs)(fail), mapping.receive(1))
    # Then the messages are reported (Lambda keeps them), not deleted without a copy
    assert len(failed) == 2
    assert depth(sqs, name) == 2


def test_config_comes_from_the_environment(
    sqs: Any, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given SQSBATCH_* settings: no retries, a DLQ
    mapping = queue_with(sqs, name, [0, 1, 2], dead_letter_queue=f"{name}-dlq", max_retries=0)
    monkeypatch.setenv("SQSBATCH_MAX_RETRIES", "0")
    monkeypatch.setenv("SQSBATCH_DEAD_LETTER_QUEUE", f"{name}-dlq")

    @lambda_handler(client=sqs)
    def handler(batch: MessageBatch) -> None:
        raise RuntimeError("boom")

    # When a failing batch is handled
    mapping.run_until_idle(handler)
    # Then it was dead-lettered at once, with nothing reported
    assert mapping.responses == [{"batchItemFailures": []}]
    assert sorted(int(m["Body"]) for m in drain(sqs, f"{name}-dlq")) == [0, 1, 2]
    assert depth(sqs, name) == 0


def test_an_early_delay_hop_is_re_sent_and_left_out(sqs: Any, name: str) -> None:
    # Given a 3 s delay with 1 s hops (shrunk SQS ceilings)
    limits = SqsLimits(max_send_delay_seconds=1)
    create_queue(name, client=sqs)
    due = time.time() + 3
    Producer(name, client=sqs, limits=limits).send("later", delay_seconds=3)
    seen: list[tuple[float, int]] = []

    @lambda_handler(config=config(), client=sqs, limits=limits)
    def handler(batch: MessageBatch) -> None:
        seen.extend((time.time(), m.attempts) for m in batch.messages)

    # When Lambda receives it before it is due, hop after hop
    mapping = EventSourceMapping(sqs, name, window=0.2)
    mapping.run_until_idle(handler, idle_seconds=2.5)
    # Then the handler saw it once, not before it was due, on its first attempt
    assert len(seen) == 1
    assert seen[0][0] >= due and seen[0][1] == 1
    assert all(r == {"batchItemFailures": []} for r in mapping.responses)
    assert len(mapping.responses) >= 2  # at least one early receive was re-sent
    assert depth(sqs, name) == 0


def test_fifo_order_holds_behind_a_retried_message(sqs: Any, name: str) -> None:
    # Given one FIFO group of three messages
    queue = f"{name}.fifo"
    create_queue(queue, client=sqs)
    Producer(queue, client=sqs).send_batch([{"body": b, "group_id": "g"} for b in range(3)])
    batches: list[list[int]] = []

    @lambda_handler(config=config(), client=sqs)
    def handler(batch: MessageBatch) -> None:
        batches.append([m.body for m in batch.messages])
        if len(batches) == 1:  # first: retry 0, explicitly ack 1, leave 2 undecided
            batch.messages[0].retry()
            batch.messages[1].ack()

    # When Lambda runs it until idle
    mapping = EventSourceMapping(sqs, queue, window=0.2)
    mapping.run_until_idle(handler)
    # Then 1 was never reported done before 0; its ack held (deleted here); the order held
    assert len(mapping.responses[0]["batchItemFailures"]) == 3
    assert batches == [[0, 1, 2], [0, 2]]
    assert depth(sqs, queue) == 0
