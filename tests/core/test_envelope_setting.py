"""The `envelope` setting (issue 31 item 4): from keywords, `SQSBATCH_ENVELOPE` and the queue's
`[[queues.consumers]]` table, as every setting; a bad value is one line naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import pytest

from sqsbatch import ConsumerConfig
from sqsbatch._core.unwrap import ENVELOPES
from sqsbatch.config import _base_type
from sqsbatch.errors import ConfigError


def test_the_setting_accepts_what_the_core_unwraps() -> None:
    literal, optional = _base_type(ConsumerConfig.model_fields["envelope"].annotation)
    assert get_args(literal) == ENVELOPES and optional


def test_the_envelope_comes_from_keywords_the_environment_and_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "sqsbatch.toml"
    path.write_text('[[queues.consumers]]\nqueue = "orders"\nenvelope = "eventbridge"\n')
    assert ConsumerConfig().envelope is None
    assert ConsumerConfig.load("orders", path).envelope == "eventbridge"
    monkeypatch.setenv("SQSBATCH_ENVELOPE", "sns")
    assert ConsumerConfig.load("orders", path).envelope == "sns"  # the environment first
    assert ConsumerConfig.load("orders", path, envelope="eventbridge").envelope == "eventbridge"


@pytest.mark.parametrize("value", ["sqs", "SNS", "", 1, True])
def test_a_bad_envelope_is_one_line(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"^envelope=.* is invalid: .*'sns' or 'eventbridge'"):
        ConsumerConfig(envelope=value)
