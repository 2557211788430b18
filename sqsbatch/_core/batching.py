"""Batch assembly: size or timeout, whichever comes first.

The window opens when the batch's first message is received and is never reset by later ones.
A full batch goes at once. With a timeout of 0 the batch is whatever is available right now:
receives continue only while they come back full. Pure: `now` is passed in (monotonic seconds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from sqsbatch.limits import SQS_LIMITS, SqsLimits

__all__ = ["BatchWindow"]

T = TypeVar("T")


@dataclass
class BatchWindow(Generic[T]):
    max_size: int
    timeout_seconds: float
    limits: SqsLimits = SQS_LIMITS
    items: list[T] = field(default_factory=list)
    opened_at: float | None = None
    last_receive_full: bool = False

    def add(self, received: list[T], *, asked: int, now: float) -> None:
        """Record one receive that asked for `asked` messages and got `received`."""
        if len(self.items) + len(received) > self.max_size:
            raise ValueError("a receive returned more messages than were asked for")
        if received and self.opened_at is None:
            self.opened_at = now
        self.items.extend(received)
        self.last_receive_full = len(received) == asked

    @property
    def is_open(self) -> bool:
        return self.opened_at is not None

    @property
    def is_full(self) -> bool:
        return len(self.items) >= self.max_size

    def remaining(self, now: float) -> float:
        """Seconds left in the window (the whole timeout while no message has arrived)."""
        if self.opened_at is None:
            return self.timeout_seconds
        return max(0.0, self.timeout_seconds - (now - self.opened_at))

    def is_due(self, now: float) -> bool:
        """Whether the batch goes to the handler now."""
        if self.is_full:
            return True
        if not self.is_open or self.remaining(now) > 0:
            return False
        # The window has closed. A zero window still takes what is there right now.
        return self.timeout_seconds > 0 or not self.last_receive_full

    def want(self) -> int:
        """How many messages the next `ReceiveMessage` asks for."""
        return min(self.limits.max_entries, self.max_size - len(self.items))

    def wait_seconds(self, now: float, *, cap: float | None = None) -> int:
        """`WaitTimeSeconds` for the next receive: never longer than the window has left.

        Before the first message the poll waits as long as SQS allows (or `cap`, the time left
        before the poller goes idle or stops). Long polls are whole seconds: the wait is rounded
        down while a second or more is left, and the last fraction up to one second, so a window
        that receives nothing more closes less than a second late, where short polls would spin
        (and bill) until it closes.
        """
        wait = float(self.limits.max_wait_seconds)
        if self.is_open:
            wait = self.remaining(now)
        if cap is not None and not self.is_open:
            wait = min(wait, cap)
        whole = math.floor(wait) if wait >= 1 else math.ceil(wait)
        return max(0, min(self.limits.max_wait_seconds, whole))

    def take(self) -> list[T]:
        """Hand over the batch and start a new, closed window."""
        items, self.items = self.items, []
        self.opened_at = None
        self.last_receive_full = False
        return items
