"""Reading a dead-letter queue with sqsbatch (issue 27, item 2), against moto's server, on every
front end: a message dead-lettered as `expired` or `invalid_body` is never screened again for
that death while it sits in its DLQ. A consumer of the DLQ (a user archiving it) gets it in a
batch with `message.deaths` saying why, instead of deleting it unseen (a DLQ has no DLQ of its
own). Redriven back to its source, it is screened again there.

No clock is waited out: the producer's clock is set an hour back, so its `ttl_seconds` deadline
is already past when the message is sent.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from pydantic import BaseModel

from redrive.manual import move_now
from sqsbatch import ConsumerConfig, MessageBatch, MessageSendRequest, Producer, create_queue
from sqsbatch._core.envelope import decode
from tests.support.front_ends import FRONT_ENDS, FrontEnd
from tests.support.sqs_helpers import depth, drain


class Order(BaseModel):
    id: int


def quick(**changes: Any) -> ConsumerConfig:
    return ConsumerConfig(**({"max_batch_size": 10, "max_batch_timeout": 0.5} | changes))


def an_hour_ago() -> float:
    return time.time() - 3600


def dead_lettered(front_end: FrontEnd, sqs: Any, name: str) -> str:
    """A source queue and its DLQ, with one message dead-lettered there as `expired` and one as
    `invalid_body` by `front_end`; the DLQ's name."""
    dlq = f"{name}-dlq"
    create_queue(name, dead_letter_queue=dlq, max_retries=2, client=sqs)
    producer = Producer(name, client=sqs, clock=an_hour_ago)
    producer.send_batch(
        [MessageSendRequest({"id": 1}, ttl_seconds=60), MessageSendRequest({"id": "x"})]
    )
    seen: list[Any] = []
    front_end.consume(
        name, lambda batch: seen.extend(batch.messages), quick(), sqs, body_model=Order
    )
    assert seen == [] and depth(sqs, name) == 0
    return dlq


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_a_consumer_of_the_dlq_sees_what_was_dead_lettered_before_a_handler(
    front_end: FrontEnd, sqs: Any, name: str
) -> None:
    # Given an expired message and an invalid one, dead-lettered by the source's consumer
    dlq = dead_lettered(front_end, sqs, name)
    # When a consumer of the DLQ (no RedrivePolicy, no DLQ of its own) reads it, with the same
    # body_model and a max_message_age that its messages are past too
    seen: dict[str, tuple[Any, list[str]]] = {}

    def archive(batch: MessageBatch) -> None:
        for message in batch.messages:
            seen[message.id] = (message.body, [death.reason for death in message.deaths])

    config = quick(max_message_age=1)
    front_end.consume(dlq, archive, config, sqs, body_model=Order, idle_seconds=1.0)
    # Then its handler saw both, each with the death it died; nothing was deleted unseen
    assert sorted(seen.values(), key=lambda found: found[1]) == [
        (Order(id=1), ["expired"]),
        ({"id": "x"}, ["invalid_body"]),  # not validated again: the raw body
    ]
    assert depth(sqs, dlq) == 0  # the handler acked them


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_redriven_to_its_source_an_expired_message_is_screened_again(
    front_end: FrontEnd, sqs: Any, name: str
) -> None:
    # Given an expired message in the DLQ, redriven to its source (`sqsbatch redrive` and the
    # daemon send it back with one more redrive in its metadata)
    dlq = dead_lettered(front_end, sqs, name)
    report = move_now(dlq, client=sqs, reasons=["all"])
    assert depth(sqs, dlq) == 0 and depth(sqs, name) == 2, report
    # When the source's consumer reads it again
    seen: list[Any] = []
    front_end.consume(
        name, lambda batch: seen.extend(batch.messages), quick(), sqs, body_model=Order
    )
    # Then it is screened as any message is: back in the DLQ, a second death in its history
    assert seen == []
    found = {raw["Body"]: decode(raw).envelope for raw in drain(sqs, dlq)}
    assert {body: [d.reason for d in e.deaths] for body, e in found.items()} == {
        '{"id":1}': ["expired", "expired"],
        '{"id":"x"}': ["invalid_body", "invalid_body"],
    }
