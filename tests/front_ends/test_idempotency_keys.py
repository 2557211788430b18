"""`message.idempotency_key` (issue 29, item 2), against moto's server, on every front end: the
key a producer gave, else the message's id; kept by the copies sqsbatch makes (a DLQ copy, a
redrive); refused in one line when it is not 1..256 characters of text.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

import redrive
from sqsbatch import ConsumerConfig, MessageBatch, MessageSendRequest, Producer, create_queue
from sqsbatch.cli.app import app
from sqsbatch.errors import MessageError
from sqsbatch.testing import TestMessage, run_handler
from tests.support.front_ends import FRONT_ENDS, FrontEnd
from tests.support.sqs_helpers import depth

CONFIG = ConsumerConfig(max_batch_size=10, max_batch_timeout=0.5, max_retries=1)


class Keys:
    """The handler: records each message's body, id and key, then acks or dead-letters it."""

    def __init__(self, *, dead_letter: bool = False) -> None:
        self.seen: dict[str, tuple[str, str]] = {}
        self._dead_letter = dead_letter

    def __call__(self, batch: MessageBatch) -> None:
        for message in batch.messages:
            self.seen[str(message.body)] = (message.id, message.idempotency_key)
            if self._dead_letter:
                message.dead_letter("to read it back")
            else:
                message.ack()


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_the_key_is_the_producers_else_the_message_id(
    front_end: FrontEnd, sqs: Any, name: str
) -> None:
    # Given a message sent with a key, one without, and one from a plain SQS producer
    url = create_queue(name, client=sqs)
    producer = Producer(name, client=sqs)
    keyed, plain = producer.send_batch(
        [MessageSendRequest("keyed", idempotency_key="order-17"), MessageSendRequest("plain")]
    )
    foreign = sqs.send_message(QueueUrl=url, MessageBody="foreign")["MessageId"]
    # When the front end consumes them
    keys = Keys()
    front_end.consume(name, keys, CONFIG, sqs)
    # Then the keyed one has its key, the others their own id
    assert keys.seen == {
        "keyed": (keyed, "order-17"),
        "plain": (plain, plain),
        "foreign": (foreign, foreign),
    }


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_a_dead_letter_copy_keeps_the_id_and_the_key(
    front_end: FrontEnd, sqs: Any, name: str
) -> None:
    # Given a keyed message and a plain one, dead-lettered by the handler
    dlq = f"{name}-dlq"
    create_queue(name, dead_letter_queue=dlq, max_retries=1, client=sqs)
    producer = Producer(name, client=sqs)
    keyed = producer.send("keyed", idempotency_key="order-17")
    plain = producer.send("plain")
    front_end.consume(name, Keys(dead_letter=True), CONFIG, sqs)
    # When the DLQ is read by the same front end
    from_dlq = Keys()
    front_end.consume(dlq, from_dlq, CONFIG, sqs)
    # Then each copy has its message's id and key
    assert from_dlq.seen == {"keyed": (keyed, "order-17"), "plain": (plain, plain)}


def test_a_redriven_copy_keeps_the_key(sqs: Any, name: str) -> None:
    # Given a keyed message dead-lettered, then moved back by `redrive`
    dlq = f"{name}-dlq"
    create_queue(name, dead_letter_queue=dlq, max_retries=1, client=sqs)
    keyed = Producer(name, client=sqs).send("keyed", idempotency_key="order-17")
    front_end = FRONT_ENDS[0]
    front_end.consume(name, Keys(dead_letter=True), CONFIG, sqs)
    report = redrive.move_now(dlq, to=name, client=sqs)
    assert report.moved == 1 and depth(sqs, dlq) == 0
    # When it is consumed again, Then it has the same id and key
    again = Keys()
    front_end.consume(name, again, CONFIG, sqs)
    assert again.seen == {"keyed": (keyed, "order-17")}


def test_sqsbatch_testing_takes_a_key() -> None:
    seen: dict[str, str] = {}

    def handler(batch: MessageBatch) -> None:
        for message in batch.messages:
            seen[message.body] = message.idempotency_key
            message.ack()

    run_handler(handler, [TestMessage("keyed", idempotency_key="k-1"), TestMessage("plain")])
    assert seen == {"keyed": "k-1", "plain": "message-1"}


@pytest.mark.parametrize(
    ("key", "why"),
    [("", "0 characters"), ("k" * 257, "257 characters"), (17, "int"), ("\ud800", "surrogate")],
)
def test_a_bad_key_is_refused_in_one_line_and_nothing_is_sent(
    sqs: Any, name: str, key: Any, why: str
) -> None:
    create_queue(name, client=sqs)
    producer = Producer(name, client=sqs)
    with pytest.raises(MessageError, match="idempotency_key") as refused:
        producer.send("x", idempotency_key=key)
    assert "\n" not in str(refused.value) and why in str(refused.value)
    with pytest.raises(MessageError, match="idempotency_key"):
        run_handler(lambda batch: None, [TestMessage("x", idempotency_key=key)])
    assert depth(sqs, name) == 0


def test_a_key_of_256_characters_is_accepted(sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send("x", idempotency_key="k" * 256)
    assert depth(sqs, name) == 1


def test_send_takes_an_idempotency_key_and_refuses_it_with_lines(
    local_sqs: Any, sqs: Any, name: str, tmp_path: Any
) -> None:
    url = create_queue(name, client=sqs)
    where = ["--endpoint-url", local_sqs.endpoint_url, "--region", "us-east-1"]
    runner = CliRunner()
    sent = runner.invoke(app, [*where, "send", name, '{"n": 1}', "--idempotency-key", "job-9"])
    assert sent.exit_code == 0, sent.output
    (message,) = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
    assert json.loads(message["MessageAttributes"]["sqsbatch"]["StringValue"])["ik"] == "job-9"
    lines = tmp_path / "lines.jsonl"
    lines.write_text('{"n": 1}\n{"n": 2}\n')
    args = [*where, "send", name, "--file", str(lines), "--lines", "--idempotency-key", "k"]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 2 and "--idempotency-key" in refused.output
    assert depth(sqs, name) == 1  # the one sent above (in flight), nothing more
