"""Intake: every step between SQS and a handler, written once for every front end. No I/O.

Messages reach a handler from a receive (both pollers: `receive`, over `receiving.Answer`) or
from a Lambda event (`sqsbatch._core.lambda_records.EventRecords`). Either way they are `Arrivals`,
and `intake` takes them through the same steps, in this order:

1. split: the delay hops received before their due time are set apart
   (`receiving.split_deliveries`);
2. postpone: they are re-sent for the time still to wait (`flows.postpone`); a poller deletes
   the originals, Lambda deletes what it is not told about;
3. fetch: large payloads in S3 (a message with `ExtendedPayloadSize`) fetched, one `GetObject`
   each (`fetching.fetch`); a pointer whose object is gone joins the screened-out messages
   (`payload_missing`), one S3 would not give now is left for SQS (`Taken.unread`);
4. screen: messages past their deadline or with an invalid body (`screening.screen`) are
   dead-lettered before any handler (`screening.close_screened`, settled by `flows.settle`, or
   by `flows.settle_for_lambda`).

A step to come (an idempotency check, a payload fetched from S3, an envelope unwrapped) goes
in `intake`, once, and every front end takes it. A step reads deliveries; `Arrivals` makes them
only when a step needs them, so that a Lambda event no step applies to stays one lazy message
per record.

The redrive daemon receives with the same `receive_messages` flow and takes a DLQ's messages as
they are (it decides on each itself: `redrive.decide`). A failure is decided once for every loop
(`ReceiveErrors.after`): fatal when the queue is gone or the credentials are refused, else a
pause that grows with each failure in a row.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from sqsbatch._core.closing import Closing
from sqsbatch._core.context import QueueContext
from sqsbatch._core.delays import Uniform, pause_seconds
from sqsbatch._core.fetching import Fetching, PayloadStore, fetch
from sqsbatch._core.flows import Flow, Line, Request, Settled, postpone, settle, settle_for_lambda
from sqsbatch._core.message import MessageBatch, _Delivery, deliveries_of
from sqsbatch._core.receiving import Answer, split_deliveries
from sqsbatch._core.screening import Doomed, Screen, close_screened, screen
from sqsbatch._core.shapes import is_transient, receive_params
from sqsbatch.errors import SqsBatchError
from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = [
    "Arrivals",
    "ReceiveErrors",
    "Received",
    "Screening",
    "Taken",
    "intake",
    "nothing_to_take",
    "receive",
    "receive_messages",
]

B = TypeVar("B")
B_co = TypeVar("B_co", covariant=True)


class Arrivals(Protocol[B_co]):
    """Messages on their way to a handler, as intake reads them: a receive's (`Answer`) or a
    Lambda event's records (`EventRecords`), each delivery made only when a step reads it."""

    @property
    def queue_url(self) -> str: ...

    def hops(self) -> Sequence[_Delivery]:
        """The deliveries that carry a due time (delay hops, early or not)."""
        ...

    def deadlines(self) -> bool:
        """Whether any message carries its producer's deadline (`ttl_seconds`)."""
        ...

    def offloaded(self) -> bool:
        """Whether any message is a large payload's pointer (`ExtendedPayloadSize`)."""
        ...

    def deliveries(self, early: Sequence[_Delivery]) -> list[_Delivery]:
        """A delivery for every message, in order, but the `early` ones."""
        ...

    def batch(self, live: list[_Delivery] | None, early: Sequence[_Delivery]) -> B_co:
        """What the handler gets: `live` once screened; None: every message but the `early`."""
        ...


@dataclass(frozen=True)
class Screening:
    """What intake screens with: the queue (where the DLQ is) and the consumer's `Screen`."""

    context: QueueContext
    screen: Screen = field(default_factory=Screen)
    payloads: PayloadStore | None = None
    """Where large payloads are fetched from (`sqsbatch._shell.payload_store`): every front end
    but `sqsbatch.testing` has one."""


@dataclass(slots=True)
class Taken(Generic[B]):
    """What intake concluded: what goes to the handler, and what it did with the rest."""

    batch: B
    counts: dict[str, int]
    early: int = 0
    """How many delay hops came before their due time (postponed, or not re-sent)."""
    unsent: Sequence[_Delivery] = ()
    """Early hops whose re-send SQS refused: they stay (hidden) and come back."""
    refused: Sequence[_Delivery] = ()
    """Lambda: messages to dead-letter whose copy SQS refused (reported, so they come back)."""
    doomed: Sequence[Doomed] = ()
    """The messages screened out, each with why (dead-lettered before their handler)."""
    line: Line | None = None
    """The messages dead-lettered before their handler (`_doomed_line`)."""
    unread: Sequence[_Delivery] = ()
    """Large payloads S3 would not give now: left for SQS (Lambda: reported, so they come back)."""


