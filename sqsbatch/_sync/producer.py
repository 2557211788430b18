"""`Producer`: sends with boto3. Thread-safe; reuse one per queue."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqsbatch._core.attributes import SendAttribute
from sqsbatch._core.calls import BatchRun
from sqsbatch._core.envelope import ContentType
from sqsbatch._core.sending import (
    MessageSendRequest,
    SendPlan,
    content_dedup_query,
    has_content_dedup,
)
from sqsbatch._shell.producer_base import ProducerBase
from sqsbatch._sync.door import SyncSqs, default_client

__all__ = ["Producer"]


class Producer(ProducerBase):
    """Sends to one queue (name or URL). Thread-safe; reuse one per queue.

    `large_payloads`: an `S3Payloads`, to send messages past its threshold through S3.
    """

    _sqs: SyncSqs

    def _door(self, client: Any) -> SyncSqs:
        return SyncSqs(client if client is not None else default_client())

    def send(
        self,
        body: Any,
        *,
        delay_seconds: int | None = None,
        content_type: ContentType | None = None,
        attributes: Mapping[str, SendAttribute] | None = None,
        group_id: str | None = None,
        deduplication_id: str | None = None,
        ttl_seconds: float | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        """Send one message; returns its id (the `message.id` the consumer will see)."""
        request = MessageSendRequest(
            body,
            delay_seconds,
            content_type,
            attributes,
            group_id,
            deduplication_id,
            ttl_seconds,
            idempotency_key,
        )
        return self.send_batch([request])[0]

    def send_batch(
        self,
        messages: Iterable[MessageSendRequest | Mapping[str, Any]],
        *,
        delay_seconds: int | None = None,
        ttl_seconds: float | None = None,
    ) -> list[str]:
        """Send up to 100 messages in calls of at most 10 entries and 1 MiB; returns their ids."""
        plan = self._plan(messages, delay_seconds, ttl_seconds)
        if self.large_payloads is not None:
            self.large_payloads.put(plan.uploads)  # the payloads first, then their pointers
        try:
            url = self._sqs.queue_url(self.queue)
            entries = plan.entries(url, content_dedup=self._has_content_dedup(url, plan))
            run = self._sqs.execute(BatchRun(entries, limits=self._limits))
        except BaseException:
            self._orphans(plan, None)
            raise
        self._orphans(plan, run)
        return plan.ids(run)

    def _has_content_dedup(self, url: str, plan: SendPlan) -> bool:
        if not plan.needs_content_dedup:
            return False
        if self._content_dedup is None:
            attributes = self._sqs.call("get_queue_attributes", content_dedup_query(url))
            self._content_dedup = has_content_dedup(attributes["Attributes"])
        return self._content_dedup
