"""The idempotency guard's steps (issue 29), as flows: intake's step 4 and the settle step.

At intake (`claim`, called by `intake.intake` over the messages left for the handler once
screened) the keys of a receive's live messages are claimed in one store call
(`Outside(store.claim)`), and `_core.idempotency.decide` gives each message a verdict:

- RUN: it goes to the handler; its key and claim token are kept (`Guard.held`, by delivery)
  until the batch is settled;
- SKIP: its key is completed: it is acked without the handler (deleted, counted
  `duplicates_skipped`);
- HOLD: a live claim of another batch holds its key: it is re-sent, due when that claim lapses,
  without counting an attempt (`costs_attempt=False`, as `holding.close_held` re-sends a held
  batch); a FIFO queue forbids a per-message delay, so there it is hidden for that time instead.

A store that cannot be reached (any exception from it) fails closed: every live message is held
for `STORE_DOWN_SECONDS`, none is skipped or dead-lettered, and a WARNING line says so.

After the handler (`settle_claims`, before the batch's own settle calls): the acked messages'
keys are completed (one call), the others' claims released (one call per claim token). A
heartbeat pushes the claims on with the visibility (`extend_claims`). No I/O here: the store is
called through `Outside`, which the doors run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Protocol

from sqsbatch._core.closing import Closing, plan_closing
from sqsbatch._core.context import QueueContext
from sqsbatch._core.flows import (
    Flow,
    Line,
    Outside,
    Request,
    Settled,
    settle,
    settle_for_lambda,
)
from sqsbatch._core.idempotency import (
    Claims,
    Kind,
    Verdict,
    after_batch,
    claim_deadline,
    decide,
    default_ttl,
)
from sqsbatch._core.ledger import Action, ActionKind
from sqsbatch._core.message import MessageBatch, _Delivery, deliveries_of
from sqsbatch._core.queue_settings import retention_of
from sqsbatch.errors import SqsError
from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = [
    "STORE_DOWN_SECONDS",
    "ClaimStore",
    "Guard",
    "Guarded",
    "claim",
    "extend_claims",
    "kept_while_copies_can_arrive",
    "settle_claims",
]

LONGEST_RETENTION = 1_209_600
"""SQS's longest MessageRetentionPeriod (14 days): a DLQ whose retention cannot be read."""
STORE_DOWN_SECONDS = 5
"""How long the messages of a receive whose claims could not be made are held (re-sent, no
attempt counted): the store is retried with the next delivery, never skipped."""


class ClaimStore(Protocol):
    """What the guard calls of a store (`sqsbatch.idempotency.Store`)."""

    def claim(self, keys: Sequence[str], *, owner: str, expires: float) -> Claims: ...

    def extend(self, keys: Sequence[str], *, owner: str, expires: float) -> frozenset[str]: ...

    def complete(
        self, keys: Sequence[str], *, owner: str, ttl_seconds: float, carry: bool = False
    ) -> None: ...

    def release(self, keys: Sequence[str], *, owner: str) -> None: ...


@dataclass(frozen=True)
class Guard:
    """One front end's guard: its store, how long a completion is kept, the claim's length
    (`claim_seconds`, else the visibility; under Lambda `lambda_deadline`, the invocation's end
    in epoch seconds), whether completions ride with the next claims (`carry`: pollers), and
    the claims of the batches not settled yet (`held`: id of a delivery -> (key, token))."""

    store: ClaimStore
    ttl_seconds: float
    new_owner: Callable[[], str]
    claim_seconds: float | None = None
    lambda_deadline: float | None = None
    carry: bool = False
    held: dict[int, tuple[str, str]] = field(default_factory=dict)

    def expires(self, now: float, *, visible_in: float, held_for: float = 0.0) -> float:
        """When a claim made (or extended) at `now` lapses: `visible_in` seconds from now the
        message is visible again; `held_for` seconds ago it was received (the 12 h ceiling)."""
        return claim_deadline(
            now,
            visibility_deadline=now + visible_in,
            received_at=now - held_for,
            lambda_deadline=self.lambda_deadline,
            claim_seconds=self.claim_seconds,
        )


