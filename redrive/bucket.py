"""A token bucket: at most `rate` messages per second on average, bursts of `capacity`.

Pure: the caller passes `now` (monotonic seconds) to every call; nothing here reads a clock,
so tests drive it with a fake one.
"""

from __future__ import annotations

import math

from sqsbatch.errors import ConfigError

__all__ = ["TokenBucket"]


class TokenBucket:
    """Starts full. `capacity` defaults to one second's worth (at least one token)."""

    def __init__(self, rate: float, *, now: float, capacity: float | None = None) -> None:
        if isinstance(rate, bool) or not isinstance(rate, int | float):
            raise ConfigError(f"rate={rate!r} is invalid (accepted: messages/s > 0)")
        if not math.isfinite(rate) or rate <= 0:
            raise ConfigError(f"rate={rate!r} is invalid (accepted: messages/s > 0)")
        self.rate = float(rate)
        self.capacity = float(capacity) if capacity is not None else max(1.0, self.rate)
        self._tokens = self.capacity
        self._at = now

    def available(self, now: float) -> float:
        """Tokens in the bucket at `now`."""
        self._refill(now)
        return self._tokens

    def take(self, count: int, now: float) -> int:
        """Take up to `count` whole tokens; returns how many were granted."""
        self._refill(now)
        granted = min(count, math.floor(self._tokens))
        self._tokens -= granted
        return granted

    def wait_seconds(self, count: int, now: float) -> float:
        """How long until `count` more tokens are available (0 when they already are)."""
        self._refill(now)
        return max(0.0, (count - self._tokens) / self.rate)

    def _refill(self, now: float) -> None:
        if now > self._at:
            self._tokens = min(self.capacity, self._tokens + (now - self._at) * self.rate)
            self._at = now
