"""FIFO queues (SPEC 2.8, issue 5): group order under retries on every front end, FIFO DLQs."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest

from sqsbatch import ConsumerConfig, MessageBatch, Producer, create_queue
from sqsbatch.limits import SQS_LIMITS
from tests.support.front_ends import FRONT_ENDS, FrontEnd
from tests.support.sqs_helpers import depth, drain


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_a_retry_holds_back_the_rest_of_its_group(front_end: FrontEnd, sqs: Any, name: str) -> None:
    queue = f"{name}.fifo"
    create_queue(queue, client=sqs)
    producer = Producer(queue, client=sqs)
    producer.send_batch([{"body": f"{g}{i}", "group_id": g} for i in (1, 2, 3) for g in "ab"])
    deliveries: dict[str, list[int]] = defaultdict(list)
    done: list[str] = []

    def handler(batch: MessageBatch) -> None:
        for message in batch.messages:
            deliveries[message.body].append(message.attempts)
            if message.body == "a2" and message.attempts == 1:
                message.retry(delay_seconds=0)  # a3 must not go through before a2 does
            else:
                done.append(message.body)  # implicitly acked, unless its group is held back

    config = ConsumerConfig(max_batch_size=10, max_batch_timeout=0.3)
    front_end.consume(queue, handler, config, sqs, limits=SQS_LIMITS, idle_seconds=1.5)
    assert dict(deliveries) == {
        "a1": [1],
        "a2": [1, 2],
        "a3": [1, 2],
        "b1": [1],
        "b2": [1],
        "b3": [1],
    }
    # per group, what finally succeeded did so in send order
    assert [b for b in done if b.startswith("a")][-2:] == ["a2", "a3"]
    assert [b for b in done if b.startswith("b")] == ["b1", "b2", "b3"]
    assert depth(sqs, queue) == 0


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_fifo_dead_letters_keep_their_group(front_end: FrontEnd, sqs: Any, name: str) -> None:
    queue, dlq = f"{name}.fifo", f"{name}-dlq.fifo"
    create_queue(queue, dead_letter_queue=dlq, max_retries=0, client=sqs)
    Producer(queue, client=sqs).send({"poison": True}, group_id="g7")

    def handler(batch: MessageBatch) -> None:
        raise RuntimeError("poison")

    config = ConsumerConfig(max_batch_timeout=0.2, max_retries=0, dead_letter_queue=dlq)
    front_end.consume(queue, handler, config, sqs, limits=SQS_LIMITS, idle_seconds=1)
    (copy,) = drain(sqs, dlq)
    assert json.loads(copy["Body"]) == {"poison": True}
    assert copy["Attributes"]["MessageGroupId"] == "g7"
    assert copy["meta"]["err"]["type"] == "RuntimeError"
    assert depth(sqs, queue) == 0


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_dead_letter_on_fifo_lets_the_rest_of_its_group_go_on(
    front_end: FrontEnd, sqs: Any, name: str
) -> None:
    # Given a group a1, a2, a3 whose handler dead-letters a1 (a poison message)
    queue, dlq = f"{name}.fifo", f"{name}-dlq.fifo"
    create_queue(queue, dead_letter_queue=dlq, max_retries=3, client=sqs)
    Producer(queue, client=sqs).send_batch([{"body": f"a{i}", "group_id": "a"} for i in (1, 2, 3)])
    deliveries: dict[str, list[int]] = defaultdict(list)

    def handler(batch: MessageBatch) -> None:
        for message in batch.messages:
            deliveries[message.body].append(message.attempts)
            if message.body == "a1":
                message.dead_letter("poison")

    config = ConsumerConfig(max_batch_size=10, max_batch_timeout=0.3, dead_letter_queue=dlq)
    front_end.consume(queue, handler, config, sqs, limits=SQS_LIMITS, idle_seconds=1)
    # Then a1 went to the DLQ, in its group, and a2 and a3 were handled once, not held back
    assert dict(deliveries) == {"a1": [1], "a2": [1], "a3": [1]}
    (copy,) = drain(sqs, dlq)
    assert (copy["Body"], copy["Attributes"]["MessageGroupId"]) == ("a1", "a")
    assert [d["r"] for d in copy["meta"]["dh"]] == ["poison"]
    assert depth(sqs, queue) == 0