def intake(
    arrivals: Arrivals[B],
    screening: Screening | None,
    *,
    wall_clock: Callable[[], float],
    for_lambda: bool = False,
    limits: SqsLimits = SQS_LIMITS,
) -> Flow[Taken[B]]:
    """The steps between SQS and the handler, in order (the module's docstring). `for_lambda`:
    the originals of re-sent hops are left to Lambda, and a copy SQS refused is reported."""
    counts: dict[str, int] = {}
    early: Sequence[_Delivery] = ()
    unsent: Sequence[_Delivery] = ()
    if hops := arrivals.hops():
        early, unsent = yield from _postpone_early(
            hops,
            arrivals.queue_url,
            counts,
            wall_now=wall_clock(),
            delete=not for_lambda,
            limits=limits,
        )
    fetched = yield from _fetch(arrivals, early, screening, counts, wall_now=wall_clock())
    if screening is None or (
        fetched is None and screening.screen.idle and not arrivals.deadlines()
    ):
        batch = arrivals.batch(None, early)  # nothing here can be screened out
        return Taken(batch, counts, len(early), unsent)
    how, context = screening.screen, screening.context
    arrived = arrivals.deliveries(early) if fetched is None else fetched.live
    found = screen(arrived, how, wall_now=wall_clock(), queue=context.name)
    taken = Taken(arrivals.batch(found.live, early), counts, len(early), unsent)
    if fetched is not None:
        found.doomed[:0] = fetched.doomed
        taken.unread = fetched.unread
    if found.doomed:
        yield from _dead_letter(
            found.doomed,
            context,
            taken,
            wall_now=wall_clock(),
            for_lambda=for_lambda,
            limits=limits,
        )
    if fetched is not None and fetched.lines:
        taken.line = _joined(taken.line, fetched.lines)
    return taken


def _fetch(
    arrivals: Arrivals[Any],
    early: Sequence[_Delivery],
    screening: Screening | None,
    counts: dict[str, int],
    *,
    wall_now: float,
) -> Flow[Fetching | None]:
    """Step 3 (`fetching.fetch`), when a message is a large payload's pointer; else None."""
    if screening is None or screening.payloads is None or not arrivals.offloaded():
        return None
    context = screening.context
    fetched = yield from fetch(
        arrivals.deliveries(early),
        screening.payloads,
        queue=context.name,
        wall_now=wall_now,
        fifo=context.fifo,
    )
    counts |= fetched.counts
    return fetched


def _joined(line: Line | None, lines: list[Line]) -> Line:
    """One line of several: the highest level, the texts joined."""
    every = ([line] if line is not None else []) + lines
    return max(level for level, _ in every), "; ".join(text for _, text in every)


def nothing_to_take(screening: Screening | None) -> bool:
    """Whether `intake` would leave messages that carry no message attributes as they came: no
    delay hop or deadline can be on them (sqsbatch's attribute is absent) and nothing screens
    (no `max_message_age`, no `body_model`, no `envelope` to unwrap: `Screen.idle`).
    The Lambda adapter's short path (`sqsbatch._lambda_hot`) runs only then, so a step added
    to `intake` says here too whether it applies to such messages. Fetching large payloads
    does not: a pointer always carries its size attribute (`ExtendedPayloadSize`)."""
    return screening is None or screening.screen.idle


def _postpone_early(
    hops: Sequence[_Delivery],
    queue_url: str,
    counts: dict[str, int],
    *,
    wall_now: float,
    delete: bool,
    limits: SqsLimits,
) -> Flow[tuple[Sequence[_Delivery], Sequence[_Delivery]]]:
    """Re-send the hops not due yet; (those early hops, those of them SQS refused)."""
    split = split_deliveries(hops, queue_url=queue_url, wall_now=wall_now, limits=limits)
    if split.postpone is None:
        return (), ()
    postponed = yield from postpone(split.postpone, delete=delete, limits=limits)
    counts["postponed"] = postponed.sent
    return split.early, [split.early[index] for index in postponed.unsent]


def _dead_letter(
    doomed: list[Doomed],
    context: QueueContext,
    taken: Taken[Any],
    *,
    wall_now: float,
    for_lambda: bool,
    limits: SqsLimits,
) -> Flow[None]:
    """Settle the screened-out messages as a batch of their own, into `taken`."""
    batch, closing = close_screened(doomed, context, wall_now=wall_now)
    settling = settle_for_lambda if for_lambda else settle
    settled = yield from settling(closing, batch, limits)
    taken.doomed = doomed
    taken.counts |= _doomed_counts(settled)
    taken.line = _doomed_line(batch, closing, settled)
    taken.refused = [deliveries_of(batch)[index] for index in settled.listed]


