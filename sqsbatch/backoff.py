"""Exponential backoff with a cap and jitter, for `retry(delay_seconds=...)`."""

from __future__ import annotations

import random as _random

from sqsbatch._core.delays import exponential_delay

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
    source = (random or _SYSTEM_RANDOM) if jitter else None
    return exponential_delay(
        attempts, base_seconds, factor=factor, max_seconds=max_seconds, random=source
    )
