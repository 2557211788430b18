"""What goes in the dead-letter queue, and why: a Lambda handler with typed bodies and deadlines.

- `body_model=Order`: every body is validated before the handler runs; one that fails goes to
  the DLQ at once with reason `invalid_body` (and the first validation error), costing no retry.
- Messages past their deadline (the producer's `ttl_seconds`, or `SQSBATCH_MAX_MESSAGE_AGE`)
  go to the DLQ with reason `expired`, never to the handler.
- `message.dead_letter(reason)`: a message that can never be processed (a deleted tenant) goes
  to the DLQ now, whatever its attempts; `message.deaths` is its history, oldest first.

Send with a deadline:
    Producer("orders").send(Order(id=1, tenant="acme"), ttl_seconds=3600)
"""

from __future__ import annotations

import logging

from pydantic import BaseModel

from sqsbatch import MessageBatch, lambda_handler

log = logging.getLogger("poison_messages")
DELETED_TENANTS = {"gone-inc"}


class Order(BaseModel):
    id: int
    tenant: str


@lambda_handler(body_model=Order)
def handler(batch: MessageBatch) -> None:
    for message in batch.messages:
        order: Order = message.body  # validated: an Order, never a dict
        if order.tenant in DELETED_TENANTS:
            message.dead_letter(f"tenant {order.tenant} deleted")
            continue
        if message.deaths:  # it was dead-lettered before, then redriven
            log.info("order %s died %d time(s) before", order.id, len(message.deaths))
        log.info("order %s for %s processed", order.id, order.tenant)
