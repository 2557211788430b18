"""Handlers tested without SQS: run a handler on one batch and read what it decided.

The batch is built as a real one is: each body encoded as `send` encodes it, then received and
decoded as a consumer decodes it, so the handler sees the same types (JSON values, `str`,
`bytes`) and attributes. The handler runs as the front ends run it (a sync one in a thread, an
`async def` one as a task, both given up at `handler_timeout`), and the same decision code
settles the batch (`_core.ledger.actions_for`, with the config's `max_retries`, `retry_delay` and
`dead_letter_queue`, and the FIFO group rule on a `.fifo` queue). Nothing is sent anywhere: no
SQS, no boto3 client, no network. The ideas come from dramatiq's `StubBroker` and arq's burst
mode: a test drives the real consumer logic to the end, then asserts on what it did.

    result = run_handler(handle, [{"order": 1}, TestMessage("text", attempts=4)])
    assert result.acked == [0] and result.retried == {1: 0}
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, Literal, cast

from sqsbatch._async.flavour import AsyncBatchHandler
from sqsbatch._core.attributes import UserAttribute, encode_attributes
from sqsbatch._core.bodies import encode_body
from sqsbatch._core.closing import failure_of, handler_end
from sqsbatch._core.context import QueueContext
from sqsbatch._core.entries import Outbound, send_entry
from sqsbatch._core.envelope import ContentType, Envelope, ErrorInfo
from sqsbatch._core.guard import Guard, Guarded, settle_claims
from sqsbatch._core.handlers import check_handler, is_async_handler
from sqsbatch._core.holding import held, overloaded_seconds
from sqsbatch._core.intake import Screening, intake
from sqsbatch._core.ledger import ActionKind, actions_for
from sqsbatch._core.message import MessageBatch, ledger_of
from sqsbatch._core.queue_settings import check_dead_letter_queue, resolve_settings
from sqsbatch._core.receiving import Answer
from sqsbatch._core.screening import BodyModel, Doomed, Screen, close_screened
from sqsbatch._core.sending import check_idempotency_key
from sqsbatch._core.shapes import is_fifo, queue_name
from sqsbatch._core.unwrap import EnvelopeKind, wrap
from sqsbatch._shell.guarding import guard_for
from sqsbatch._shell.handler_tasks import run_async_handler, run_in_thread, run_returned
from sqsbatch._sync.door import SyncSqs
from sqsbatch._sync.flavour import BatchHandler
from sqsbatch.config import MAX_TTL_SECONDS, ConsumerConfig
from sqsbatch.errors import MessageError, Overloaded, SqsBatchError
from sqsbatch.idempotency import Store

__all__ = ["HandlerResult", "MessageResult", "TestMessage", "run_handler", "run_handler_async"]

Fate = Literal["acked", "retried", "dead_lettered", "dropped", "skipped"]
_FATES: dict[ActionKind, Fate] = {
    ActionKind.DELETE: "acked",
    ActionKind.HIDE: "retried",
    ActionKind.RESEND: "retried",
    ActionKind.DEAD_LETTER: "dead_lettered",
    ActionKind.DROP: "dropped",
}  # LEAVE needs a queue whose RedrivePolicy could not be read: never the case here
DEFAULT_QUEUE = "test-queue"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_abandoned: set[asyncio.Task[object]] = set()  # timed-out async handlers that ignore cancel
AnyHandler = BatchHandler | AsyncBatchHandler


@dataclass(frozen=True)
class TestMessage:
    """A body with what a producer and SQS would have set: `id` (default `message-<index>`),
    `attempts` (1 on the first delivery, `max_retries + 1` on the last), `timestamp` (the send,
    timezone-aware, kept to the millisecond as SQS keeps it; default now), `attributes`,
    `group_id` (FIFO), `content_type`, `ttl_seconds` (a deadline from `timestamp`) and
    `idempotency_key`, as `send` takes them. `envelope="sns"` or `"eventbridge"`: the body
    wrapped as SNS or EventBridge delivers it (`envelope_fields` add to or replace the
    envelope's fields), for a config with the same `envelope`."""

    __test__ = False  # not a pytest test class, though its name starts with "Test"

    body: Any
    _: KW_ONLY
    id: str | None = None
    attempts: int = 1
    timestamp: datetime | None = None
    attributes: Mapping[str, UserAttribute] | None = None
    group_id: str | None = None
    content_type: ContentType | None = None
    ttl_seconds: float | None = None
    idempotency_key: str | None = None
    envelope: EnvelopeKind | None = None
    envelope_fields: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class MessageResult:
    """What became of one message: its `fate`; for a retry, `delay_seconds` until it is seen
    again; whether an `ack`/`retry` call decided it (`explicit`) or the handler's end did; for a
    last failure, the `error` a dead-lettered copy records. `body` is as the handler saw it."""

    index: int
    id: str
    body: Any
    attempts: int
    fate: Fate
    delay_seconds: int | None = None
    explicit: bool = True
    error: ErrorInfo | None = None
    reason: str | None = None
    """Why it was dead-lettered or dropped: `retries_exhausted`, `expired`, `invalid_body`
    (screened out before the handler), or the text given `dead_letter(reason)`; for a
    message the idempotency guard kept from the handler, `duplicate` (skipped: acked without
    the handler) or `claimed` (held: retried after the other claim, no attempt counted)."""


@dataclass(frozen=True)
class HandlerResult:
    """How the handler ended, and one `MessageResult` per message, in batch order."""

    outcomes: list[MessageResult]
    raised: BaseException | None = None
    """What the handler raised (`raise result.raised` shows its traceback)."""
    timed_out: bool = False
    """It ran past `handler_timeout`: the batch failed; its later calls are ignored."""

    @property
    def acked(self) -> list[int]:
        """Indexes of the acked messages."""
        return self._having("acked")

    @property
    def retried(self) -> dict[int, int]:
        """Index of each retried message: its delay in seconds."""
        return {o.index: o.delay_seconds or 0 for o in self.outcomes if o.fate == "retried"}

    @property
    def dead_lettered(self) -> list[int]:
        """Indexes of the messages sent to the `dead_letter_queue` (their last delivery failed)."""
        return self._having("dead_lettered")

    @property
    def dropped(self) -> list[int]:
        """Indexes of the messages deleted after their last failure (no `dead_letter_queue`)."""
        return self._having("dropped")

    @property
    def skipped(self) -> list[int]:
        """Indexes of the duplicates the idempotency guard acked without the handler."""
        return self._having("skipped")

    def _having(self, fate: Fate) -> list[int]:
        return [outcome.index for outcome in self.outcomes if outcome.fate == fate]


def run_handler(
    handler: AnyHandler,
    messages: Sequence[object],
    *,
    config: ConsumerConfig | None = None,
    queue: str | None = None,
    body_model: Any = None,
    idempotency: Store | None = None,
) -> HandlerResult:
    """Hand `handler` (sync or `async def`) one batch of `messages` and settle it.

    Each item is a body (JSON value, `str` or `bytes`) or a `TestMessage`. `config` defaults to
    `ConsumerConfig()`; `queue` (a name or URL) to `test-queue`, or `test-queue.fifo` when the
    messages have group ids. Bad input raises one line (`MessageError`, `ConfigError`).

    Messages are screened first, by the consumers' own code: one past its deadline (its
    `TestMessage(timestamp=)` older than `config.max_message_age`, or its `ttl_seconds` gone)
    is dead-lettered with reason `expired`; one whose body fails `body_model` (anything
    pydantic's `TypeAdapter` takes), with reason `invalid_body`. The handler sees the others,
    their bodies validated; it is not called when none is left.

    `idempotency` (a store, e.g. `MemoryStore()`, kept across calls): the consumers' guard. A
    message whose `idempotency_key` (else `id`) the store has completed is `skipped`; one the
    store holds claimed is `retried` after that claim, no attempt counted; an acked one is
    completed in the store, any other released (docs/idempotency.md).
    """
    if is_async_handler(handler):
        _check_no_running_loop()
        return asyncio.run(
            run_handler_async(
                handler,
                messages,
                config=config,
                queue=queue,
                body_model=body_model,
                idempotency=idempotency,
            )
        )
    run = _Run.start(handler, messages, config, queue, body_model, idempotency=idempotency)
    if not run.batch.messages:
        return run.finish(False, None)
    return run.finish(*run_in_thread(handler, run.batch, run.config.handler_timeout))


async def run_handler_async(
    handler: AnyHandler,
    messages: Sequence[object],
    *,
    config: ConsumerConfig | None = None,
    queue: str | None = None,
    body_model: Any = None,
    idempotency: Store | None = None,
) -> HandlerResult:
    """`run_handler` for a test already in an event loop (a sync handler runs in a thread; an
    awaitable it returns is awaited here, as the Lambda adapter awaits it)."""
    run = _Run.start(handler, messages, config, queue, body_model, idempotency=idempotency)
    if not run.batch.messages:
        return run.finish(False, None)
    budget = run.config.handler_timeout
    if is_async_handler(handler):
        handler_ = cast(AsyncBatchHandler, handler)
        ended = await run_async_handler(handler_, run.batch, budget, _abandoned)
    else:
        started = time.monotonic()
        thread = partial(run_in_thread, keep_awaitable=True)
        ended = await asyncio.to_thread(thread, handler, run.batch, budget)
        left = budget - (time.monotonic() - started)
        ended = await run_returned(ended, run.batch, left, _abandoned)
    return run.finish(*ended)


@dataclass
class _Run:
    """One batch on its way through the handler to settlement."""

    batch: MessageBatch
    config: ConsumerConfig
    queue: str
    screened: list[MessageResult] = field(default_factory=list)
    """The messages screened out before the handler (expired, invalid body)."""
    positions: list[int] = field(default_factory=list)
    """The index in `messages` of each message of `batch`."""
    guard: Guard | None = None

    @classmethod
    def start(
        cls,
        handler: object,
        messages: Sequence[object],
        config: ConsumerConfig | None,
        queue: str | None,
        body_model: Any = None,
        *,
        idempotency: Store | None = None,
    ) -> _Run:
        check_handler(handler)
        model = BodyModel(body_model) if body_model is not None else None
        config = config if config is not None else ConsumerConfig()
        items = _checked(messages, config.max_batch_size)
        if queue is None:
            fifo = any(item.group_id is not None for item in items)
            queue = DEFAULT_QUEUE + (".fifo" if fifo else "")
        check_dead_letter_queue(queue, config.dead_letter_queue)
        wall_now = time.time()
        raw = [_received(i, item, queue, wall_now) for i, item in enumerate(items)]
        visibility = config.visibility_timeout
        answer = Answer(raw, queue_url=queue, received_at=time.monotonic(), visibility=visibility)
        context = _context(queue, config)
        screening = Screening(context, Screen(config.max_message_age, model, config.envelope))
        guard = guard_for(idempotency, config)
        flow = intake(answer, screening, wall_clock=lambda: wall_now, guard=guard)
        taken = SyncSqs(_Accepting()).run(flow)  # the consumers' intake; `queue` is never called
        index = {id(delivery): i for i, delivery in enumerate(answer.all)}
        run = cls(MessageBatch(queue_name(queue), taken.batch), config, queue, guard=guard)
        run.positions = [index[id(delivery)] for delivery in taken.batch]
        run.screened = _screened(taken.doomed, index, context, wall_now)
        run.screened += _guarded(taken.guarded, index)
        return run

    def finish(self, timed_out: bool, error: BaseException | None) -> HandlerResult:
        """Seal the ledger and settle as the front ends do, on a queue with no RedrivePolicy."""
        if not self.batch.messages:  # all screened out: no handler ran
            return HandlerResult(self.screened)
        # Not logged as the front ends log it: the result carries the error.
        end = handler_end(self.batch, self.config, timed_out=timed_out, error=error)
        settings = resolve_settings(self.queue, self.config, {})
        ledger = ledger_of(self.batch)
        ledger.seal()
        decisions = ledger.decisions(end.outcome)
        actions = actions_for(
            self.batch._settled(),
            decisions,
            max_retries=settings.config.max_retries,
            retry_delay=settings.config.retry_delay,
            last_failure=settings.last_failure,
            failure=failure_of(end.outcome, end.error, self.config.handler_timeout),
            now=time.monotonic(),
            wall_now=time.time(),
            fifo=is_fifo(self.queue),
        )
        if isinstance(end.error, Overloaded) and not is_fifo(self.queue):  # as a poller holds it
            open_seconds = self.config.circuit_open_seconds
            actions = held(actions, decisions, overloaded_seconds(end.error, open_seconds))
        if self.guard is not None:  # acked keys completed, the other claims released
            kinds = [action.kind for action in actions]
            SyncSqs(_Accepting()).run(settle_claims(self.guard, self.batch, kinds))
        outcomes = list(self.screened)
        for message, decision, action in zip(self.batch.messages, decisions, actions, strict=True):
            fate = _FATES[action.kind]
            delay = action.delay_seconds if fate == "retried" else None
            found = (message.id, message.body, message.attempts, fate, delay, decision.explicit)
            reason = action.reason if fate in ("dead_lettered", "dropped") else None
            position = self.positions[action.index]
            outcomes.append(MessageResult(position, *found, action.error, reason))
        outcomes.sort(key=lambda outcome: outcome.index)
        return HandlerResult(outcomes, end.error, timed_out)


def _context(queue: str, config: ConsumerConfig) -> QueueContext:
    """The test's queue, as if it had no RedrivePolicy."""
    settings = resolve_settings(queue, config, {})
    return QueueContext.of(queue, settings, config.dead_letter_queue)


class _Accepting:
    """The client of a test's queue, which is not a real one: every call succeeds and every
    entry is accepted (the calls of screened-out messages: copies to the DLQ, deletes)."""

    def __getattr__(self, op: str) -> Callable[..., Mapping[str, Any]]:
        def call(**params: Any) -> Mapping[str, Any]:
            entries = params.get("Entries", [])
            return {"Successful": [{"Id": entry["Id"]} for entry in entries], "Failed": []}

        return call


def _screened(
    doomed: Sequence[Doomed],
    index: Mapping[int, int],
    context: QueueContext,
    wall_now: float,
) -> list[MessageResult]:
    """The results of the messages screened out, closed as the consumers close them."""
    if not doomed:
        return []
    batch, closing = close_screened(doomed, context, wall_now=wall_now)
    return [
        MessageResult(
            index[id(item.delivery)],
            message.id,
            message.body,
            message.attempts,
            _FATES[closing.kinds[i]],
            explicit=False,
            error=item.error,
            reason=item.reason,
        )
        for i, (item, message) in enumerate(zip(doomed, batch.messages, strict=True))
    ]


def _guarded(guarded: Guarded | None, index: Mapping[int, int]) -> list[MessageResult]:
    """The results of the messages the idempotency guard kept from the handler."""
    if guarded is None:
        return []
    results = [
        MessageResult(
            index[id(d)], d.id, d.body, d.attempts, "skipped", None, False, None, "duplicate"
        )
        for d in guarded.skipped
    ]
    for d, delay in guarded.held:
        at = index[id(d)]
        held = MessageResult(at, d.id, d.body, d.attempts, "retried", delay, False, None, "claimed")
        results.append(held)
    return results


def _checked(messages: Sequence[object], max_batch_size: int) -> list[TestMessage]:
    if isinstance(messages, str | bytes | bytearray) or not isinstance(messages, Sequence):
        raise MessageError(
            f"messages must be a list of bodies or TestMessage, not {type(messages).__name__}"
        )
    if not messages:
        raise MessageError("a batch is never empty: give at least one message")
    if len(messages) > max_batch_size:
        raise MessageError(
            f"{len(messages)} messages: a batch holds at most max_batch_size={max_batch_size} "
            "(pass config=ConsumerConfig(max_batch_size=...), up to 100)"
        )
    return [item if isinstance(item, TestMessage) else TestMessage(item) for item in messages]


def _received(index: int, item: TestMessage, queue: str, wall_now: float) -> dict[str, Any]:
    """`item` as `ReceiveMessage` returns it, after a send checked by the producer's rules."""
    try:
        attempts, sent_ms = _delivery_fields(item, wall_now)
        body, content_type = encode_body(*_wrapped(index, item, sent_ms))
        outbound = Outbound(
            body,
            Envelope(
                content_type=content_type,
                expires_at=_expires_at(item, sent_ms),
                idempotency_key=check_idempotency_key(item.idempotency_key),
            ),
            encode_attributes(item.attributes),
            group_id=item.group_id,
        )
        params = send_entry(str(index), queue, outbound, fifo=is_fifo(queue)).params
    except MessageError as exc:
        raise type(exc)(f"message #{index}: {exc}") from None
    system = {"SentTimestamp": str(sent_ms), "ApproximateReceiveCount": str(attempts)}
    if "MessageGroupId" in params:
        system["MessageGroupId"] = params["MessageGroupId"]
    return {
        "MessageId": item.id if item.id is not None else f"message-{index}",
        "ReceiptHandle": f"receipt-{index}",
        "Body": params["MessageBody"],
        "Attributes": system,
        "MessageAttributes": params["MessageAttributes"],
    }


def _wrapped(index: int, item: TestMessage, sent_ms: int) -> tuple[object, ContentType | None]:
    """The body and content type to send: `item`'s, or its body wrapped in its `envelope`."""
    if item.envelope is None:
        return item.body, item.content_type
    fields, at = item.envelope_fields, sent_ms / 1000
    body = wrap(item.envelope, item.body, message_id=f"envelope-{index}", sent_at=at, fields=fields)
    return body, "text"


def _delivery_fields(item: TestMessage, wall_now: float) -> tuple[int, int]:
    """(ApproximateReceiveCount, SentTimestamp in ms), checked."""
    attempts = item.attempts
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise MessageError(f"attempts={attempts!r} is invalid: must be an int >= 1")
    if item.id is not None and (not isinstance(item.id, str) or not item.id):
        raise MessageError(f"id={item.id!r} is invalid: must be a non-empty str")
    sent = item.timestamp
    if sent is None:
        return attempts, int(wall_now * 1000)
    if not isinstance(sent, datetime) or sent.tzinfo is None:
        raise MessageError(f"timestamp={sent!r} is invalid: must be a timezone-aware datetime")
    return attempts, (sent - _EPOCH) // timedelta(milliseconds=1)


def _expires_at(item: TestMessage, sent_ms: int) -> float | None:
    ttl = item.ttl_seconds
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 1 <= ttl <= MAX_TTL_SECONDS:
        raise MessageError(f"ttl_seconds={ttl!r} is invalid: must be seconds 1..{MAX_TTL_SECONDS}")
    return sent_ms / 1000 + ttl


def _check_no_running_loop() -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise SqsBatchError(
        "run_handler cannot run an async handler inside a running event loop: "
        "await run_handler_async(...) there"
    )
