"""The consumer's decisions that every front end shares, without I/O.

Sync poller, async poller and Lambda adapter differ only in how they wait and call SQS; what
they receive, hide, settle and count is decided here.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqsbatch.batching import BatchWindow
from sqsbatch.calls import BatchRun, Entry
from sqsbatch.config import ConsumerConfig
from sqsbatch.envelope import DecodedMessage, decode
from sqsbatch.errors import ConfigError
from sqsbatch.lifecycle import Counters
from sqsbatch.limits import SQS_LIMITS, SqsLimits
from sqsbatch.message import LazyView, MessageBatch, _Delivery
from sqsbatch.outbox import Settlement, is_premature, postponement, settlement
from sqsbatch.settlement import (
    ActionKind,
    LastFailure,
    Outcome,
    Verdict,
    settle,
    visibility_allowed,
)

__all__ = [
    "Assembly",
    "ConsumerStats",
    "HandlerEnd",
    "Received",
    "Watch",
    "check_handler",
    "connections_for",
    "failure_of",
    "handler_end",
    "heartbeat_entries",
    "is_async_handler",
    "next_heartbeat",
    "plan_settlement",
    "refusals",
    "sent_keys",
    "split_deliveries",
    "split_received",
]


@dataclass
class ConsumerStats(Counters):
    """Counters a consumer keeps; safe to read from any thread."""

    received: int = 0
    batches: int = 0
    acked: int = 0
    retried: int = 0
    dead_lettered: int = 0
    dropped: int = 0
    left_to_redrive_policy: int = 0
    postponed: int = 0
    expired_receipts: int = 0
    settle_failures: int = 0
    receive_errors: int = 0
    handler_errors: int = 0
    handler_timeouts: int = 0


@dataclass
class Received:
    """One receive, decoded: deliveries for a batch and early hops to postpone."""

    deliveries: list[_Delivery]
    postpone: Settlement | None


def split_received(
    raw: Sequence[Mapping[str, Any]],
    *,
    queue_url: str,
    received_at: float,
    visibility: int,
    wall_now: float,
    limits: SqsLimits = SQS_LIMITS,
) -> Received:
    """Decode a `ReceiveMessage` answer; messages that are not due yet are not delivered."""
    deliveries = [
        _Delivery(decode(item), str(item["ReceiptHandle"]), received_at, received_at + visibility)
        for item in raw
    ]
    return split_deliveries(deliveries, queue_url=queue_url, wall_now=wall_now, limits=limits)


def split_deliveries(
    deliveries: Sequence[_Delivery],
    *,
    queue_url: str,
    wall_now: float,
    limits: SqsLimits = SQS_LIMITS,
) -> Received:
    """Received messages for a batch, and a re-send for those not due yet (delay hops)."""
    early = [d for d in deliveries if d.due_at is not None and is_premature(d.decoded, wall_now)]
    if not early:
        return Received(list(deliveries), None)
    pairs = [(d.decoded, d.receipt_handle) for d in early]
    postpone = postponement(pairs, queue_url=queue_url, wall_now=wall_now, limits=limits)
    held = {id(d) for d in early}
    return Received([d for d in deliveries if id(d) not in held], postpone)


def connections_for(config: ConsumerConfig) -> int:
    """HTTP connections a poller needs: a long poll per receiver, a heartbeat and settlement per
    batch (a slot does one at a time; the room to spare is for `receivers` growing)."""
    return config.max_concurrency * 2 + 2


def is_async_handler(handler: object) -> bool:
    """Whether calling `handler` gives an awaitable: an `async def` function or `__call__`."""
    call = getattr(handler, "__call__", None)  # noqa: B004 - an async __call__ counts too
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


def check_handler(handler: object, *, is_async: bool | None = None) -> None:
    """A handler must be callable with the batch as its one positional argument, and of the
    flavour the front end runs (`is_async`; None: either). One-line `ConfigError` otherwise."""
    if not callable(handler):
        raise ConfigError(f"handler {handler!r} is not callable")
    name = getattr(handler, "__qualname__", None) or repr(handler)
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):  # no signature to read (some builtins): trust it
        signature = None
    if signature is not None:
        try:
            signature.bind(None)
        except TypeError:
            raise ConfigError(
                f"handler {name}{signature} cannot take the batch as its one positional "
                "argument: write it as def handler(batch)"
            ) from None
    if is_async is True and not is_async_handler(handler):
        raise ConfigError(f"handler {name} is not `async def`: use Consumer for sync handlers")
    if is_async is False and is_async_handler(handler):
        raise ConfigError(f"handler {name} is `async def`: use AsyncConsumer (or lambda_handler)")


@dataclass
class Assembly:
    """The receives that fill one batch: how many to ask for, how long to wait, when to stop.

    `surplus`: the receiver assembling it is one more than demand allows now (`receivers`), so
    an empty receive ends assembly instead of waiting on; the shell sets it after each receive.
    `idle_seconds` (run until idle) caps the wait of an empty window by what is left before the
    poller counts as idle.
    """

    window: BatchWindow[_Delivery]
    idle_seconds: float | None
    surplus: bool = False

    def next_receive(
        self, now: float, idle_for: float, *, stopping: bool
    ) -> tuple[int, int] | None:
        """(MaxNumberOfMessages, WaitTimeSeconds) of the next receive; None: the batch goes now."""
        if self.window.is_due(now):
            return None
        if stopping and not self.window.is_open:
            return None  # stopped: receive nothing new (a partial batch is still delivered)
        cap = None
        if self.idle_seconds is not None:
            cap = self.idle_seconds - idle_for
            if not self.window.is_open and cap <= 0:
                return None
        return self.window.want(), self.window.wait_seconds(now, cap=cap)

    def add(self, received: list[_Delivery], *, asked: int, now: float, stopping: bool) -> bool:
        """Record one receive; False when assembly ends before the batch is due."""
        self.window.add(received, asked=asked, now=now)
        return not (stopping or (self.surplus and not self.window.is_open))


def receive_visibility(
    config: ConsumerConfig, window_left: float, limits: SqsLimits = SQS_LIMITS
) -> int:
    """Hidden through what is left of the batch window, then `visibility_timeout`."""
    hidden = config.visibility_timeout + math.ceil(window_left)
    return min(limits.visibility_ceiling_seconds, hidden)


def next_heartbeat(deliveries: Iterable[_Delivery], visibility_timeout: int) -> float:
    """When the heartbeat is next due: half a visibility timeout before the first expiry of a
    message that can still be extended (`math.inf` when none can)."""
    due = [d.hidden_until - visibility_timeout / 2 for d in deliveries if not d.at_ceiling]
    return min(due, default=math.inf)


def heartbeat_entries(
    deliveries: Sequence[_Delivery],
    *,
    queue_url: str,
    now: float,
    visibility_timeout: int,
    limits: SqsLimits = SQS_LIMITS,
) -> list[Entry]:
    """Visibility extensions due now, never past the ceiling counted from each receive.

    Every message of a running batch stays hidden, acked ones too: they are deleted only when the
    batch settles, and must not be redelivered before. An extension clamped by the ceiling is the
    message's last (it is marked `at_ceiling`); one that would gain nothing is not sent.
    """
    entries = []
    for index, delivery in enumerate(deliveries):
        if delivery.at_ceiling or delivery.hidden_until - now > visibility_timeout / 2:
            continue
        seconds = min(visibility_timeout, visibility_allowed(delivery.received_at, now, limits))
        if seconds < visibility_timeout:
            delivery.at_ceiling = True
            if now + seconds <= delivery.hidden_until:
                continue  # SQS will show it again at the ceiling; nothing can stop that
        params = {"ReceiptHandle": delivery.receipt_handle, "VisibilityTimeout": seconds}
        key = f"{index}:{seconds}"
        entries.append(Entry(key, "change_message_visibility_batch", queue_url, params))
    return entries


def extended(deliveries: Sequence[_Delivery], run: BatchRun, now: float) -> int:
    """Record the extensions SQS accepted; returns how many receipts had expired."""
    for result in run.ok():
        index, seconds = result.key.split(":")
        deliveries[int(index)].hidden_until = now + int(seconds)
    gone = [result for result in run.failed() if result.gone]
    for result in gone:
        deliveries[int(result.key.split(":")[0])].at_ceiling = True  # nothing left to extend
    return len(gone)


@dataclass(frozen=True)
class Watch:
    """A running handler's supervisor: when it next wakes (heartbeat) and when it gives up."""

    deadline: float
    visibility_timeout: int

    @classmethod
    def start(cls, now: float, config: ConsumerConfig) -> Watch:
        return cls(now + config.handler_timeout, config.visibility_timeout)

    def timed_out(self, now: float) -> bool:
        return now >= self.deadline

    def wake_at(self, deliveries: Iterable[_Delivery]) -> float:
        """The next heartbeat, or the deadline when it comes first."""
        return min(self.deadline, next_heartbeat(deliveries, self.visibility_timeout))


