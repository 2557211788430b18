"""Holding back: whether a poller may receive now, and how many messages. No I/O, no clock.

Issue 30's rule: hold back by not receiving, never by receiving and retrying. Before each
receive a poller asks `Holding.admit` how many messages it may ask for; three things can say
fewer, or none:

- the queue's pause (its tags, read every `pause_check_seconds` by the shell: `paused`);
- the circuit breaker (`circuit.Circuit`): open, none; half-open, one probe of
  `circuit_probe_size`;
- the rate limit (`rate.TokenBucket`, `max_messages_per_second`): what the bucket grants; what
  SQS did not return goes back (`returned`).

A batch whose handler raised `Overloaded`, or whose failure opened the circuit, is not retried:
its undecided messages are re-sent with their attempts carried, due when the circuit's open time
is over (`close_held`), so that neither an attempt nor SQS's receive count is spent on them.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

from sqsbatch._core.circuit import Change, Circuit, CircuitState
from sqsbatch._core.closing import Closing, close_batch, failure_of, plan_closing
from sqsbatch._core.context import QueueContext
from sqsbatch._core.flows import Line
from sqsbatch._core.ledger import Action, ActionKind, Decision, Outcome, Verdict, actions_for
from sqsbatch._core.message import MessageBatch, ledger_of
from sqsbatch._core.pause_state import PauseState
from sqsbatch._core.rate import TokenBucket
from sqsbatch.config import ConsumerConfig
from sqsbatch.errors import Overloaded

__all__ = ["Hold", "Holding", "close_held", "held", "overloaded_seconds"]

OPEN_SECONDS = 30.0
"""`circuit_open_seconds`' default: how long the circuit opens, and `Overloaded` without a
`retry_after` holds back."""
HELD_WAKE_SECONDS = 1.0
"""A held receiver looks again at least this often (a resume, a stop, the health file)."""


@dataclass(frozen=True)
class Hold:
    """What `admit` allows: `count` messages now (0: hold back, and look again in `wait`
    seconds); `probe`: this receive is the circuit's half-open probe; `why` it is held."""

    count: int
    wait: float = 0.0
    probe: bool = False
    why: str = ""
    change: Change | None = None


