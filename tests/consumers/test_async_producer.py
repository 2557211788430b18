"""`AsyncProducer` on moto's server: the same sends as `Producer`, awaited."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from sqsbatch import AsyncProducer, FifoError, MessageError, MessageSendRequest, create_queue
from tests.support.front_ends import aio_client
from tests.support.sqs_helpers import drain


def test_send_and_send_batch_return_the_ids_the_consumer_sees(sqs: Any, name: str) -> None:
    # Given a queue
    create_queue(name, client=sqs)

    async def main() -> list[str]:
        async with aio_client(sqs) as aio:
            producer = AsyncProducer(name, client=aio)
            first = await producer.send({"n": 0})
            rest = await producer.send_batch(
                [MessageSendRequest("text"), {"body": b"\x00raw", "attributes": {"k": "v"}}]
            )
            assert producer.requests == 3  # GetQueueUrl once, then one batch call per send
            return [first, *rest]

    # When one message and a batch of two are sent
    ids = asyncio.run(main())
    # Then they arrive with those ids, their types and attributes
    found = {m["MessageId"]: m for m in drain(sqs, name)}
    assert sorted(found) == sorted(ids)
    assert json.loads(found[ids[0]]["Body"]) == {"n": 0}
    assert found[ids[1]]["meta"]["ct"] == "text"
    assert found[ids[2]]["MessageAttributes"]["k"]["StringValue"] == "v"


def test_without_a_client_it_opens_and_closes_its_own(
    sqs: Any, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the endpoint in the environment, as on ECS with a local SQS
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", sqs.meta.endpoint_url)
    create_queue(name, client=sqs)

    async def main() -> None:
        async with AsyncProducer(name) as producer:
            await producer.send("hello", delay_seconds=0)
        lazy = AsyncProducer(name)
        await lazy.send("again")
        await lazy.aclose()

    # When it sends, Then both messages arrive
    asyncio.run(main())
    assert sorted(m["Body"] for m in drain(sqs, name)) == ["again", "hello"]


def test_refuses_before_any_call() -> None:
    # Given a producer on a queue that does not exist (no client needed: nothing is called)
    async def main() -> None:
        producer = AsyncProducer("nowhere", client=object())
        with pytest.raises(MessageError, match="body is None"):
            await producer.send(None)
        with pytest.raises(MessageError, match="at most 100"):
            await producer.send_batch([{"body": i} for i in range(101)])
        assert producer.requests == 0

    asyncio.run(main())
    with pytest.raises(FifoError, match="delivery_delay on a FIFO queue"):
        AsyncProducer("q.fifo", delivery_delay=5, client=object())
