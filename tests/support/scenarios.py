"""One table of Cloudflare Queues semantics, run against every front end.

A scenario sends integer bodies, consumes them with a script (a plain function of the batch that
acks, retries or raises), and says what the queues must look like afterwards: the attempts each
body was delivered with, what ended in the DLQ and what is left. A front end is anything that
can run a script on a queue until it is idle (`tests.support.front_ends.FRONT_ENDS`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqsbatch import ConsumerConfig, MessageBatch


@dataclass
class Recorder:
    """Every delivery a handler saw: (body, id, attempts), and each batch's bodies."""

    deliveries: list[tuple[Any, str, int]] = field(default_factory=list)
    batches: list[list[Any]] = field(default_factory=list)

    def saw(self, batch: MessageBatch) -> None:
        self.batches.append([m.body for m in batch.messages])
        self.deliveries.extend((m.body, m.id, m.attempts) for m in batch.messages)

    def attempts(self) -> dict[Any, list[int]]:
        seen: dict[Any, list[int]] = defaultdict(list)
        for body, _, attempts in self.deliveries:
            seen[body].append(attempts)
        return dict(seen)


Script = Callable[[MessageBatch], None]


def first_delivery(action: Callable[[MessageBatch], None]) -> Script:
    """Run `action` on a batch whose messages are all on their first delivery; return otherwise."""

    def script(batch: MessageBatch) -> None:
        if all(m.attempts == 1 for m in batch.messages):
            action(batch)

    return script


def by_body(body: Any, batch: MessageBatch) -> Any:
    return next(m for m in batch.messages if m.body == body)


def fail(batch: MessageBatch) -> None:
    raise RuntimeError("handler failed")


def _ack_then_raise(batch: MessageBatch) -> None:
    by_body(0, batch).ack()
    raise RuntimeError("after an explicit ack")


def _ack_then_retry_all(batch: MessageBatch) -> None:
    by_body(0, batch).ack()
    batch.retry_all()


def _retry_then_ack_all(batch: MessageBatch) -> None:
    by_body(0, batch).retry()
    batch.ack_all()


def _ack_all_then_retry_all(batch: MessageBatch) -> None:
    batch.ack_all()
    batch.retry_all()


def _retry_all_then_ack_all(batch: MessageBatch) -> None:
    batch.retry_all()
    batch.ack_all()


def _retry_then_raise(batch: MessageBatch) -> None:
    for message in batch.messages:
        message.retry()
    raise RuntimeError("after the retries")


def _retry_each(batch: MessageBatch) -> None:
    for message in batch.messages:
        message.retry(delay_seconds=0)


def _dead_letter_first(batch: MessageBatch) -> None:
    by_body(0, batch).dead_letter("tenant deleted")


def _ack_then_dead_letter(batch: MessageBatch) -> None:
    by_body(0, batch).ack()
    by_body(0, batch).dead_letter("ignored: acked first")


def _dead_letter_then_retry(batch: MessageBatch) -> None:
    by_body(0, batch).dead_letter("poison")
    by_body(0, batch).retry()


def _retry_then_dead_letter_all(batch: MessageBatch) -> None:
    by_body(0, batch).retry()
    batch.dead_letter_all("bad batch")


def _dead_letter_all_then_ack_all(batch: MessageBatch) -> None:
    batch.dead_letter_all("bad batch")
    batch.ack_all()


def _dead_letter_then_raise(batch: MessageBatch) -> None:
    by_body(0, batch).dead_letter("poison")
    raise RuntimeError("after a dead_letter")


@dataclass
class Scenario:
    name: str
    script: Script
    attempts: dict[Any, list[int]]
    """Per body, the attempts of each delivery, in order."""
    dead_lettered: list[Any] = field(default_factory=list)
    max_retries: int = 2
    bodies: list[Any] = field(default_factory=lambda: [0, 1, 2])
    dlq: bool = True
    reasons: dict[Any, list[str]] | None = None
    """Per dead-lettered body, the reasons of its history (`message.deaths`), when checked."""

    def config(self, dlq: str | None) -> ConsumerConfig:
        return ConsumerConfig(
            max_batch_size=10,
            max_batch_timeout=0.5,
            max_retries=self.max_retries,
            dead_letter_queue=dlq if self.dlq else None,
            visibility_timeout=30,
        )


