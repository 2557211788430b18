"""Every exchange with SQS, written once: a flow yields the calls it needs and takes the answers.

A flow is a generator. It yields a `Request` (one SQS API call) and is sent SQS's answer back, or
has the translated `SqsBatchError` thrown in at that `yield`; it yields a `Pause` to wait between
rounds of retries, and an `Outside` for a call elsewhere (an idempotency store, S3); it returns
what it concluded as a value (counts, refusals, what to log), and never logs, sleeps or calls
anything itself. The pattern is httpx's `auth_flow`, driven from
both `sync_auth_flow` and `async_auth_flow`: here exactly two drivers exist,
`sqsbatch._async.door.AsyncSqs.run` and its generated twin `sqsbatch._sync.door.SyncSqs.run`, and
every front end (both pollers, the Lambda adapter, the redrive daemon and the manual redrive)
goes through one of them.

The flows: `batch_calls` (a `BatchRun`, chunked and reconciled per entry), `settle` (the two
phases of a settled batch), `settle_for_lambda` (the same, deleting only what Lambda will not),
`postpone` (early delay hops), `heartbeat` (visibility extensions) and `read_settings` (the
queue's RedrivePolicy at start). Receiving and every step between SQS and a handler are
`sqsbatch._core.intake`'s flows, built on these.

What is made once or more per batch (`Request`, `Settled`) is a plain slotted
dataclass, not a frozen one (a third of the cost to make); nothing changes one once made.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqsbatch._core.calls import BatchRun, Call, accepted_whole
from sqsbatch._core.closing import Closing, acked_tally, refusals, sent_keys, tally
from sqsbatch._core.entries import TwoPhase, delete_entries
from sqsbatch._core.heartbeat import extended, heartbeat_entries
from sqsbatch._core.lambda_report import report
from sqsbatch._core.message import MessageBatch, deliveries_of
from sqsbatch._core.notices import notices
from sqsbatch._core.queue_settings import (
    QueueSettings,
    lookup_refusal,
    policy_query,
    resolve_settings,
)
from sqsbatch._core.shapes import is_transient
from sqsbatch.config import ConsumerConfig
from sqsbatch.errors import QueueNotFound, SqsError
from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = [
    "Flow",
    "Heartbeat",
    "Line",
    "Outside",
    "Pause",
    "Postponed",
    "Request",
    "Settled",
    "acked_in_bulk",
    "batch_calls",
    "heartbeat",
    "postpone",
    "read_settings",
    "settle",
    "settle_for_lambda",
]

T = TypeVar("T")


@dataclass(slots=True)
class Request:
    """One SQS API call: the boto3 operation name and its parameters."""

    op: str
    params: Mapping[str, Any]
    queue: str | None = None
    """The queue named in a translated error (default: the one in `QueueUrl`)."""


@dataclass(slots=True)
class Outside:
    """One call to something other than SQS (an idempotency store, S3): the door runs
    `call()` (the async door in a worker thread) and sends its result back, or throws in what
    it raised, untranslated. Intake's steps that read or write elsewhere yield one."""

    call: Callable[[], Any]


@dataclass(frozen=True)
class Pause:
    """Wait this long before the next request (backoff between rounds of entry retries)."""

    seconds: float


Flow = Generator[Request | Outside | Pause, Any, T]
Line = tuple[int, str]
"""(logging level, text): what a flow found worth logging; the shell logs it."""


def batch_calls(run: BatchRun) -> Flow[BatchRun]:
    """Execute `run` round by round until every entry is settled or given up.

    A call that fails as a whole is recorded against each of its entries: retried next round
    when SQS's fault is transient, given up otherwise (a missing queue never comes back).
    """
    while calls := run.next_calls():
        if wait := run.backoff_seconds():
            yield Pause(wait)
        for call in calls:
            try:
                answer = yield Request(call.op, call.params())  # errors name the queue
            except SqsError as exc:
                answer = exc
            _record(run, call, answer)
    return run


def _record(run: BatchRun, call: Call, answer: Any) -> None:
    """SQS's answer to `call`, or the error it failed with as a whole, into `run`."""
    if isinstance(answer, QueueNotFound):
        run.record_error(call, answer.code, str(answer), retryable=False)
    elif isinstance(answer, SqsError):
        run.record_error(call, answer.code, str(answer), retryable=is_transient(answer))
    else:
        run.record(call, answer)


