"""create_queue: the RedrivePolicy from max_retries, DLQs, FIFO, refusals (SPEC 5)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sqsbatch import ConfigError, Producer, QueueNotFound, create_queue


def attributes(sqs: Any, url: str) -> dict[str, str]:
    return dict(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"])


def test_creates_the_dlq_and_the_redrive_policy(sqs: Any, name: str) -> None:
    url = create_queue(
        name,
        dead_letter_queue=f"{name}-dlq",
        max_retries=4,
        delivery_delay=7,
        visibility_timeout=45,
        client=sqs,
    )
    source = attributes(sqs, url)
    policy = json.loads(source["RedrivePolicy"])
    assert policy["maxReceiveCount"] == 5  # 4 retries = 5 deliveries
    assert policy["deadLetterTargetArn"].endswith(f":{name}-dlq")
    assert (source["DelaySeconds"], source["VisibilityTimeout"]) == ("7", "45")
    dlq = attributes(sqs, sqs.get_queue_url(QueueName=f"{name}-dlq")["QueueUrl"])
    assert dlq["MessageRetentionPeriod"] == "1209600"


def test_is_idempotent_and_updates_an_existing_queue(sqs: Any, name: str) -> None:
    first = create_queue(name, dead_letter_queue=f"{name}-dlq", max_retries=1, client=sqs)
    again = create_queue(name, dead_letter_queue=f"{name}-dlq", max_retries=6, client=sqs)
    assert first == again
    assert json.loads(attributes(sqs, again)["RedrivePolicy"])["maxReceiveCount"] == 7


def test_fifo_queue_gets_a_fifo_dlq(sqs: Any, name: str) -> None:
    url = create_queue(f"{name}.fifo", dead_letter_queue=f"{name}-dlq.fifo", client=sqs)
    assert attributes(sqs, url)["FifoQueue"] == "true"
    dlq = sqs.get_queue_url(QueueName=f"{name}-dlq.fifo")["QueueUrl"]
    assert attributes(sqs, dlq)["FifoQueue"] == "true"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"name": "orders", "dead_letter_queue": "orders"}, "is the queue itself"),
        ({"name": "orders.fifo", "dead_letter_queue": "dlq"}, "must be a FIFO queue"),
        ({"name": "orders", "dead_letter_queue": "dlq.fifo"}, "must be a standard queue"),
        ({"name": "orders", "fifo": True}, "FIFO queue names end in .fifo"),
        ({"name": "orders", "max_retries": 101}, r"max_retries=101 .*0\.\.100"),
        ({"name": "orders", "delivery_delay": 901}, "producer's delivery_delay"),
        ({"name": "orders", "delivery_delay": -1}, r"delivery_delay=-1 .*0\.\.900"),
        ({"name": "orders", "visibility_timeout": 43_201}, "visibility_timeout=43201"),
        ({"name": ""}, "queue name is empty"),
    ],
)
def test_bad_input_is_refused_before_any_call(kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        create_queue(client=object(), **kwargs)


def test_missing_queue_is_a_clear_error(sqs: Any) -> None:
    with pytest.raises(QueueNotFound, match="queue does not exist"):
        Producer("no-such-queue", client=sqs).send("x")
