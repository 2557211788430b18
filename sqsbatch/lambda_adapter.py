"""`lambda_handler`: the same handler, sync or `async def`, behind an SQS event source mapping.

A thin shell like the pollers: the event becomes received messages (`lambda_event`), which go
through the same intake (`_core.intake`: early delay hops re-sent, screening), the batch is
closed by the same decision code (`_core.closing.close_batch`) and settled by the core's flow
for Lambda (`_core.flows.settle_for_lambda`), and only what Lambda cannot do is called:
visibility changes for retries with a delay, dead-letter copies and re-sent long delays, all
before returning. Lambda deletes every record left out of `batchItemFailures`
(`lambda_report.report` decides which), so acks cost no call. With `metrics = "emf"`, each
invocation writes its batch's CloudWatch metrics before returning (`sqsbatch._shell.emf_writer`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol, cast, overload

from sqsbatch._async.flavour import AsyncBatchHandler
from sqsbatch._core.closing import close_batch, handler_end
from sqsbatch._core.context import QueueContext
from sqsbatch._core.fetching import delete_acked
from sqsbatch._core.flows import acked_in_bulk, read_settings, settle, settle_for_lambda
from sqsbatch._core.guard import Guard, settle_claims
from sqsbatch._core.handlers import check_handler, is_async_handler
from sqsbatch._core.holding import overloaded_seconds
from sqsbatch._core.intake import Screening, intake
from sqsbatch._core.lambda_event import BatchResponse, ParsedEvent, handler_budget, parse_event
from sqsbatch._core.lambda_records import Arrival, EventRecords, RecordDelivery, RecordMessage
from sqsbatch._core.ledger import Outcome, Verdict
from sqsbatch._core.message import Message, MessageBatch, _Delivery, ledger_of
from sqsbatch._core.metrics import batch_sample
from sqsbatch._core.queue_settings import (
    check_dead_letter_queue,
)
from sqsbatch._core.screening import BodyModel, Screen
from sqsbatch._core.shapes import is_url, queue_name
from sqsbatch._lambda_hot import Ran, Warm, bulk_checked, remember_warm
from sqsbatch._lambda_hot import batch_response as _response
from sqsbatch._shell import tracing
from sqsbatch._shell.emf_writer import EmfMetrics, consumer_metrics
from sqsbatch._shell.guarding import FROM_CONFIG, Idempotency, guard_for, log_line
from sqsbatch._shell.handler_alarm import run_sync_handler
from sqsbatch._shell.handler_tasks import run_async_handler, run_returned
from sqsbatch._shell.payload_store import PayloadStore, payload_store
from sqsbatch._sync.door import SyncSqs, default_client
from sqsbatch._sync.flavour import BatchHandler
from sqsbatch.config import ConsumerConfig
from sqsbatch.errors import AwaitableReturned, Overloaded
from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = ["LambdaAdapter", "LambdaContext", "lambda_handler"]

log = logging.getLogger("sqsbatch")

AnyHandler = BatchHandler | AsyncBatchHandler


class LambdaContext(Protocol):
    """The part of Lambda's context object that sqsbatch reads."""

    def get_remaining_time_in_millis(self) -> int: ...


