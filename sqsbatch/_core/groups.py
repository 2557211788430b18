"""FIFO groups in parallel (issue 31, item 3): one batch per message group, no I/O.

SQS hands out no message of a FIFO group while an earlier one of that group is in flight, so
receives in parallel slots never get the same group twice at once: what a receive returns of a
group is the group's next messages, in order. With `fifo_batches = "by_group"` a poller splits
a batch window's messages into one batch per group (`group_batches`): the receiving slot keeps
the first, and the others wait (`Waiting`) for a slot of their own, which a free slot, or the
next slot whose batch is settled, takes before it receives again. Each group's batch is settled
when its own handler ends, so a slow group holds up no other group's deletes, and the group's
next messages come from SQS only once its batch is settled. A waiting batch's messages are kept
hidden as a running batch's are (`Waiting.due`: the poller's loop extends them when their
heartbeat is due), so a group never shows again while one of its batches waits.

Pure: no clock, no lock; the shells hold `Waiting` and `Receivers` under their lock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from sqsbatch._core.heartbeat import next_heartbeat
from sqsbatch._core.message import _Delivery
from sqsbatch._core.receivers import Receivers

__all__ = ["Waiting", "group_batches", "splits_groups"]

D = TypeVar("D", bound=_Delivery)


def splits_groups(*, fifo: bool, fifo_batches: str, slots: int, probe: bool = False) -> bool:
    """Whether a poller splits a batch window by group: on a FIFO queue with `by_group` and
    more than one slot (with one, the groups would take turns in it, and each group's batch
    would cost a delete call of its own for nothing), but not the circuit's probe (the probe
    receive's messages are one batch, whatever they hold)."""
    return fifo and fifo_batches == "by_group" and slots > 1 and not probe


def group_batches(deliveries: Sequence[D]) -> list[list[D]]:
    """One batch per `MessageGroupId`: groups in the order of their first message, each
    group's messages in the order they were received (SQS's order within a group)."""
    batches: dict[str | None, list[D]] = {}
    for delivery in deliveries:
        batches.setdefault(delivery.group_id, []).append(delivery)
    return list(batches.values())


@dataclass
class Waiting:
    """Group batches received, waiting for a slot, oldest first; `Receivers.waiting` counts
    them (every change here goes through the poller's `Receivers` too)."""

    batches: deque[list[_Delivery]] = field(default_factory=deque)

    def __len__(self) -> int:
        return len(self.batches)

    def put(self, receivers: Receivers, batches: Sequence[list[_Delivery]]) -> None:
        """A receiving slot's window, split: the batches it does not keep wait for a slot."""
        self.batches.extend(batches)
        receivers.waiting += len(batches)

    def hand_out(self, receivers: Receivers) -> list[list[_Delivery]]:
        """The waiting batches that free slots start on now (as many as `Receivers` allows)."""
        return [self.batches.popleft() for _ in range(receivers.take_waiting())]

    def next(self, receivers: Receivers) -> list[_Delivery] | None:
        """The next waiting batch, for a slot whose batch is settled (it stays handling)."""
        if not self.batches:
            return None
        receivers.waiting -= 1
        return self.batches.popleft()

    def due(self, now: float, visibility_timeout: int) -> list[_Delivery]:
        """Every waiting message when any needs its visibility extended now (their heartbeat,
        as a running batch's: `heartbeat_entries` then extends only those that need it)."""
        waiting = [delivery for batch in self.batches for delivery in batch]
        if not waiting or next_heartbeat(waiting, visibility_timeout) > now:
            return []
        return waiting
