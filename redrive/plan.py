"""Dispositions into batch calls, and batch results into per-message results. No I/O.

Phase one sends the copies (moves and parks) and hides what stays; phase two deletes from the
DLQ exactly the messages whose copy SQS accepted. A crash between the phases leaves the message
in both queues (a duplicate), never in neither.

A moved copy keeps body, user attributes, content type, FIFO group, id and timestamp; its
envelope gets `redrives + 1`, a fresh retry budget (`base_attempts = 0`), the queue it now
lives in as `source_queue`, and no error (a later dead-lettering records its own). A parked
copy keeps the envelope as it was, so the error and the source stay readable there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from redrive.decide import Disposition, DlqMessage, Kind
from sqsbatch._core.calls import BatchRun, Entry, EntryResult
from sqsbatch._core.closing import sent_keys
from sqsbatch._core.entries import TwoPhase, copy_of, send_entry
from sqsbatch._core.envelope import Envelope, carry
from sqsbatch._core.flows import Flow, batch_calls
from sqsbatch._core.rate import TokenBucket
from sqsbatch._core.shapes import is_fifo, queue_name
from sqsbatch.errors import MessageError
from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = [
    "MoveRow",
    "Step",
    "StepResult",
    "counts",
    "move",
    "moved_envelope",
    "outcomes",
    "parked_envelope",
    "plan",
    "throttle",
]

_SENDS = frozenset({Kind.MOVE, Kind.PARK})


@dataclass(frozen=True)
class MoveRow:
    """One message of a move: what it was, where it went (or would go) and what happened.

    `action` is one of `moved`, `would-move` (dry run), `skipped` (not selected),
    `unroutable`, `failed`, `kept` (a reason not moved: `reasons`); for the daemon also
    `delayed`, `throttled`, `exhausted`, `parked`. `reason` is why it is on the DLQ (its last
    death). `error_type` is the failure recorded when the message was dead-lettered; `error`
    says why this move failed, when it did.
    """

    id: str
    source: str | None
    target: str | None
    error_type: str | None
    action: str
    error: str | None = None
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Step:
    """One received message, its disposition, and the URL its copy goes to (for MOVE and PARK)."""

    message: DlqMessage
    disposition: Disposition
    target_url: str | None = None
    action: str = ""
    """The reported action; by default the disposition's kind (`throttled`: a rate-limit hide)."""
    note: str | None = None
    """Why, when the disposition alone does not say (an unroutable message's missing source)."""

    @property
    def label(self) -> str:
        return self.action or self.disposition.kind.value


@dataclass(frozen=True)
class StepResult:
    step: Step
    ok: bool
    """The step's first call (send or hide) was accepted."""
    error: str | None = None
    delete_failed: bool = False

    def row(self, source: str | None) -> MoveRow:
        error = self.step.message.message.envelope.error
        return MoveRow(
            id=self.step.message.message.id,
            source=source,
            target=queue_name(self.step.target_url) if self.step.target_url else None,
            error_type=error.type if error else None,
            action=self.step.label if self.ok else "failed",
            error=self.error or self.step.note,
            reason=self.step.message.reason,
        )


def moved_envelope(message: DlqMessage, target: str) -> Envelope:
    """The envelope of the copy sent back to `target`: one more redrive, a fresh budget."""
    return replace(
        carry(message.message),
        base_attempts=0,
        redrives=message.redrives + 1,
        dead_count_at_redrive=max(
            message.message.envelope.dead_count, len(message.message.envelope.deaths)
        ),
        source_queue=queue_name(target),
        error=None,
        due_at=None,
    )


def parked_envelope(message: DlqMessage) -> Envelope:
    """The envelope of the copy sent to the parking queue: as it was, id and timestamp kept."""
    return replace(carry(message.message), base_attempts=0, due_at=None)