class LambdaAdapter:
    """A Lambda entry point `(event, context) -> {"batchItemFailures": [...]}` around `handler`.

    Built by `lambda_handler`. It keeps one SQS client and one event loop per execution
    environment, so warm invocations reuse them (and an async handler may keep loop-bound
    clients across invocations).
    """

    def __init__(
        self,
        handler: AnyHandler,
        config: ConsumerConfig | None = None,
        *,
        client: Any = None,
        limits: SqsLimits = SQS_LIMITS,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        body_model: Any = None,
        idempotency: Idempotency = FROM_CONFIG,
    ) -> None:
        check_handler(handler)
        self._body_model = BodyModel(body_model) if body_model is not None else None
        self.handler = handler
        self.config = config
        self.__wrapped__ = handler
        self._is_async = is_async_handler(handler)
        self._client = client
        self._sqs: SyncSqs | None = None
        self._queues: dict[str, QueueContext] = {}
        self._metrics: dict[str, EmfMetrics | None] = {}
        self._limits = limits
        self._clock = clock
        self._wall_clock = wall_clock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._abandoned: set[asyncio.Task[object]] = set()
        self._screened: Screening | None = None
        self._payloads: PayloadStore | None = None  # large payloads in S3 (docs/payloads.md)
        self._endpoint_url: list[str | None] = []
        self._warm: dict[str, Warm] = {}  # per queue ARN, its plain events' hot path
        self._idempotency = idempotency
        self._guards: dict[str, Guard | None] = {}  # per queue name (docs/idempotency.md)

    def __call__(
        self, event: Mapping[str, Any], context: LambdaContext | None = None
    ) -> BatchResponse:
        checked = bulk_checked(event)
        if checked is not None:
            records, (arn, plain, bodies) = checked
            if plain and (warm := self._warm.get(arn)) is not None:
                return warm.invoke(records, bodies, context)
        well_formed = None if checked is None else checked[1]
        parsed = parse_event(event, endpoint_url=self._endpoint(), well_formed=well_formed)
        listed = _set_aside(parsed)
        if not parsed.records:
            return _response(listed)
        sqs = self._door()
        queue = self._queue(sqs, parsed.queue_url)
        metrics = self._metrics_of(queue)
        if parsed.plain:  # its hot path, once known to apply (`lambda_hot`)
            remember_warm(self, sqs, parsed, queue, metrics)
        batch = self._intake(sqs, parsed, queue, listed, metrics, remaining=_remaining(context))
        try:
            if batch.messages:
                trace = tracing.start(batch)  # the batch's span, current until `end()`
                try:
                    listed += self._process(
                        sqs, batch, queue, _remaining(context), metrics=metrics, trace=trace
                    )
                finally:
                    trace.end()
        finally:  # also when the invocation fails (`overloaded_fails_invocation`)
            if metrics is not None:
                metrics.add({"received": len(parsed.records) + len(parsed.set_aside)})
                metrics.flush()
        return _response(listed)

    def close(self) -> None:
        """Close the event loop kept for async handlers (tests; Lambda never needs it)."""
        if self._loop is not None:
            self._loop.close()
            self._loop = None

    # -- intake and settling ---------------------------------------------------------------------

    def _intake(
        self,
        sqs: SyncSqs,
        parsed: ParsedEvent,
        queue: QueueContext,
        listed: list[str],
        metrics: EmfMetrics | None,
        *,
        remaining: float | None = None,
    ) -> MessageBatch:
        """The core's intake of the records (`_core.intake`): early delay hops re-sent (Lambda
        deletes the originals), records past their deadline or with an invalid body
        dead-lettered (the copy sent before returning). What SQS refused joins `listed`, so that
        it comes back; the rest is the handler's batch."""
        wall_now, now = self._wall_clock(), self._clock()
        visibility = queue.config.visibility_timeout
        arrival = Arrival(parsed, now=now, wall_now=wall_now, visibility_timeout=visibility)
        records = EventRecords(queue.name, parsed, arrival)
        how = self._screening(queue)
        guard = self._guard_of(queue)
        if guard is not None and remaining is not None:  # a claim lasts the invocation
            guard = replace(guard, lambda_deadline=wall_now + remaining)
        flow = intake(
            records,
            how,
            wall_clock=self._wall_clock,
            for_lambda=True,
            limits=self._limits,
            guard=guard,
        )
        taken = sqs.run(flow)
        if metrics is not None and taken.counts:
            metrics.add(taken.counts)
        for delivery in taken.unsent:
            log.error("re-sending early message %s failed: it will come back", _item(delivery))
        if taken.line is not None:
            log.log(taken.line[0], "%s", taken.line[1])
        if taken.unsent or taken.refused or taken.unread:
            again = (*taken.unsent, *taken.refused, *taken.unread)
            listed += [_item(delivery) for delivery in again]
        return taken.batch

    def _guard_of(self, queue: QueueContext) -> Guard | None:
        """The queue's idempotency guard (None: none), made once per execution environment."""
        if queue.name not in self._guards:
            self._guards[queue.name] = guard_for(self._idempotency, queue.config)
        return self._guards[queue.name]

    def _screening(self, queue: QueueContext) -> Screening:
        """What intake screens this queue's records with (kept while the queue's is kept)."""
        kept, store = self._screened, self._payloads
        if store is None or store.keep != queue.config.keep_payloads:
            keep = queue.config.keep_payloads
            store = self._payloads = payload_store(lambda: self._door().client, keep=keep)
        if (
            kept is None
            or kept.context is not queue
            or kept.screen.body_model is not self._body_model
            or kept.payloads is not store
        ):
            config = queue.config
            screen = Screen(config.max_message_age, self._body_model, config.envelope)
            kept = self._screened = Screening(queue, screen, payloads=store)
        return kept

    def _process(
        self,
        sqs: SyncSqs,
        batch: MessageBatch,
        queue: QueueContext,
        remaining: float | None,
        *,
        metrics: EmfMetrics | None,
        trace: tracing.BatchTrace,
    ) -> list[str]:
        budget = handler_budget(queue.config.handler_timeout, remaining)
        started, delivered_at = self._clock(), self._wall_clock()
        ran = Ran(self._run(batch, budget), budget, started, delivered_at)
        return self._settle(sqs, batch, queue, ran, metrics=metrics, trace=trace)

    def _settle(
        self,
        sqs: SyncSqs,
        batch: MessageBatch,
        queue: QueueContext,
        ran: Ran,
        *,
        metrics: EmfMetrics | None,
        trace: tracing.BatchTrace,
    ) -> list[str]:
        """After the handler (`ran`): the batch closed and settled; the ids to report. A sync
        handler's awaitable is awaited here first."""
        ended, budget, started, delivered_at = ran
        if isinstance(ended[1], AwaitableReturned):  # a coroutine: this loop awaits it
            left = budget - (self._clock() - started)
            running = run_returned(ended, batch, left, self._abandoned)
            ended = self._event_loop().run_until_complete(running)
        outcome, error = self._ended(batch, queue.config, ended, budget, metrics)
        trace.ended(outcome, error)
        fail = isinstance(error, Overloaded) and self._overloaded(batch, error, queue.config)
        now, wall_now = self._clock(), self._wall_clock()
        closing = close_batch(
            batch, outcome, error, queue, now=now, wall_now=wall_now, acks_free=not fail
        )
        if (guard := self._guard_of(queue)) is not None:  # before returning: never carried
            log_line(sqs.run(settle_claims(guard, batch, closing)))
        if fail:  # Lambda deletes nothing of a failed invocation: its acks are deleted here
            settled = sqs.run(trace.calls(settle(closing, batch, self._limits)))
        elif closing.bulk_ack:  # every record acked: Lambda deletes them, nothing to call
            settled = acked_in_bulk(closing)
        else:
            settled = sqs.run(trace.calls(settle_for_lambda(closing, batch, self._limits)))
        if self._payloads is not None and self._payloads.used:  # an offloaded message came
            settled = sqs.run(delete_acked(settled, batch, closing.kinds, self._payloads))
        if metrics is not None:
            metrics.add(settled.counts)
            seconds = now - started
            metrics.sample(
                batch_sample(batch.messages, handler_seconds=seconds, wall_now=delivered_at)
            )
        for level, text in settled.lines:
            log.log(level, "%s", text)
        if fail:
            raise cast(Overloaded, error)
        return [_identifier(batch.messages[index]) for index in settled.listed]

    @staticmethod
    def _overloaded(batch: MessageBatch, error: Overloaded, config: ConsumerConfig) -> bool:
        """`Overloaded` under Lambda: the messages the handler left undecided are retried after
        `retry_after` (a visibility change, reported in `batchItemFailures`); whether the
        invocation fails too (`overloaded_fails_invocation`)."""
        delay = math.ceil(overloaded_seconds(error, config.circuit_open_seconds))
        ledger_of(batch).on_batch(Verdict.RETRY, delay)
        return config.overloaded_fails_invocation

    # -- running the handler ---------------------------------------------------------------------

    def _run(self, batch: MessageBatch, budget: float) -> tuple[bool, BaseException | None]:
        """Run the handler for at most `budget` seconds (no heartbeat: the queue's visibility
        timeout must outlast the function): an `async def` as a task, cancelled at the deadline;
        a sync handler here, on Lambda's main thread, interrupted at the deadline
        (`handler_alarm`), or on a thread where it cannot be (an awaitable it returns is kept
        for `_settle` to await)."""
        if self._is_async:
            handler = cast(AsyncBatchHandler, self.handler)
            running = run_async_handler(handler, batch, budget, self._abandoned)
            return self._event_loop().run_until_complete(running)
        return run_sync_handler(self.handler, batch, budget, keep_awaitable=True)

    def _ended(
        self,
        batch: MessageBatch,
        config: ConsumerConfig,
        ended: tuple[bool, BaseException | None],
        budget: float,
        metrics: EmfMetrics | None,
    ) -> tuple[Outcome, BaseException | None]:
        """How the handler ended, counted and logged."""
        timed_out, error = ended
        end = handler_end(batch, config, timed_out=timed_out, error=error, budget=budget)
        if metrics is not None:
            metrics.add(end.counts)
        if end.log is not None:
            log.log(end.log[0], "%s", end.log[1], exc_info=end.exc_info)
        return end.outcome, end.error

    # -- per execution environment ----------------------------------------------------------------

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop

    def _door(self) -> SyncSqs:
        if self._sqs is None:
            # its calls are built from the records: no client-side validation (`client_config`)
            client = self._client if self._client is not None else default_client(validate=False)
            self._sqs = SyncSqs(client)
        return self._sqs

    def _endpoint(self) -> str | None:
        """Where queue URLs point, read at the first invocation (an execution environment's
        variables never change): the standard endpoint variables, else a given client's."""
        if not self._endpoint_url:
            self._endpoint_url.append(self._read_endpoint())
        return self._endpoint_url[0]

    def _read_endpoint(self) -> str | None:
        for name in ("AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL"):
            if os.environ.get(name):
                return os.environ[name]
        if self._client is not None:
            return str(self._client.meta.endpoint_url)
        return None

    def _metrics_of(self, queue: QueueContext) -> EmfMetrics | None:
        """The queue's metrics, written once per invocation; None when `metrics` is off."""
        if queue.name not in self._metrics:
            self._metrics[queue.name] = consumer_metrics(
                queue.name,
                queue.config,
                per_invocation=True,
                clock=self._clock,
                wall_clock=self._wall_clock,
            )
        return self._metrics[queue.name]

    def _queue(self, sqs: SyncSqs, queue_url: str) -> QueueContext:
        """The queue and its settings: one RedrivePolicy lookup per execution environment (a
        lookup that failed for a passing reason, throttling or the network, is not kept: this
        invocation goes on without it, the next one asks again)."""
        name = queue_name(queue_url)
        if name in self._queues:
            return self._queues[name]
        config = self.config if self.config is not None else ConsumerConfig.load(name)
        check_dead_letter_queue(name, config.dead_letter_queue)
        settings, keep = sqs.run(read_settings(name, queue_url, config))
        for level, note in settings.notes:
            log.log(level, "%s", note)
        dlq_url = _dead_letter_url(queue_url, settings.config)
        queue = QueueContext.of(queue_url, settings, dlq_url, self._limits)
        if keep:
            self._queues[name] = queue
        return queue


