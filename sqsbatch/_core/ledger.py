"""The ledger and the actions: what happens to each message of a batch once its handler is done.

`Ledger` records the handler's `ack`/`retry`/`dead_letter` calls with Cloudflare's precedence
(first call on a message wins; a batch-level call covers the messages with no call before it
and freezes the rest; between `ack_all` and `retry_all` the first wins).
`actions_for` turns the ledger and the handler's outcome into one `Action` per message: delete,
hide for a delay, re-send (delays past the visibility ceiling), dead-letter, drop, or leave to
the queue's RedrivePolicy. Pure: clocks come in as arguments.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

from sqsbatch._core.envelope import RETRIES_EXHAUSTED, ErrorInfo
from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = [
    "Action",
    "ActionKind",
    "Decision",
    "Delivered",
    "LastFailure",
    "Ledger",
    "Outcome",
    "Verdict",
    "acks_out_of_order",
    "actions_for",
    "visibility_allowed",
]


class Verdict(enum.Enum):
    ACK = "ack"
    RETRY = "retry"
    DEAD_LETTER = "dead_letter"


class Outcome(enum.Enum):
    """How the handler ended."""

    RETURNED = "returned"
    RAISED = "raised"
    TIMED_OUT = "timed_out"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    delay_seconds: int | None = None
    explicit: bool = True
    """False for the default that the handler's outcome gave an undecided message."""
    reason: str | None = None
    """`dead_letter(reason)`: why (its entry in the message's dead-letter history)."""


class Ledger:
    """The `ack`/`retry` calls made on one batch, with first-call-wins precedence."""

    def __init__(self, size: int) -> None:
        self._messages: list[Decision | None] = [None] * size
        self._batch: Decision | None = None
        self.sealed = False

    def on_message(
        self, index: int, verdict: Verdict, delay_seconds: int | None, reason: str | None = None
    ) -> bool:
        """Record `message.ack()`/`retry()`/`dead_letter()`; False when the call is ignored."""
        if self.sealed or self._batch is not None or self._messages[index] is not None:
            return False
        self._messages[index] = Decision(verdict, delay_seconds, reason=reason)
        return True

    def on_batch(
        self, verdict: Verdict, delay_seconds: int | None, reason: str | None = None
    ) -> bool:
        """Record `batch.ack_all()`/`retry_all()`/`dead_letter_all()`; False when ignored."""
        if self.sealed or self._batch is not None:
            return False
        self._batch = Decision(verdict, delay_seconds, reason=reason)
        return True

    def seal(self) -> None:
        """The handler is done (or timed out): every later call is ignored."""
        self.sealed = True

    def undecided(self) -> list[int]:
        """Indexes of the messages no call has settled yet (the heartbeat keeps them hidden)."""
        if self._batch is not None:
            return []
        return [i for i, decision in enumerate(self._messages) if decision is None]

    def all_acked(self, outcome: Outcome) -> bool:
        """Whether every message ends acked (by its own call, the batch's, or the outcome's
        default): the common case, which settlement decides in bulk."""
        rest = self._batch or _default(outcome)
        if self._messages.count(None) == len(self._messages):  # no call of its own: in bulk
            return rest.verdict is Verdict.ACK
        ack = Verdict.ACK
        return all((own or rest).verdict is ack for own in self._messages)

    def decisions(self, outcome: Outcome) -> list[Decision]:
        """One decision per message: its own call, else the batch call, else the outcome's."""
        default = self._batch or _default(outcome)
        return [own or default for own in self._messages]


def _default(outcome: Outcome) -> Decision:
    """What the handler's outcome gives a message with no call (not an explicit decision)."""
    return _RETURNED if outcome is Outcome.RETURNED else _FAILED


_RETURNED = Decision(Verdict.ACK, None, explicit=False)
_FAILED = Decision(Verdict.RETRY, None, explicit=False)


class ActionKind(enum.Enum):
    DELETE = "delete"
    """Acked: `DeleteMessageBatch`."""
    HIDE = "hide"
    """Retried within the visibility ceiling: `ChangeMessageVisibilityBatch(delay)`."""
    RESEND = "resend"
    """Retried past the ceiling: re-sent with the carried metadata and a due time, then deleted."""
    DEAD_LETTER = "dead_letter"
    """Its final delivery failed, or it was dead-lettered on request (`dead_letter()`), or
    before its handler (expired, invalid body): sent to the DLQ with metadata, then deleted."""
    DROP = "drop"
    """As DEAD_LETTER, but the queue has no RedrivePolicy and no DLQ is configured: deleted
    and logged, as Cloudflare Queues does."""
    LEAVE = "leave"
    """As DEAD_LETTER, but sqsbatch cannot know where it belongs: hidden like a retry, never
    deleted, so that the queue's RedrivePolicy moves it."""


class LastFailure(enum.Enum):
    """What a message whose delivery `max_retries + 1` failed becomes."""

    DEAD_LETTER = "dead_letter"
    """A DLQ is known: a copy goes there, then the message is deleted."""
    DROP = "drop"
    """The queue has no RedrivePolicy and no DLQ is configured: deleted (logged)."""
    LEAVE = "leave"
    """No DLQ is known and the RedrivePolicy could not be read: left to SQS, never deleted."""


