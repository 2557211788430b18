"""`lambda_handler`: the same handler, sync or `async def`, behind an SQS event source mapping.

A thin shell like the pollers: the event becomes received messages (`lambda_event`), the batch
is settled by the same decision code (`consuming.plan_settlement`), and only what Lambda cannot
do is called here: visibility changes for retries with a delay, dead-letter copies and re-sent
long delays, all before returning. Lambda deletes every record left out of `batchItemFailures`
(`lambda_event.report` decides which), so acks cost no call.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, cast, overload

from sqsbatch.async_consumer import AsyncBatchHandler
from sqsbatch.calls import BatchRun
from sqsbatch.config import ConsumerConfig
from sqsbatch.consumer import BatchHandler
from sqsbatch.consuming import (
    Plan,
    Received,
    check_handler,
    drops,
    handler_end,
    is_async_handler,
    plan_settlement,
    refusals,
    sent_keys,
    split_deliveries,
)
from sqsbatch.errors import SqsError
from sqsbatch.handler_tasks import run_async_handler, run_in_thread
from sqsbatch.lambda_event import (
    BatchResponse,
    ParsedEvent,
    RecordDelivery,
    deliveries,
    handler_budget,
    parse_event,
    report,
)
from sqsbatch.limits import SQS_LIMITS, SqsLimits
from sqsbatch.message import MessageBatch
from sqsbatch.outbox import Settlement
from sqsbatch.queues import (
    QueueSettings,
    check_dead_letter_queue,
    lookup_refusal,
    policy_query,
    resolve_settings,
)
from sqsbatch.settlement import ActionKind, Outcome
from sqsbatch.sqs_sync import SyncSqs, default_client
from sqsbatch.transport import is_fifo, is_transient, is_url, queue_name

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
    ) -> None:
        check_handler(handler)
        self.handler = handler
        self.config = config
        self.__wrapped__ = handler
        self._is_async = is_async_handler(handler)
        self._client = client
        self._sqs: SyncSqs | None = None
        self._settings: dict[str, QueueSettings] = {}
        self._limits = limits
        self._clock = clock
        self._wall_clock = wall_clock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._abandoned: set[asyncio.Task[object]] = set()

    def __call__(
        self, event: Mapping[str, Any], context: LambdaContext | None = None
    ) -> BatchResponse:
        parsed = parse_event(event, endpoint_url=self._endpoint())
        set_aside = _set_aside(parsed)
        if not parsed.records:
            return {"batchItemFailures": [{"itemIdentifier": mid} for mid in set_aside]}
        sqs = self._door()
        settings = self._settings_for(sqs, parsed.queue_url)
        config = settings.config
        wall_now, now = self._wall_clock(), self._clock()
        received_at = now - max(0.0, wall_now - parsed.first_receive)
        hidden_until = received_at + config.visibility_timeout
        records = deliveries(parsed, received_at=received_at, hidden_until=hidden_until)
        if parsed.plain:  # no record carries sqsbatch's attribute: none is an early hop
            received = Received(list(records), None)
        else:
            received = split_deliveries(
                records, queue_url=parsed.queue_url, wall_now=wall_now, limits=self._limits
            )
        listed = set_aside
        if received.postpone is not None:
            listed += self._postpone(sqs, received.postpone, parsed)
        if received.deliveries:
            batch = MessageBatch(queue_name(parsed.queue_url), received.deliveries)
            listed += self._process(sqs, batch, settings, parsed, _remaining(context))
        return {"batchItemFailures": [{"itemIdentifier": mid} for mid in listed]}

    def close(self) -> None:
        """Close the event loop kept for async handlers (tests; Lambda never needs it)."""
        if self._loop is not None:
            self._loop.close()
            self._loop = None

    # -- settling ---------------------------------------------------------------------------------

    def _postpone(self, sqs: SyncSqs, plan: Settlement, parsed: ParsedEvent) -> list[str]:
        """Re-send records that came before their due time; Lambda deletes the originals."""
        sent = sent_keys(sqs.execute(BatchRun(plan.first, limits=self._limits)))
        ids = parsed.message_ids
        unsent = [
            ids[entry.params["ReceiptHandle"]]
            for key, entry in plan.delete_after_send.items()
            if key not in sent
        ]
        for message_id in unsent:
            log.error("re-sending early message %s failed: it will come back", message_id)
        return unsent

    def _process(
        self,
        sqs: SyncSqs,
        batch: MessageBatch,
        settings: QueueSettings,
        parsed: ParsedEvent,
        remaining: float | None,
    ) -> list[str]:
        config = settings.config
        budget = handler_budget(config.handler_timeout, remaining)
        outcome, error = self._supervise(batch, config, budget)
        fifo = is_fifo(parsed.queue_url)
        plan = plan_settlement(
            batch,
            outcome,
            error,
            config,
            queue_url=parsed.queue_url,
            dlq_url=_dead_letter_url(parsed.queue_url, config),
            last_failure=settings.last_failure,
            now=self._clock(),
            wall_now=self._wall_clock(),
            fifo=fifo,
            limits=self._limits,
            acks_free=True,
        )
        if plan.kinds.count(ActionKind.DELETE) == len(plan.kinds):
            return []  # all acked: Lambda deletes them all, nothing to call or report
        listed = self._settle(sqs, batch, plan, fifo=fifo)
        deliveries = cast(list[RecordDelivery], batch._deliveries)
        return [deliveries[index].item_identifier for index in listed]

    def _settle(self, sqs: SyncSqs, batch: MessageBatch, plan: Plan, *, fifo: bool) -> list[int]:
        """Phase one (copies, visibility changes) here; Lambda deletes what is not reported."""
        first = sqs.execute(BatchRun(plan.settlement.first, limits=self._limits))
        sent = sent_keys(first)
        groups = [d.group_id for d in batch._deliveries] if fifo else []
        decided = report(plan.kinds, {int(key[1:]) for key in sent}, groups, fifo=fifo)
        deletes = [e for e in plan.settlement.second(sent) if int(e.key[1:]) in decided.delete]
        second = sqs.execute(BatchRun(deletes, limits=self._limits))
        for level, text in refusals(first, second, refused=plan.settlement.refused, batch=batch):
            log.log(level, "settling on %s: %s", batch.queue, text)
        for line in drops(batch, plan):
            log.warning("%s", line)
        return decided.listed

    # -- running the handler ---------------------------------------------------------------------

    def _supervise(
        self, batch: MessageBatch, config: ConsumerConfig, budget: float
    ) -> tuple[Outcome, BaseException | None]:
        """Run the handler for at most `budget` seconds (no heartbeat: the queue's visibility
        timeout must outlast the function)."""
        if self._is_async:
            handler = cast(AsyncBatchHandler, self.handler)
            running = run_async_handler(handler, batch, budget, self._abandoned)
            timed_out, error = self._event_loop().run_until_complete(running)
        else:
            timed_out, error = run_in_thread(self.handler, batch, budget)
        end = handler_end(batch, config, timed_out=timed_out, error=error)
        if end.log is not None:
            log.log(end.log[0], "%s", end.log[1], exc_info=end.error)
        return end.outcome, end.error

    # -- per execution environment ----------------------------------------------------------------

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop

    def _door(self) -> SyncSqs:
        if self._sqs is None:
            self._sqs = SyncSqs(self._client if self._client is not None else default_client())
        return self._sqs

    def _endpoint(self) -> str | None:
        """Where queue URLs point: the standard endpoint variables, else a given client's."""
        for name in ("AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL"):
            if os.environ.get(name):
                return os.environ[name]
        if self._client is not None:
            return str(self._client.meta.endpoint_url)
        return None

    def _settings_for(self, sqs: SyncSqs, queue_url: str) -> QueueSettings:
        """The queue's settings: one RedrivePolicy lookup per execution environment (a lookup
        that failed for a passing reason, throttling or the network, is not kept: this
        invocation goes on without it, the next one asks again)."""
        name = queue_name(queue_url)
        if name in self._settings:
            return self._settings[name]
        config = self.config if self.config is not None else ConsumerConfig.load(name)
        check_dead_letter_queue(name, config.dead_letter_queue)
        try:
            answer = sqs.call("get_queue_attributes", policy_query(queue_url))
        except SqsError as exc:
            settings = resolve_settings(name, config, None, refused=lookup_refusal(exc))
            if not is_transient(exc):  # AccessDenied will not change: ask once
                self._settings[name] = settings
        else:
            settings = resolve_settings(name, config, answer.get("Attributes", {}))
            self._settings[name] = settings
        for level, note in settings.notes:
            log.log(level, "%s", note)
        return settings


@overload
def lambda_handler(handler: AnyHandler, /) -> LambdaAdapter: ...
@overload
def lambda_handler(
    *,
    config: ConsumerConfig | None = None,
    client: Any = None,
    limits: SqsLimits = SQS_LIMITS,
) -> Callable[[AnyHandler], LambdaAdapter]: ...
def lambda_handler(
    handler: AnyHandler | None = None,
    /,
    *,
    config: ConsumerConfig | None = None,
    client: Any = None,
    limits: SqsLimits = SQS_LIMITS,
) -> LambdaAdapter | Callable[[AnyHandler], LambdaAdapter]:
    """`@lambda_handler` or `@lambda_handler(config=...)` on `def handler(batch)` or `async def`.

    The result is the function to name in Lambda's handler setting. Config comes from the
    environment (`SQSBATCH_*`, `sqsbatch.toml`) for the event's queue when not given.
    """

    def wrap(function: AnyHandler) -> LambdaAdapter:
        return LambdaAdapter(function, config, client=client, limits=limits)

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


def _remaining(context: LambdaContext | None) -> float | None:
    if context is None:
        return None
    return context.get_remaining_time_in_millis() / 1000
