"""`AsyncProducer`: sending with aioboto3, the twin of `sqsbatch._sync.producer.Producer`.

Every check and encoding is `sqsbatch._core.sending.SendPlan`'s, before any call; the settings
are `sqsbatch._shell.producer_base`'s. Only the calls are awaited here (a test compares the two
classes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, Self

from sqsbatch._async.door import AsyncSqs, default_client
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

__all__ = ["AsyncProducer"]


class AsyncProducer(ProducerBase):
    """Sends to one queue (name or URL) from asyncio code; reuse one per queue.

    `client` is an aiobotocore SQS client already entered. Without one, the producer opens its
    own on first use: close it with `await producer.aclose()`, or use `async with`.
    `large_payloads`: an `S3Payloads`, to send messages past its threshold through S3 (its
    boto3 calls run in a thread).
    """

    _sqs: AsyncSqs
    _exit: AsyncExitStack | None = None  # the client this producer opened, to close

    def _door(self, client: Any) -> AsyncSqs:
        return AsyncSqs(client)

    async def send(
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
        return (await self.send_batch([request]))[0]

    async def send_batch(
        self,
        messages: Iterable[MessageSendRequest | Mapping[str, Any]],
        *,
        delay_seconds: int | None = None,
        ttl_seconds: float | None = None,
    ) -> list[str]:
        """Send up to 100 messages in calls of at most 10 entries and 1 MiB; returns their ids."""
        plan = self._plan(messages, delay_seconds, ttl_seconds)
        await self._open()
        if self.large_payloads is not None and plan.uploads:  # the payloads first (boto3's S3,
            await asyncio.to_thread(self.large_payloads.put, plan.uploads)  # in a thread)
        try:
            url = await self._sqs.queue_url(self.queue)
            entries = plan.entries(url, content_dedup=await self._has_content_dedup(url, plan))
            run = await self._sqs.execute(BatchRun(entries, limits=self._limits))
        except BaseException:
            self._orphans(plan, None)
            raise
        self._orphans(plan, run)
        return plan.ids(run)

    async def _has_content_dedup(self, url: str, plan: SendPlan) -> bool:
        if not plan.needs_content_dedup:
            return False
        if self._content_dedup is None:
            attributes = await self._sqs.call("get_queue_attributes", content_dedup_query(url))
            self._content_dedup = has_content_dedup(attributes["Attributes"])
        return self._content_dedup

    async def _open(self) -> None:
        if self._sqs.client is None:
            self._exit = AsyncExitStack()
            self._sqs.client = await self._exit.enter_async_context(default_client())

    async def aclose(self) -> None:
        """Close the client this producer opened (a client passed in stays open)."""
        if self._exit is not None:
            exit_stack, self._exit = self._exit, None
            self._sqs.client = None
            await exit_stack.aclose()

    async def __aenter__(self) -> Self:
        await self._open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