@overload
def lambda_handler(handler: AnyHandler, /) -> LambdaAdapter: ...
@overload
def lambda_handler(
    *,
    config: ConsumerConfig | None = None,
    client: Any = None,
    limits: SqsLimits = SQS_LIMITS,
    body_model: Any = None,
    idempotency: Idempotency = FROM_CONFIG,
) -> Callable[[AnyHandler], LambdaAdapter]: ...
def lambda_handler(
    handler: AnyHandler | None = None,
    /,
    *,
    config: ConsumerConfig | None = None,
    client: Any = None,
    limits: SqsLimits = SQS_LIMITS,
    body_model: Any = None,
    idempotency: Idempotency = FROM_CONFIG,
) -> LambdaAdapter | Callable[[AnyHandler], LambdaAdapter]:
    """`@lambda_handler` or `@lambda_handler(config=...)` on `def handler(batch)` or `async def`.

    The result is the function to name in Lambda's handler setting. Config comes from the
    environment (`SQSBATCH_*`, `sqsbatch.toml`) for the event's queue when not given.
    `body_model` (anything pydantic's `TypeAdapter` accepts) validates each body before the
    handler: an invalid one is dead-lettered with reason `invalid_body`. A bad `body_model`
    fails here, in one line. `idempotency`: a store for the idempotency guard, or None; not
    given, the settings' `idempotency_table` makes one (docs/idempotency.md).
    """
    checked = BodyModel(body_model) if body_model is not None else None

    def wrap(function: AnyHandler) -> LambdaAdapter:
        adapter = LambdaAdapter(
            function, config, client=client, limits=limits, idempotency=idempotency
        )
        adapter._body_model = checked
        return adapter

    return wrap(handler) if handler is not None else wrap


