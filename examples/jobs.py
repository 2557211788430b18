"""The handler module that docs/cli.md runs with `sqsbatch consume jobs:handle`."""

from __future__ import annotations

from sqsbatch import MessageBatch


def handle(batch: MessageBatch) -> None:
    for message in batch.messages:
        if message.body == "poison":
            message.retry(delay_seconds=5)
        else:
            message.ack()
