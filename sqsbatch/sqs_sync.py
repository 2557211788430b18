"""The sync shell's one door to SQS: every request goes through `SyncSqs.call`.

It translates botocore's errors, counts requests (`requests`, per operation) and executes the
pure `BatchRun` plans. `sqs_async.AsyncSqs` is its line-for-line twin.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from sqsbatch.calls import BatchRun
from sqsbatch.errors import QueueNotFound, SqsError
from sqsbatch.transport import client_config, is_transient, is_url, queue_name, sqs_errors

__all__ = ["SyncSqs", "default_client"]

log = logging.getLogger("sqsbatch")


def default_client(*, max_pool_connections: int = 10) -> Any:
    """A boto3 SQS client; the endpoint comes from `AWS_ENDPOINT_URL_SQS`/`AWS_ENDPOINT_URL`."""
    import boto3  # noqa: PLC0415 - keeps `import sqsbatch` light for Lambda cold starts

    config = client_config(max_pool_connections=max_pool_connections)
    return boto3.session.Session().client("sqs", config=config)


class SyncSqs:
    """A boto3 client, with translated errors and a request count."""

    def __init__(self, client: Any, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.client = client
        self.requests: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._sleep = sleep
        self._urls: dict[str, str] = {}

    def call(self, op: str, params: dict[str, Any], *, queue: str | None = None) -> Any:
        with self._lock:
            self.requests[op] += 1
        with sqs_errors(queue or _queue_of(params)):
            return getattr(self.client, op)(**params)

    def queue_url(self, queue: str) -> str:
        """The URL of a queue given by name or URL (one `GetQueueUrl` per name, cached)."""
        if is_url(queue):
            return queue
        if queue not in self._urls:
            self._urls[queue] = self.call("get_queue_url", {"QueueName": queue}, queue=queue)[
                "QueueUrl"
            ]
        return self._urls[queue]

    def execute(self, run: BatchRun) -> BatchRun:
        """Execute a plan round by round until every entry is settled or given up."""
        while calls := run.next_calls():
            if wait := run.backoff_seconds():
                self._sleep(wait)
            for call in calls:
                try:
                    response = self.call(call.op, call.params(), queue=call.queue_url)
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
