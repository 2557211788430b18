"""Closing a batch: how its handler ended, what each message becomes, what to count and log.

`close_batch` seals the ledger and turns the handler's calls and outcome into actions
(`ledger.actions_for`) and entries (`entries.settle_entries`); `tally` and `refusals` read
what SQS accepted, entry by entry, once the settle flow has run (`notices` says what the
operator hears of its dead letters). No I/O.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sqsbatch._core.calls import BatchRun
from sqsbatch._core.context import QueueContext
from sqsbatch._core.entries import TwoPhase, settle_entries
from sqsbatch._core.envelope import RETRIES_EXHAUSTED
from sqsbatch._core.ledger import Action, ActionKind, Outcome, acks_out_of_order, actions_for
from sqsbatch._core.message import MessageBatch, deliveries_of, ledger_of
from sqsbatch._core.metrics import reason_key
from sqsbatch._core.shapes import queue_name
from sqsbatch.config import ConsumerConfig
from sqsbatch.errors import AwaitableReturned
from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = [
    "OVERLAP_ROUND_TRIP_SECONDS",
    "SETTLES_OUT_PER_SLOT",
    "SETTLE_WINDOW",
    "SLOW_SETTLE_SECONDS",
    "Closing",
    "HandlerEnd",
    "SettleTimes",
    "acked_tally",
    "close_batch",
    "deletes_behind",
    "failure_of",
    "handler_end",
    "plan_closing",
    "refusals",
    "sent_keys",
    "settles_behind",
    "tally",
]


@dataclass(slots=True)
class HandlerEnd:
    """How a handler call ended, what to count and what to log (with `error`'s traceback)."""

    outcome: Outcome
    error: BaseException | None
    counts: dict[str, int]
    log: tuple[int, str] | None

    @property
    def exc_info(self) -> BaseException | None:
        """What to log the line with: the error's traceback, but for an awaitable the handler
        returned (its line says all there is)."""
        return None if isinstance(self.error, AwaitableReturned) else self.error


LOGGED_IDS = 5
"""How many message ids a failed batch's log line names."""


def handler_end(
    batch: MessageBatch,
    config: ConsumerConfig,
    *,
    timed_out: bool,
    error: BaseException | None,
    budget: float | None = None,
) -> HandlerEnd:
    """Past the deadline the batch failed, whatever the handler does later; else raise or return.
    `budget`: the deadline it had, when shorter than `handler_timeout` (Lambda's time left)."""
    if timed_out:
        limit = f"{config.handler_timeout:g} s"
        if budget is not None and budget < config.handler_timeout:
            limit = f"{budget:.1f} s (the function's time left)"
        note = f"handler for {batch.queue} ran past {limit}{_which(batch)}"
        return HandlerEnd(Outcome.TIMED_OUT, None, {"handler_timeouts": 1}, (logging.ERROR, note))
    if isinstance(error, AwaitableReturned):
        note = f"handler for {batch.queue}{_which(batch)}: {error}; the batch is retried"
        return HandlerEnd(Outcome.RAISED, error, {"handler_errors": 1}, (logging.ERROR, note))
    if error is not None:
        note = f"handler for {batch.queue} raised {error!r}{_which(batch)}"
        return HandlerEnd(Outcome.RAISED, error, {"handler_errors": 1}, (logging.WARNING, note))
    return _RETURNED


_RETURNED = HandlerEnd(Outcome.RETURNED, None, {}, None)
"""How most handler calls end (one value for all: nothing changes it)."""


def _which(batch: MessageBatch) -> str:
    """` on a batch of 12 messages (ids a, b, c, d, e and 7 more)`."""
    ids = [message.id for message in batch.messages]
    shown = ", ".join(ids[:LOGGED_IDS])
    more = f" and {len(ids) - LOGGED_IDS} more" if len(ids) > LOGGED_IDS else ""
    plural = "s" if len(ids) != 1 else ""
    return f" on a batch of {len(ids)} message{plural} (ids {shown}{more})"


def failure_of(
    outcome: Outcome, error: BaseException | None, handler_timeout: float
) -> tuple[str, str]:
    """What a dead-lettered copy records as the reason its last delivery failed."""
    if outcome is Outcome.TIMED_OUT:
        return "HandlerTimeout", f"the handler ran past handler_timeout={handler_timeout:g} s"
    if error is not None:
        return type(error).__name__, str(error)
    return "GroupOrder", "held back behind a retried message of its FIFO group"


@dataclass(slots=True)
class Closing:
    """A closed batch: its entries, and what each message became (`kinds`, by index)."""

    entries: TwoPhase
    kinds: list[ActionKind]
    fifo: bool = False
    bulk_ack: bool = False
    """Every message ends acked (`Ledger.all_acked`): `entries` is empty, and `settle` deletes
    every message straight from its receipt on `queue_url` (Lambda deletes them itself)."""
    reasons: dict[int, str] = field(default_factory=dict)
    """Why each message dead-lettered, dropped or left to the RedrivePolicy was, by index."""
    queue_url: str = ""
    """The queue the batch came from (what a bulk ack's deletes need)."""
    dead_letter_queue: str | None = None
    """Where its dead letters go (a name), for the line that says so."""
    before_handler: bool = False
    """Screened out before any handler saw them (`screening.close_screened`)."""
    out_of_order: list[int] = field(default_factory=list)
    """FIFO: the messages acked by the handler after an earlier one of their group was retried
    (`ledger.acks_out_of_order`): their acks hold, and a line warns of it."""


def close_batch(
    batch: MessageBatch,
    outcome: Outcome,
    error: BaseException | None,
    context: QueueContext,
    *,
    now: float,
    wall_now: float,
    acks_free: bool = False,
) -> Closing:
    """Seal the batch and decide what happens to each of its messages.

    `acks_free`: the front end deletes acked messages without being told (Lambda deletes every
    record left out of `batchItemFailures`), so an acked message gets no entry; every other
    entry, and `kinds`, are the same. A batch that every message leaves acked is decided in bulk
    (no action per message: its deletes, or nothing with `acks_free`).
    On a FIFO queue acks keep their entries but for that bulk case: an ack behind a failure of
    its group is reported to Lambda, and deleted by the front end itself.
    """
    ledger = ledger_of(batch)
    ledger.seal()
    size = len(deliveries_of(batch))
    config, fifo, limits = context.config, context.fifo, context.limits
    if ledger.all_acked(outcome):  # the common case, in bulk
        kinds = [ActionKind.DELETE] * size
        return Closing(TwoPhase([], [], {}), kinds, fifo, bulk_ack=True, queue_url=context.url)
    settled, decisions = batch._settled(), ledger.decisions(outcome)
    actions = actions_for(
        settled,
        decisions,
        max_retries=config.max_retries,
        retry_delay=config.retry_delay,
        last_failure=context.last_failure,
        failure=failure_of(outcome, error, config.handler_timeout),
        now=now,
        wall_now=wall_now,
        fifo=fifo,
        limits=limits,
        with_acks=fifo or not acks_free,
    )
    closing = plan_closing(batch, actions, context, wall_now=wall_now)
    if fifo:
        closing.out_of_order = acks_out_of_order(settled, decisions)
    return closing


OVERLAP_ROUND_TRIP_SECONDS = 0.004
"""A delete call that takes this long is mostly waiting on the network: a thread sending it
beside the next receive then costs less than it saves, where on loopback it costs more than it
saves (`bench/poller.py --extra overlapped` measures both; docs/performance.md has figures).
Twice the delay where it begins to pay, so that a local endpoint on a busy machine stays below it
and a remote SQS is above it."""


SETTLES_OUT_PER_SLOT = 8
"""How many batches' settle calls a slot may have out behind its receives (`settles_behind`)
before it waits for the oldest: one late answer (a delete SQS answers seconds late) then holds
no slot, while what waits on SQS stays bounded (at most this many batches' messages handled and
not yet deleted per slot, each still hidden by its receive's visibility timeout)."""

SETTLE_WINDOW = 64
"""How many recent settles `SettleTimes` takes its floor over."""

SLOW_SETTLE_SECONDS = 0.25
"""A settle that took this long waited on SQS (a retry after a failure, a late answer), not on
the GIL: for the next `SETTLE_WINDOW` settles, threads send settle calls beside the next receive
too (`SettleTimes.slow`), as a slot that waits on a flaky endpoint holds its whole batch."""


class SettleTimes:
    """How long a poller's delete calls take, per call, as the settles of all-acked batches show:
    the least of the last `SETTLE_WINDOW` (wall time, network included). The least, not an
    average: beside busy slots a thread's call waits for the GIL too, and that is not the
    network: on loopback an average would send every batch to a settle thread of its own and
    make the GIL's queue longer still, while the least still tells loopback from a remote SQS
    (docs/performance.md has the figures). `seconds` is that floor, 0 until a settle of deletes
    alone was timed. Slots of threads add to it at once; a lost update only drops a sample."""

    __slots__ = ("_next", "_slow_left", "_times", "seconds")

    def __init__(self, window: int = SETTLE_WINDOW) -> None:
        self.seconds = 0.0
        self._times = [math.inf] * window  # a ring: not yet timed counts for nothing
        self._next = 0
        self._slow_left = 0

    @property
    def slow(self) -> bool:
        """One of the last `SETTLE_WINDOW` settles took `SLOW_SETTLE_SECONDS` or more."""
        return self._slow_left > 0

    def settled(self, closing: Closing, seconds: float, limits: SqsLimits = SQS_LIMITS) -> None:
        """A settle of `closing` (or its phase one, or two) took `seconds`: `slow` for any, the
        floor for deletes alone."""
        self._slow_left = (
            len(self._times) if seconds >= SLOW_SETTLE_SECONDS else self._slow_left - 1
        )
        if not closing.bulk_ack or not closing.kinds:
            return
        times, at = self._times, self._next
        times[at] = seconds / math.ceil(len(closing.kinds) / limits.max_entries)
        self._next = (at + 1) % len(times)
        self.seconds = min(times)


def settles_behind(
    closing: Closing | None, *, free: bool, settle_seconds: float, slow: bool = False
) -> bool:
    """Whether a slot may receive its next batch while this batch's settle calls are still out.

    On a standard queue (a FIFO group's next messages wait for its deletes anyway), when every
    message was acked (deletes alone), or, for any batch, while SQS has been slow to answer
    (`slow`, `SettleTimes.slow`: one late answer would hold the slot for seconds). Otherwise a
    retry's visibility change lands before the next receive, or that receive (a long poll moto
    does not wake for it) could miss the message, and `run_until_idle` end with it still due:
    a price worth paying only while settles are slow. `free`: the flavour runs calls side by
    side for free (asyncio tasks); threads overlap once settles take
    `OVERLAP_ROUND_TRIP_SECONDS` (`settle_seconds`, `SettleTimes`): on a fast local endpoint
    the second thread costs more in the GIL than the overlap saves.
    """
    if closing is None or closing.fifo:
        return False
    if not closing.bulk_ack:
        return slow
    return free or slow or settle_seconds >= OVERLAP_ROUND_TRIP_SECONDS


def deletes_behind(
    closing: Closing | None, *, free: bool, settle_seconds: float, slow: bool = False
) -> bool:
    """Whether a batch that does not settle behind (`settles_behind`) sends its phase one in the
    slot and its deletes beside the next receive (`settle(..., deletes_later=True)`): on a
    standard queue, when overlapping pays (as `settles_behind`). The retries' visibility changes
    and the dead-letter copies land before the next receive; a delete that lands later can
    only duplicate a message, never lose one (the copy was accepted first). While SQS is slow
    (`slow`) the whole settle goes behind instead (`settles_behind`)."""
    if closing is None or closing.bulk_ack or closing.fifo or slow:
        return False
    return free or settle_seconds >= OVERLAP_ROUND_TRIP_SECONDS


def plan_closing(
    batch: MessageBatch, actions: Sequence[Action], context: QueueContext, *, wall_now: float
) -> Closing:
    """The closing of `batch` for `actions`: its entries, and what each message became."""
    plan = settle_entries(
        deliveries_of(batch),
        actions,
        queue_url=context.url,
        queue=batch.queue,
        dlq_url=context.dlq_url,
        wall_now=wall_now,
        fifo=context.fifo,
        limits=context.limits,
    )
    kinds = [ActionKind.DELETE] * len(deliveries_of(batch))
    reasons = {}
    for action in actions:
        kinds[action.index] = action.kind
        if action.kind in _DEATHS:
            reasons[action.index] = action.reason
    dlq = queue_name(context.dlq_url) if context.dlq_url is not None else None
    return Closing(plan, kinds, context.fifo, reasons=reasons, dead_letter_queue=dlq)


_DEATHS = (ActionKind.DEAD_LETTER, ActionKind.DROP, ActionKind.LEAVE)


_COUNTER = {
    ActionKind.DELETE: "acked",
    ActionKind.HIDE: "retried",
    ActionKind.RESEND: "retried",
    ActionKind.DEAD_LETTER: "dead_lettered",
    ActionKind.DROP: "dropped",
    ActionKind.LEAVE: "left_to_redrive_policy",
}


def sent_keys(first: BatchRun) -> set[str]:
    """The send entries (`s<index>`) SQS accepted: their messages may now be deleted."""
    return {result.key for result in first.ok() if result.key.startswith("s")}


def refusals(
    *runs: BatchRun, refused: Mapping[int, str] | None = None, batch: MessageBatch | None = None
) -> list[tuple[int, str]]:
    """(log level, text) per entry SQS refused, or copy it would refuse; an expired receipt is
    no error of ours. Given the `batch`, each text names its message's id (never its body)."""

    def about(key: str) -> str:
        return "" if batch is None else f"message {batch.messages[int(key[1:])].id}: "

    found = [
        (
            logging.INFO if result.gone else logging.ERROR,
            f"{about(result.key)}{result.code} {result.message or ''}",
        )
        for run in runs
        for result in run.failed()
    ]
    return found + [
        (logging.ERROR, f"left for the RedrivePolicy: {why}") for why in (refused or {}).values()
    ]


def tally(closing: Closing, first: BatchRun, second: BatchRun) -> dict[str, int]:
    """Counters for a settled batch, from what SQS accepted entry by entry.

    A message whose receipt had expired "may be redelivered": it is counted apart from real
    failures, and neither is counted as settled. Dead letters are also counted by reason
    (`dead_lettered:<reason>`, for the metrics).
    """
    counts = dict(_ZEROS)
    failed: dict[int, list[bool]] = {}
    for result in (*first.failed(), *second.failed()):
        failed.setdefault(int(result.key[1:]), []).append(result.gone)
    if not failed and not closing.entries.refused:  # every entry accepted: count kinds in bulk
        for kind, name in _COUNTER.items():
            counts[name] += closing.kinds.count(kind)
        if counts["dead_lettered"]:
            _count_reasons(counts, closing, range(len(closing.kinds)))
        return counts
    for index, kind in enumerate(closing.kinds):
        if index in closing.entries.refused:
            counts["settle_failures"] += 1
        elif index not in failed:
            counts[_COUNTER[kind]] += 1
            if kind is ActionKind.DEAD_LETTER:
                _count_reasons(counts, closing, [index])
        elif all(failed[index]):
            counts["expired_receipts"] += 1
        else:
            counts["settle_failures"] += 1
    return counts


def acked_tally(size: int) -> dict[str, int]:
    """`tally` of a batch acked in bulk whose deletes SQS all accepted at once."""
    return {**_ZEROS, "acked": size}


_ZEROS = {name: 0 for name in _COUNTER.values()} | {
    "batches": 1,
    "expired_receipts": 0,
    "settle_failures": 0,
}


def _count_reasons(counts: dict[str, int], closing: Closing, indexes: Iterable[int]) -> None:
    """`dead_lettered:<reason>` for each message of `indexes` copied to the DLQ."""
    for index in indexes:
        if closing.kinds[index] is ActionKind.DEAD_LETTER:
            key = reason_key(closing.reasons.get(index, RETRIES_EXHAUSTED))
            counts[key] = counts.get(key, 0) + 1
