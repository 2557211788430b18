"""The idempotency guard's decisions (issue 29): pure, no I/O, no clock.

A store (`sqsbatch.idempotency`) answers which keys of a batch this consumer claimed and what
blocks the others; this module turns those answers into one verdict per message, and the
handler's outcome into the keys to complete and the keys to release. It also says how long a
claim lasts and how long a completed record is kept. Every time here is a number handed in
(epoch seconds): the callers own the clock.

A record blocks a claim while `now < expires`, whatever its state: a claim until it lapses, a
completed record until its `idempotency_ttl` runs out (then it is forgotten, as DynamoDB's TTL
clean-up would delete it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

__all__ = [
    "CLAIMED",
    "COMPLETED",
    "MAX_CLAIM_SECONDS",
    "MAX_DEFAULT_TTL_SECONDS",
    "Claims",
    "Intake",
    "Kind",
    "Record",
    "Settle",
    "Verdict",
    "after_batch",
    "claim_deadline",
    "decide",
    "default_ttl",
    "held_delay",
]

CLAIMED = "claimed"
COMPLETED = "completed"
MAX_CLAIM_SECONDS = 43_200
"""SQS's 12 h visibility ceiling: sqsbatch never holds a message longer, nor a claim."""
MAX_DEFAULT_TTL_SECONDS = 28 * 86_400
"""The longest default `idempotency_ttl`: a queue's and its DLQ's longest retention (14 d each)."""


@dataclass(frozen=True)
class Record:
    """One key's record in a store: `state` is CLAIMED or COMPLETED; `expires` (epoch seconds)
    is when a claim lapses, or when a completed record may be forgotten; `owner` the token of
    the claim that wrote it."""

    key: str
    state: str
    expires: float
    owner: str

    def blocks(self, now: float) -> bool:
        """Whether this record stops a claim at `now`."""
        return now < self.expires


@dataclass(frozen=True)
class Claims:
    """A store's answer to a batch of claims: the keys now claimed by us, and the record that
    blocked each other key (absent when the record lapsed before it could be read)."""

    won: frozenset[str]
    blocked: Mapping[str, Record | None] = field(default_factory=dict)


class Kind(Enum):
    RUN = "run"
    """Claimed: hand the message to the handler."""
    SKIP = "skip"
    """Its key is completed: ack it without the handler (a duplicate)."""
    HOLD = "hold"
    """Its key is held by a live claim (another consumer's, or an earlier copy in this batch):
    retry it after what is left of that claim, without counting an attempt."""


@dataclass(frozen=True)
class Verdict:
    kind: Kind
    delay: int = 0
    """For HOLD: seconds until the claim that holds the key lapses (at least 1)."""

    @property
    def counts_attempt(self) -> bool:
        """A held message did not fail: its retry is not one of its attempts."""
        return self.kind is not Kind.HOLD


@dataclass(frozen=True)
class Intake:
    """What the guard decided at intake: one verdict per message, in order, and the keys this
    consumer claimed but will not run (a FIFO group held behind an earlier message): release
    them at once."""

    verdicts: tuple[Verdict, ...]
    release: tuple[str, ...] = ()


@dataclass(frozen=True)
class Settle:
    """After the handler: the keys to record as completed, and the claims to release."""

    complete: tuple[str, ...]
    release: tuple[str, ...]


def held_delay(expires: float, now: float) -> int:
    """Whole seconds until a claim that ends at `expires` lapses: at least 1 (a claim that
    lapsed since it was read is tried again next second), at most SQS's 12 h ceiling."""
    return max(1, min(MAX_CLAIM_SECONDS, math.ceil(expires - now)))


def decide(
    keys: Sequence[str],
    claims: Claims,
    now: float,
    *,
    deadline: float,
    groups: Sequence[str | None] | None = None,
) -> Intake:
    """One verdict per message of a batch, in order, from the store's answer.

    `deadline` is when our own claims lapse (a second copy of a key in the batch waits for it).
    `groups` (FIFO: each message's group id) keeps a group's order: behind a held message every
    later message of its group is held too, and a claim it won is released.
    """
    seen: set[str] = set()
    held_groups: dict[str, int] = {}
    verdicts: list[Verdict] = []
    release: list[str] = []
    for index, key in enumerate(keys):
        group = groups[index] if groups is not None else None
        verdict = _verdict(key, claims, now, deadline, first=key not in seen)
        if verdict.kind is Kind.RUN:
            seen.add(key)
        if group is not None and group in held_groups and verdict.kind is not Kind.SKIP:
            if verdict.kind is Kind.RUN:
                release.append(key)
            verdict = Verdict(Kind.HOLD, held_groups[group])
        elif group is not None and verdict.kind is Kind.HOLD:
            held_groups[group] = verdict.delay
        verdicts.append(verdict)
    return Intake(tuple(verdicts), tuple(release))


def _verdict(key: str, claims: Claims, now: float, deadline: float, *, first: bool) -> Verdict:
    if key in claims.won:
        return Verdict(Kind.RUN) if first else Verdict(Kind.HOLD, held_delay(deadline, now))
    record = claims.blocked.get(key)
    if record is None or not record.blocks(now):
        return Verdict(Kind.HOLD, 1)  # it lapsed between the claim and the read: try again
    if record.state == COMPLETED:
        return Verdict(Kind.SKIP)
    return Verdict(Kind.HOLD, held_delay(record.expires, now))


def after_batch(keys: Sequence[str], verdicts: Sequence[Verdict], acked: Sequence[bool]) -> Settle:
    """The keys of the messages that ran: acked ones are completed; every other way a run ends
    (retried, dead-lettered, timed out, raised) releases its claim. Skipped and held messages
    touch no record: theirs belongs to someone else (or is completed already)."""
    complete: list[str] = []
    release: list[str] = []
    for key, verdict, ok in zip(keys, verdicts, acked, strict=True):
        if verdict.kind is Kind.RUN:
            (complete if ok else release).append(key)
    return Settle(tuple(complete), tuple(release))


def claim_deadline(
    now: float,
    *,
    visibility_deadline: float,
    received_at: float,
    lambda_deadline: float | None = None,
    claim_seconds: float | None = None,
) -> float:
    """When a claim made (or extended by a heartbeat) at `now` lapses: as long as sqsbatch
    holds the message, not a guess.

    `claim_seconds` (the setting) overrides everything. Under Lambda (`lambda_deadline`, the
    invocation's end) the claim lasts the invocation's remaining time. A poller holds the
    message until its visibility deadline (which each heartbeat pushes on), never past SQS's
    12 h ceiling counted from the receive (`received_at`).
    """
    if claim_seconds is not None:
        return now + claim_seconds
    if lambda_deadline is not None:
        return max(now, lambda_deadline)
    ceiling = received_at + MAX_CLAIM_SECONDS
    return max(now, min(visibility_deadline, ceiling))


def default_ttl(retention_seconds: int | None, dlq_retention_seconds: int | None = None) -> int:
    """How long a completed record is kept when `idempotency_ttl` is unset: as long as a copy
    of the message can still arrive, i.e. the queue's retention plus its DLQ's (a message
    dead-lettered on its last day lives the DLQ's retention more), at most 28 days. An unknown
    retention counts as the longest."""
    if retention_seconds is None:
        return MAX_DEFAULT_TTL_SECONDS
    total = retention_seconds + (dlq_retention_seconds or 0)
    return min(MAX_DEFAULT_TTL_SECONDS, total)