ALL = [0, 1, 2]
SCENARIOS = [
    Scenario("returning acks everything", lambda batch: None, {b: [1] for b in ALL}),
    Scenario(
        "max_retries N gives N+1 deliveries then the DLQ",
        fail,
        {b: [1, 2, 3] for b in ALL},
        dead_lettered=ALL,
    ),
    Scenario(
        "max_retries 0 dead-letters the first failure",
        fail,
        {b: [1] for b in ALL},
        dead_lettered=ALL,
        max_retries=0,
    ),
    Scenario(
        "explicit retries count like failures",
        _retry_each,
        {b: [1, 2] for b in ALL},
        dead_lettered=ALL,
        max_retries=1,
    ),
    Scenario(
        "without a DLQ the last failure is deleted",
        fail,
        {b: [1, 2] for b in ALL},
        max_retries=1,
        dlq=False,
    ),
    Scenario(
        "an explicit ack survives a raising handler",
        first_delivery(_ack_then_raise),
        {0: [1], 1: [1, 2], 2: [1, 2]},
    ),
    Scenario(
        "ack(m) then retry_all keeps m acked",
        first_delivery(_ack_then_retry_all),
        {0: [1], 1: [1, 2], 2: [1, 2]},
    ),
    Scenario(
        "retry(m) then ack_all retries only m",
        first_delivery(_retry_then_ack_all),
        {0: [1, 2], 1: [1], 2: [1]},
    ),
    Scenario(
        "ack_all then retry_all acks all",
        first_delivery(_ack_all_then_retry_all),
        {b: [1] for b in ALL},
    ),
    Scenario(
        "retry_all then ack_all retries all",
        first_delivery(_retry_all_then_ack_all),
        {b: [1, 2] for b in ALL},
    ),
    Scenario(
        "retry then raise costs one attempt",
        first_delivery(_retry_then_raise),
        {b: [1, 2] for b in ALL},
    ),
    Scenario(
        "failures exhausted record retries_exhausted",
        fail,
        {b: [1, 2] for b in ALL},
        dead_lettered=ALL,
        max_retries=1,
        reasons={b: ["retries_exhausted"] for b in ALL},
    ),
    Scenario(
        "dead_letter(m) sends m to the DLQ on its first delivery",
        first_delivery(_dead_letter_first),
        {b: [1] for b in ALL},
        dead_lettered=[0],
        reasons={0: ["tenant deleted"]},
    ),
    Scenario(
        "ack(m) then dead_letter(m) keeps m acked",
        first_delivery(_ack_then_dead_letter),
        {b: [1] for b in ALL},
    ),
    Scenario(
        "dead_letter(m) then retry(m) dead-letters m",
        first_delivery(_dead_letter_then_retry),
        {b: [1] for b in ALL},
        dead_lettered=[0],
        reasons={0: ["poison"]},
    ),
    Scenario(
        "retry(m) then dead_letter_all dead-letters the others",
        first_delivery(_retry_then_dead_letter_all),
        {0: [1, 2], 1: [1], 2: [1]},
        dead_lettered=[1, 2],
        reasons={1: ["bad batch"], 2: ["bad batch"]},
    ),
    Scenario(
        "dead_letter_all then ack_all dead-letters all",
        first_delivery(_dead_letter_all_then_ack_all),
        {b: [1] for b in ALL},
        dead_lettered=ALL,
        reasons={b: ["bad batch"] for b in ALL},
    ),
    Scenario(
        "dead_letter survives a raising handler",
        first_delivery(_dead_letter_then_raise),
        {0: [1], 1: [1, 2], 2: [1, 2]},
        dead_lettered=[0],
        reasons={0: ["poison"]},
    ),
    Scenario(
        "dead_letter without a DLQ deletes the message",
        first_delivery(_dead_letter_first),
        {b: [1] for b in ALL},
        dlq=False,
    ),
]
