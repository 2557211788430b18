"""The async shell's one door to SQS: every request goes through `AsyncSqs.call`.

The line-for-line twin of `sqs_sync.SyncSqs` (a test compares their methods): it translates
botocore's errors, counts requests (`requests`, per operation) and executes the pure `BatchRun`
plans, awaiting an aiobotocore client instead of calling a boto3 one.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from sqsbatch.calls import BatchRun
from sqsbatch.errors import QueueNotFound, SqsError
from sqsbatch.transport import client_config, is_transient, is_url, queue_name, sqs_errors

__all__ = ["AsyncSqs", "default_client"]

log = logging.getLogger("sqsbatch")


def default_client(*, max_pool_connections: int = 10) -> Any:
    """An aioboto3 SQS client, to enter with `async with`; the endpoint comes from
    `AWS_ENDPOINT_URL_SQS`/`AWS_ENDPOINT_URL`. The pool must hold every concurrent long poll."""
    import aioboto3  # noqa: PLC0415 - keeps `import sqsbatch` light for Lambda cold starts

    config = client_config(max_pool_connections=max_pool_connections)
    return aioboto3.Session().client("sqs", config=config)


class AsyncSqs:
    """An aiobotocore client, with translated errors and a request count."""

    def __init__(
        self, client: Any, *, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    ) -> None:
        self.client = client
        self.requests: Counter[str] = Counter()
        self._sleep = sleep
        self._urls: dict[str, str] = {}

    async def call(self, op: str, params: dict[str, Any], *, queue: str | None = None) -> Any:
        self.requests[op] += 1  # one event loop: no lock needed
        with sqs_errors(queue or _queue_of(params)):
            return await getattr(self.client, op)(**params)

    async def queue_url(self, queue: str) -> str:
        """The URL of a queue given by name or URL (one `GetQueueUrl` per name, cached)."""
        if is_url(queue):
            return queue
        if queue not in self._urls:
            self._urls[queue] = (
                await self.call("get_queue_url", {"QueueName": queue}, queue=queue)
            )["QueueUrl"]
        return self._urls[queue]

    async def execute(self, run: BatchRun) -> BatchRun:
        """Execute a plan round by round until every entry is settled or given up."""
        while calls := run.next_calls():
            if wait := run.backoff_seconds():
                await self._sleep(wait)
            for call in calls:
                try:
                    response = await self.call(call.op, call.params(), queue=call.queue_url)
                except QueueNotFound as exc:
                    run.record_error(call, exc.code, str(exc), retryable=False)
                except SqsError as exc:
                    log.warning("%s failed: %s", call.op, exc)
                    run.record_error(call, exc.code, str(exc), retryable=is_transient(exc))
                else:
                    run.record(call, response)
        return run


def _queue_of(params: dict[str, Any]) -> str | None:
    url = params.get("QueueUrl")
    return queue_name(url) if isinstance(url, str) else None
