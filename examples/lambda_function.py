"""A Lambda function behind an SQS event source mapping: set the handler to
`lambda_function.handler`.

The event source mapping must report partial failures (`FunctionResponseTypes =
["ReportBatchItemFailures"]`): Lambda then deletes every record the function does not list as
failed. Its `BatchSize` is `max_batch_size`, its `MaximumBatchingWindowInSeconds` is
`max_batch_timeout`; the queue's visibility timeout is at least 6x the function timeout (see
docs/lambda-and-ecs.md). The other settings (`SQSBATCH_MAX_RETRIES`,
`SQSBATCH_DEAD_LETTER_QUEUE`, `SQSBATCH_RETRY_DELAY`, ...) come from the function's environment.
The same `handle` runs unchanged in examples/ecs_worker.py's `AsyncConsumer`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sqsbatch import MessageBatch, exponential_backoff, lambda_handler

logging.getLogger("sqsbatch").setLevel(logging.INFO)


class Declined(Exception):
    """A failure worth retrying later."""


async def charge(order: Any, attempt: int) -> None:
    """Stand-in for a payment API: order 3 is declined on its first try."""
    await asyncio.sleep(0)
    if order["id"] == 3 and attempt == 1:
        raise Declined(f"order {order['id']}: card declined")


@lambda_handler
async def handler(batch: MessageBatch) -> None:
    for message in batch.messages:
        try:
            await charge(message.body, message.attempts)
        except Declined:
            # Lambda: a ChangeMessageVisibility call before returning, then reported as failed
            message.retry(delay_seconds=exponential_backoff(message.attempts, base_seconds=1))
        else:
            message.ack()  # left out of batchItemFailures: Lambda deletes it