@dataclass(slots=True)
class Guarded:
    """What the guard did at intake: the handler's messages, and the rest with their fate."""

    run: list[_Delivery]
    counts: dict[str, int] = field(default_factory=dict)
    line: Line | None = None
    listed: list[_Delivery] = field(default_factory=list)
    """Lambda: set-apart messages to report in `batchItemFailures` (held on FIFO, refused)."""
    skipped: list[_Delivery] = field(default_factory=list)
    held: list[tuple[_Delivery, int]] = field(default_factory=list)


def claim(
    guard: Guard,
    live: list[_Delivery],
    context: QueueContext,
    *,
    wall_now: float,
    for_lambda: bool = False,
    limits: SqsLimits = SQS_LIMITS,
) -> Flow[Guarded]:
    """Intake's step 4: claim the live messages' keys (one store call) and set apart the
    duplicates (acked) and the held ones (re-sent, no attempt counted)."""
    if not live:
        return Guarded(live)
    how: dict[str, Any] = {"wall_now": wall_now, "for_lambda": for_lambda, "limits": limits}
    keys = [delivery.idempotency_key for delivery in live]
    owner = guard.new_owner()
    visible_in = min(d.hidden_until - d.received_at for d in live)
    expires = guard.expires(wall_now, visible_in=visible_in)
    try:
        claims = yield Outside(partial(guard.store.claim, keys, owner=owner, expires=expires))
    except Exception as exc:  # fail closed: retried, never skipped
        down = [Verdict(Kind.HOLD, STORE_DOWN_SECONDS)] * len(live)
        text = (
            f"{context.name}: idempotency store unreachable ({exc}); {len(live)} messages "
            f"retried in {STORE_DOWN_SECONDS} s, none skipped"
        )
        guarded = Guarded([], line=(logging.WARNING, text))
        yield from _set_apart(guarded, live, down, context, **how)
        return guarded
    groups = [delivery.group_id for delivery in live] if context.fifo else None
    decided = decide(keys, claims, wall_now, deadline=expires, groups=groups)
    if decided.release:
        yield from _release({owner: list(decided.release)}, guard.store)
    guarded = Guarded([])
    for delivery, key, verdict in zip(live, keys, decided.verdicts, strict=True):
        if verdict.kind is Kind.RUN:
            guarded.run.append(delivery)
            guard.held[id(delivery)] = (key, owner)
    yield from _set_apart(guarded, live, decided.verdicts, context, **how)
    return guarded


def _set_apart(
    guarded: Guarded,
    live: list[_Delivery],
    verdicts: Sequence[Verdict],
    context: QueueContext,
    *,
    wall_now: float,
    for_lambda: bool,
    limits: SqsLimits,
) -> Flow[None]:
    """Settle the messages that do not run, as a batch of their own: a SKIP deleted like an
    ack, a HOLD re-sent due in its delay (hidden for it on FIFO), costing no attempt."""
    apart: list[_Delivery] = []
    actions: list[Action] = []
    ceiling = limits.visibility_ceiling_seconds - 60  # hidden just after the receive
    for delivery, verdict in zip(live, verdicts, strict=True):
        if verdict.kind is Kind.RUN:
            continue
        index = len(apart)
        apart.append(delivery)
        if verdict.kind is Kind.SKIP:
            guarded.skipped.append(delivery)
            actions.append(Action(index, ActionKind.DELETE))
            continue
        guarded.held.append((delivery, verdict.delay))
        if context.fifo:
            actions.append(Action(index, ActionKind.HIDE, min(verdict.delay, ceiling)))
        else:
            actions.append(Action(index, ActionKind.RESEND, verdict.delay, costs_attempt=False))
    if not apart:
        return
    batch = MessageBatch(context.name, apart)
    closing = plan_closing(batch, actions, context, wall_now=wall_now)
    settling = settle_for_lambda if for_lambda else settle
    settled = yield from settling(closing, batch, limits)
    guarded.counts = _counts(settled, len(guarded.skipped))
    guarded.listed = [apart[index] for index in settled.listed]
    lines = [text for _, text in settled.lines]
    if lines:
        level = max(level for level, _ in settled.lines)
        if guarded.line is not None:
            level, lines = max(level, guarded.line[0]), [guarded.line[1], *lines]
        guarded.line = (level, "; ".join(lines))


def _counts(settled: Settled, skipped: int) -> dict[str, int]:
    counts = {key: value for key, value in settled.counts.items() if key != "batches" and value}
    if skipped:
        counts["duplicates_skipped"] = skipped
    return counts


