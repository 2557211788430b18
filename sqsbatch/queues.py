"""Creating queues with their RedrivePolicy, and checking a queue against a consumer's settings.

`max_retries` N means N+1 deliveries, so `RedrivePolicy.maxReceiveCount = max_retries + 1`. The
library dead-letters a message itself when its last delivery fails; the RedrivePolicy is the
safety net for consumers that crash before they can settle. A consumer reads the policy at start
(`resolve_settings`): what its settings leave unset comes from there.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from sqsbatch._core.queue_settings import check_dead_letter_queue
from sqsbatch._core.shapes import is_fifo
from sqsbatch._sync.door import SyncSqs, default_client
from sqsbatch.config import check_int
from sqsbatch.errors import ConfigError, SqsError

__all__ = ["create_queue", "queue_attributes_for"]

log = logging.getLogger("sqsbatch")

DLQ_RETENTION_SECONDS = 1_209_600  # 14 days, SQS's maximum: a DLQ should outlive its source


def queue_attributes_for(
    name: str,
    *,
    dead_letter_arn: str | None,
    max_retries: int,
    delivery_delay: int,
    visibility_timeout: int,
    fifo: bool,
) -> dict[str, str]:
    """The attributes of a source queue, checked; pure so that every front end shares it."""
    check_int("max_retries", max_retries, 0, 100)
    if isinstance(delivery_delay, int) and delivery_delay > 900:
        raise ConfigError(
            f"delivery_delay={delivery_delay} is invalid for a queue: SQS queues delay at most "
            "900 s; for longer delays set the producer's delivery_delay (up to 86400 s)"
        )
    check_int("delivery_delay", delivery_delay, 0, 900)
    check_int("visibility_timeout", visibility_timeout, 0, 43_200)
    attributes = {
        "DelaySeconds": str(delivery_delay),
        "VisibilityTimeout": str(visibility_timeout),
    }
    if fifo:
        attributes["FifoQueue"] = "true"
        attributes["ContentBasedDeduplication"] = "true"
    if dead_letter_arn is not None:
        policy = {"deadLetterTargetArn": dead_letter_arn, "maxReceiveCount": max_retries + 1}
        attributes["RedrivePolicy"] = json.dumps(policy)
    return attributes


def create_queue(
    name: str,
    *,
    dead_letter_queue: str | None = None,
    max_retries: int = 3,
    delivery_delay: int = 0,
    visibility_timeout: int = 30,
    fifo: bool = False,
    client: Any = None,
) -> str:
    """Create `name` (and its DLQ, if missing) with the RedrivePolicy; return its URL.

    An existing queue gets its attributes updated to match. FIFO is inferred from a `.fifo` name;
    a FIFO queue needs a FIFO DLQ.
    """
    fifo = _check_names(name, dead_letter_queue, fifo)
    sqs = SyncSqs(client if client is not None else default_client())
    dead_letter_arn = None
    if dead_letter_queue is not None:
        dlq_attributes = {"MessageRetentionPeriod": str(DLQ_RETENTION_SECONDS)}
        if fifo:
            dlq_attributes |= {"FifoQueue": "true", "ContentBasedDeduplication": "true"}
        dlq_url = _create_or_update(sqs, dead_letter_queue, dlq_attributes)
        dead_letter_arn = sqs.call(
            "get_queue_attributes", {"QueueUrl": dlq_url, "AttributeNames": ["QueueArn"]}
        )["Attributes"]["QueueArn"]
    attributes = queue_attributes_for(
        name,
        dead_letter_arn=dead_letter_arn,
        max_retries=max_retries,
        delivery_delay=delivery_delay,
        visibility_timeout=visibility_timeout,
        fifo=fifo,
    )
    return _create_or_update(sqs, name, attributes)


def _check_names(name: str, dead_letter_queue: str | None, fifo: bool) -> bool:
    if not name:
        raise ConfigError("queue name is empty")
    fifo = fifo or name.endswith(".fifo")
    if fifo and not name.endswith(".fifo"):
        raise ConfigError(f"FIFO queue names end in .fifo: {name!r}")
    check_dead_letter_queue(name, dead_letter_queue)
    if dead_letter_queue is not None and is_fifo(dead_letter_queue) != fifo:
        kind = "a FIFO" if fifo else "a standard"
        raise ConfigError(
            f"dead_letter_queue={dead_letter_queue!r} must be {kind} queue like {name!r}"
        )
    return fifo


def _create_or_update(sqs: SyncSqs, name: str, attributes: dict[str, str]) -> str:
    try:
        url: str = sqs.call("create_queue", {"QueueName": name, "Attributes": attributes})[
            "QueueUrl"
        ]
    except SqsError as exc:
        if exc.code not in ("QueueAlreadyExists", "QueueNameExists"):
            raise
        url = sqs.queue_url(name)
        changeable = {k: v for k, v in attributes.items() if k != "FifoQueue"}
        sqs.call("set_queue_attributes", {"QueueUrl": url, "Attributes": changeable})
    log.info("queue %s ready at %s", name, url)
    return url
