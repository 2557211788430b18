"""Exponential backoff with a cap and jitter, for `retry(delay_seconds=...)`."""

from __future__ import annotations

import math
import random as _random

__all__ = ["exponential_backoff"]

_SYSTEM_RANDOM = _random.Random()


def exponential_backoff(
    attempts: int,
    base_seconds: float,
    *,
    factor: float = 2.0,
    max_seconds: float = 3600.0,
    jitter: bool = True,
    random: _random.Random | None = None,
) -> int:
    """`min(max_seconds, base * factor**(attempts-1)) + U(0, base)`, as whole seconds.

    `attempts` is `message.attempts` (1 on the first delivery), so the first retry waits about
    `base_seconds`. The result is rounded up to whole seconds because SQS takes whole seconds;
    the jitter spreads a burst of failures so that they do not come back together.
    """
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
    if jitter:
        delay += (random or _SYSTEM_RANDOM).uniform(0, base_seconds)
    return math.ceil(delay)


def pause_seconds(
    failures: int, *, base: float = 0.2, cap: float = 20.0, random: _random.Random | None = None
) -> float:
    """How long a loop waits after `failures` consecutive failed calls: exponential, capped,
    with "equal jitter" (between half and all of the step) so that replicas do not retry in step.
    """
    step: float = min(cap, base * 2.0 ** min(max(failures, 1) - 1, 32))
    return step / 2 + (random or _SYSTEM_RANDOM).uniform(0, step / 2)
