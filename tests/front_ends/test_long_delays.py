"""Delays past SQS's limits (SPEC 4, issue 5): hops on send and on retry, with the ceilings
shrunk to seconds (900 s -> 1 s per hop, 12 h of visibility -> 2 s), on every front end."""

from __future__ import annotations

import time
from typing import Any

import pytest

from sqsbatch import ConsumerConfig, MessageBatch, MessageError, Producer, create_queue
from sqsbatch._core.entries import hop_delay, remaining_delay
from sqsbatch._core.envelope import Envelope
from sqsbatch.limits import SqsLimits
from tests.support.front_ends import FRONT_ENDS, FrontEnd
from tests.support.sqs_helpers import depth

SHRUNK = SqsLimits(max_send_delay_seconds=1, visibility_ceiling_seconds=2)


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_send_delay_travels_in_hops_and_arrives_when_due_at_attempt_1(
    front_end: FrontEnd, sqs: Any, name: str
) -> None:
    create_queue(name, client=sqs)
    sent_at = time.time()
    sent_id = Producer(name, client=sqs, limits=SHRUNK).send("late", delay_seconds=3)
    seen: list[tuple[str, int, float]] = []

    def handler(batch: MessageBatch) -> None:
        seen.extend((m.id, m.attempts, time.time()) for m in batch.messages)

    config = ConsumerConfig(max_batch_timeout=0.2)
    front_end.consume(name, handler, config, sqs, limits=SHRUNK, idle_seconds=4.5)
    # three hops of at most 1 s; early receives were re-sent, not delivered, and cost nothing
    ((message_id, attempts, arrived),) = seen
    assert (message_id, attempts) == (sent_id, 1)
    assert arrived >= sent_at + 3  # never before it is due
    assert depth(sqs, name) == 0


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_retry_past_the_visibility_ceiling_is_resent_and_keeps_identity(
    front_end: FrontEnd, sqs: Any, name: str
) -> None:
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send({"order": 1})
    seen: list[tuple[str, Any, int, float]] = []

    def handler(batch: MessageBatch) -> None:
        for message in batch.messages:
            seen.append((message.id, message.timestamp, message.attempts, time.time()))
            if message.attempts == 1:
                message.retry(delay_seconds=3)  # past the 2 s ceiling: a re-send

    config = ConsumerConfig(max_batch_timeout=0.2, max_retries=3)
    front_end.consume(name, handler, config, sqs, limits=SHRUNK, idle_seconds=4.5)
    first, second = seen
    assert first[:2] == second[:2]  # same id and timestamp
    assert (first[2], second[2]) == (1, 2)  # exactly one attempt more
    assert second[3] >= first[3] + 3
    assert depth(sqs, name) == 0


@pytest.mark.parametrize("delay", [-1, 1.5, 86_401, "10", True])
def test_bad_retry_delays_are_refused_clearly(delay: Any, sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send("x")
    errors: list[str] = []

    def handler(batch: MessageBatch) -> None:
        for call in (batch.messages[0].retry, batch.retry_all):
            with pytest.raises(MessageError) as caught:
                call(delay_seconds=delay)
            errors.append(str(caught.value))

    FRONT_ENDS[0].consume(
        name,
        handler,
        ConsumerConfig(max_batch_timeout=0),
        sqs,
        limits=SHRUNK,
        idle_seconds=0.5,
    )
    assert len(errors) == 2
    assert all(f"delay_seconds={delay!r}" in e and "0..86400" in e for e in errors)


def test_a_24_hour_delay_costs_a_hop_per_15_minutes() -> None:
    """The API cost of long delays, from the pure planner with the real limits."""
    now, due_in, hops = 0.0, 86_400, 0
    delay, envelope = hop_delay(due_in, wall_now=now, envelope=Envelope())
    assert (delay, envelope.due_at) == (900, 86_400.0)
    while envelope.due_at is not None and now + delay < envelope.due_at:
        now += delay  # received early: re-sent for what is left
        hops += 1
        delay, envelope = hop_delay(
            remaining_delay(envelope.due_at, now), wall_now=now, envelope=envelope
        )
    assert hops == 95  # 96 legs of 900 s: each early receive costs receive + send + delete
