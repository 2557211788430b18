"""ECS task scale-in protection: when to take it, renew it and drop it. No I/O, no clock.

A poller that turns busy (a batch in hand) takes protection for `expires_minutes`; while it
stays busy it renews it once half of that has passed (a long handler stays protected, and a
wedged process loses it at the expiry); when it turns idle it drops it. One call at a time: a
call whose answer is awaited holds the next back, and a failed call is tried again after
`retry_seconds`; a failed or unanswered take counts as held (it may have reached the agent)
until dropped. A protection whose expiry has passed is known to be gone without a call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["MAX_EXPIRES_MINUTES", "ProtectionCall", "ProtectionPlan", "expires_minutes_for"]

MAX_EXPIRES_MINUTES = 2880
"""48 hours, the longest protection ECS grants in one call."""


@dataclass(frozen=True)
class ProtectionCall:
    """One `PUT $ECS_AGENT_URI/task-protection/v1/state`."""

    enabled: bool
    expires_minutes: int | None = None

    def body(self) -> dict[str, object]:
        if not self.enabled:
            return {"ProtectionEnabled": False}
        return {"ProtectionEnabled": True, "ExpiresInMinutes": self.expires_minutes}


def expires_minutes_for(handler_timeout: float) -> int:
    """Long enough for the longest batch sqsbatch holds (`handler_timeout`, at most SQS's 12 h
    visibility ceiling) plus a minute: whole minutes, 1..2880."""
    longest = min(handler_timeout, 43_200.0)
    return max(1, min(MAX_EXPIRES_MINUTES, math.ceil(longest / 60) + 1))


class ProtectionPlan:
    """Which protection call is due, if any, given whether the process is busy."""

    def __init__(self, *, expires_minutes: int, retry_seconds: float = 30.0) -> None:
        if not 1 <= expires_minutes <= MAX_EXPIRES_MINUTES:
            raise ValueError(f"expires_minutes={expires_minutes!r} is invalid: 1..2880")
        self.expires_minutes = expires_minutes
        self._retry_seconds = retry_seconds
        self._held_until: float | None = None  # when the agent's protection lapses
        self._held_since = 0.0
        self._pending: tuple[ProtectionCall, float] | None = None
        self._failed_at: float | None = None

    @property
    def held(self) -> bool:
        return self._held_until is not None

    def step(self, now: float, *, busy: bool) -> ProtectionCall | None:
        """The call to make now (then `done` with how it went), or None."""
        if self._pending is not None:
            return None
        if self._held_until is not None and now >= self._held_until:
            self._held_until = None  # lapsed: ECS dropped it by itself
        if self._failed_at is not None and now - self._failed_at < self._retry_seconds:
            return None
        call = self._due(now, busy=busy)
        if call is not None:
            self._pending = (call, now)
        return call

    def _due(self, now: float, *, busy: bool) -> ProtectionCall | None:
        if not busy:
            return ProtectionCall(enabled=False) if self.held else None
        half_life = self.expires_minutes * 30.0
        if not self.held or now - self._held_since >= half_life:
            return ProtectionCall(enabled=True, expires_minutes=self.expires_minutes)
        return None

    def done(self, now: float, *, ok: bool) -> None:
        """How the pending call went (`now`: when its answer came, or it gave up)."""
        if self._pending is None:
            return
        call, sent_at = self._pending
        self._pending = None
        if not ok:
            self._failed_at = now
            if call.enabled:  # it may have reached the agent: drop it on idle, to be sure
                self._held_until = sent_at + self.expires_minutes * 60.0
                self._held_since = -math.inf  # and take it again while busy
            return
        self._failed_at = None
        if call.enabled:  # counted from the send: the agent may have applied it at once
            self._held_since = sent_at
            self._held_until = sent_at + self.expires_minutes * 60.0
        else:
            self._held_until = None
