"""A consumer that an orchestrator can watch (docs/operations.md): a health file for the
container health check, and the stall watchdog with its default made explicit."""

from __future__ import annotations

from sqsbatch import Consumer, ConsumerConfig, MessageBatch
from sqsbatch.errors import SqsBatchError


def handle(batch: MessageBatch) -> None:
    for message in batch.messages:
        message.ack()


def main(queue: str, health_file: str) -> int:
    """Run until stopped; a stalled loop is an exit code, so the orchestrator replaces us."""
    config = ConsumerConfig.load(queue, stall_seconds=90)  # three 20 s polls + 30 s visibility
    consumer = Consumer(queue, handle, config, health_file=health_file)
    try:
        consumer.run()
    except SqsBatchError as exc:  # the watchdog: "consumer of ... stalled: ..."
        print(exc)
        return 1
    return 0
