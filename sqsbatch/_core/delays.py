"""Every backoff formula, once: a retried message's delay, a failing loop's pause, the wait
between rounds of a batch call's entry retries, and the wait before botocore retries a failed
request (`call_retry_seconds`). The random source comes in as an argument."""

from __future__ import annotations

import math
from typing import Protocol

__all__ = [
    "CALL_RETRY_CAP_SECONDS",
    "THROTTLED_BASE_SECONDS",
    "TRANSIENT_BASE_SECONDS",
    "Uniform",
    "call_retry_seconds",
    "exponential_delay",
    "pause_seconds",
    "round_pause",
]

TRANSIENT_BASE_SECONDS = 0.05
"""The first retry's longest wait after a transient failure (a 5xx, a connection cut): AWS's
2026 standard retry mode."""
THROTTLED_BASE_SECONDS = 1.0
"""The first retry's longest wait after SQS throttled a request: it asked for less."""
CALL_RETRY_CAP_SECONDS = 20.0
"""The longest step of either, before jitter (botocore's `MAX_BACKOFF`)."""


class Uniform(Protocol):
    """A random source (`random.Random` is one)."""

    def uniform(self, a: float, b: float) -> float: ...


def exponential_delay(
    attempts: int,
    base_seconds: float,
    *,
    factor: float,
    max_seconds: float,
    random: Uniform | None,
) -> int:
    """`min(max_seconds, base * factor**(attempts-1)) + U(0, base)`, as whole seconds (no jitter
    without a random source). See `sqsbatch.exponential_backoff`."""
    if attempts < 1:
        raise ValueError(f"attempts={attempts!r} is invalid: must be >= 1")
    if base_seconds < 0 or max_seconds < 0:
        raise ValueError("base_seconds and max_seconds must be >= 0")
    if factor < 1:
        raise ValueError(f"factor={factor!r} is invalid: must be >= 1")
    try:
        grown = base_seconds * factor ** (attempts - 1)
    except OverflowError:
        grown = math.inf
    delay = min(max_seconds, grown)
    if random is not None:
        delay += random.uniform(0, base_seconds)
    return math.ceil(delay)


def pause_seconds(failures: int, *, random: Uniform, base: float = 0.2, cap: float = 20.0) -> float:
    """How long a loop waits after `failures` consecutive failed calls: exponential, capped,
    with "equal jitter" (between half and all of the step) so that replicas do not retry in step.
    """
    step: float = min(cap, base * 2.0 ** min(max(failures, 1) - 1, 32))
    return step / 2 + random.uniform(0, step / 2)


def round_pause(rounds: int) -> float:
    """How long a batch call waits before its round `rounds` (0 before the first two): entries
    SQS failed for a passing reason are retried after 0.1 s, then 0.2 s."""
    return 0.0 if rounds <= 1 else 0.1 * 2 ** (rounds - 2)


def call_retry_seconds(attempt: int, *, throttled: bool, draw: float) -> float:
    """How long botocore waits before retrying a request whose attempt `attempt` (1-based)
    failed: "full jitter" over an exponential step, `draw * min(cap, base * 2**(attempt-1))`
    with `draw` in [0, 1). The base is AWS's 2026 standard retry mode's: 50 ms after a transient
    failure (botocore 1.40's standard mode waits up to 1 s, as for a throttle, which parks a
    poller's slot for nothing), 1 s after a throttle."""
    base = THROTTLED_BASE_SECONDS if throttled else TRANSIENT_BASE_SECONDS
    step = min(CALL_RETRY_CAP_SECONDS, base * 2.0 ** min(max(attempt, 1) - 1, 32))
    return draw * step
