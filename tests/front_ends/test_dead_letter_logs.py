"""Dead-lettering is visible (issue 27, item 6), against moto's server, on every front end: each
dead-letter (retries exhausted, expired, invalid body, on the handler's request) is logged at
WARNING, one line per batch with the reason and the first ids; so is the start-up line that
says a queue without RedrivePolicy and DLQ deletes its failures.

No clock is waited out: the producer's clock is set an hour back, so a `ttl_seconds` deadline
is already past when the message is sent.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import pytest
from pydantic import BaseModel

from sqsbatch import ConsumerConfig, MessageBatch, MessageSendRequest, Producer, create_queue
from tests.support.front_ends import FRONT_ENDS, FrontEnd
from tests.support.sqs_helpers import depth


class Order(BaseModel):
    id: int


def quick(**changes: Any) -> ConsumerConfig:
    return ConsumerConfig(**({"max_batch_size": 10, "max_batch_timeout": 0.5} | changes))


def fail_all_but_give_up_on_7(batch: MessageBatch) -> None:
    for message in batch.messages:
        if message.body == Order(id=7):
            message.dead_letter("tenant gone")
    raise RuntimeError("downstream is down")


def logged(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "sqsbatch" and text in r.getMessage()]


def counted(records: list[logging.LogRecord], what: str) -> int:
    """The messages the lines say were `what` (`3 messages dead-lettered ...`)."""
    pattern = rf"(\d+) messages? {re.escape(what)}"
    return sum(int(n) for r in records for n in re.findall(pattern, r.getMessage()))


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_every_dead_letter_is_a_warning_with_its_reason_and_ids(
    front_end: FrontEnd, sqs: Any, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given six messages the handler fails on their last delivery, one it dead-letters on
    # request, one past its deadline and one with an invalid body
    dlq = f"{name}-dlq"
    create_queue(name, dead_letter_queue=dlq, max_retries=0, client=sqs)
    Producer(name, client=sqs).send_batch(
        [MessageSendRequest({"id": i}) for i in (1, 2, 3, 4, 5, 6, 7, "x")]
    )
    hour_ago = Producer(name, client=sqs, clock=lambda: time.time() - 3600)
    hour_ago.send_batch([MessageSendRequest({"id": 8}, ttl_seconds=60)])
    # When the front end consumes them
    with caplog.at_level(logging.WARNING, logger="sqsbatch"):
        front_end.consume(name, fail_all_but_give_up_on_7, quick(), sqs, body_model=Order)
    # Then every one of the nine is in the DLQ, and WARNING lines said so, with each reason
    assert depth(sqs, dlq) == 9
    lines = logged(caplog, "dead-lettered")
    assert {r.levelno for r in lines} == {logging.WARNING}
    assert counted(lines, "dead-lettered") == 9
    text = "\n".join(r.getMessage() for r in lines)
    for reason in ("retries_exhausted", "requested 'tenant gone'", "expired", "invalid_body"):
        assert reason in text
    assert f"dead-lettered before the handler to {dlq}" in text
    assert all(r.getMessage().startswith(f"{name}: ") for r in lines)


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_without_a_dlq_the_start_and_each_deleted_failure_are_warnings(
    front_end: FrontEnd, sqs: Any, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a queue with no RedrivePolicy, no DLQ configured, and two messages that fail
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send_batch([MessageSendRequest({"id": i}) for i in (1, 2)])

    def fail(batch: MessageBatch) -> None:
        raise RuntimeError("downstream is down")

    # When the front end consumes them with no retries left
    with caplog.at_level(logging.WARNING, logger="sqsbatch"):
        front_end.consume(name, fail, quick(max_retries=0), sqs)
    # Then the start said failures are deleted, and each batch said which were
    (start,) = logged(caplog, "has no RedrivePolicy and no dead_letter_queue is set")
    assert start.levelno == logging.WARNING
    deleted = "deleted (the queue has no RedrivePolicy and no dead_letter_queue)"
    lines = logged(caplog, deleted)
    assert {r.levelno for r in lines} == {logging.WARNING}
    assert counted(lines, deleted) == 2
    assert depth(sqs, name) == 0
