"""The clients sqsbatch makes for itself: the consumers' skip botocore's client-side parameter
validation (every request they send is built from SQS's own answers: `client_config`), and
still settle every kind of exchange on a real endpoint; the producers' keep it, so that a value
of the wrong type is a clear error before anything is sent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from botocore.validate import ParamValidationDecorator

from sqsbatch import (
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    ConsumerConfig,
    MessageBatch,
    Producer,
    create_queue,
    lambda_handler,
)
from sqsbatch._shell.botocore import client_config
from sqsbatch.errors import SqsBatchError
from tests.support.front_ends import EventSourceMapping
from tests.support.sqs_helpers import depth, drain

CONFIG = ConsumerConfig(max_batch_timeout=0, max_retries=1, retry_delay=0)


def validates(client: Any) -> bool:
    """Whether a boto3 or aiobotocore client checks parameters before it serializes them
    (botocore wraps its serializer then; `meta.config` does not always say)."""
    return isinstance(client._serializer, ParamValidationDecorator)


def test_client_config_validates_unless_told_not_to() -> None:
    assert client_config().parameter_validation is True
    assert client_config(validate=False).parameter_validation is False


def three_messages(sqs: Any, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A queue with a DLQ holding "ack", "retry" and "dead"; its endpoint in the environment
    only, for a front end that makes its own client."""
    create_queue(name, dead_letter_queue=f"{name}-dlq", client=sqs)
    Producer(name, client=sqs).send_batch([{"body": b} for b in ("ack", "retry", "dead")])
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", sqs.meta.endpoint_url)


def every_outcome(seen: list[bool]) -> Any:
    """A handler that acks "ack", retries "retry" once (then acks it) and dead-letters
    "dead", noting whether its poller's client validates parameters."""

    def handle(batch: MessageBatch, validates: bool) -> None:
        seen.append(validates)
        for message in batch.messages:
            if message.body == "dead":
                message.dead_letter("poison")
            elif message.body == "retry" and message.attempts == 1:
                message.retry(0)
            else:
                message.ack()

    return handle


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_poller_without_a_client_skips_validation_and_settles_every_outcome(
    kind: str, sqs: Any, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a queue with a DLQ, three messages, and the endpoint in the environment only
    three_messages(sqs, name, monkeypatch)
    seen: list[bool] = []
    handle = every_outcome(seen)
    # When a poller that makes its own client runs until idle
    if kind == "sync":
        consumer: Any = None

        def sync_handler(batch: MessageBatch) -> None:
            handle(batch, validates(consumer._sqs.client))

        consumer = Consumer(name, sync_handler, CONFIG)
        consumer.run_until_idle(1.0)
    else:

        async def async_handler(batch: MessageBatch) -> None:
            handle(batch, validates(consumer._sqs.client))

        consumer = AsyncConsumer(name, async_handler, CONFIG)
        asyncio.run(consumer.run_until_idle(1.0))
    # Then its client did not validate, and every exchange went through: acked, retried
    # (a visibility change) then acked, dead-lettered (a send, then a delete)
    assert seen and not any(seen)
    stats = consumer.stats.as_dict()
    assert (stats["acked"], stats["retried"], stats["dead_lettered"]) == (2, 1, 1)
    assert depth(sqs, name) == 0
    assert [m["Body"] for m in drain(sqs, f"{name}-dlq")] == ["dead"]


def test_the_lambda_adapter_without_a_client_skips_validation_and_settles(
    sqs: Any, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the same three messages, and a function whose adapter makes its own client
    three_messages(sqs, name, monkeypatch)
    seen: list[bool] = []
    handle = every_outcome(seen)

    @lambda_handler(config=CONFIG)
    def function(batch: MessageBatch) -> None:
        handle(batch, validates(function._door().client))

    # When the event source mapping invokes it until the queue is idle
    EventSourceMapping(sqs, name).run_until_idle(function)
    # Then its client did not validate, and the retry and the dead letter went through
    assert seen and not any(seen)
    assert depth(sqs, name) == 0
    assert [m["Body"] for m in drain(sqs, f"{name}-dlq")] == ["dead"]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_producer_without_a_client_still_validates_what_it_is_given(
    kind: str, sqs: Any, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a producer that makes its own client, and a deduplication id of the wrong type
    # (sqsbatch checks a group id itself; this one only botocore's validation catches)
    name = f"{name}.fifo"
    create_queue(name, client=sqs)
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", sqs.meta.endpoint_url)
    bad: dict[str, Any] = {"body": "x", "group_id": "g", "deduplication_id": 7}
    # When it sends it, Then botocore refuses it before the request leaves, by name
    with pytest.raises(SqsBatchError, match="MessageDeduplicationId"):
        if kind == "sync":
            Producer(name).send_batch([bad])
        else:

            async def main() -> None:
                async with AsyncProducer(name) as producer:
                    await producer.send_batch([bad])

            asyncio.run(main())
    assert depth(sqs, name) == 0
