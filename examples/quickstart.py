"""Cloudflare Queues' consumer model on SQS: ack, retry with backoff, dead-letter.

It creates queues of its own, `quickstart-orders` and `quickstart-orders-dlq`, and finds SQS as
boto3 does: `AWS_ENDPOINT_URL_SQS`, then the usual credentials. On a local SQS: start
`sqsbatch dev` in another shell, paste the `export` lines it prints into this one, then
    python examples/quickstart.py
Without `AWS_ENDPOINT_URL_SQS` it runs on real SQS with your AWS credentials.
"""

from __future__ import annotations

import logging

from sqsbatch import (
    Consumer,
    ConsumerConfig,
    MessageBatch,
    Producer,
    create_queue,
    exponential_backoff,
)


class PaymentDeclined(Exception):
    """A failure worth retrying later."""


def charge(order: dict[str, int], attempt: int) -> None:
    """Stand-in for a payment API: every third order is declined on its first try."""
    if order["id"] % 3 == 0 and attempt == 1:
        raise PaymentDeclined(f"order {order['id']}: card declined, try again")


def handle(batch: MessageBatch) -> None:
    for message in batch.messages:
        try:
            charge(message.body, message.attempts)
        except PaymentDeclined:
            # back off about 1 s, 2 s, 4 s... (plus jitter) by the delivery count
            message.retry(delay_seconds=exponential_backoff(message.attempts, base_seconds=1))
        else:
            message.ack()


def main(queue: str = "quickstart-orders", idle_seconds: float = 5.0) -> None:
    create_queue(queue, dead_letter_queue=f"{queue}-dlq", max_retries=3)
    Producer(queue).send_batch([{"body": {"id": n}} for n in range(30)])
    config = ConsumerConfig(
        max_batch_size=30, max_batch_timeout=1, max_retries=3, dead_letter_queue=f"{queue}-dlq"
    )
    consumer = Consumer(queue, handle, config)
    consumer.run_until_idle(idle_seconds)  # `consumer.run()` in a service: until SIGTERM
    print(consumer.stats.as_dict())


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()
