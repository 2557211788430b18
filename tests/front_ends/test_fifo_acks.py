"""FIFO order and explicit acks (issue 27, item 12), on a FIFO queue of moto's server, on every
front end: a handler that acks a message itself after retrying an earlier one of its group has
handled the group out of order. The ack holds (SPEC 2.3: explicit acks hold; its work is done,
and a retry would run it a second time, not in order), and a WARNING says so, naming it.
The decision itself is table-tested on the core: tests/core/test_fifo_acks.py.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

import pytest

from sqsbatch import ConsumerConfig, MessageBatch, MessageSendRequest, Producer, create_queue
from sqsbatch.limits import SQS_LIMITS
from tests.support.front_ends import FRONT_ENDS, FrontEnd
from tests.support.sqs_helpers import depth


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_an_ack_after_a_retry_of_its_group_holds_and_is_a_warning(
    front_end: FrontEnd, sqs: Any, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given group a (a1, a2, a3) and group b (b1) on a FIFO queue
    queue = f"{name}.fifo"
    create_queue(queue, client=sqs)
    bodies = [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b")]
    Producer(queue, client=sqs).send_batch(
        [MessageSendRequest(body, group_id=group) for body, group in bodies]
    )
    deliveries: dict[str, list[int]] = defaultdict(list)
    ids: dict[str, str] = {}

    # When the handler retries a1 and then acks a2 itself, leaving a3 and b1 undecided
    def handler(batch: MessageBatch) -> None:
        for message in batch.messages:
            deliveries[message.body].append(message.attempts)
            ids[message.body] = message.id
            if message.attempts == 1 and message.body == "a1":
                message.retry(delay_seconds=0)
            elif message.attempts == 1 and message.body == "a2":
                message.ack()

    config = ConsumerConfig(max_batch_size=10, max_batch_timeout=0.3)
    with caplog.at_level(logging.WARNING, logger="sqsbatch"):
        front_end.consume(queue, handler, config, sqs, limits=SQS_LIMITS, idle_seconds=1.5)
    # Then a2's ack held (never delivered again), a3 was held back behind a1, b1 went on
    assert dict(deliveries) == {"a1": [1, 2], "a2": [1], "a3": [1, 2], "b1": [1]}
    assert depth(sqs, queue) == 0
    # and one WARNING named a2 as handled out of its group's order
    lines = [r for r in caplog.records if "out of order" in r.getMessage()]
    assert [r.levelno for r in lines] == [logging.WARNING]
    assert (
        lines[0]
        .getMessage()
        .startswith(
            f"{queue}: 1 message acked by the handler after an earlier message of the same FIFO "
            f"group was retried ({ids['a2']})"
        )
    )
