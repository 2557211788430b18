"""Moves an operator asks for: `move_now` (ours, per message) and `start_native_move` (SQS's).

`move_now` ignores the backoff and `max_redrives`: it moves every selected message now (but,
unless `reasons` says otherwise, those dead-lettered as `expired` or `invalid_body`, which would
die again: they stay, reported as `kept`), with the same copy the daemon makes (body,
attributes, FIFO group, id and timestamp kept, one more redrive, a fresh retry budget), send
before delete. Messages it looks at but does not move are released (visibility 0) before it
returns, so a dry run leaves the DLQ as it found it, save that each message's receive count
went up by one.

`start_native_move` starts SQS's own `StartMessageMoveTask`: server-side, no per-message
backoff, no sqsbatch metadata update.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from redrive.daemon import execute, only_source
from redrive.decide import Disposition, DlqMessage, Kind, read, route
from redrive.plan import MoveRow, Step, StepResult
from redrive.reasons import BRING_BACK_DEFAULT, Reasons
from redrive.report import MoveReport
from sqsbatch._core.calls import BatchRun, Entry
from sqsbatch._core.envelope import DecodedMessage
from sqsbatch._core.intake import receive_messages
from sqsbatch._core.shapes import queue_name
from sqsbatch._sync.door import SyncSqs, default_client
from sqsbatch.config import check_int
from sqsbatch.errors import ConfigError, QueueNotFound

__all__ = ["check_destination", "move_now", "start_native_move"]

RECEIVE_WAIT_SECONDS = 1
"""A short long poll: enough for SQS to look at every server, short for the last, empty one."""
HOLD_SECONDS = 120
"""How long a message looked at stays hidden while the move runs (released at the end)."""
MAX_NATIVE_RATE = 500


def move_now(
    dlq: str,
    *,
    to: str | None = None,
    select: Callable[[DecodedMessage], bool] | None = None,
    limit: int | None = None,
    dry_run: bool = False,
    client: Any = None,
    on_message: Callable[[MoveRow], None] | None = None,
    reasons: Iterable[str] | None = None,
    stop: Callable[[], bool] | None = None,
) -> MoveReport:
    """Move the messages of `dlq` that `select` accepts (all by default) now, up to `limit`.

    `to` sends every message there; without it each goes to its source, found as the daemon
    finds it (metadata, `DeadLetterQueueSourceArn`, the DLQ's only source). `on_message` is
    called with each message's row as it is settled (for a progress bar). `reasons`: the
    dead-letter reasons to move, as the daemon's (`redrive.reasons`; default: all but
    `expired` and `invalid_body`).
    `stop` is asked between batches: True ends the move there (its report says what moved).
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigError(f"limit={limit!r} is invalid (accepted: int >= 0, or None for all)")
    check_destination(dlq, to)
    chosen = Reasons.of(reasons)
    sqs = SyncSqs(client if client is not None else default_client())
    move = _Move(sqs, sqs.queue_url(dlq), select, limit, dry_run, on_message, chosen)
    move.to_url = sqs.queue_url(to) if to is not None else None
    move.stop = stop
    try:
        move.run()
    finally:
        move.release()
    return move.report