@dataclass(frozen=True)
class HandlerEnd:
    """How a handler call ended, what to count and what to log (with `error`'s traceback)."""

    outcome: Outcome
    error: BaseException | None
    counts: dict[str, int]
    log: tuple[int, str] | None


LOGGED_IDS = 5
"""How many message ids a failed batch's log line names."""


def handler_end(
    batch: MessageBatch, config: ConsumerConfig, *, timed_out: bool, error: BaseException | None
) -> HandlerEnd:
    """Past the deadline the batch failed, whatever the handler does later; else raise or return."""
    if timed_out:
        note = f"handler for {batch.queue} ran past {config.handler_timeout:g} s{_which(batch)}"
        return HandlerEnd(Outcome.TIMED_OUT, None, {"handler_timeouts": 1}, (logging.ERROR, note))
    if error is not None:
        note = f"handler for {batch.queue} raised {error!r}{_which(batch)}"
        return HandlerEnd(Outcome.RAISED, error, {"handler_errors": 1}, (logging.WARNING, note))
    return HandlerEnd(Outcome.RETURNED, None, {}, None)


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


@dataclass
class Plan:
    settlement: Settlement
    kinds: list[ActionKind]


def plan_settlement(
    batch: MessageBatch,
    outcome: Outcome,
    error: BaseException | None,
    config: ConsumerConfig,
    *,
    queue_url: str,
    dlq_url: str | None,
    last_failure: LastFailure,
    now: float,
    wall_now: float,
    fifo: bool,
    limits: SqsLimits = SQS_LIMITS,
    acks_free: bool = False,
) -> Plan:
    """Seal the batch and decide what happens to each of its messages.

    `acks_free`: the front end deletes acked messages without being told (Lambda deletes every
    record left out of `batchItemFailures`), so an acked message gets no entry; every other
    entry, and `kinds`, are the same. A batch that every message leaves acked is decided in bulk.
    On a FIFO queue acks keep their entries but for that bulk case: an ack behind a failure of
    its group is reported to Lambda, and deleted by the front end itself.
    """
    ledger = batch._ledger
    ledger.seal()
    size = len(batch._deliveries)
    if acks_free:
        uniform = ledger.uniform(outcome)
        if uniform is not None and uniform.verdict is Verdict.ACK:
            return Plan(Settlement([], [], {}), [ActionKind.DELETE] * size)
    actions = settle(
        batch._settled(),
        ledger.decisions(outcome),
        max_retries=config.max_retries,
        retry_delay=config.retry_delay,
        last_failure=last_failure,
        failure=failure_of(outcome, error, config.handler_timeout),
        now=now,
        wall_now=wall_now,
        fifo=fifo,
        limits=limits,
        with_acks=fifo or not acks_free,
    )
    plan = settlement(
        LazyView(batch._deliveries, _pair),
        actions,
        queue_url=queue_url,
        queue=batch.queue,
        dlq_url=dlq_url,
        wall_now=wall_now,
        fifo=fifo,
        limits=limits,
    )
    kinds = [ActionKind.DELETE] * size
    for action in actions:
        kinds[action.index] = action.kind
    return Plan(plan, kinds)


