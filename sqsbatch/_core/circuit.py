"""The circuit breaker, as a state machine on a clock it is given. No I/O, no clock of its own.

    closed --(Overloaded, or `failures` failed batches in a row)--> open
    open --(its time is up; asked again)--> half-open
    half-open --(one probe batch of `probe_size` messages succeeds)--> closed
    half-open --(the probe fails)--> open again, for twice as long (up to `max_open_seconds`)

It answers one question, "may I receive now, and how many at most?" (`admit`), and is told how
each batch ended (`record`). Every change of state comes back as a `Change` for a WARNING line
and, on opening, the `CircuitOpen` metric. Per process: each poller keeps its own.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Admission", "Change", "Circuit", "CircuitState"]


class CircuitState(enum.Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


@dataclass(frozen=True)
class Change:
    """A change of state at `at`: why, and (opening) until when."""

    before: CircuitState
    after: CircuitState
    at: float
    why: str
    until: float | None = None

    @property
    def opened(self) -> bool:
        """Whether this change counts in the `CircuitOpen` metric."""
        return self.after is CircuitState.OPEN

    def line(self) -> str:
        """The WARNING line: `circuit open for 30 s (3 failed batches in a row)`."""
        if self.after is CircuitState.OPEN and self.until is not None:
            return f"circuit open for {self.until - self.at:g} s ({self.why})"
        return f"circuit {self.after.value} ({self.why})"


@dataclass(frozen=True)
class Admission:
    """May a poller receive now, and at most how many messages (None: the circuit sets no limit).
    When it may not: `wait` seconds before asking again helps (None: not before the probe's
    batch is recorded). `probe`: this receive is the half-open probe; record its batch with
    `probe=True` (or `probe_unused` when it got no message). `change`: what asking changed."""

    may_receive: bool
    at_most: int | None = None
    wait: float | None = 0.0
    probe: bool = False
    change: Change | None = None


class Circuit:
    """One poller's breaker. `failures=None` opens it only on `Overloaded`."""

    def __init__(
        self,
        *,
        failures: int | None,
        probe_size: int,
        open_seconds: float = 30.0,
        max_open_seconds: float = 900.0,
    ) -> None:
        if failures is not None and failures < 1:
            raise ValueError(f"failures={failures!r} is invalid: must be >= 1, or None")
        if probe_size < 1:
            raise ValueError(f"probe_size={probe_size!r} is invalid: must be >= 1")
        self._failures = failures
        self._probe_size = probe_size
        self._open_seconds = open_seconds
        self._max_open_seconds = max(max_open_seconds, open_seconds)
        self.state = CircuitState.CLOSED
        self._failed_in_row = 0
        self._reopenings = 0
        self._until = 0.0
        self._probe_out = False

    def admit(self, now: float) -> Admission:
        """Whether to receive now, and how many messages at most."""
        if self.state is CircuitState.CLOSED:
            return Admission(may_receive=True)
        change = None
        if self.state is CircuitState.OPEN:
            if now < self._until:
                return Admission(may_receive=False, wait=self._until - now)
            change = self._move(CircuitState.HALF_OPEN, now, "open time over: one probe batch")
        if self._probe_out:
            return Admission(may_receive=False, wait=None, change=change)
        self._probe_out = True
        return Admission(True, at_most=self._probe_size, probe=True, change=change)

    def open_for(self, now: float) -> float:
        """Seconds until the open circuit's time is over (0 unless open)."""
        return max(0.0, self._until - now) if self.state is CircuitState.OPEN else 0.0

    def probe_unused(self) -> None:
        """The probe's receive got no message: the next `admit` sends another."""
        self._probe_out = False

    def record(
        self,
        now: float,
        *,
        failed: bool,
        overloaded: bool = False,
        retry_after: float | None = None,
        probe: bool = False,
    ) -> Change | None:
        """How a batch ended: `failed` (its handler failed it), `overloaded` (it raised
        `Overloaded(retry_after)`), and whether it was the probe."""
        if self.state is CircuitState.CLOSED:
            return self._closed(
                now, failed=failed or overloaded, overloaded=overloaded, retry_after=retry_after
            )
        if not probe or self.state is not CircuitState.HALF_OPEN:
            if overloaded and retry_after is not None:  # a batch from before it opened
                self._until = max(self._until, now + retry_after)
            return None
        self._probe_out = False
        if not (failed or overloaded):
            self._failed_in_row = self._reopenings = 0
            return self._move(CircuitState.CLOSED, now, "the probe batch succeeded")
        self._reopenings += 1
        backoff = min(self._max_open_seconds, self._open_seconds * 2.0**self._reopenings)
        why = "the probe batch was overloaded" if overloaded else "the probe batch failed"
        return self._open(now, max(backoff, retry_after or 0.0), why)

    def _closed(
        self, now: float, *, failed: bool, overloaded: bool, retry_after: float | None
    ) -> Change | None:
        if overloaded:
            seconds = self._open_seconds if retry_after is None else retry_after
            return self._open(now, seconds, "a handler raised Overloaded")
        self._failed_in_row = self._failed_in_row + 1 if failed else 0
        if self._failures is not None and self._failed_in_row >= self._failures:
            return self._open(
                now, self._open_seconds, f"{self._failed_in_row} failed batches in a row"
            )
        return None

    def _open(self, now: float, seconds: float, why: str) -> Change:
        self._until = now + seconds
        self._failed_in_row = 0
        return self._move(CircuitState.OPEN, now, why)

    def _move(self, after: CircuitState, now: float, why: str) -> Change:
        before, self.state = self.state, after
        until = self._until if after is CircuitState.OPEN else None
        return Change(before, after, now, why, until)
