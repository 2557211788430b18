"""The Lambda adapter's hot path: a warm invocation that no intake step and no settling applies to.

Most invocations are the same case: a well-formed event whose records carry no message
attributes (so no delay hop and no producer's deadline), a queue already looked up (its
RedrivePolicy read once per execution environment), nothing screened, no metrics, a sync
handler that returns having acked everything. For it, the general path (`LambdaAdapter`) makes
Python calls that decide nothing: the event made a `ParsedEvent`, the intake flow and its door,
a closing, an empty settlement. Each is cheap warm, but an invocation is mostly cold (the
runtime's own work, and any garbage collection, run between invocations), so each costs its
code and data fetched from memory again. `Warm.invoke` takes that case in far fewer calls:

- the event is checked as `parse_event` checks it in bulk (`lambda_event._well_formed`), and
  taken here only when that finds every record well formed, none with message attributes, from
  a queue this execution environment already knows (`Warm`, made by the adapter once the
  general path has looked the queue up and found nothing to screen or count);
- the batch is the one intake would hand the handler (`plain_batch`, as `record_batch` makes
  it: intake's steps are no-ops for such records), and the handler runs as on the general
  path (`run_sync_handler`);
- when it returned in time with every message acked, the ledger is sealed and the response
  lists nothing, which is what `close_batch` and `acked_in_bulk` conclude; anything else (a
  retry, an error, a timeout, an awaitable, a trace to record) goes on through the general
  path's own steps (`LambdaAdapter._process`, `_settle`) with the same batch.

Nothing here is kept between invocations but what the general path keeps too (the queue's
context, per execution environment); the context's remaining time is read at every invocation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from sqsbatch._core.context import QueueContext
from sqsbatch._core.intake import Screening, nothing_to_take
from sqsbatch._core.lambda_event import (
    BatchResponse,
    ParsedEvent,
    _first_receive,
    _well_formed,
    handler_budget,
)
from sqsbatch._core.lambda_records import Arrival, plain_batch
from sqsbatch._core.ledger import Outcome
from sqsbatch._core.message import ledger_of
from sqsbatch._shell import tracing
from sqsbatch._shell.handler_alarm import run_sync_handler

if TYPE_CHECKING:
    from sqsbatch._core.message import MessageBatch
    from sqsbatch._shell.emf_writer import EmfMetrics
    from sqsbatch._sync.door import SyncSqs

__all__ = ["Ran", "Warm", "batch_response", "bulk_checked", "remember_warm"]


class Adapter(Protocol):
    """What the short path needs of the adapter that keeps it (`LambdaAdapter`): its handler,
    clocks and settings, and its general path's steps after intake."""

    handler: Any
    _clock: Callable[[], float]
    _wall_clock: Callable[[], float]
    _is_async: bool
    _queues: dict[str, QueueContext]
    _warm: dict[str, Warm]

    def _screening(self, queue: QueueContext) -> Screening: ...

    def _process(
        self,
        sqs: SyncSqs,
        batch: MessageBatch,
        queue: QueueContext,
        remaining: float | None,
        *,
        metrics: EmfMetrics | None,
        trace: tracing.BatchTrace,
    ) -> list[str]: ...

    def _settle(
        self,
        sqs: SyncSqs,
        batch: MessageBatch,
        queue: QueueContext,
        ran: Ran,
        *,
        metrics: EmfMetrics | None,
        trace: tracing.BatchTrace,
    ) -> list[str]: ...


class Ran(NamedTuple):
    """How a handler call ended (timed out, raised), the budget it had, and when it started
    (monotonic, and wall clock: what its batch's metrics sample reads)."""

    ended: tuple[bool, BaseException | None]
    budget: float
    started: float
    delivered_at: float


