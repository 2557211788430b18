"""The settings of issue 30 (docs/pressure.md): defaults, bounds in one line, environment, file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sqsbatch import ConfigError, ConsumerConfig


def test_defaults() -> None:
    config = ConsumerConfig()
    assert config.pause_check_seconds == 60
    assert config.circuit_failures is None  # off: only Overloaded opens the circuit
    assert config.circuit_probe_size == 1
    assert (config.circuit_open_seconds, config.circuit_max_open_seconds) == (30, 900)
    assert config.max_messages_per_second is None
    assert config.scale_in_protection is True


@pytest.mark.parametrize(
    ("values", "accepted"),
    [
        ({"pause_check_seconds": 0.5}, "pause_check_seconds=0.5 is invalid: "),
        ({"pause_check_seconds": 3601}, "(accepted: float 1..3600)"),
        ({"circuit_failures": 0}, "(accepted: int 1..1000, or unset)"),
        ({"circuit_failures": True}, "a boolean is not a number"),
        ({"circuit_probe_size": 0}, "(accepted: int 1..100)"),
        ({"circuit_open_seconds": 0}, "circuit_open_seconds=0 is invalid: "),
        ({"circuit_open_seconds": 43_201}, "(accepted: float > 0, <= 43200)"),
        ({"circuit_max_open_seconds": -1}, "(accepted: float > 0, <= 43200)"),
        (
            {"circuit_open_seconds": 60, "circuit_max_open_seconds": 30},
            "circuit_max_open_seconds=30.0 is invalid: must be >= circuit_open_seconds (60.0)",
        ),
        ({"max_messages_per_second": 0}, "(accepted: float > 0, <= 100000, or unset)"),
        ({"scale_in_protection": "maybe"}, "(accepted: true or false)"),
    ],
)
def test_bad_values_are_one_line(values: dict[str, Any], accepted: str) -> None:
    with pytest.raises(ConfigError) as raised:
        ConsumerConfig(**values)
    assert accepted in str(raised.value) and "\n" not in str(raised.value)


def test_from_the_environment_and_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQSBATCH_SCALE_IN_PROTECTION", "false")
    monkeypatch.setenv("SQSBATCH_MAX_MESSAGES_PER_SECOND", "2.5")
    path = tmp_path / "sqsbatch.toml"
    path.write_text(
        '[[queues.consumers]]\nqueue = "orders"\ncircuit_failures = 5\ncircuit_probe_size = 3\n'
        "pause_check_seconds = 30\ncircuit_open_seconds = 10\ncircuit_max_open_seconds = 120\n"
    )
    config = ConsumerConfig.load("orders", path)
    assert config.scale_in_protection is False and config.max_messages_per_second == 2.5
    assert (config.circuit_failures, config.circuit_probe_size) == (5, 3)
    assert config.pause_check_seconds == 30
    assert (config.circuit_open_seconds, config.circuit_max_open_seconds) == (10, 120)
