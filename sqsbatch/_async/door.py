"""The one door to SQS: every request goes through `AsyncSqs.call`, every flow through `run`.

`sqsbatch/_async/door.py` is the source and `sqsbatch/_sync/door.py` is generated from it by
unasync (`make twins`; a test fails when it is stale): edit the source, never the generated
file. The door translates botocore's errors, counts requests (`requests`, per operation) and
drives the core's flows (`sqsbatch._core.flows`): it executes each request a flow yields and
sends the answer back, or throws the translated error in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, TypeVar

from sqsbatch._async.flavour import Sleep, counter_lock, default_client, sleep
from sqsbatch._botocore import BOTOCORE_ERRORS, translate
from sqsbatch._core.calls import BatchRun
from sqsbatch._core.flows import Flow, Pause, batch_calls
from sqsbatch._core.shapes import is_url, queue_name
from sqsbatch.errors import SqsBatchError

__all__ = ["AsyncSqs", "default_client"]

T = TypeVar("T")


class AsyncSqs:
    """An SQS client, with translated errors, a request count and the flows' driver."""

    def __init__(self, client: Any, *, sleep: Sleep = sleep) -> None:
        self.client = client
        self.requests: Counter[str] = Counter()
        self._lock = counter_lock()
        self._sleep = sleep
        self._urls: dict[str, str] = {}

    async def call(self, op: str, params: Mapping[str, Any], *, queue: str | None = None) -> Any:
        with self._lock:
            self.requests[op] += 1
        try:
            return await getattr(self.client, op)(**params)
        except BOTOCORE_ERRORS as exc:  # `sqs_errors`, inline: the queue is named only on error
            raise translate(exc, queue=queue or _queue_of(params)) from exc

    async def run(self, flow: Flow[T]) -> T:
        """Drive `flow` to its end and return what it concluded."""
        try:
            step = next(flow)
            while True:
                if isinstance(step, Pause):
                    await self._sleep(step.seconds)
                    step = flow.send(None)
                    continue
                try:
                    answer = await self.call(step.op, step.params, queue=step.queue)
                except SqsBatchError as exc:
                    step = flow.throw(exc)
                else:
                    step = flow.send(answer)
        except StopIteration as stop:
            result: T = stop.value
            return result

    async def execute(self, run: BatchRun) -> BatchRun:
        """Execute a plan round by round until every entry is settled or given up."""
        return await self.run(batch_calls(run))

    async def queue_url(self, queue: str) -> str:
        """The URL of a queue given by name or URL (one `GetQueueUrl` per name, cached)."""
        if is_url(queue):
            return queue
        if queue not in self._urls:
            answer = await self.call("get_queue_url", {"QueueName": queue}, queue=queue)
            self._urls[queue] = answer["QueueUrl"]
        return self._urls[queue]


def _queue_of(params: Mapping[str, Any]) -> str | None:
    url = params.get("QueueUrl")
    return queue_name(url) if isinstance(url, str) else None