def settle_claims(
    guard: Guard, batch: MessageBatch, closing: Closing | Sequence[ActionKind] | None
) -> Flow[Line | None]:
    """The settle step, before the batch's own settle calls (`closing`, or what each message
    became; None: not known, a bug of ours, every claim released): the acked messages' keys are
    completed (one store call), every other claim of the batch released. A store that fails
    here is logged (an ERROR): the claims lapse on their own, and only a copy of a completed
    message that arrives after that could run again."""
    kinds = closing.kinds if isinstance(closing, Closing) else closing
    keys: list[str] = []
    owners: list[str] = []
    acked: list[bool] = []
    for index, delivery in enumerate(deliveries_of(batch)):
        found = guard.held.pop(id(delivery), None)
        if found is None:
            continue
        keys.append(found[0])
        owners.append(found[1])
        ok = kinds is not None and kinds[index] is ActionKind.DELETE
        acked.append(ok)
    if not keys:
        return None
    ends = after_batch(keys, [Verdict(Kind.RUN)] * len(keys), acked)
    release: dict[str, list[str]] = {}
    for key, owner, ok in zip(keys, owners, acked, strict=True):
        if not ok:
            release.setdefault(owner, []).append(key)
    try:
        if ends.complete:
            call = partial(
                guard.store.complete,
                list(ends.complete),
                owner=owners[0],
                ttl_seconds=guard.ttl_seconds,
                carry=guard.carry,
            )
            yield Outside(call)
    except Exception as exc:
        return logging.ERROR, (
            f"{batch.queue}: recording {len(ends.complete)} completed keys failed ({exc}); "
            "their claims lapse, and a later copy of one of them may run again"
        )
    return (yield from _release(release, guard.store))


def _release(by_owner: Mapping[str, list[str]], store: ClaimStore) -> Flow[Line | None]:
    """Release claims (one call per token); a failure leaves them to lapse, said in a line."""
    try:
        for owner, keys in by_owner.items():
            yield Outside(partial(store.release, keys, owner=owner))
    except Exception as exc:
        return logging.WARNING, f"releasing claims failed ({exc}): they lapse on their own"
    return None


def extend_claims(
    guard: Guard, deliveries: Sequence[_Delivery], *, now: float, wall_now: float
) -> Flow[Line | None]:
    """A heartbeat pushed the batch's visibility on: its claims follow (one call per token)."""
    by_owner: dict[str, tuple[list[str], float]] = {}
    for delivery in deliveries:
        found = guard.held.get(id(delivery))
        if found is None:
            continue
        visible_in = max(0.0, delivery.hidden_until - now)
        expires = guard.expires(
            wall_now, visible_in=visible_in, held_for=now - delivery.received_at
        )
        keys, earliest = by_owner.get(found[1], ([], expires))
        keys.append(found[0])
        by_owner[found[1]] = (keys, min(earliest, expires))
    try:
        for owner, (keys, expires) in by_owner.items():
            yield Outside(partial(guard.store.extend, keys, owner=owner, expires=expires))
    except Exception as exc:
        return logging.WARNING, f"extending claims failed ({exc}): they may lapse early"
    return None


def kept_while_copies_can_arrive(
    guard: Guard, retention_seconds: int | None, dlq_url: str | None
) -> Flow[Guard]:
    """The guard with `idempotency_ttl`'s default counted from the queues (a poller's start,
    when the setting is unset): a completion is kept while a copy of its message can still
    arrive, the queue's retention (`retention_seconds`, read with its RedrivePolicy; None:
    unknown) plus its DLQ's (one `GetQueueAttributes`; unreadable, SQS's longest), at most 28
    days (`default_ttl`)."""
    dlq_retention: int | None = 0  # no DLQ: a copy lives the queue's retention at most
    if dlq_url is not None:
        try:
            query = {"QueueUrl": dlq_url, "AttributeNames": ["MessageRetentionPeriod"]}
            answer = yield Request("get_queue_attributes", query)
            dlq_retention = retention_of(answer.get("Attributes", {}))
        except SqsError:
            dlq_retention = None
    if dlq_retention is None:
        dlq_retention = LONGEST_RETENTION
    return replace(guard, ttl_seconds=default_ttl(retention_seconds, dlq_retention))
