"""What a settled batch tells the operator about its dead letters and its FIFO order. Pure.

Every dead-letter is visible: a batch whose messages were dead-lettered (retries exhausted,
expired, an invalid body, or on the handler's request), deleted without a DLQ, or left to the
queue's RedrivePolicy says so in one WARNING line, with each reason and the first ids of its
messages (`and N more`). A FIFO batch whose handler acked a message after retrying an earlier
one of its group says so too (its acks hold: docs/delays-and-fifo.md). The settle flows
(`sqsbatch._core.flows`) return these lines; the shells log them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqsbatch._core.calls import BatchRun
from sqsbatch._core.closing import Closing
from sqsbatch._core.envelope import EXPIRED, INVALID_BODY, PAYLOAD_MISSING, RETRIES_EXHAUSTED
from sqsbatch._core.ledger import ActionKind
from sqsbatch._core.message import MessageBatch

__all__ = ["LOGGED_IDS", "LOGGED_REASONS", "dead_letter_line", "notices", "out_of_order_line"]

LOGGED_IDS = 5
"""How many message ids a line names per reason (then `and N more`)."""
LOGGED_REASONS = 3
"""How many reasons a line names (then `and N more reasons`)."""
REASON_CHARS = 100
"""How much of a handler's reason a line shows."""

_OURS = (RETRIES_EXHAUSTED, EXPIRED, INVALID_BODY, PAYLOAD_MISSING)
_WHAT = {
    ActionKind.DEAD_LETTER: "dead-lettered",
    ActionKind.DROP: "deleted (the queue has no RedrivePolicy and no dead_letter_queue)",
    ActionKind.LEAVE: "left for the queue's RedrivePolicy (no dead-letter queue is known)",
}


def notices(
    closing: Closing, batch: MessageBatch, first: BatchRun, second: BatchRun
) -> list[tuple[int, str]]:
    """(level, line) for the dead letters of a settled batch and its out-of-order FIFO acks."""
    lines = []
    if closing.reasons:
        line = dead_letter_line(batch, closing, _settled_deaths(closing, first, second))
        if line is not None:
            lines.append((logging.WARNING, line))
    if closing.out_of_order:
        lines.append((logging.WARNING, out_of_order_line(batch, closing.out_of_order)))
    return lines


def _settled_deaths(closing: Closing, first: BatchRun, second: BatchRun) -> list[int]:
    """The dead messages whose fate SQS accepted: a copy sent to the DLQ; a delete or a
    visibility change not refused (or, under Lambda, a delete left to Lambda)."""
    sent = {result.key for result in first.ok()}
    failed = {int(result.key[1:]) for run in (first, second) for result in run.failed()}
    found = []
    for index in sorted(closing.reasons):
        if closing.kinds[index] is ActionKind.DEAD_LETTER:
            if f"s{index}" in sent:
                found.append(index)
        elif index not in failed and index not in closing.entries.refused:
            found.append(index)
    return found


def dead_letter_line(batch: MessageBatch, closing: Closing, indexes: Sequence[int]) -> str | None:
    """`orders: 7 messages dead-lettered to orders-dlq: retries_exhausted (m1, m2, m3, m4, m5
    and 1 more), requested 'tenant gone' (m9)`; None when there is none."""
    parts = []
    when = " before the handler" if closing.before_handler else ""
    for kind, what in _WHAT.items():
        chosen = [index for index in indexes if closing.kinds[index] is kind]
        if not chosen:
            continue
        where = f" to {closing.dead_letter_queue}" if kind is ActionKind.DEAD_LETTER else ""
        text = f"{_count(len(chosen))} {what}{when}{where}: {_by_reason(batch, closing, chosen)}"
        parts.append(text)
    return f"{batch.queue}: " + "; ".join(parts) if parts else None


def out_of_order_line(batch: MessageBatch, indexes: Sequence[int]) -> str:
    """The acks that a FIFO batch's handler made after retrying an earlier message of their
    group: they hold, and the group was handled out of order."""
    ids = _ids([batch.messages[index].id for index in indexes])
    return (
        f"{batch.queue}: {_count(len(indexes))} acked by the handler after an earlier message "
        f"of the same FIFO group was retried ({ids}): the acks hold, so the group was handled "
        "out of order; retry the later messages too (or leave them undecided) to keep it"
    )


def _by_reason(batch: MessageBatch, closing: Closing, indexes: Sequence[int]) -> str:
    groups: dict[str, list[str]] = {}
    for index in indexes:
        reason = closing.reasons.get(index, RETRIES_EXHAUSTED)
        groups.setdefault(reason, []).append(batch.messages[index].id)
    shown = [f"{_label(reason)} ({_ids(ids)})" for reason, ids in groups.items()]
    more = len(shown) - LOGGED_REASONS
    if more <= 0:
        return ", ".join(shown)
    return ", ".join(shown[:LOGGED_REASONS]) + f" and {more} more reason{'s' if more > 1 else ''}"


def _label(reason: str) -> str:
    if reason in _OURS:
        return reason
    return f"requested {reason[:REASON_CHARS]!r}"


def _ids(ids: Sequence[str]) -> str:
    more = f" and {len(ids) - LOGGED_IDS} more" if len(ids) > LOGGED_IDS else ""
    return ", ".join(ids[:LOGGED_IDS]) + more


def _count(size: int) -> str:
    return f"{size} message{'s' if size != 1 else ''}"
