"""`sqsbatch.testing` with envelopes (issue 31 item 4): `TestMessage(envelope=)` wraps a body as
SNS or EventBridge delivers it, and `run_handler` unwraps it with the consumers' own screening
when the config names the same envelope. Sync and async handlers. No SQS."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from sqsbatch import ConsumerConfig, MessageBatch
from sqsbatch.errors import MessageError
from sqsbatch.testing import TestMessage, run_handler, run_handler_async


class Order(BaseModel):
    order: int


class Seen:
    """A sync and an async handler that record each message's body and envelope."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, Any]] = []

    def sync(self, batch: MessageBatch) -> None:
        self.seen.extend((m.body, m.envelope) for m in batch.messages)

    async def async_(self, batch: MessageBatch) -> None:
        self.sync(batch)


@pytest.mark.parametrize("kind", ["sync", "async_"])
def test_a_test_message_in_an_sns_envelope_reaches_the_handler_unwrapped(kind: str) -> None:
    seen = Seen()
    messages = [
        TestMessage({"order": 1}, envelope="sns", envelope_fields={"Subject": "new"}),
        TestMessage("hello", envelope="sns"),
        "not a notification",
    ]
    config = ConsumerConfig(envelope="sns", dead_letter_queue="dlq")
    result = run_handler(getattr(seen, kind), messages, config=config)
    assert [body for body, _ in seen.seen] == [{"order": 1}, "hello"]
    first = seen.seen[0][1]
    assert (first["Type"], first["Subject"], first["MessageId"]) == (
        "Notification",
        "new",
        "envelope-0",
    )
    assert result.acked == [0, 1] and result.dead_lettered == [2]
    doomed = result.outcomes[2]
    assert doomed.reason == "invalid_body" and doomed.error is not None
    assert doomed.error.message == "not an SNS notification: the body is not JSON"


def test_an_eventbridge_test_message_is_validated_by_body_model_on_its_detail() -> None:
    seen = Seen()
    messages = [
        TestMessage({"order": 2}, envelope="eventbridge", envelope_fields={"source": "shop"}),
        TestMessage({"order": "x"}, envelope="eventbridge"),
    ]
    config = ConsumerConfig(envelope="eventbridge")
    result = asyncio.run(run_handler_async(seen.async_, messages, config=config, body_model=Order))
    assert [(body, envelope["source"]) for body, envelope in seen.seen] == [
        (Order(order=2), "shop")
    ]
    assert result.acked == [0] and result.outcomes[1].reason == "invalid_body"


def test_without_the_setting_the_handler_gets_the_envelope_as_text() -> None:
    seen = Seen()
    run_handler(seen.sync, [TestMessage({"order": 3}, envelope="sns")])
    [(body, envelope)] = seen.seen
    assert envelope is None and json.loads(body)["Message"] == '{"order": 3}'


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (TestMessage("x", envelope="sqs"), r"^message #0: envelope='sqs' is invalid"),  # type: ignore[arg-type]
        (TestMessage(b"x", envelope="sns"), r"^message #0: an SNS notification carries text"),
    ],
)
def test_a_test_message_its_envelope_cannot_carry_is_one_line(
    message: TestMessage, error: str
) -> None:
    with pytest.raises(MessageError, match=error):
        run_handler(lambda batch: None, [message])
