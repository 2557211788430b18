"""When a dead-lettered message is due to go back: exponential backoff with a cap and jitter.

    delay(n) = min(max_delay, base_delay * factor**n) + U(0, jitter)
    due      = dead-lettered-at + delay(n)

`n` is how many times the message was already redriven (the envelope's `redrives`). The jitter of
one message at one redrive count is drawn from a `random.Random` seeded with its id and `n` (the
daemon's `jitter_random`, passed in): every receive of the message, on every replica, computes the
same due time, so a message is never re-rolled into the future by being looked at, and replicas
agree on it.

Pure: no clock, no I/O, no random source of its own. Validation errors are one line naming the
value and the accepted range.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from sqsbatch._core.delays import Uniform
from sqsbatch.config import check_int
from sqsbatch.errors import ConfigError

__all__ = ["MAX_DELAY_SECONDS", "BackoffPolicy", "JitterSource"]

MAX_DELAY_SECONDS = 1_209_600
"""14 days, SQS's longest retention: a message due later than that would expire first."""
_MAX_BASE_SECONDS = 86_400
JitterSource = Callable[[str, int], Uniform]
"""Gives the random source for a message id at a redrive count."""
_MAX_FACTOR = 100.0
_MAX_REDRIVES = 1_000
_CEILING_SECONDS = 43_200


@dataclass(frozen=True)
class BackoffPolicy:
    """How long a dead-lettered message waits before it goes back, and how often it may.

    `jitter=None` means "as much as `base_delay`", the seeds' `random(0, base)`. `hold_seconds`
    is how long a message that stays (exhausted, or with nowhere to go) is hidden between two
    reports, so that it neither crowds the due ones out of receives nor vanishes for long.
    """

    base_delay: float = 60.0
    factor: float = 2.0
    max_delay: float = 3600.0
    jitter: float | None = None
    max_redrives: int = 5
    hold_seconds: int = 300

    def __post_init__(self) -> None:
        _check_number("base_delay", self.base_delay, 0, _MAX_BASE_SECONDS)
        _check_number("factor", self.factor, 1, _MAX_FACTOR, "number")
        _check_number("max_delay", self.max_delay, 0, MAX_DELAY_SECONDS)
        if self.max_delay < self.base_delay:
            raise ConfigError(
                f"max_delay={self.max_delay!r} is invalid: it must be >= base_delay="
                f"{self.base_delay!r} (accepted: {_n(self.base_delay)}..{MAX_DELAY_SECONDS})"
            )
        if self.jitter is not None:
            _check_number("jitter", self.jitter, 0, _MAX_BASE_SECONDS)
        check_int("max_redrives", self.max_redrives, 0, _MAX_REDRIVES)
        check_int("hold_seconds", self.hold_seconds, 1, _CEILING_SECONDS)

    @property
    def jitter_seconds(self) -> float:
        """The jitter's upper bound in seconds (`base_delay` when not given)."""
        return self.base_delay if self.jitter is None else self.jitter

    def backoff(self, redrives: int) -> float:
        """The delay before redrive number `redrives + 1`, without jitter."""
        if redrives < 0:
            raise ValueError(f"redrives={redrives!r} is invalid: must be >= 0")
        try:
            grown = self.base_delay * self.factor**redrives
        except OverflowError:
            grown = math.inf
        return min(self.max_delay, grown)

    def delay(self, redrives: int, random: Uniform) -> float:
        """`min(max_delay, base_delay * factor**redrives) + U(0, jitter)`, in seconds."""
        jitter = self.jitter_seconds
        return self.backoff(redrives) + (random.uniform(0, jitter) if jitter else 0.0)

    def due_at(self, dead_lettered_at: float, redrives: int, random: Uniform) -> float:
        """When the message may go back (epoch seconds).

        Pass the daemon's `jitter_random(id, redrives)` as `random` so that every receive of the
        message, on every replica, finds the same due time.
        """
        return dead_lettered_at + self.delay(redrives, random)

    def exhausted(self, redrives: int) -> bool:
        """True once the message has been redriven `max_redrives` times already."""
        return redrives >= self.max_redrives


def _check_number(name: str, value: object, low: float, high: float, unit: str = "seconds") -> None:
    number = (
        float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    )
    if number is None or not math.isfinite(number) or not low <= number <= high:
        raise ConfigError(f"{name}={value!r} is invalid (accepted: {unit} {_n(low)}..{_n(high)})")


def _n(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else repr(number)
