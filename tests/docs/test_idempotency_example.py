"""examples/idempotency.py runs: the same order sent twice is charged once."""

from __future__ import annotations

from typing import Any

import pytest

from sqsbatch.dev.server import LocalSqs
from tests.support.front_ends import load_example
from tests.support.sqs_helpers import depth


def test_the_idempotency_example_charges_once(
    local_sqs: LocalSqs, monkeypatch: pytest.MonkeyPatch, name: str, capsys: Any
) -> None:
    for key, value in local_sqs.environment().items():
        monkeypatch.setenv(key, value)
    charges = load_example("idempotency").main(name, idle_seconds=1.0)
    assert charges == ["4200 cents for order 17 (order-17)"]
    assert "first run: 1 acked; second run: 1 skipped" in capsys.readouterr().out
    assert depth(local_sqs.client(), name) == 0