def _dead_letter_url(queue_url: str, config: ConsumerConfig) -> str | None:
    """A DLQ lives in its source queue's account and region: its URL needs no call."""
    dlq = config.dead_letter_queue
    if dlq is None or is_url(dlq):
        return dlq
    return f"{queue_url.rsplit('/', 1)[0]}/{dlq}"


def _set_aside(parsed: ParsedEvent) -> list[str]:
    """The message ids of the records set aside, each logged with why: they are reported, so
    Lambda leaves them on the queue, which dead-letters them after its maxReceiveCount."""
    for entry in parsed.set_aside:
        log.warning(
            "%s: message %s set aside, not handled: %s; reported in batchItemFailures (SQS "
            "redelivers it, and moves it to the dead-letter queue after maxReceiveCount)",
            queue_name(parsed.queue_url),
            entry.message_id,
            entry.reason,
        )
    return [entry.message_id for entry in parsed.set_aside]


def _identifier(message: Message) -> str:
    """The record's `messageId`, what `batchItemFailures` names."""
    if isinstance(message, RecordMessage):
        return message.item_identifier
    return cast(RecordDelivery, message._delivery).item_identifier


def _item(delivery: _Delivery) -> str:
    """A record's `messageId`, from its delivery (`EventRecords` makes `RecordDelivery`s)."""
    return cast(RecordDelivery, delivery).item_identifier


def _remaining(context: LambdaContext | None) -> float | None:
    if context is None:
        return None
    return context.get_remaining_time_in_millis() / 1000
