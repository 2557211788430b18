"""A FIFO receive's `ReceiveRequestAttemptId`: fresh for a new receive, the same for a retry.

SQS asks for it on FIFO queues: a `ReceiveMessage` that failed on the way back (a network
error, a read timeout, a throttle) may still have handed messages out, which then stay hidden,
and hold their groups, until their visibility timeout ends. The same receive sent again with
the same attempt id within 5 minutes returns those same messages instead. So a poller's
receive after a transient failure re-sends the failed receive's attempt id (`failed` keeps it
for the next receive that asks for as many messages: the same receive; it is handed to exactly
one receive); every other receive gets a fresh one (`claim`). Attempt ids past SQS's 5 minutes
are dropped: SQS would no longer match them.

Pure: the ids come from the shell (`fresh`), `now` is passed in; the pollers hold this under
their lock (its slots receive in parallel).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["ATTEMPT_SECONDS", "ReceiveAttempts"]

ATTEMPT_SECONDS = 300.0
"""How long SQS matches a receive attempt id (5 minutes)."""


@dataclass
class ReceiveAttempts:
    """The attempt ids of one poller's receives on a FIFO queue."""

    fresh: Callable[[], str]
    retries: list[tuple[str, int, float]] = field(default_factory=list)
    """(attempt id, MaxNumberOfMessages, when first sent) of failed receives, to send again."""
    out: dict[str, float] = field(default_factory=dict)
    """Attempt ids of receives in flight -> when each was first sent (a retry keeps it)."""

    def claim(self, asked: int, now: float) -> str:
        """The attempt id of a receive asking for `asked` messages: a failed receive's (the
        oldest that asked as many, first sent less than 5 minutes ago), else a fresh one."""
        self.retries = [retry for retry in self.retries if now - retry[2] < ATTEMPT_SECONDS]
        for index, (attempt_id, count, sent) in enumerate(self.retries):
            if count == asked:
                del self.retries[index]
                self.out[attempt_id] = sent
                return attempt_id
        attempt_id = self.fresh()
        self.out[attempt_id] = now
        return attempt_id

    def failed(self, attempt_id: str, asked: int) -> None:
        """The receive failed for a passing reason: the next receive asking as many sends its
        attempt id again."""
        sent = self.out.pop(attempt_id, None)
        if sent is not None:
            self.retries.append((attempt_id, asked, sent))

    def answered(self, attempt_id: str) -> None:
        """The receive was answered (or failed for good): its attempt id is done with."""
        self.out.pop(attempt_id, None)
