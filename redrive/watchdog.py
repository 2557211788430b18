"""The redrive daemon's stall watchdog: the core's `Liveness`, looked at from a thread of its own.

The daemon's loop is alive while it completes receives (an empty long poll too) and while it
waits for the rate limit's tokens (it is working, not stuck). When it has been neither for
`stall_seconds`, the watchdog says so (`on_stall`, once); the daemon then stops, gives its door
up (each call still out gets one attempt) and `run()` raises, so that the process exits and is
replaced, as a poller's watchdog does (docs/operations.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqsbatch._core.liveness import Liveness, default_stall_seconds

__all__ = ["LOOK_SECONDS", "Watchdog", "default_stall_seconds"]

LOOK_SECONDS = 0.5
"""How often the watchdog looks."""


class Watchdog:
    """`alive()` after each completed receive, `busy()` around a wait that is work; `watching`
    runs the thread for a block. `stall_seconds` None: no watchdog."""

    def __init__(
        self,
        stall_seconds: float | None,
        *,
        clock: Callable[[], float],
        on_stall: Callable[[float], None],
    ) -> None:
        self.stall_seconds = stall_seconds
        self._clock = clock
        self._on_stall = on_stall
        self._lock = threading.Lock()
        self._busy = False
        self._liveness = Liveness(stall_seconds, alive_at=clock())

    def alive(self) -> None:
        with self._lock:
            self._liveness.received(self._clock())

    @contextmanager
    def busy(self) -> Iterator[None]:
        with self._lock:
            self._busy = True
        try:
            yield
        finally:
            with self._lock:
                self._busy = False
                self._liveness.received(self._clock())  # the wait is over: alive from here

    @contextmanager
    def watching(self, stopping: threading.Event) -> Iterator[None]:
        """Look every `LOOK_SECONDS` until the block ends (or the loop is stopping)."""
        done = threading.Event()
        with self._lock:
            self._liveness = Liveness(self.stall_seconds, alive_at=self._clock())
        thread = threading.Thread(
            target=self._watch, args=(stopping, done), name="redrive-watchdog", daemon=True
        )
        if self.stall_seconds is not None:
            thread.start()
        try:
            yield
        finally:
            done.set()

    def look(self, *, stopping: bool = False) -> bool:
        """One look (the thread's, every `LOOK_SECONDS`): whether the loop has stalled, in
        which case `on_stall` was called."""
        with self._lock:
            pulse = self._liveness.look(self._clock(), busy=self._busy, stopping=stopping)
        if pulse.stalled_for is None:
            return False
        self._on_stall(pulse.stalled_for)
        return True

    def _watch(self, stopping: threading.Event, done: threading.Event) -> None:
        while not done.wait(LOOK_SECONDS):
            if self.look(stopping=stopping.is_set()):
                return
