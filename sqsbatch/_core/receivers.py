"""How many receivers a poller runs at once: one while the queue is quiet, more while it is not.

A poller has `max_concurrency` slots. A receiver takes a slot at its first receive and holds it
while it assembles its own batch window and, when the window yields a batch, until the handler
is done and the batch is settled; then, when a receiver would start now, it goes on receiving in
the same slot (no new unit of work, no news for the loop). Receivers grow with demand: a receive
that came back full (as many messages as it asked for, 10 or what its window could still take)
is evidence of a backlog and lets one more free slot start receiving; a short one shrinks that
allowance back by one, so an empty queue costs one long poll at a time whatever
`max_concurrency` is. A receiver asks only for what its own window can take, so nothing is
prefetched and later released. On a FIFO queue a window split by group (`_core.groups`) leaves
batches `waiting` for a slot: free slots start on them before any new receiver does. On a FIFO
queue (`fifo`) a receive that got anything counts as full: it is the groups in flight, not an
empty queue, that cut a FIFO receive short, and each batch settled frees its groups' next
messages for the slot's next receive.

Pure: no clock, no I/O, no lock; the shells hold it under their lock and execute what it says.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Receivers"]


@dataclass
class Receivers:
    """The slots of one poller: `receiving` assemble batches, `handling` run or settle one;
    `waiting`: batches received (a FIFO window's other groups) that no slot holds yet."""

    slots: int
    allowed: int = 1
    receiving: int = 0
    handling: int = 0
    waiting: int = 0
    fifo: bool = False

    @property
    def in_flight(self) -> int:
        return self.receiving + self.handling + self.waiting

    @property
    def takers(self) -> int:
        """How many free slots would start on a waiting batch now."""
        return max(0, min(self.waiting, self.slots - self.receiving - self.handling))

    def take_waiting(self) -> int:
        """Free slots start on waiting batches (counted as handling from here on): how many."""
        count = self.takers
        self.waiting -= count
        self.handling += count
        return count

    @property
    def startable(self) -> int:
        """How many receivers `start` would start now, unless stopping or idle."""
        return max(0, min(self.allowed - self.receiving, self.slots - self.in_flight))

    def start(self, *, stopping: bool, idle: bool) -> int | None:
        """How many receivers to start now (counted as receiving from here on).

        None: the run is over (idle, and nothing is received or handled any more). Stopping or
        idle starts none; otherwise free slots start receiving up to the allowance.
        """
        if idle and not self.in_flight:
            return None
        if stopping or idle:
            return 0
        count = self.startable
        self.receiving += count
        return count

    def received(self, *, got: int, asked: int) -> bool:
        """Record one receive; True when its receiver is now surplus (more receivers than the
        allowance), so it ends unless its window already holds messages."""
        if got >= asked or (self.fifo and got > 0):
            self.allowed = min(self.slots, self.allowed + 1)
        else:
            self.allowed = max(1, self.allowed - 1)
        return self.receiving > self.allowed

    def stopped_receiving(self, *, with_batch: bool) -> bool:
        """A receiver is done receiving: its slot is free, or its batch goes to the handler.
        True when the loop has news: the slot is free, or another receiver could start."""
        self.receiving -= 1
        if not with_batch:
            return True
        self.handling += 1
        return self.startable > 0 or self.takers > 0

    def settled(self, *, again: bool = False, stopping: bool = False, idle: bool = False) -> bool:
        """A batch was handled and settled. `again`: its slot goes on receiving (True, counted as
        receiving) when a receiver would start now (as `start` decides); else its slot is free."""
        self.handling -= 1
        if again and not stopping and not idle and self.startable > 0:
            self.receiving += 1
            return True
        return False