@dataclass(frozen=True)
class Action:
    index: int
    kind: ActionKind
    delay_seconds: int = 0
    error: ErrorInfo | None = None
    reason: str = RETRIES_EXHAUSTED
    """Why a DEAD_LETTER, DROP or LEAVE: its entry in the dead-letter history."""
    costs_attempt: bool = True
    """False for a message dead-lettered before its handler (expired, invalid body)."""


@dataclass(frozen=True)
class Delivered:
    """A delivered message, as settlement sees it: its attempts, when it came, its FIFO group."""

    attempts: int
    received_at: float
    """Monotonic seconds before the `ReceiveMessage` call that returned it."""
    group_id: str | None = None


def actions_for(
    messages: Sequence[Delivered],
    decisions: Sequence[Decision],
    *,
    max_retries: int,
    retry_delay: int,
    last_failure: LastFailure,
    failure: tuple[str, str],
    now: float,
    wall_now: float,
    fifo: bool = False,
    limits: SqsLimits = SQS_LIMITS,
    with_acks: bool = True,
) -> list[Action]:
    """One action per message (`with_acks=False`: none for the acked ones, whose `DELETE` a
    front end that deletes them itself, Lambda, has no use for; the others are the same).

    `failure` is the (type, message) recorded on a dead-lettered copy when the handler raised or
    timed out. On FIFO queues a retried message makes the later implicitly decided messages of its
    group retry too, so that the group's order holds.
    """
    if fifo:
        decisions = _hold_group_order(messages, decisions)
    if len(messages) != len(decisions):
        raise ValueError(f"{len(messages)} messages, {len(decisions)} decisions")
    actions = []
    for index, decision in enumerate(decisions):
        if decision.verdict is Verdict.ACK:
            if with_acks:
                actions.append(Action(index, ActionKind.DELETE))
            continue
        message = messages[index]
        delay = retry_delay if decision.delay_seconds is None else decision.delay_seconds
        allowed = visibility_allowed(message.received_at, now, limits)
        if decision.verdict is Verdict.DEAD_LETTER:
            assert decision.reason is not None, "dead_letter() always gives a reason"
            actions.append(_requested(index, decision.reason, last_failure, min(delay, allowed)))
            continue
        final = message.attempts >= max_retries + 1
        if final and last_failure is not LastFailure.LEAVE:
            why = failure if not decision.explicit else ("Retry", "retried by the handler")
            actions.append(Action(index, _FINAL[last_failure], error=ErrorInfo(*why, at=wall_now)))
        elif final or delay <= allowed or fifo:  # FIFO forbids per-message delays: clamp instead
            kind = ActionKind.LEAVE if final else ActionKind.HIDE  # left: SQS's redrive moves it
            actions.append(Action(index, kind, min(delay, allowed)))
        else:
            actions.append(Action(index, ActionKind.RESEND, delay))
    return actions


_FINAL = {LastFailure.DEAD_LETTER: ActionKind.DEAD_LETTER, LastFailure.DROP: ActionKind.DROP}
_DEAD = {**_FINAL, LastFailure.LEAVE: ActionKind.LEAVE}


def _requested(index: int, reason: str, last_failure: LastFailure, hide: int) -> Action:
    """`dead_letter(reason)`: to the DLQ whatever the attempt count; deleted (logged) when the
    queue has none; left to the RedrivePolicy (hidden like a retry) when sqsbatch cannot know."""
    kind = _DEAD[last_failure]
    return Action(index, kind, hide if kind is ActionKind.LEAVE else 0, reason=reason)


def visibility_allowed(received_at: float, now: float, limits: SqsLimits = SQS_LIMITS) -> int:
    """The longest visibility timeout SQS accepts now: 12 h from the receive, minus what passed.

    `received_at` is taken before the receive call, so the elapsed time is never underestimated
    and a change never goes past the ceiling.
    """
    return max(0, math.floor(limits.visibility_ceiling_seconds - (now - received_at)))


def _hold_group_order(
    messages: Sequence[Delivered], decisions: Sequence[Decision]
) -> list[Decision]:
    held = list(decisions)
    retried_groups: dict[str, Decision] = {}
    for index, message in enumerate(messages):
        decision = held[index]
        group = message.group_id
        if group is None:
            continue
        if group in retried_groups and not decision.explicit:
            held[index] = Decision(Verdict.RETRY, retried_groups[group].delay_seconds, False)
        elif decision.verdict is Verdict.RETRY and group not in retried_groups:
            retried_groups[group] = decision
    return held


def acks_out_of_order(messages: Sequence[Delivered], decisions: Sequence[Decision]) -> list[int]:
    """FIFO: the messages the handler acked itself after an earlier message of their group was
    retried (explicitly, or by the handler's failure). Their acks hold (SPEC: explicit acks hold
    either way; the handler did their work, so a retry would run it twice, not in order): the
    caller warns that the group was handled out of order."""
    retried: set[str] = set()
    found = []
    for index, message in enumerate(messages):
        group, decision = message.group_id, decisions[index]
        if group is None:
            continue
        if decision.verdict is Verdict.RETRY:
            retried.add(group)
        elif decision.verdict is Verdict.ACK and decision.explicit and group in retried:
            found.append(index)
    return found