@dataclass(slots=True)
class Settled:
    """What settling a batch concluded: counters, and lines for the operator."""

    counts: dict[str, int]
    lines: list[Line]
    listed: list[int] = field(default_factory=list)
    """Lambda: the indexes of the messages to report in `batchItemFailures`."""
    rest: Flow[Settled] | None = None
    """`settle(..., deletes_later=True)`: phase two (the deletes), still to run; the counters and
    lines are its."""
    undeleted: set[int] = field(default_factory=set)
    """The indexes of the messages whose delete SQS did not accept (`_core.fetching` keeps
    their payloads in S3: they may come back)."""


def settle(
    closing: Closing,
    batch: MessageBatch,
    limits: SqsLimits = SQS_LIMITS,
    *,
    deletes_later: bool = False,
) -> Flow[Settled]:
    """Phase one (copies, visibility changes), then the deletes: the acked messages and every
    message whose copy SQS accepted. A crash between the phases duplicates, never loses.
    `deletes_later`: return after phase one, with the deletes as `Settled.rest` (a poller sends
    them beside its next receive: phase one, which makes retried messages visible again, has
    landed by then; a late delete only risks a duplicate)."""
    plan = closing.entries
    if closing.bulk_ack:  # deletes only
        rest = yield from _delete_acked(batch, closing.queue_url, limits)
        if rest is None:  # all accepted at once (the common case): nothing to read
            return Settled(acked_tally(len(closing.kinds)), [])
        first, second = BatchRun((), limits=limits), rest
    else:
        first = yield from batch_calls(BatchRun(plan.first, limits=limits))
        second = BatchRun(plan.second(sent_keys(first)), limits=limits)
        if deletes_later:
            return Settled({}, [], rest=_deletes(closing, batch, first, second))
        second = yield from batch_calls(second)
    return _settled(closing, batch, first, second)


def _deletes(
    closing: Closing, batch: MessageBatch, first: BatchRun, second: BatchRun
) -> Flow[Settled]:
    """Phase two of `settle`, on its own: the whole batch's counters and lines at its end."""
    second = yield from batch_calls(second)
    return _settled(closing, batch, first, second)


def _settled(closing: Closing, batch: MessageBatch, first: BatchRun, second: BatchRun) -> Settled:
    lines = _lines(closing, batch, first, second)
    return Settled(tally(closing, first, second), lines, undeleted=_undeleted(second))


def _undeleted(second: BatchRun) -> set[int]:
    """The messages whose delete entry (`d<index>`) SQS did not accept."""
    return {int(result.key[1:]) for result in second.failed() if result.key.startswith("d")}


def _delete_acked(batch: MessageBatch, queue_url: str, limits: SqsLimits) -> Flow[BatchRun | None]:
    """Round one of the deletes of a batch acked in bulk, made straight from the receipts, 10 a
    call. None when SQS accepted every entry at once (the common case, read in bulk); else the
    same deletes as a `BatchRun` that has read round one's answers and settled the rest."""
    deliveries, step = deliveries_of(batch), limits.max_entries
    answers: list[Any] = []
    clean = True
    for start in range(0, len(deliveries), step):
        chunk = deliveries[start : start + step]
        entries = [{"Id": str(i), "ReceiptHandle": d.receipt_handle} for i, d in enumerate(chunk)]
        params = {"QueueUrl": queue_url, "Entries": entries}
        try:
            answer = yield Request("delete_message_batch", params)
        except SqsError as exc:
            answer = exc
        answers.append(answer)
        clean = clean and not isinstance(answer, SqsError) and accepted_whole(answer, len(chunk))
    if clean:
        return None
    run = BatchRun(delete_entries(deliveries, queue_url=queue_url), limits=limits)
    for call, answer in zip(run.next_calls(), answers, strict=True):  # the same calls
        _record(run, call, answer)
    return (yield from batch_calls(run))


