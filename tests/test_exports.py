"""The public names: exactly SPEC 5's, sorted, all importable (httpx's test_exported_members)."""

from __future__ import annotations

import sqsbatch

SPEC_NAMES = {
    "Consumer",
    "AsyncConsumer",
    "ConsumerConfig",
    "Producer",
    "AsyncProducer",
    "Message",
    "MessageBatch",
    "MessageSendRequest",
    "lambda_handler",
    "create_queue",
    "exponential_backoff",
}


def isort_order(name: str) -> tuple[int, str]:
    """CONSTANTS, then Classes, then functions: ruff's RUF022 order."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_all_is_sorted_and_complete() -> None:
    assert sqsbatch.__all__ == sorted(sqsbatch.__all__, key=isort_order)
    assert set(sqsbatch.__all__) >= SPEC_NAMES
    for name in sqsbatch.__all__:
        assert getattr(sqsbatch, name) is not None


def test_public_members_say_they_are_public() -> None:
    for name in sqsbatch.__all__:
        member = getattr(sqsbatch, name)
        if hasattr(member, "__module__"):
            assert member.__module__.startswith("sqsbatch")
