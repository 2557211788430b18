"""When a long-running loop is alive, and when it has stalled: no I/O, no clock.

A poller is alive while it completes receives (an empty long poll too) or while every one of its
slots is busy with a handler still inside its `handler_timeout` (a full poller is not stalled).
`Liveness` turns that evidence into two answers for the shell: touch the health file now, and
the loop has stalled (neither receiving nor busy for `stall_seconds`). The shells feed it the
time as `now`; `sqsbatch._shell.health` does the touching.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "BUSY_TOUCH_SECONDS",
    "STORE_CALL_SECONDS",
    "Liveness",
    "Pulse",
    "all_busy",
    "default_stall_seconds",
]

BUSY_TOUCH_SECONDS = 1.0
"""While busy (and not receiving), touch the health file at most this often."""


STORE_CALL_SECONDS = 21.0
"""The longest a healthy idempotency store's claim may take: the DynamoDB store's client tries
3 times, each within a 2 s connect and 5 s read timeout (`_shell/dynamodb_store.py`)."""


def default_stall_seconds(
    long_poll_seconds: float, visibility_timeout: float, *, guarded: bool = False
) -> float:
    """Three long polls plus the visibility timeout: a healthy loop completes a receive at least
    every long poll, and a batch settles within its visibility timeout or reappears. With an
    idempotency guard, a receive also waits for its claim (`STORE_CALL_SECONDS` more)."""
    return 3 * long_poll_seconds + visibility_timeout + (STORE_CALL_SECONDS if guarded else 0.0)


def all_busy(
    now: float, handler_started: Iterable[float], *, slots: int, handler_timeout: float
) -> bool:
    """Every slot runs a handler, and every one is still inside its `handler_timeout`."""
    started = list(handler_started)
    return len(started) >= slots and all(now - start < handler_timeout for start in started)


@dataclass(frozen=True)
class Pulse:
    """What the shell does after one look: touch the health file; the loop has stalled."""

    touch: bool
    stalled_for: float | None = None


_TOUCH = Pulse(touch=True)


@dataclass
class Liveness:
    """The evidence that a loop is alive. `stall_seconds` None: no watchdog."""

    stall_seconds: float | None
    alive_at: float
    touched_at: float | None = None

    def received(self, now: float) -> Pulse:
        """A receive completed (messages or not): alive; touch."""
        self.alive_at = max(self.alive_at, now)
        self.touched_at = now
        return _TOUCH

    def look(self, now: float, *, busy: bool, stopping: bool) -> Pulse:
        """The loop's periodic look. Busy counts as alive (a touch at most every
        `BUSY_TOUCH_SECONDS`); stalled once neither for `stall_seconds`, unless stopping (a
        stopping loop receives nothing by design and ends on its own)."""
        touch = False
        if busy:
            self.alive_at = max(self.alive_at, now)
            if self.touched_at is None or now - self.touched_at >= BUSY_TOUCH_SECONDS:
                self.touched_at = now
                touch = True
        quiet = now - self.alive_at
        if self.stall_seconds is not None and not stopping and quiet >= self.stall_seconds:
            return Pulse(touch=touch, stalled_for=quiet)
        return Pulse(touch=touch)

    def stall_message(self, queue: str, quiet: float) -> str:
        """The watchdog's one line."""
        return (
            f"consumer of {queue} stalled: no receive completed and no handler kept every slot "
            f"busy for {quiet:.1f} s (stall_seconds={self.stall_seconds:g}); stopping so that "
            "the process can be replaced"
        )
