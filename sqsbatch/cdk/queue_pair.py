"""A consumer queue and its dead-letter queue, both derived from a `ConsumerConfig`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from sqsbatch.cdk.rules import is_fifo, max_receive_count
from sqsbatch.config import ConsumerConfig
from sqsbatch.errors import ConfigError

__all__ = ["DeadLetterQueue", "QueueWithDlq", "queue_arn"]

FOUR_DAYS_SECONDS = 4 * 86_400
MAX_QUEUE_DELAY_SECONDS = 900
MAX_RETENTION_SECONDS = 14 * 86_400


def encryption(key: kms.IKey | None) -> dict[str, Any]:
    """SQS-managed SSE without a key, SSE-KMS with it (data keys reused for 5 minutes)."""
    if key is None:
        return {"encryption": sqs.QueueEncryption.SQS_MANAGED}
    return {"encryption": sqs.QueueEncryption.KMS, "encryption_master_key": key}


def queue_arn(scope: Construct, name: str) -> str:
    """The ARN of the queue called `name` in the stack's account and region.

    Built from the name, not from the queue resource, so a DLQ can name its sources in its
    RedriveAllowPolicy while the sources name the DLQ in their RedrivePolicy: no cycle.
    """
    return Stack.of(scope).format_arn(service="sqs", resource=name)


class DeadLetterQueue(Construct):
    """A DLQ kept for 14 days (SQS's maximum, so never shorter than a source's retention).

    SQS-managed encryption (SSE-KMS with `encryption_key`), a policy refusing requests without
    TLS, and a RedriveAllowPolicy that lets only `source_queue_names` dead-letter into it. Share
    one between several `QueueWithDlq`s by passing it as their `dead_letter_queue`.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        queue_name: str,
        source_queue_names: Sequence[str],
        encryption_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, id)
        if not 1 <= len(source_queue_names) <= 10:
            raise ConfigError(
                f"a dead-letter queue names 1..10 source queues, not {len(source_queue_names)}"
            )
        self.queue_name = queue_name
        self.source_queue_names = tuple(source_queue_names)
        self.encryption_key = encryption_key
        sources = [
            sqs.Queue.from_queue_arn(self, f"Source{index}", queue_arn(self, name))
            for index, name in enumerate(self.source_queue_names)
        ]
        self.queue = sqs.Queue(
            self,
            "Queue",
            queue_name=queue_name,
            fifo=True if is_fifo(queue_name) else None,
            retention_period=Duration.seconds(MAX_RETENTION_SECONDS),
            enforce_ssl=True,
            redrive_allow_policy=sqs.RedriveAllowPolicy(
                redrive_permission=sqs.RedrivePermission.BY_QUEUE, source_queues=sources
            ),
            **encryption(encryption_key),
        )


class QueueWithDlq(Construct):
    """The queue a consumer reads, with `RedrivePolicy.maxReceiveCount = max_retries + 1`.

    Its name is `queue_name`, its DLQ `config.dead_letter_queue` (created here unless a shared
    `DeadLetterQueue` is given), its visibility timeout `config.visibility_timeout` and its
    `DelaySeconds` the queue-level `delivery_delay_seconds` (0..900). SQS-managed encryption
    (SSE-KMS with `encryption_key`, which a created DLQ shares) and a policy that denies every
    request made without TLS (`aws:SecureTransport` false).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        queue_name: str,
        config: ConsumerConfig,
        delivery_delay_seconds: int = 0,
        retention_seconds: int = FOUR_DAYS_SECONDS,
        dead_letter_queue: DeadLetterQueue | None = None,
        encryption_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, id)
        _check(queue_name, config, delivery_delay_seconds, retention_seconds, dead_letter_queue)
        if dead_letter_queue is not None and dead_letter_queue.encryption_key is not encryption_key:
            raise ConfigError(
                f"queue {queue_name!r}: the shared DLQ {dead_letter_queue.queue_name!r} is "
                "encrypted with another key (accepted: the same encryption_key for both)"
            )
        if dead_letter_queue is None:
            assert config.dead_letter_queue is not None  # _check refuses a config without one
            dead_letter_queue = DeadLetterQueue(
                self,
                "DeadLetter",
                queue_name=config.dead_letter_queue,
                source_queue_names=[queue_name],
                encryption_key=encryption_key,
            )
        self.queue_name = queue_name
        self.config = config
        self.dead_letter = dead_letter_queue
        self.encryption_key = encryption_key
        self.receive_headroom = 0
        self.queue = sqs.Queue(
            self,
            "Queue",
            queue_name=queue_name,
            fifo=True if is_fifo(queue_name) else None,
            visibility_timeout=Duration.seconds(config.visibility_timeout),
            delivery_delay=Duration.seconds(delivery_delay_seconds),
            retention_period=Duration.seconds(retention_seconds),
            enforce_ssl=True,
            dead_letter_queue=sqs.DeadLetterQueue(
                max_receive_count=max_receive_count(config), queue=dead_letter_queue.queue
            ),
            **encryption(encryption_key),
        )

    def add_receive_headroom(self, headroom: int) -> None:
        """Let SQS dead-letter a message only after `headroom` receives more than
        `max_retries + 1` (for consumers whose receives are not all deliveries, like Lambda's)."""
        count = max_receive_count(self.config, headroom=headroom)
        queue = self.queue.node.default_child
        assert isinstance(queue, sqs.CfnQueue)
        queue.add_property_override("RedrivePolicy.maxReceiveCount", count)
        self.receive_headroom = headroom

    @property
    def dead_letter_queue(self) -> sqs.Queue:
        return self.dead_letter.queue


def _check(
    queue_name: str,
    config: ConsumerConfig,
    delay: int,
    retention: int,
    shared: DeadLetterQueue | None,
) -> None:
    if config.dead_letter_queue is None:
        raise ConfigError(f"queue {queue_name!r}: dead_letter_queue is not set (a DLQ is needed)")
    if not 0 <= delay <= MAX_QUEUE_DELAY_SECONDS:
        raise ConfigError(f"delivery_delay={delay} is invalid (accepted: 0..900 for a queue)")
    if not 60 <= retention <= MAX_RETENTION_SECONDS:
        raise ConfigError(f"retention_seconds={retention} is invalid (accepted: 60..1209600)")
    if shared is None:
        return
    if shared.queue_name != config.dead_letter_queue:
        raise ConfigError(
            f"queue {queue_name!r}: the shared DLQ is {shared.queue_name!r} but "
            f"dead_letter_queue={config.dead_letter_queue!r}"
        )
    if queue_name not in shared.source_queue_names:
        raise ConfigError(
            f"queue {queue_name!r} is not among the sources of DLQ {shared.queue_name!r}"
        )
