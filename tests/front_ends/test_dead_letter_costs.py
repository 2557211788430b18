"""What each new dead-letter path costs in SQS requests (issue 12), counted, on moto's server.

A batch of 10 messages, all dead-lettered one way: on request (`dead_letter_all`), past their
deadline (`expired`), or with an invalid body (`invalid_body`). Counted: the requests the front
end itself makes beyond what the same batch costs when it is acked (the start-up lookups and
the receives are the same). `pytest -s` prints the figures; the asserts keep them from growing.
Expired messages are sent by a producer whose clock is behind: their 1 s deadline is past when
they arrive, with no wait.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from pydantic import BaseModel

from sqsbatch import Consumer, ConsumerConfig, MessageBatch, Producer, create_queue
from tests.support.front_ends import LambdaFrontEnd
from tests.support.sqs_helpers import depth

SIZE = 10


class Order(BaseModel):
    id: int


def _late() -> float:
    """A producer's clock 2 s behind: a 1 s deadline it stamps is already past."""
    return time.time() - 2.0


def _queue(sqs: Any, name: str, bodies: list[Any], **send: Any) -> str:
    dlq = f"{name}-dlq"
    create_queue(name, dead_letter_queue=dlq, client=sqs)
    clock = _late if "ttl_seconds" in send else time.time
    Producer(name, client=sqs, clock=clock).send_batch([{"body": b} for b in bodies], **send)
    return dlq


def _config(dlq: str, **changes: Any) -> ConsumerConfig:
    return ConsumerConfig(
        max_batch_size=SIZE, max_batch_timeout=1, dead_letter_queue=dlq, **changes
    )


def _settling(requests: dict[str, int]) -> dict[str, int]:
    """The requests that settle: not the start-up lookups (the queue, its RedrivePolicy, its
    pause tags), not the receives."""
    skip = {"get_queue_url", "get_queue_attributes", "list_queue_tags", "receive_message"}
    return {op: n for op, n in sorted(requests.items()) if op not in skip}


def test_dead_letter_all_on_the_poller_costs_one_send_and_one_delete_per_ten(
    sqs: Any, name: str
) -> None:
    dlq = _queue(sqs, name, list(range(SIZE)))

    def handler(batch: MessageBatch) -> None:
        batch.dead_letter_all("tenant deleted")

    consumer = Consumer(name, handler, _config(dlq), client=sqs)
    consumer.run_until_idle(1.0)
    found = _settling(consumer.requests_by_operation)
    print(f"\npoller, dead_letter_all on {SIZE} messages: {found}")
    assert found == {"delete_message_batch": 1, "send_message_batch": 1}
    assert depth(sqs, dlq) == SIZE and depth(sqs, name) == 0


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("dead_letter", {"send_message_batch": 1}),
        ("expired", {"send_message_batch": 1}),
        ("invalid_body", {"send_message_batch": 1}),
    ],
)
def test_lambda_dead_letter_paths_cost_one_send_per_ten(
    sqs: Any, name: str, path: str, expected: dict[str, int]
) -> None:
    bodies: list[Any] = list(range(SIZE)) if path != "invalid_body" else ["x"] * SIZE
    dlq = _queue(sqs, name, bodies, **({"ttl_seconds": 1} if path == "expired" else {}))
    front_end = LambdaFrontEnd()

    def handler(batch: MessageBatch) -> None:
        batch.dead_letter_all("tenant deleted")

    model = Order if path == "invalid_body" else None
    front_end.consume(name, handler, _config(dlq), sqs, body_model=model)
    found = _settling(front_end.requests)
    print(f"\nlambda, {path} on {SIZE} messages: {found} (Lambda deletes what is not reported)")
    assert found == expected
    assert depth(sqs, dlq) == SIZE and depth(sqs, name) == 0


@pytest.mark.parametrize("path", ["expired", "invalid_body"])
def test_poller_screening_costs_one_send_and_one_delete_per_ten(
    sqs: Any, name: str, path: str
) -> None:
    # Given 10 messages that can never be processed: past their deadline, or not an Order
    bodies: list[Any] = list(range(SIZE)) if path != "invalid_body" else ["x"] * SIZE
    dlq = _queue(sqs, name, bodies, **({"ttl_seconds": 1} if path == "expired" else {}))
    seen: list[Any] = []
    # When the poller consumes them (screened in the receive, before any batch)
    model = Order if path == "invalid_body" else None
    consumer = Consumer(name, seen.append, _config(dlq), client=sqs, body_model=model)
    consumer.run_until_idle(1.0)
    found = _settling(consumer.requests_by_operation)
    print(f"\npoller, {path} on {SIZE} messages: {found}")
    # Then one copy call and one delete call for the 10, and the handler saw none of them
    assert found == {"delete_message_batch": 1, "send_message_batch": 1}
    assert seen == []
    assert depth(sqs, dlq) == SIZE and depth(sqs, name) == 0