def plan(
    steps: Sequence[Step], *, dlq_url: str, limits: SqsLimits = SQS_LIMITS
) -> tuple[TwoPhase, dict[int, str]]:
    """The calls for `steps`, and the steps refused before any call (index: why)."""
    settlement = TwoPhase([], [], {})
    refused: dict[int, str] = {}
    for i, step in enumerate(steps):
        receipt = step.message.receipt_handle
        if step.disposition.kind not in _SENDS:
            params = {"ReceiptHandle": receipt, "VisibilityTimeout": step.disposition.hide_seconds}
            settlement.first.append(
                Entry(f"h{i}", "change_message_visibility_batch", dlq_url, params)
            )
            continue
        assert step.target_url is not None
        try:
            entry = _send(f"s{i}", step, limits)
        except MessageError as exc:
            refused[i] = str(exc)
            continue
        settlement.first.append(entry)
        delete = Entry(f"d{i}", "delete_message_batch", dlq_url, {"ReceiptHandle": receipt})
        settlement.delete_after_send[entry.key] = delete
    return settlement, refused


def _send(key: str, step: Step, limits: SqsLimits) -> Entry:
    assert step.target_url is not None
    fifo = is_fifo(step.target_url)
    if step.disposition.kind is Kind.MOVE:
        envelope = moved_envelope(step.message, step.target_url)
    else:
        envelope = parked_envelope(step.message)
    copy = copy_of(step.message.message, envelope, fifo=fifo)
    return send_entry(key, step.target_url, copy, fifo=fifo, limits=limits)


def outcomes(
    steps: Sequence[Step], refused: Mapping[int, str], first: BatchRun, second: BatchRun
) -> list[StepResult]:
    """What happened to each step, from SQS's per-entry answers."""
    results: dict[str, EntryResult] = {**first.results, **second.results}
    found = []
    for i, step in enumerate(steps):
        if i in refused:
            found.append(StepResult(step, False, refused[i]))
            continue
        key = f"s{i}" if step.disposition.kind in _SENDS else f"h{i}"
        result = results.get(key)
        if result is None or not result.ok:
            why = f"{result.code}: {result.message or ''}".strip() if result else "not sent"
            found.append(StepResult(step, False, why))
            continue
        delete = results.get(f"d{i}")
        if delete is not None and not delete.ok:
            why = f"delete failed ({delete.code}): a duplicate will follow"
            found.append(StepResult(step, True, why, delete_failed=True))
        else:
            found.append(StepResult(step, True))
    return found


def counts(found: Sequence[StepResult]) -> dict[str, int]:
    """Counter increments for `RedriveStats`: one per message, plus `failed` for refusals."""
    tally: dict[str, int] = {}
    for outcome in found:
        kind = outcome.step.disposition.kind
        if outcome.ok or kind in (Kind.EXHAUSTED, Kind.UNROUTABLE, Kind.KEPT):
            tally[kind.value] = tally.get(kind.value, 0) + 1
        if not outcome.ok or outcome.delete_failed:
            tally["failed"] = tally.get("failed", 0) + 1
    return tally


def move(
    steps: list[Step], *, dlq_url: str, limits: SqsLimits = SQS_LIMITS
) -> Flow[list[StepResult]]:
    """The redrive move, as a flow (`sqsbatch._core.flows`): sends and hides, then deletes
    from the DLQ for the sends SQS accepted; one result per step."""
    settlement, refused = plan(steps, dlq_url=dlq_url, limits=limits)
    first = yield from batch_calls(BatchRun(settlement.first, limits=limits))
    second = yield from batch_calls(BatchRun(settlement.second(sent_keys(first)), limits=limits))
    return outcomes(steps, refused, first, second)


def throttle(steps: list[Step], bucket: TokenBucket | None, now: float) -> list[Step]:
    """Moves beyond the rate limit are hidden until the bucket will have a token for them."""
    if bucket is None:
        return steps
    moves = [i for i, step in enumerate(steps) if step.disposition.kind is Kind.MOVE]
    granted = bucket.take(now, len(moves)).count
    for rank, index in enumerate(moves[granted:], start=1):
        wait = max(1, math.ceil(bucket.wait_seconds(rank, now)))
        hidden = replace(steps[index].disposition, kind=Kind.HIDE, hide_seconds=wait)
        steps[index] = replace(steps[index], disposition=hidden, action="throttled")
    return steps
