"""The one door to SQS: every request goes through `AsyncSqs.call`, every flow through `run`.

`sqsbatch/_async/door.py` is the source and `sqsbatch/_sync/door.py` is generated from it by
unasync (`make twins`; a test fails when it is stale): edit the source, never the generated
file. The door translates botocore's errors, counts requests (`requests`, per operation) and
drives the core's flows (`sqsbatch._core.flows`): it executes each request a flow yields and
sends the answer back, or throws the translated error in.

A door can be given up on (`give_up`, when a poller's watchdog fires): from then on each call
goes out once (no botocore retries), pauses between rounds of entry retries are skipped, and
once a call could not reach SQS, or a flow asks for a second round, the calls after it fail at
once without being sent. What was not settled then comes back after its visibility timeout:
nothing is deleted that was not handled, and the process can exit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, TypeVar

from sqsbatch._async.flavour import Sleep, counter_lock, default_client, outside, sleep
from sqsbatch._core.calls import BatchRun
from sqsbatch._core.flows import Flow, Outside, Pause, batch_calls
from sqsbatch._core.shapes import is_url, queue_name
from sqsbatch._shell.botocore import BOTOCORE_ERRORS, no_retries_once, translate
from sqsbatch.errors import SqsBatchError, SqsError

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
        self.given_up = False
        """The watchdog fired: one attempt per call, no rounds (the module's docstring)."""
        self._unreachable = False  # given up, and a call has failed since: send nothing more

    def hook(self) -> None:
        """A loop starts: not given up, and the client obeys `give_up` (botocore's retries
        stop). The loop calls it once its client is set."""
        self.given_up = self._unreachable = False
        if self.client is not None:
            no_retries_once(self.client, self._retries_off, key=f"sqsbatch-door-{id(self)}")

    def give_up(self) -> None:
        """The process is stopping because SQS does not answer: see the module's docstring."""
        self.given_up = True

    def _retries_off(self) -> bool:
        return self.given_up

    async def call(self, op: str, params: Mapping[str, Any], *, queue: str | None = None) -> Any:
        if self._unreachable:
            name = _named(queue or _queue_of(params))
            raise SqsError(f"not sent: SQS does not answer{name}", code="NetworkError")
        with self._lock:
            self.requests[op] += 1
        try:
            return await getattr(self.client, op)(**params)
        except BOTOCORE_ERRORS as exc:  # `sqs_errors`, inline: the queue is named only on error
            if self.given_up:
                self._unreachable = True
            raise translate(exc, queue=queue or _queue_of(params)) from exc

    async def run(self, flow: Flow[T]) -> T:
        """Drive `flow` to its end and return what it concluded."""
        try:
            step = next(flow)
            while True:
                if isinstance(step, Pause):
                    if self.given_up:  # a second round: not after the watchdog fired
                        self._unreachable = True
                    else:
                        await self._sleep(step.seconds)
                    step = flow.send(None)
                    continue
                if isinstance(step, Outside):
                    try:
                        answer = await outside(step.call)
                    except Exception as exc:  # the flow decides what a store's failure means
                        step = flow.throw(exc)
                    else:
                        step = flow.send(answer)
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


def _named(queue: str | None) -> str:
    return f" ({queue})" if queue else ""


def _queue_of(params: Mapping[str, Any]) -> str | None:
    url = params.get("QueueUrl")
    return queue_name(url) if isinstance(url, str) else None