class Warm:
    """One queue's hot path in an execution environment: what the general path found for it
    (its URL from the ARN, its context, that nothing is screened or counted), kept as long as
    the adapter keeps the queue's context."""

    __slots__ = ("_adapter", "_sqs", "arn", "queue", "url")

    def __init__(
        self, adapter: Adapter, sqs: SyncSqs, arn: str, url: str, queue: QueueContext
    ) -> None:
        self._adapter = adapter
        self._sqs = sqs
        self.arn = arn
        self.url = url
        self.queue = queue

    def invoke(self, records: list[Any], bodies: list[str], context: Any) -> BatchResponse:
        """The invocation of well-formed `records` without message attributes (`bodies`, as
        the bulk check read them) from this queue: the handler's batch, run, and answered."""
        adapter, queue = self._adapter, self.queue
        clock, wall_clock = adapter._clock, adapter._wall_clock
        config = queue.config
        arrival = Arrival(
            _Receives(records),
            now=clock(),
            wall_now=wall_clock(),
            visibility_timeout=config.visibility_timeout,
        )
        batch = plain_batch(queue.name, records, bodies, arrival)
        trace = tracing.start(batch)
        remaining = None if context is None else context.get_remaining_time_in_millis() / 1000
        if trace is not tracing.OFF:  # traced: the general path records the span's calls
            try:
                listed = adapter._process(
                    self._sqs, batch, queue, remaining, metrics=None, trace=trace
                )
            finally:
                trace.end()
            return batch_response(listed)
        budget = handler_budget(config.handler_timeout, remaining)
        started, delivered_at = clock(), wall_clock()
        ended = run_sync_handler(adapter.handler, batch, budget, keep_awaitable=True)
        ledger = ledger_of(batch)
        if ended[0] is False and ended[1] is None:  # returned in time
            ledger.seal()
            if ledger.all_acked(Outcome.RETURNED):  # what close_batch decides in bulk
                return {"batchItemFailures": []}
        ran = Ran(ended, budget, started, delivered_at)
        listed = adapter._settle(self._sqs, batch, queue, ran, metrics=None, trace=trace)
        return batch_response(listed)


class _Receives:
    """A plain event's records as `Arrival` reads them (what `ParsedEvent` would tell it, with
    no `ParsedEvent` made): the earliest first receive, read when a delivery is first made."""

    __slots__ = ("_records",)

    def __init__(self, records: list[Any]) -> None:
        self._records = records

    @property
    def first_receive(self) -> float:
        return _first_receive(self._records)


def bulk_checked(event: object) -> tuple[list[Any], tuple[str, bool, list[str]]] | None:
    """(the records, `_well_formed`'s answer) for an event of records that `parse_event`'s bulk
    check finds well formed, from one queue; None for anything else (`parse_event` then checks
    it itself, record by record if need be, and says what is wrong)."""
    if type(event) is not dict:
        return None
    records = event.get("Records")
    if type(records) is not list or not records:
        return None
    try:
        found = _well_formed(records)
    except (KeyError, TypeError, AttributeError):  # a field missing, or of the wrong type
        return None
    return None if found is None else (records, found)


def remember_warm(
    adapter: Adapter,
    sqs: SyncSqs,
    parsed: ParsedEvent,
    queue: QueueContext,
    metrics: object,
) -> None:
    """Keep the hot path for `parsed`'s queue (a plain event's) when the general path has just
    found that nothing applies to its plain events but the handler: the queue's context kept
    (its lookup did not fail), no metrics, no intake step (`intake.nothing_to_take`: no
    `max_message_age`, no `body_model`, no `envelope`), a sync handler; else nothing (its
    invocations take the general path)."""
    if (
        parsed.queue_arn in adapter._warm
        or metrics is not None
        or adapter._is_async
        or adapter._queues.get(queue.name) is not queue
        or not nothing_to_take(adapter._screening(queue))
    ):
        return
    adapter._warm[parsed.queue_arn] = Warm(adapter, sqs, parsed.queue_arn, parsed.queue_url, queue)


def batch_response(listed: list[str]) -> BatchResponse:
    """The answer that names `listed` (message ids) for Lambda to leave on the queue."""
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in listed]}
