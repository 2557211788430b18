"""One thread that keeps time for every running batch of a sync poller (threads flavour only).

A sync handler runs inline, on its slot's own thread; the slot arms a `Ticket` on the poller's
`Watcher` before the handler starts and disarms it when the handler ends. The watcher sleeps
until the earliest ticket is due (a heartbeat, or `handler_timeout`), so a batch whose handler
ends before then costs a lock and a heap push, and no thread switch: arming wakes the watcher
only when the new ticket is due before the watcher planned to wake anyway.

A due ticket's action (`due`: heartbeat, or give up past the deadline) runs on a short-lived
thread of its own, so one slow call cannot delay another batch's timeout, and holding the
ticket's lock: `disarm` takes the same lock, so a handler's end and its ticket's action never
overlap, and exactly one of them owns the batch. A disarmed ticket stays in the heap until it
comes up (lazy deletion), holding nothing; the heap is compacted when most of it is dead.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable

__all__ = ["MAX_SLEEP_SECONDS", "Ticket", "Watcher"]

log = logging.getLogger("sqsbatch")

MAX_SLEEP_SECONDS = 1.0
"""The watcher looks at its heap at least this often, whatever it plans."""
_COMPACT_AT = 64
"""Dead tickets in the heap before it is compacted (when they are also most of it)."""

Due = Callable[[], float | None]
"""A due ticket's action: the next time it is due, or None once it took its batch over."""


class Ticket:
    """A running batch, as the watcher knows it: when it is next due and what to do then."""

    __slots__ = ("due", "lock", "queued", "taken", "wake_at")

    def __init__(self, wake_at: float, due: Due) -> None:
        self.wake_at = wake_at
        self.due: Due | None = due  # None once disarmed or taken: it holds nothing any more
        self.lock = threading.Lock()
        self.queued = False  # in the heap (guarded by the watcher's lock)
        self.taken = False  # its action took the batch over (guarded by `lock`)


class Watcher:
    """The poller's one time keeper: a daemon thread, started at the first `arm`."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, *, max_sleep: float = MAX_SLEEP_SECONDS
    ) -> None:
        self._clock = clock
        self._max_sleep = max_sleep
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Ticket]] = []
        self._order = itertools.count()
        self._dead = 0
        self._plan = -math.inf  # when the thread will look next (-inf: not started)
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.wakes = 0
        """How many times the thread looked at its heap (for tests)."""
        self.notifies = 0
        """How many times a ticket woke the thread before its plan (for tests)."""

    @property
    def clock(self) -> Callable[[], float]:
        return self._clock

    def arm(self, wake_at: float, due: Due) -> Ticket:
        """Watch a batch from now on: `due` runs (on a thread of its own) at `wake_at`."""
        ticket = Ticket(wake_at, due)
        with self._cond:
            self._push(ticket)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="sqsbatch-watcher", daemon=True
                )
                self._thread.start()
            elif wake_at < self._plan:
                self._wake()
        return ticket

    def disarm(self, ticket: Ticket) -> bool:
        """The handler ended: whether its slot still owns the batch (False: the ticket's
        action took it over). Waits for an action of this ticket under way; none runs after."""
        with ticket.lock:
            owned = not ticket.taken
            ticket.due = None
        with self._cond:
            if ticket.queued:
                self._dead += 1
                if self._dead >= _COMPACT_AT and 2 * self._dead > len(self._heap):
                    self._heap = [entry for entry in self._heap if entry[2].due is not None]
                    heapq.heapify(self._heap)
                    self._dead = sum(1 for entry in self._heap if entry[2].due is None)
        return owned

    @property
    def queued(self) -> int:
        """Tickets in the heap, dead ones too (for tests)."""
        with self._cond:
            return len(self._heap)

    def stop(self) -> None:
        """No ticket is armed any more: the thread ends."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _wake(self) -> None:
        self.notifies += 1
        self._plan = -math.inf  # woken: no second notify until it has looked again
        self._cond.notify()

    def _push(self, ticket: Ticket) -> None:
        ticket.queued = True
        heapq.heappush(self._heap, (ticket.wake_at, next(self._order), ticket))

    def _run(self) -> None:
        with self._cond:
            while not self._stopping:
                self.wakes += 1
                now = self._clock()
                while self._heap and self._heap[0][0] <= now:
                    _, _, ticket = heapq.heappop(self._heap)
                    ticket.queued = False
                    if ticket.due is None:
                        self._dead -= 1
                        continue
                    threading.Thread(
                        target=self._act, args=(ticket,), name="sqsbatch-watch", daemon=True
                    ).start()
                first = self._heap[0][0] if self._heap else math.inf
                self._plan = min(first, now + self._max_sleep)
                self._cond.wait(self._plan - now)

    def _act(self, ticket: Ticket) -> None:
        """A due ticket's action, holding its lock; re-armed at the next time it returns."""
        with ticket.lock:
            due = ticket.due
            if due is None:  # disarmed since it came up
                return
            try:
                wake_at = due()
            except Exception:  # a bug of ours: no more heartbeats; the slot still settles it
                log.exception("watching a running batch failed")
                return
            if wake_at is None:
                ticket.taken = True
                ticket.due = None
                return
            ticket.wake_at = wake_at
        with self._cond:
            if ticket.due is not None and not self._stopping:
                self._push(ticket)
                if wake_at < self._plan:
                    self._wake()
