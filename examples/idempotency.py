"""The idempotency guard (docs/idempotency.md): a copy of a message whose work is done is acked
without calling the handler. Here a producer sends the same order twice (a retried send); the
second copy is skipped. The store is a SQLite file (one host); a fleet shares a DynamoDB table
(`DynamoDBStore(table)`, or `SQSBATCH_IDEMPOTENCY_TABLE` and no `idempotency=` at all).

Run against a local endpoint: `AWS_ENDPOINT_URL=http://127.0.0.1:4566 python
examples/idempotency.py idempotency-orders`.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from sqsbatch import Consumer, ConsumerConfig, MessageBatch, Producer, create_queue
from sqsbatch.idempotency import SqliteStore

charges: list[str] = []


def charge(order: dict[str, int], *, idempotency_key: str) -> None:
    """The side effect: a payment API that takes an idempotency key of its own."""
    charges.append(f"{order['cents']} cents for order {order['order']} ({idempotency_key})")


def handle(batch: MessageBatch) -> None:
    for message in batch.messages:
        # pass the key downstream: it closes the window the guard cannot (a crash after this call)
        charge(message.body, idempotency_key=message.idempotency_key)
        message.ack()


def consume(queue: str, store: SqliteStore, idle_seconds: float) -> dict[str, int]:
    config = ConsumerConfig(max_batch_timeout=0.5)
    consumer = Consumer(queue, handle, config, idempotency=store)
    consumer.run_until_idle(idle_seconds)
    return consumer.stats.as_dict()


def main(queue: str, idle_seconds: float = 2.0) -> list[str]:
    create_queue(queue)
    producer = Producer(queue)
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(Path(folder) / "idempotency.sqlite")
        producer.send({"order": 17, "cents": 4200}, idempotency_key="order-17")
        first = consume(queue, store, idle_seconds)
        producer.send({"order": 17, "cents": 4200}, idempotency_key="order-17")  # sent again
        second = consume(queue, store, idle_seconds)
        store.close()
    print(f"first run: {first['acked']} acked; second run: {second['duplicates_skipped']} skipped")
    return charges


if __name__ == "__main__":
    for line in main(sys.argv[1] if len(sys.argv) > 1 else "idempotency-orders"):
        print(line)