def _doomed_counts(settled: Settled) -> dict[str, int]:
    """Counters for messages dead-lettered before their handler (not a batch of their own)."""
    return {key: value for key, value in settled.counts.items() if key != "batches" and value}


def _doomed_line(batch: MessageBatch, closing: Closing, settled: Settled) -> Line:
    """One line for the messages dead-lettered before their handler: a WARNING (an ERROR when
    SQS refused some of it) with each reason and the first ids (`notices`)."""
    level = max([logging.WARNING, *(level for level, _ in settled.lines)])
    texts = [text for _, text in settled.lines]
    if not texts:  # nothing settled, nothing refused: cannot happen, but say what was meant
        texts = [f"{batch.queue}: {len(batch.messages)} to dead-letter before the handler"]
    return level, "; ".join(texts)


# -- receiving -------------------------------------------------------------------------------------


@dataclass
class ReceiveErrors:
    """Consecutive failures of a loop (a receive; the redrive daemon's pass), for the pause
    after each: the same decision in every loop."""

    failures: int = 0
    base_seconds: float = 0.2
    """The first pause's step (`backoff.pause_seconds`)."""

    def after(self, error: SqsBatchError, random: Uniform) -> float | None:
        """The pause after `error`, one failure more in a row; None when it is fatal (the queue
        is gone or the credentials are refused: the loop stops and raises it)."""
        if not is_transient(error):
            return None
        self.failures += 1
        return pause_seconds(self.failures, random=random, base=self.base_seconds)


@dataclass(slots=True)
class Received:
    """What one receive concluded."""

    deliveries: list[_Delivery]
    counts: dict[str, int]
    pause: float = 0.0
    """A transient failure: wait this long (interruptibly) before the next receive."""
    fatal: SqsBatchError | None = None
    """The queue is gone or the credentials are refused: the loop stops and raises it."""
    line: Line | None = None


def receive_messages(
    queue_url: str,
    *,
    asked: int,
    wait_seconds: int,
    visibility: int,
    queue: str | None = None,
    attempt_id: str | None = None,
) -> Flow[list[dict[str, Any]]]:
    """One `ReceiveMessage`: the messages as SQS returned them. A failure raises (`queue` is
    the name it gives; default: the one in `queue_url`). `attempt_id`: a FIFO queue's
    `ReceiveRequestAttemptId` (`_core.receive_attempts`)."""
    params = receive_params(
        queue_url,
        max_messages=asked,
        wait_seconds=wait_seconds,
        visibility_timeout=visibility,
        attempt_id=attempt_id,
    )
    answer = yield Request("receive_message", params, queue)
    messages: list[dict[str, Any]] = answer.get("Messages", [])
    return messages


def receive(
    queue: str,
    queue_url: str,
    *,
    asked: int,
    wait_seconds: int,
    visibility: int,
    received_at: float,
    wall_clock: Callable[[], float],
    errors: ReceiveErrors,
    random: Uniform,
    limits: SqsLimits = SQS_LIMITS,
    screening: Screening | None = None,
    attempt_id: str | None = None,
) -> Flow[Received]:
    """A poller's receive: `receive_messages`, then `intake` (early hops postponed; with
    `screening`, messages past their deadline or with an invalid body dead-lettered).

    `received_at` is the monotonic time taken before the call (the 12 h ceiling counts from it);
    `wall_clock()` is read after the answer, to tell early hops. A transient failure asks for a
    pause (exponential, with jitter); a permanent one is fatal (`ReceiveErrors.after`).
    `attempt_id`: a FIFO queue's `ReceiveRequestAttemptId`, the same when the poller sends a
    failed receive again (`_core.receive_attempts`).
    """
    try:
        raw = yield from receive_messages(
            queue_url,
            asked=asked,
            wait_seconds=wait_seconds,
            visibility=visibility,
            attempt_id=attempt_id,
        )
    except SqsBatchError as exc:
        return _failed(queue, exc, errors, random)
    errors.failures = 0
    answer = Answer(raw, queue_url=queue_url, received_at=received_at, visibility=visibility)
    taken = yield from intake(answer, screening, wall_clock=wall_clock, limits=limits)
    counts = {"received": len(raw) - taken.early} | taken.counts
    return Received(taken.batch, counts, line=taken.line)


def _failed(queue: str, error: SqsBatchError, errors: ReceiveErrors, random: Uniform) -> Received:
    pause = errors.after(error, random)
    if pause is None:  # the queue is gone, or the credentials are refused
        return Received([], {"receive_errors": 1}, fatal=error)
    line = (logging.WARNING, f"receive from {queue} failed ({error}); retrying in {pause:.1f} s")
    return Received([], {"receive_errors": 1}, pause=pause, line=line)
