"""The whole cycle with the real consumer: dead-lettered, redriven, and finally handled."""

from __future__ import annotations

from typing import Any

from redrive import BackoffPolicy, Redriver
from sqsbatch import Consumer, ConsumerConfig, MessageBatch, Producer, create_queue
from tests.support.redrive import peek
from tests.support.sqs_helpers import depth


def test_consumer_dead_letters_redrive_brings_it_back_and_the_consumer_succeeds(
    sqs: Any, name: str
) -> None:
    # Given a queue with one retry and a DLQ, and a handler that fails twice per cycle at first
    dlq = f"{name}-dlq"
    create_queue(name, dead_letter_queue=dlq, max_retries=1, client=sqs)
    sent_id = Producer(name, client=sqs).send({"order": 42})
    config = ConsumerConfig.load(name, max_retries=1, dead_letter_queue=dlq, max_batch_timeout=0)
    seen: list[tuple[str, int]] = []
    healthy = {"now": False}

    def handler(batch: MessageBatch) -> None:
        seen.extend((m.id, m.attempts) for m in batch.messages)
        if not healthy["now"]:
            raise RuntimeError("downstream is down")

    def consume() -> None:
        Consumer(name, handler, config, client=sqs).run_until_idle(0.5)

    redriver = Redriver(dlq, policy=BackoffPolicy(base_delay=0, jitter=0), client=sqs)
    # When it fails its two deliveries, is redriven, fails two more, and is redriven again
    consume()
    first_dead = peek(sqs, dlq)
    assert redriver.run_once(wait_seconds=0).moved == 1
    consume()
    second_dead = peek(sqs, dlq)
    healthy["now"] = True
    assert redriver.run_once(wait_seconds=0).moved == 1
    consume()
    # Then the consumer kept the redrive count when it dead-lettered it the second time
    assert [m["meta"].get("rd", 0) for m in first_dead] == [0]
    assert [m["meta"]["rd"] for m in second_dead] == [1]
    assert second_dead[0]["meta"]["err"]["type"] == "RuntimeError"
    # and each cycle started again at attempt 1, with the id the producer gave, until it worked
    assert seen == [(sent_id, 1), (sent_id, 2)] * 2 + [(sent_id, 1)]
    assert depth(sqs, name) == 0
    assert depth(sqs, dlq) == 0