@dataclass
class _Move:
    sqs: SyncSqs
    dlq_url: str
    select: Callable[[DecodedMessage], bool] | None
    limit: int | None
    dry_run: bool
    on_message: Callable[[MoveRow], None] | None
    reasons: Reasons = BRING_BACK_DEFAULT
    to_url: str | None = None
    report: MoveReport = field(default_factory=MoveReport)
    held: dict[str, str] = field(default_factory=dict)
    """MessageId: receipt handle of every message looked at and not moved."""
    taken: int = 0
    stop: Callable[[], bool] | None = None
    """Asked between batches: True ends the move (an operator's Ctrl-C)."""
    _only: tuple[str | None] | None = None

    def run(self) -> None:
        self.report.dry_run = self.dry_run
        seen: set[str] = set()
        while self.limit is None or self.taken < self.limit:
            if self.stop is not None and self.stop():
                return
            raw = self.sqs.run(
                receive_messages(
                    self.dlq_url,
                    asked=10,
                    wait_seconds=RECEIVE_WAIT_SECONDS,
                    visibility=HOLD_SECONDS,
                )
            )
            messages = [read(item) for item in raw]
            fresh = [m for m in messages if m.message_id not in seen]
            for again in (m for m in messages if m.message_id in seen):
                self.held[again.message_id] = again.receipt_handle
            if not fresh:
                return
            seen.update(m.message_id for m in fresh)
            self._batch(fresh)

    def _batch(self, messages: list[DlqMessage]) -> None:
        moves: list[Step] = []
        for message in messages:
            if self.limit is not None and self.taken >= self.limit:
                self.held[message.message_id] = message.receipt_handle  # not looked at
                continue
            row = self._look(message)
            if row is None:
                disposition = Disposition(Kind.MOVE, target=self._target(message))
                moves.append(Step(message, disposition, target_url=disposition.target))
                continue
            self.held[message.message_id] = message.receipt_handle
            self._record(row)
        for outcome in execute(self.sqs, moves, dlq_url=self.dlq_url) if moves else []:
            self._settled(outcome)

    def _look(self, message: DlqMessage) -> MoveRow | None:
        """The row of a message that is not moved, or None when it is to be moved."""
        source = self._source(message)
        target = self._target(message)
        error = message.message.envelope.error
        row = MoveRow(
            message.message.id,
            source,
            None,
            error.type if error else None,
            "skipped",
            reason=message.reason,
        )
        if self.select is not None and not self.select(message.message):
            return row
        if not self.reasons.brings_back(message.reason):
            return replace(row, action="kept")
        if target is None:
            why = "no existing source queue known; pass to="
            return replace(row, action="unroutable", error=why)
        self.taken += 1
        if self.dry_run:
            return replace(row, target=queue_name(target), action="would-move")
        return None

    def _settled(self, outcome: StepResult) -> None:
        message = outcome.step.message
        if not outcome.ok:
            self.held[message.message_id] = message.receipt_handle
        self._record(outcome.row(source=self._source(message)))

    def _record(self, row: MoveRow) -> None:
        if row.action in ("moved", "would-move"):
            self.report.moved += 1
        elif row.action in ("failed", "unroutable"):
            self.report.failed += 1
        elif row.action == "skipped":
            self.report.skipped += 1
        elif row.action == "kept":
            self.report.kept += 1
        if row.error and row.action == "moved":
            self.report.failed += 1
        self.report.rows.append(row)
        if self.on_message is not None:
            self.on_message(row)

    def _target(self, message: DlqMessage) -> str | None:
        return self.to_url or self._source_url(message)

    def _source(self, message: DlqMessage) -> str | None:
        url = self._source_url(message)
        return queue_name(url) if url else None

    def _source_url(self, message: DlqMessage) -> str | None:
        known = message.known_source
        if known is not None:
            try:
                return self.sqs.queue_url(known)
            except QueueNotFound:
                return None  # reported as unroutable
        if self._only is None:
            self._only = (only_source(self.sqs, self.dlq_url),)
        return route(message, only_source=self._only[0], fallback=None)

    def release(self) -> None:
        """Make every message looked at and not moved visible again."""
        entries = [
            Entry(mid, "change_message_visibility_batch", self.dlq_url, _release(receipt))
            for mid, receipt in self.held.items()
        ]
        self.held.clear()
        if entries:
            self.sqs.execute(BatchRun(entries))


def start_native_move(
    dlq: str, *, to: str | None = None, rate: int | None = None, client: Any = None
) -> str:
    """Start SQS's `StartMessageMoveTask` from `dlq`; returns its `TaskHandle`.

    Without `to`, SQS sends each message back to the queue its RedrivePolicy moved it from:
    messages the sqsbatch consumer dead-lettered itself have no such queue, so give `to`.
    `rate` caps messages per second (1..500); SQS picks a rate when it is not given.
    """
    if rate is not None:
        check_int("rate", rate, 1, MAX_NATIVE_RATE)
    check_destination(dlq, to)
    sqs = SyncSqs(client if client is not None else default_client())
    params: dict[str, Any] = {"SourceArn": _arn(sqs, dlq)}
    if to is not None:
        params["DestinationArn"] = _arn(sqs, to)
    if rate is not None:
        params["MaxNumberOfMessagesPerSecond"] = rate
    return str(sqs.call("start_message_move_task", params, queue=queue_name(dlq))["TaskHandle"])


def check_destination(dlq: str, to: str | None) -> None:
    """`to` (a name, URL or ARN) may not be the DLQ itself: a move there would go round in
    circles (every copy is a new message to move again)."""
    if to is not None and _name(to) == _name(dlq):
        raise ConfigError(f"to={to!r} is the dead-letter queue itself: nothing would leave it")


def _name(queue: str) -> str:
    return queue.rsplit(":", 1)[-1] if queue.startswith("arn:") else queue_name(queue)


def _arn(sqs: SyncSqs, queue: str) -> str:
    if queue.startswith("arn:"):
        return queue
    params = {"QueueUrl": sqs.queue_url(queue), "AttributeNames": ["QueueArn"]}
    return str(sqs.call("get_queue_attributes", params)["Attributes"]["QueueArn"])


def _release(receipt: str) -> dict[str, Any]:
    return {"ReceiptHandle": receipt, "VisibilityTimeout": 0}
