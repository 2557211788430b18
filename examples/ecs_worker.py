"""An ECS (Fargate) worker: the `AsyncConsumer` until SIGTERM, then a graceful stop.

ECS stops a task with SIGTERM, waits the container's `stopTimeout` (30 s by default, at most
120 s) and then sends SIGKILL. On SIGTERM the consumer receives nothing new, lets the long poll
under way end (up to 20 s; what it returns is still delivered), lets the batches in flight finish
and settles them, then `run()` returns. Give the container a `stopTimeout` of at least
20 s + `max_batch_timeout` + the `handler_timeout` you need + a few seconds to settle.

Settings come from `SQSBATCH_*` variables (or `sqsbatch.toml`), the queue from `QUEUE_NAME`
(`ecs-worker-orders` when unset), the endpoint from the standard `AWS_ENDPOINT_URL_SQS`, so the
same image runs against a local SQS. With `sqsbatch dev` running in another shell and the
`export` lines it prints pasted into this one, on its own queue with examples/sqsbatch.toml:
    sqsbatch create ecs-worker-orders --dlq ecs-worker-orders-dlq --max-retries 3
    SQSBATCH_CONFIG_FILE=examples/sqsbatch.toml python examples/ecs_worker.py
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from sqsbatch import AsyncConsumer, MessageBatch, exponential_backoff

log = logging.getLogger("ecs_worker")


class Unavailable(Exception):
    """A downstream outage worth retrying later."""


async def deliver(order: Any) -> None:
    """Stand-in for your I/O (an HTTP call, a database write). Never block the event loop:
    run blocking code with `await asyncio.to_thread(...)`, or the heartbeat and the
    `handler_timeout` wait for it too."""
    await asyncio.sleep(0)
    log.info("delivered %s", order)


async def handle(batch: MessageBatch) -> None:
    for message in batch.messages:
        try:
            await deliver(message.body)
        except Unavailable:
            message.retry(delay_seconds=exponential_backoff(message.attempts, base_seconds=5))
    # returning acks every message with no ack()/retry() call; raising would retry them


def main(idle_seconds: float | None = None) -> AsyncConsumer:
    """Consume until SIGTERM (the service), or until idle for `idle_seconds` (a batch job)."""
    consumer = AsyncConsumer(os.environ.get("QUEUE_NAME", "ecs-worker-orders"), handle)
    run = consumer.run() if idle_seconds is None else consumer.run_until_idle(idle_seconds)
    asyncio.run(run)
    log.info("stopped: %s", consumer.stats.as_dict())
    return consumer


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()
