"""`sqsbatch.testing` screens as the consumers do (issue 27, item 7): `run_handler(...,
body_model=)` validates bodies before the handler, and a message past its deadline (by
`TestMessage(timestamp=)` and `max_message_age`, or `TestMessage(ttl_seconds=)`) is
dead-lettered as `expired`, with the consumers' own screening code. Sync and async handlers,
`run_handler` and `run_handler_async`. No SQS: the timestamps are set, no clock is waited."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from sqsbatch import ConsumerConfig, MessageBatch
from sqsbatch.errors import ConfigError, MessageError
from sqsbatch.testing import HandlerResult, TestMessage, run_handler, run_handler_async


class Order(BaseModel):
    id: int


class Seen:
    """A sync and an async handler that record the bodies they were given."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []

    def sync(self, batch: MessageBatch) -> None:
        self.bodies.extend(m.body for m in batch.messages)

    async def async_(self, batch: MessageBatch) -> None:
        self.bodies.extend(m.body for m in batch.messages)


def via_run_handler(seen: Seen, kind: str, messages: list[Any], **kw: Any) -> HandlerResult:
    return run_handler(getattr(seen, kind), messages, **kw)


def via_run_handler_async(seen: Seen, kind: str, messages: list[Any], **kw: Any) -> HandlerResult:
    return asyncio.run(run_handler_async(getattr(seen, kind), messages, **kw))


RUNS = [via_run_handler, via_run_handler_async]
Run = Callable[..., HandlerResult]
parametrized = pytest.mark.parametrize(
    ("run", "kind"),
    [(run, kind) for run in RUNS for kind in ("sync", "async_")],
    ids=lambda value: getattr(value, "__name__", value),
)
HOUR_AGO = datetime.now(UTC) - timedelta(hours=1)


@parametrized
def test_body_model_validates_before_the_handler(run: Run, kind: str) -> None:
    seen = Seen()
    config = ConsumerConfig(dead_letter_queue="dlq")
    result = run(seen, kind, [{"id": 1}, {"id": "x"}, {"id": 3}], body_model=Order, config=config)
    assert seen.bodies == [Order(id=1), Order(id=3)]
    assert result.acked == [0, 2] and result.dead_lettered == [1]
    invalid = result.outcomes[1]
    assert (invalid.reason, invalid.explicit, invalid.body) == ("invalid_body", False, {"id": "x"})
    assert invalid.error is not None and invalid.error.type == "ValidationError"
    assert invalid.error.message.startswith("id: ")


@parametrized
def test_an_old_message_is_dead_lettered_as_expired(run: Run, kind: str) -> None:
    seen = Seen()
    config = ConsumerConfig(max_message_age=60, dead_letter_queue="dlq")
    messages = [
        TestMessage("old", timestamp=HOUR_AGO),
        "new",
        TestMessage("gone", ttl_seconds=1, timestamp=HOUR_AGO),
    ]
    result = run(seen, kind, messages, config=config)
    assert seen.bodies == ["new"]
    assert result.dead_lettered == [0, 2] and result.acked == [1]
    assert [o.reason for o in result.outcomes] == ["expired", None, "expired"]


@parametrized
def test_without_a_dead_letter_queue_a_screened_message_is_dropped(run: Run, kind: str) -> None:
    seen = Seen()
    result = run(seen, kind, [TestMessage({"id": "x"})], body_model=Order)
    assert seen.bodies == []  # the handler is not called with an empty batch
    assert result.dropped == [0] and result.raised is None
    assert result.outcomes[0].reason == "invalid_body"


@pytest.mark.parametrize("run", RUNS)
def test_a_handler_dead_letter_reports_its_reason(run: Run) -> None:
    def handler(batch: MessageBatch) -> None:
        batch.messages[0].dead_letter("tenant gone")

    config = ConsumerConfig(dead_letter_queue="dlq")
    if run is via_run_handler:
        result = run_handler(handler, ["a", "b"], config=config)
    else:
        result = asyncio.run(run_handler_async(handler, ["a", "b"], config=config))
    assert [o.reason for o in result.outcomes] == ["tenant gone", None]


def test_bad_screening_input_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^body_model=42 is invalid: not a type pydantic"):
        run_handler(Seen().sync, ["a"], body_model=42)
    with pytest.raises(MessageError, match=r"^message #0: ttl_seconds=0 is invalid"):
        run_handler(Seen().sync, [TestMessage("a", ttl_seconds=0)])