class Holding:
    """One poller's pause, circuit and rate limit (`off` when none is set: `admit` is free)."""

    def __init__(self, config: ConsumerConfig, *, now: float) -> None:
        self.circuit = Circuit(
            failures=config.circuit_failures,
            probe_size=config.circuit_probe_size,
            open_seconds=config.circuit_open_seconds,
            max_open_seconds=config.circuit_max_open_seconds,
        )
        rate = config.max_messages_per_second
        self.bucket = TokenBucket(rate, now=now) if rate is not None else None
        self.pause = PauseState(paused=False)
        self._paused_since: float | None = None
        self._paused_total = 0.0

    def admit(self, now: float, wanted: int) -> Hold:
        """How many of `wanted` messages to ask SQS for now."""
        if self.pause.paused:
            return Hold(0, HELD_WAKE_SECONDS, why="paused")
        admission = self.circuit.admit(now)
        if not admission.may_receive:
            wait = HELD_WAKE_SECONDS if admission.wait is None else admission.wait
            return Hold(0, min(wait, HELD_WAKE_SECONDS), why="circuit", change=admission.change)
        if admission.at_most is not None:
            wanted = min(wanted, admission.at_most)
        if self.bucket is not None:
            grant = self.bucket.take(now, wanted)
            if grant.count == 0:
                if admission.probe:
                    self.circuit.probe_unused()
                return Hold(0, min(grant.wait, HELD_WAKE_SECONDS), why="rate")
            wanted = grant.count
        return Hold(wanted, probe=admission.probe, change=admission.change)

    def returned(self, hold: Hold, got: int, now: float) -> None:
        """The receive `hold` allowed returned `got` messages."""
        if self.bucket is not None and got < hold.count:
            self.bucket.give_back(hold.count - got, now)
        if hold.probe and got == 0:
            self.circuit.probe_unused()

    def read(self, state: PauseState, now: float, queue: str) -> Line | None:
        """The pause a check read; a line when it changed (paused, or resumed)."""
        was, self.pause = self.pause, state
        if state.paused == was.paused:
            return None
        if state.paused:
            self._paused_since = now
            why = f" ({state.reason})" if state.reason else ""
            text = f"{queue} is paused until {state.until_text()}{why}: not receiving"
            return logging.WARNING, text
        if self._paused_since is not None:  # counted, and taken at the next `paused_seconds`
            self._paused_total += max(0.0, now - self._paused_since)
        self._paused_since = None
        return logging.WARNING, f"{queue} is resumed: receiving again"

    def paused_seconds(self, now: float) -> int:
        """Whole seconds paused since last asked (the rest is kept for next time)."""
        if self._paused_since is not None:
            self._paused_total += max(0.0, now - self._paused_since)
            self._paused_since = now
        whole = math.floor(self._paused_total)
        self._paused_total -= whole
        return whole

    def record(
        self, now: float, *, outcome: Outcome, error: BaseException | None, probe: bool
    ) -> tuple[Change | None, float | None]:
        """How a batch ended: the circuit's change, and how long to hold the batch's undecided
        messages (None: not held, settled as usual; 0: re-sent at once, costing no attempt)."""
        overloaded = isinstance(error, Overloaded)
        retry_after = error.retry_after if isinstance(error, Overloaded) else None
        failed = outcome is not Outcome.RETURNED
        change = self.circuit.record(
            now, failed=failed, overloaded=overloaded, retry_after=retry_after, probe=probe
        )
        opened = change is not None and change.opened
        if not (overloaded or opened) or self.circuit.state is not CircuitState.OPEN:
            return change, None
        return change, self.circuit.open_for(now)


def close_held(
    batch: MessageBatch,
    outcome: Outcome,
    error: BaseException | None,
    context: QueueContext,
    *,
    hold_seconds: float,
    now: float,
    wall_now: float,
) -> Closing:
    """`close_batch`, but the messages the handler left undecided are re-sent, due in
    `hold_seconds`, with their attempts carried and this delivery not counted (a visibility
    change would raise `ApproximateReceiveCount`). What the handler decided itself stands.
    A FIFO queue forbids a per-message delay: its batch is closed as usual."""
    if context.fifo:
        return close_batch(batch, outcome, error, context, now=now, wall_now=wall_now)
    ledger = ledger_of(batch)
    ledger.seal()
    config, decisions = context.config, ledger.decisions(outcome)
    actions = actions_for(
        batch._settled(),
        decisions,
        max_retries=config.max_retries,
        retry_delay=config.retry_delay,
        last_failure=context.last_failure,
        failure=failure_of(outcome, error, config.handler_timeout),
        now=now,
        wall_now=wall_now,
        limits=context.limits,
    )
    return plan_closing(batch, held(actions, decisions, hold_seconds), context, wall_now=wall_now)


def held(
    actions: Sequence[Action], decisions: Sequence[Decision], hold_seconds: float
) -> list[Action]:
    """`actions` (one per message, in order), but each message the handler left undecided is
    re-sent, due in `hold_seconds`, costing no attempt."""
    delay = math.ceil(hold_seconds)
    return [
        Action(index, ActionKind.RESEND, delay, costs_attempt=False)
        if not decision.explicit and decision.verdict is Verdict.RETRY
        else actions[index]
        for index, decision in enumerate(decisions)
    ]


def overloaded_seconds(error: Overloaded, open_seconds: float = OPEN_SECONDS) -> float:
    """How long `Overloaded` holds back: its `retry_after`, else the circuit's open time
    (`circuit_open_seconds`)."""
    return open_seconds if error.retry_after is None else error.retry_after
