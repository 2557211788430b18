"""Deadlines and typed bodies (issue 12) against moto's server, on every front end: messages
past their deadline or with an invalid body are dead-lettered before the handler, never handed
to it, costing no attempt. Plus the producer's side:
`ttl_seconds` precedence, pydantic bodies, and bad input in one line.

Deadlines here are a second or two long. A test never waits one out: a deadline already past
is a producer whose clock is behind (`late`) or a consumer whose clock is ahead (`ahead`).
Only the retry due after its deadline waits, for SQS's delay. Nothing about timing is asserted,
only where each message ends.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from sqsbatch import ConsumerConfig, MessageBatch, MessageSendRequest, Producer, create_queue
from sqsbatch._core.envelope import decode
from sqsbatch.errors import ConfigError, MessageError
from tests.support.front_ends import FRONT_ENDS, FrontEnd
from tests.support.scenarios import Recorder
from tests.support.sqs_helpers import depth, drain

SCREENING = FRONT_ENDS
PAST_SECONDS = 2.0
"""How far the clocks below are off: more than the 1 s deadlines these tests give."""


def late() -> float:
    """A producer's clock `PAST_SECONDS` behind: a 1 s deadline it stamps is already past."""
    return time.time() - PAST_SECONDS


def ahead() -> float:
    """A consumer's clock `PAST_SECONDS` ahead: a message sent now is already 2 s old."""
    return time.time() + PAST_SECONDS


class Order(BaseModel):
    id: int


def config(dlq: str, **changes: Any) -> ConsumerConfig:
    values: dict[str, Any] = {
        "max_batch_size": 10,
        "max_batch_timeout": 0.5,
        "max_retries": 2,
        "dead_letter_queue": dlq,
    }
    return ConsumerConfig(**(values | changes))


def dead(sqs: Any, dlq: str) -> dict[Any, list[tuple[str, int]]]:
    """Per body of each DLQ copy, its history as (reason, attempts)."""
    found = {}
    for raw in drain(sqs, dlq):
        deaths = decode(raw).envelope.deaths
        found[raw["Body"]] = [(d.reason, d.attempts) for d in deaths]
    return found


def consume(front_end: FrontEnd, queue: str, cfg: ConsumerConfig, sqs: Any, **kw: Any) -> Recorder:
    recorder = Recorder()
    front_end.consume(queue, recorder.saw, cfg, sqs, **kw)
    return recorder


@pytest.mark.parametrize("front_end", SCREENING, ids=lambda f: f.name)
def test_a_message_past_its_ttl_is_dead_lettered_before_the_handler(
    front_end: FrontEnd, sqs: Any, name: str
) -> None:
    # Given one message with a 1 s deadline and one without, received after the deadline
    dlq = f"{name}-dlq"
    create_queue(name, dead_letter_queue=dlq, max_retries=2, client=sqs)
    producer = Producer(name, client=sqs, clock=late)
    producer.send_batch([MessageSendRequest(0, ttl_seconds=1), MessageSendRequest(1)])
    # When the front end consumes
    recorder = consume(front_end, name, config(dlq), sqs)
    # Then the handler never saw the expired one; it is in the DLQ as expired, no attempt spent
    assert recorder.attempts() == {1: [1]}
    assert dead(sqs, dlq) == {"0": [("expired", 0)]}
    assert depth(sqs, name) == 0


@pytest.mark.parametrize("front_end", SCREENING, ids=lambda f: f.name)
def test_max_message_age_gives_every_message_a_deadline_foreign_ones_too(
    front_end: FrontEnd, sqs: Any, name: str
) -> None:
    dlq = f"{name}-dlq"
    url = create_queue(name, dead_letter_queue=dlq, client=sqs)
    sqs.send_message(QueueUrl=url, MessageBody="foreign")
    Producer(name, client=sqs).send("ours", ttl_seconds=3600)  # the earlier deadline wins
    recorder = consume(front_end, name, config(dlq, max_message_age=1), sqs, wall_clock=ahead)
    assert recorder.deliveries == []
    assert dead(sqs, dlq) == {"foreign": [("expired", 0)], "ours": [("expired", 0)]}


