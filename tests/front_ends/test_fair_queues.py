"""Fair queues (issue 31, item 1), against moto's server, on every front end: a `group_id` on a
standard queue marks the message's tenant; `message.group_id` has it, and every copy sqsbatch
sends (a delay hop, a long retry, a DLQ copy, a redrive) keeps it. It orders nothing: the
group of a retried message does not hold back the rest of its group, as it would on FIFO.
"""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

import redrive
from sqsbatch import ConsumerConfig, MessageBatch, MessageSendRequest, Producer, create_queue
from sqsbatch.cli.app import app
from sqsbatch.limits import SqsLimits
from tests.support.front_ends import FRONT_ENDS, FrontEnd
from tests.support.sqs_helpers import depth

SHRUNK = SqsLimits(max_send_delay_seconds=1, visibility_ceiling_seconds=2)
CONFIG = ConsumerConfig(max_batch_size=10, max_batch_timeout=0.2, max_retries=3)


def groups_in(sqs: Any, queue: str) -> dict[str, str | None]:
    """Body -> MessageGroupId of every message on `queue` (received, then left to come back)."""
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    found: dict[str, str | None] = {}
    for _ in range(5):
        answer = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["MessageGroupId"]
        )
        for message in answer.get("Messages", []):
            found[message["Body"]] = message.get("Attributes", {}).get("MessageGroupId")
        if len(answer.get("Messages", [])) == 0:
            break
    return found


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_a_tenant_rides_with_its_message_through_a_long_retry_and_a_dead_letter(
    front_end: FrontEnd, sqs: Any, name: str
) -> None:
    # Given a standard queue with a DLQ, and messages of two tenants and of none
    dlq = f"{name}-dlq"
    create_queue(name, dead_letter_queue=dlq, max_retries=3, client=sqs)
    Producer(name, client=sqs).send_batch(
        [
            MessageSendRequest("retried", group_id="tenant-a"),
            MessageSendRequest("dead", group_id="tenant-b"),
            MessageSendRequest("plain"),
        ]
    )
    seen: list[tuple[Any, str | None, int]] = []

    def handler(batch: MessageBatch) -> None:
        for message in batch.messages:
            seen.append((message.body, message.group_id, message.attempts))
            if message.body == "retried" and message.attempts == 1:
                message.retry(delay_seconds=3)  # past the shrunk ceiling: re-sent in hops
            elif message.body == "dead":
                message.dead_letter("to see the copy")
            else:
                message.ack()

    # When the front end consumes until idle
    front_end.consume(name, handler, CONFIG, sqs, limits=SHRUNK, idle_seconds=4.5)
    # Then each message had its tenant on every delivery, the retried one after its hops too
    assert sorted(seen, key=str) == sorted(
        [
            ("retried", "tenant-a", 1),
            ("retried", "tenant-a", 2),
            ("dead", "tenant-b", 1),
            ("plain", None, 1),
        ],
        key=str,
    )
    # And the DLQ copy is in its tenant's group
    assert groups_in(sqs, dlq) == {"dead": "tenant-b"}
    assert depth(sqs, name) == 0


def test_a_redriven_copy_keeps_its_tenant(sqs: Any, name: str) -> None:
    dlq = f"{name}-dlq"
    create_queue(name, dead_letter_queue=dlq, max_retries=1, client=sqs)
    Producer(name, client=sqs).send("x", group_id="tenant-c")

    def dead(batch: MessageBatch) -> None:
        batch.dead_letter_all("then redriven")

    FRONT_ENDS[0].consume(name, dead, CONFIG, sqs)
    assert redrive.move_now(dlq, to=name, client=sqs).moved == 1
    assert groups_in(sqs, name) == {"x": "tenant-c"}


def test_send_takes_a_group_id_on_a_standard_queue(local_sqs: Any, sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    where = ["--endpoint-url", local_sqs.endpoint_url, "--region", "us-east-1"]
    runner = CliRunner()
    sent = runner.invoke(app, [*where, "send", name, "hello", "--group-id", "tenant-d"])
    assert sent.exit_code == 0, sent.output
    refused = runner.invoke(app, [*where, "send", name, "hello", "--deduplication-id", "d"])
    assert refused.exit_code == 1 and "deduplication_id is for FIFO queues" in refused.output
    assert groups_in(sqs, name) == {"hello": "tenant-d"}