def _pair(delivery: _Delivery) -> tuple[DecodedMessage, str]:
    return delivery.decoded, delivery.receipt_handle


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


_LAST_FAILURE_LOG = {
    ActionKind.DROP: "deleted, the queue has no RedrivePolicy and no dead_letter_queue",
    ActionKind.LEAVE: "left for the queue's RedrivePolicy, no dead-letter queue is known",
}


def drops(batch: MessageBatch, plan: Plan) -> list[str]:
    """A log line per message whose last delivery failed and that was deleted (the queue has no
    RedrivePolicy, no DLQ is configured) or left to the queue's RedrivePolicy."""
    messages = batch.messages
    return [
        f"message {messages[index].id} of {batch.queue} failed its last delivery (attempt "
        f"{messages[index].attempts}): {_LAST_FAILURE_LOG[kind]}"
        for index, kind in enumerate(plan.kinds)
        if kind is ActionKind.DROP or kind is ActionKind.LEAVE  # no hash of each kind
    ]


def tally(plan: Plan, first: BatchRun, second: BatchRun) -> dict[str, int]:
    """Counters for a settled batch, from what SQS accepted entry by entry.

    A message whose receipt had expired "may be redelivered": it is counted apart from real
    failures, and neither is counted as settled.
    """
    counts = {name: 0 for name in _COUNTER.values()}
    counts |= {"batches": 1, "expired_receipts": 0, "settle_failures": 0}
    failed: dict[int, list[bool]] = {}
    for result in (*first.failed(), *second.failed()):
        failed.setdefault(int(result.key[1:]), []).append(result.gone)
    for index, kind in enumerate(plan.kinds):
        if index in plan.settlement.refused:
            counts["settle_failures"] += 1
        elif index not in failed:
            counts[_COUNTER[kind]] += 1
        elif all(failed[index]):
            counts["expired_receipts"] += 1
        else:
            counts["settle_failures"] += 1
    return counts