@pytest.mark.parametrize("front_end", SCREENING, ids=lambda f: f.name)
def test_a_body_that_fails_body_model_is_dead_lettered_with_its_first_error(
    front_end: FrontEnd, sqs: Any, name: str
) -> None:
    # Given valid and invalid bodies, from sqsbatch and as foreign JSON text (SNS-style)
    dlq = f"{name}-dlq"
    url = create_queue(name, dead_letter_queue=dlq, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": Order(id=1)}, {"body": {"id": "x"}}])
    sqs.send_message(QueueUrl=url, MessageBody='{"id": 3}')
    sqs.send_message(QueueUrl=url, MessageBody="not json")
    # When consumed with body_model=Order
    recorder = consume(front_end, name, config(dlq), sqs, body_model=Order)
    # Then the handler saw the valid ones, validated; the invalid ones are in the DLQ, explained
    seen = sorted((body for body, _, _ in recorder.deliveries), key=lambda o: o.id)
    assert seen == [Order(id=1), Order(id=3)]
    found = {raw["Body"]: decode(raw).envelope for raw in drain(sqs, dlq)}
    assert sorted(found) == ["not json", '{"id":"x"}']
    assert [(d.reason, d.attempts) for d in found['{"id":"x"}'].deaths] == [("invalid_body", 0)]
    assert found['{"id":"x"}'].deaths[0].error_message == (
        "id: Input should be a valid integer, unable to parse string as an integer"
    )
    assert (found["not json"].deaths[0].error_message or "").startswith("body: Invalid JSON")


@pytest.mark.parametrize("front_end", SCREENING, ids=lambda f: f.name)
def test_a_retry_due_after_the_deadline_dead_letters_when_it_comes_due(
    front_end: FrontEnd, sqs: Any, name: str
) -> None:
    # Given a message with a 60 s deadline that the handler retries, after which the
    # consumer's clock is past the deadline (so a slow first receive cannot expire it)
    dlq = f"{name}-dlq"
    create_queue(name, dead_letter_queue=dlq, max_retries=2, client=sqs)
    Producer(name, client=sqs).send(0, ttl_seconds=60)
    skew = [0.0]

    def handler(batch: MessageBatch) -> None:
        recorder.saw(batch)
        skew[0] = 120.0
        batch.messages[0].retry(delay_seconds=1)

    recorder = Recorder()
    front_end.consume(
        name, handler, config(dlq), sqs, idle_seconds=3, wall_clock=lambda: time.time() + skew[0]
    )
    # Then it was handled once, and dead-lettered as expired when it came back
    assert recorder.attempts() == {0: [1]}
    assert dead(sqs, dlq) == {"0": [("expired", 1)]}


@pytest.mark.parametrize("front_end", SCREENING, ids=lambda f: f.name)
def test_without_a_dlq_an_expired_message_is_deleted(
    front_end: FrontEnd, sqs: Any, name: str
) -> None:
    create_queue(name, client=sqs)
    Producer(name, client=sqs, clock=late).send(0, ttl_seconds=1)
    cfg = ConsumerConfig(max_batch_timeout=0.5)
    recorder = consume(front_end, name, cfg, sqs)
    assert recorder.deliveries == [] and depth(sqs, name) == 0


def test_a_bad_body_model_fails_at_construction(sqs: Any) -> None:
    from sqsbatch import lambda_handler  # noqa: PLC0415 - the public name, where users find it

    with pytest.raises(ConfigError, match=r"^body_model=42 is invalid: not a type pydantic"):
        lambda_handler(body_model=42, client=sqs)


# -- the producer ------------------------------------------------------------------------------


def envelope_of(sqs: Any, queue: str) -> dict[str, Any]:
    [raw] = drain(sqs, queue)
    return dict(json.loads(raw["MessageAttributes"]["sqsbatch"]["StringValue"]))


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ((None, None, None), None),
        ((60, None, None), 60),
        ((60, 30, None), 30),
        ((60, 30, 10), 10),
    ],
)
def test_ttl_precedence_per_message_then_batch_then_producer(
    sqs: Any, name: str, given: tuple[int | None, ...], expected: int | None
) -> None:
    producer_ttl, batch_ttl, own_ttl = given
    create_queue(name, client=sqs)
    producer = Producer(name, client=sqs, ttl_seconds=producer_ttl, clock=lambda: 1000.0)
    producer.send_batch([MessageSendRequest("x", ttl_seconds=own_ttl)], ttl_seconds=batch_ttl)
    meta = envelope_of(sqs, name)
    assert meta.get("exp") == (None if expected is None else 1000.0 + expected)


def test_message_expires_at_reads_the_deadline(sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    Producer(name, client=sqs, clock=lambda: 1_700_000_000.0).send("x", ttl_seconds=60)
    [raw] = drain(sqs, name)
    from sqsbatch._core.ledger import Ledger  # noqa: PLC0415
    from sqsbatch._core.message import Message, _Delivery  # noqa: PLC0415

    message = Message(_Delivery(decode(raw), "r", 0.0, 30.0), Ledger(1), 0)
    assert message.expires_at == datetime.fromtimestamp(1_700_000_060, UTC)
    assert message.deaths == ()


@pytest.mark.parametrize("ttl", [0, -1, 1_209_601, float("nan"), True, "60"])
def test_a_bad_ttl_is_one_line_and_sends_nothing(sqs: Any, name: str, ttl: Any) -> None:
    create_queue(name, client=sqs)
    producer = Producer(name, client=sqs)
    for send in (
        lambda: producer.send("x", ttl_seconds=ttl),
        lambda: producer.send_batch([{"body": "x"}], ttl_seconds=ttl),
        lambda: Producer(name, client=sqs, ttl_seconds=ttl),
    ):
        with pytest.raises(
            MessageError, match=r"^ttl_seconds=.* is invalid: must be seconds 1.."
        ) as e:
            send()
        assert "\n" not in str(e.value)
    assert depth(sqs, name) == 0


def test_a_pydantic_model_is_sent_as_json_and_an_unserialisable_body_is_refused(
    sqs: Any, name: str
) -> None:
    create_queue(name, client=sqs)
    producer = Producer(name, client=sqs)
    producer.send(Order(id=5))
    with pytest.raises(MessageError, match=r"^body is not JSON-serialisable"):
        producer.send({"at": object()})
    with pytest.raises(MessageError, match="a pydantic model is sent as json"):
        producer.send(Order(id=5), content_type="text")
    [raw] = drain(sqs, name)
    assert (raw["Body"], envelope_of_raw(raw)["ct"]) == ('{"id":5}', "json")


def envelope_of_raw(raw: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads(raw["MessageAttributes"]["sqsbatch"]["StringValue"]))
