"""`sqsbatch.testing` with the idempotency guard (`idempotency=MemoryStore()`): the consumers'
own intake and settle steps, no SQS, sync and `async def` handlers alike."""

from __future__ import annotations

import time
from typing import Any

import pytest

from sqsbatch import MessageBatch
from sqsbatch.idempotency import MemoryStore
from sqsbatch.testing import TestMessage, run_handler


def acking(batch: MessageBatch) -> None:
    for message in batch.messages:
        if message.body == "fail":
            message.retry()
        else:
            message.ack()


async def acking_async(batch: MessageBatch) -> None:
    acking(batch)


HANDLERS = [acking, acking_async]


@pytest.mark.parametrize("handler", HANDLERS, ids=["sync", "async"])
def test_a_completed_keys_copy_is_skipped_and_a_failed_ones_runs_again(handler: Any) -> None:
    store = MemoryStore()
    first = run_handler(
        handler,
        [TestMessage("ok", idempotency_key="k1"), TestMessage("fail", idempotency_key="k2")],
        idempotency=store,
    )
    assert (first.acked, list(first.retried)) == ([0], [1])
    again = run_handler(
        handler,
        [TestMessage("ok", idempotency_key="k1"), TestMessage("ok", idempotency_key="k2")],
        idempotency=store,
    )
    assert (again.skipped, again.acked) == ([0], [1])
    assert again.outcomes[0].reason == "duplicate" and not again.outcomes[0].explicit


def test_a_key_claimed_elsewhere_is_retried_after_the_claim() -> None:
    store = MemoryStore()
    store.claim(["k1"], owner="another consumer", expires=time.time() + 20)
    called: list[str] = []

    def handler(batch: MessageBatch) -> None:
        called.extend(message.idempotency_key for message in batch.messages)

    result = run_handler(
        handler,
        [TestMessage("a", idempotency_key="k1"), TestMessage("b", idempotency_key="k2")],
        idempotency=store,
    )
    assert called == ["k2"]
    held = result.outcomes[0]
    assert (held.fate, held.reason) == ("retried", "claimed")
    assert held.delay_seconds is not None and 19 <= held.delay_seconds <= 20


def test_without_a_store_nothing_is_guarded() -> None:
    result = run_handler(acking, [TestMessage("ok", id="m"), TestMessage("ok", id="m")])
    assert result.acked == [0, 1] and result.skipped == []
