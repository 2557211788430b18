"""The rate limit (`max_messages_per_second`) as a token bucket on a clock it is given.

Applied before receiving: a receive asks for at most what the bucket grants (`take`), and what
SQS did not return goes back (`give_back`), so nothing is ever received beyond the rate and no
message waits, invisible, for its turn. The bucket holds at most `burst` tokens (one second's
worth, at least 1), full at start. Per process: a fleet divides the rate by its task count.
The redrive daemon paces its moves back to the sources with the same bucket.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqsbatch.errors import ConfigError

__all__ = ["Grant", "TokenBucket"]


@dataclass(frozen=True)
class Grant:
    """How many messages one receive may ask for now (0..wanted); when none, how many seconds
    until one may."""

    count: int
    wait: float = 0.0


class TokenBucket:
    """`rate` messages a second on average, at most `burst` at once."""

    def __init__(self, rate: float, *, now: float, burst: float | None = None) -> None:
        number = isinstance(rate, int | float) and not isinstance(rate, bool)
        if not (number and rate > 0 and math.isfinite(rate)):
            raise ConfigError(f"rate={rate!r} is invalid (accepted: messages/s > 0)")
        self.rate = rate
        self.burst = max(1.0, rate) if burst is None else burst
        if self.burst < 1:
            raise ConfigError(f"burst={burst!r} is invalid (accepted: >= 1)")
        self._tokens = self.burst
        self._last = now

    def take(self, now: float, wanted: int) -> Grant:
        """Up to `wanted` messages, now; or none, and how long to wait for one."""
        self._refill(now)
        count = min(wanted, math.floor(self._tokens + 1e-9))  # 0.99999... after a wait is 1
        if count > 0:
            self._tokens -= count
            return Grant(count)
        if wanted <= 0:
            return Grant(0)
        return Grant(0, wait=(1.0 - self._tokens) / self.rate)

    def wait_seconds(self, count: int, now: float) -> float:
        """How long until `count` more tokens are in the bucket (0 when they already are)."""
        self._refill(now)
        return max(0.0, (count - self._tokens) / self.rate)

    def give_back(self, count: int, now: float) -> None:
        """`count` granted messages that a receive did not return."""
        self._refill(now)
        self._tokens = min(self.burst, self._tokens + max(0, count))

    def _refill(self, now: float) -> None:
        elapsed = max(0.0, now - self._last)  # a clock that steps back adds nothing
        self._tokens = min(self.burst, self._tokens + elapsed * self.rate)
        self._last = max(self._last, now)
