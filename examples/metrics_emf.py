"""A consumer whose counts become CloudWatch metrics (docs/operations.md): Embedded Metric
Format lines on stdout, which CloudWatch Logs turns into metrics with no API call."""

from __future__ import annotations

from sqsbatch import Consumer, ConsumerConfig, MessageBatch


def handle(batch: MessageBatch) -> None:
    for message in batch.messages:
        if message.body.get("tenant") is None:
            message.dead_letter("no tenant")  # counted as DeadLettered, Reason=requested
        else:
            message.ack()


def main(queue: str, *, idle_seconds: float | None = None) -> None:
    """Consume with metrics on; as in production, `SQSBATCH_METRICS=emf` does the same."""
    config = ConsumerConfig.load(queue, metrics="emf", metrics_namespace="Shop/Orders")
    consumer = Consumer(queue, handle, config)
    if idle_seconds is None:
        consumer.run()  # one line per metrics_interval (60 s), and one when it stops
    else:
        consumer.run_until_idle(idle_seconds)
