"""exponential_backoff: the seed's min(MAX, base * factor**(attempts-1)) + U(0, base)."""

from __future__ import annotations

import random

import pytest

from sqsbatch import exponential_backoff


@pytest.mark.parametrize(
    ("attempts", "expected"), [(1, 30), (2, 60), (3, 120), (4, 240), (10, 3600), (10_000, 3600)]
)
def test_grows_then_caps(attempts: int, expected: int) -> None:
    assert exponential_backoff(attempts, 30, jitter=False) == expected


def test_jitter_stays_within_base() -> None:
    rng = random.Random(7)
    values = [exponential_backoff(2, 10, random=rng) for _ in range(500)]
    assert min(values) >= 20 and max(values) <= 30 and len(set(values)) > 5


def test_seeded_random_is_repeatable() -> None:
    first = [exponential_backoff(3, 5, random=random.Random(1)) for _ in range(3)]
    assert first == [exponential_backoff(3, 5, random=random.Random(1)) for _ in range(3)]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"attempts": 0, "base_seconds": 1},
        {"attempts": 1, "base_seconds": -1},
        {"attempts": 1, "base_seconds": 1, "factor": 0.5},
    ],
)
def test_bad_input(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"invalid|>= 0"):
        exponential_backoff(**kwargs)  # type: ignore[arg-type]
