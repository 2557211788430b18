"""Settings say what is wrong and what would do (issue 27, item 8): the accepted texts, a TOML
string where a number belongs, a queue's second table, an unknown SQSBATCH_*/REDRIVE_* variable."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from redrive.settings import RedriveSettings
from sqsbatch import ConfigError, ConsumerConfig, ProducerConfig
from sqsbatch._core.bodies import encode_body
from sqsbatch.config import accepted_text, load_file
from sqsbatch.errors import MessageError

PYTHON_WORDS = ("Optional", "|", "None", "Annotated", "Union", "NoneType", "<class")


@pytest.mark.parametrize("cls", [ConsumerConfig, ProducerConfig, RedriveSettings])
def test_accepted_texts_show_no_python_types(cls: Any) -> None:
    for name, field in cls.model_fields.items():
        text = accepted_text(field)
        assert not any(word in text for word in PYTHON_WORDS), f"{name}: {text}"


@pytest.mark.parametrize(
    ("cls", "values", "accepted"),
    [
        (ConsumerConfig, {"metrics_interval": 3601}, "(accepted: float > 0, <= 3600)"),
        (ConsumerConfig, {"stall_seconds": 0}, "(accepted: float > 0, <= 86400, or unset)"),
        (ConsumerConfig, {"max_message_age": 0}, "(accepted: float 1..1209600, or unset)"),
        (ConsumerConfig, {"dead_letter_queue": ""}, "(accepted: text (not empty), or unset)"),
        (ProducerConfig, {"delivery_delay": -1}, "(accepted: int 0..86400, or unset)"),
        (ProducerConfig, {"ttl_seconds": 0}, "(accepted: float 1..1209600, or unset)"),
        (RedriveSettings, {"rate": 0}, "(accepted: float > 0, or unset)"),
        (RedriveSettings, {"metrics_interval": 0}, "(accepted: float > 0, <= 3600)"),
    ],
)
def test_accepted_texts_name_every_bound(cls: Any, values: dict[str, Any], accepted: str) -> None:
    with pytest.raises(ConfigError) as raised:
        cls(**values)
    assert str(raised.value).endswith(accepted)


def test_an_unknown_key_names_the_nearest() -> None:
    with pytest.raises(ConfigError, match=r"'max_batchsize' \(did you mean 'max_batch_size'\?\)"):
        ConsumerConfig(max_batchsize=3)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ('max_batch_size = "5"', "max_batch_size='5' is invalid: a string where a number belongs"),
        ('max_batch_timeout = "2.5"', "write max_batch_timeout = 2.5"),
        (
            'max_message_age = "60"',
            "(accepted: float 1..1209600, or unset): write max_message_age = 60",
        ),
        ('retry_delay = "ten"', "retry_delay='ten' is invalid"),
    ],
)
def test_a_toml_string_where_a_number_belongs_is_refused(
    tmp_path: Path, line: str, named: str
) -> None:
    path = tmp_path / "sqsbatch.toml"
    path.write_text(f'[[queues.consumers]]\nqueue = "orders"\n{line}\n')
    with pytest.raises(ConfigError) as raised:
        ConsumerConfig.load("orders", path)
    message = str(raised.value)
    assert message.startswith("[[queues.consumers]] queue='orders': ") and named in message
    assert "\n" not in message
    path.write_text('[[queues.producers]]\nqueue = "orders"\nttl_seconds = "60"\n')
    with pytest.raises(ConfigError, match="write ttl_seconds = 60"):
        ProducerConfig.load("orders", path)


def test_a_redrive_table_string_where_a_number_belongs_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "sqsbatch.toml"
    path.write_text('[redrive]\nbase_delay = "60"\n')
    monkeypatch.setenv("SQSBATCH_CONFIG_FILE", str(path))
    with pytest.raises(
        ConfigError, match=r"^\[redrive\]: base_delay='60' .* write base_delay = 60"
    ):
        RedriveSettings(dlqs=["d"])
    monkeypatch.setenv("REDRIVE_BASE_DELAY", "30")  # the environment's strings are converted
    path.write_text("[redrive]\nbase_delay = 60\n")
    assert RedriveSettings(dlqs=["d"]).base_delay == 30


def test_a_second_table_for_one_queue_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sqsbatch.toml"
    path.write_text(
        '[[queues.consumers]]\nqueue = "orders"\nmax_retries = 1\n\n'
        '[[queues.consumers]]\nqueue = "emails"\n\n'
        '[[queues.consumers]]\nqueue = "orders"\nmax_batch_size = 5\n'
    )
    with pytest.raises(ConfigError) as raised:
        ConsumerConfig.load("emails", path)
    assert str(raised.value) == (
        f"{path}: queue='orders' has two [[queues.consumers]] tables: keep one "
        "(the settings of a queue go in one table)"
    )
    path.write_text('[[queues.producers]]\nqueue = "a"\n[[queues.producers]]\nqueue = "a"\n')
    with pytest.raises(ConfigError, match=r"queue='a' has two \[\[queues.producers\]\] tables"):
        load_file(path)


def test_an_unknown_variable_is_a_warning_naming_the_nearest(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SQSBATCH_MAX_BATCH", "30")  # a typo: it would be ignored silently
    monkeypatch.setenv("SQSBATCH_ZZZ_NOTHING", "1")
    monkeypatch.setenv("SQSBATCH_REDRIVE_FACTOR", "3")  # the redrive daemon's
    monkeypatch.setenv("SQSBATCH_METRICS", "emf")
    with caplog.at_level(logging.WARNING, logger="sqsbatch"):
        assert ConsumerConfig().max_batch_size == 10
        ConsumerConfig()  # once per process
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "unknown environment variable SQSBATCH_MAX_BATCH is ignored "
        "(did you mean 'SQSBATCH_MAX_BATCH_SIZE'?)",
        "unknown environment variable SQSBATCH_ZZZ_NOTHING is ignored (it names no setting)",
    ]


def test_an_unknown_redrive_variable_is_a_warning_naming_the_nearest(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("REDRIVE_MAX_REDRIVE", "3")
    monkeypatch.setenv("SQSBATCH_REDRIVE_BASEDELAY", "3")
    monkeypatch.setenv("REDRIVE_RATE", "5")
    with caplog.at_level(logging.WARNING):
        assert RedriveSettings(dlqs=["d"]).max_redrives == 5
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "unknown environment variable REDRIVE_MAX_REDRIVE is ignored "
        "(did you mean 'REDRIVE_MAX_REDRIVES'?)",
        "unknown environment variable SQSBATCH_REDRIVE_BASEDELAY is ignored "
        "(did you mean 'SQSBATCH_REDRIVE_BASE_DELAY'?)",
    ]


def test_a_bad_content_type_lists_the_accepted_ones_in_words() -> None:
    with pytest.raises(MessageError) as raised:
        encode_body("x", "yaml")  # type: ignore[arg-type]
    assert str(raised.value) == "content_type='yaml' is invalid (accepted: json, text, bytes)"
