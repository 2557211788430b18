"""A poller for test_guard_kill.py, run as a child process: its handler writes each message's key
to a side-effect ledger file, and its store, once a completion is written, says so in a marker
file and blocks before the poller's deletes, so that the test kills it (-9) exactly there.

    python -m tests.idempotency.killed_poller QUEUE TABLE DYNAMODB_ENDPOINT LEDGER MARKER
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from sqsbatch import Consumer, ConsumerConfig, MessageBatch
from sqsbatch.idempotency import DynamoDBStore
from tests.idempotency.conftest import dynamodb_client


class Blocking(DynamoDBStore):
    """A DynamoDB store that stops for good once a completion is written."""

    marker = Path()

    def complete(
        self, keys: Sequence[str], *, owner: str, ttl_seconds: float, carry: bool = False
    ) -> None:
        super().complete(keys, owner=owner, ttl_seconds=ttl_seconds, carry=carry)
        self.marker.write_text("completed\n")
        threading.Event().wait()  # the kill comes here, before the deletes


def main(queue: str, table: str, endpoint: str, ledger: str, marker: str) -> None:
    Blocking.marker = Path(marker)
    store = Blocking(table, client=dynamodb_client(endpoint))

    def handle(batch: MessageBatch) -> None:
        with open(ledger, "a") as side_effects:
            for message in batch.messages:
                side_effects.write(message.idempotency_key + "\n")

    config = ConsumerConfig(max_batch_timeout=0.1, visibility_timeout=2)
    Consumer(queue, handle, config, idempotency=store).run()


if __name__ == "__main__":
    main(*sys.argv[1:6])