def settle_for_lambda(
    closing: Closing, batch: MessageBatch, limits: SqsLimits = SQS_LIMITS
) -> Flow[Settled]:
    """Phase one here; Lambda deletes every record left out of `batchItemFailures`, so the
    second phase deletes only what Lambda cannot (`lambda_report.report` decides which).
    A batch acked in bulk costs nothing: no call, nothing to report (`acked_in_bulk`)."""
    if closing.bulk_ack:
        return acked_in_bulk(closing)
    plan = closing.entries
    first = yield from batch_calls(BatchRun(plan.first, limits=limits))
    sent = sent_keys(first)
    groups = [delivery.group_id for delivery in deliveries_of(batch)] if closing.fifo else []
    decided = report(closing.kinds, {int(key[1:]) for key in sent}, groups, fifo=closing.fifo)
    deletes = [entry for entry in plan.second(sent) if int(entry.key[1:]) in decided.delete]
    second = yield from batch_calls(BatchRun(deletes, limits=limits))
    lines = _lines(closing, batch, first, second)
    undeleted = _undeleted(second)
    return Settled(tally(closing, first, second), lines, decided.listed, undeleted=undeleted)


def acked_in_bulk(closing: Closing) -> Settled:
    """What `settle_for_lambda` concludes, with no call, of a batch acked in bulk: a front end
    may take it without running the flow (Lambda's hot path)."""
    return Settled({"batches": 1, "acked": len(closing.kinds)}, [])


def _lines(closing: Closing, batch: MessageBatch, first: BatchRun, second: BatchRun) -> list[Line]:
    found = refusals(first, second, refused=closing.entries.refused, batch=batch)
    where = [(level, f"settling on {batch.queue}: {text}") for level, text in found]
    return where + notices(closing, batch, first, second)


@dataclass(frozen=True)
class Postponed:
    """Early delay hops re-sent: how many, and the indexes of those that were not."""

    sent: int
    unsent: list[int]


def postpone(plan: TwoPhase, *, delete: bool, limits: SqsLimits = SQS_LIMITS) -> Flow[Postponed]:
    """Re-send messages that came before their due time, then delete the originals whose copy
    SQS accepted (`delete=False` under Lambda, which deletes what it is not told about)."""
    first = yield from batch_calls(BatchRun(plan.first, limits=limits))
    sent = sent_keys(first)
    if delete:
        yield from batch_calls(BatchRun(plan.second(sent), limits=limits))
    unsent = [int(key[1:]) for key in plan.delete_after_send if key not in sent]
    return Postponed(len(sent), unsent)


@dataclass(frozen=True)
class Heartbeat:
    """What one heartbeat concluded: counters, and lines for the operator."""

    counts: dict[str, int]
    lines: list[Line]


def heartbeat(
    batch: MessageBatch,
    *,
    queue_url: str,
    now: float,
    visibility_timeout: int,
    limits: SqsLimits = SQS_LIMITS,
) -> Flow[Heartbeat]:
    """Extend the visibility of a running batch's messages that need it now. An expired receipt
    is counted (its message may be redelivered); an extension SQS refused is logged."""
    deliveries = deliveries_of(batch)
    entries = heartbeat_entries(
        deliveries,
        queue_url=queue_url,
        now=now,
        visibility_timeout=visibility_timeout,
        limits=limits,
    )
    if not entries:
        return Heartbeat({}, [])
    run = yield from batch_calls(BatchRun(entries, limits=limits))
    found = extended(deliveries, run, now)
    lines = [
        (
            logging.WARNING,
            f"keeping a batch of {batch.queue} hidden failed ({why}): its messages may be "
            "delivered again while the handler runs",
        )
        for why in found.refused[:1]  # one line per heartbeat, not one per message
    ]
    return Heartbeat({"expired_receipts": found.expired}, lines)


def read_settings(
    queue: str, queue_url: str, config: ConsumerConfig
) -> Flow[tuple[QueueSettings, bool]]:
    """The queue's settings from its RedrivePolicy, and whether the answer may be kept (a lookup
    that failed for a passing reason, throttling or the network, should be asked again).
    A missing queue or refused credentials raise: nothing could work."""
    try:
        answer = yield Request("get_queue_attributes", policy_query(queue_url))
    except SqsError as exc:
        refused = lookup_refusal(exc)
        return resolve_settings(queue, config, None, refused=refused), not is_transient(exc)
    return resolve_settings(queue, config, answer.get("Attributes", {})), True
