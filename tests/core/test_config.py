"""ConsumerConfig: defaults, bounds, sources (kwargs > env > sqsbatch.toml > defaults)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sqsbatch import ConfigError, ConsumerConfig, ProducerConfig
from sqsbatch.config import load_file

DEFAULTS = {
    "max_batch_size": 10,
    "max_batch_timeout": 5.0,
    "max_retries": 3,
    "dead_letter_queue": None,
    "retry_delay": 0,
    "max_concurrency": 1,
    "visibility_timeout": 30,
    "handler_timeout": 900.0,
    "max_message_age": None,
    "fifo_batches": "by_group",  # FIFO pollers: a batch per group, groups in parallel slots
    "envelope": None,  # issue 31 item 4: no SNS/EventBridge envelope to unwrap (docs/envelopes.md)
    "stall_seconds": None,  # three long polls plus visibility_timeout (docs/operations.md)
    "read_timeout_margin": 10.0,
    "metrics": "off",  # "emf": CloudWatch Embedded Metric Format lines on stdout
    "metrics_namespace": "sqsbatch",
    "metrics_interval": 60.0,
    "idempotency_table": None,  # no guard (docs/idempotency.md)
    "idempotency_ttl": None,  # the queue's retention plus its DLQ's, at most 28 days
    "claim_seconds": None,  # as long as sqsbatch holds the message
    "pause_check_seconds": 60.0,  # issue 30: holding back (docs/pressure.md)
    "circuit_failures": None,
    "circuit_probe_size": 1,
    "circuit_open_seconds": 30.0,
    "circuit_max_open_seconds": 900.0,
    "max_messages_per_second": None,
    "scale_in_protection": True,
    "overloaded_fails_invocation": False,
    "keep_payloads": False,  # issue 31 item 2: an acked message's S3 object is deleted
}


def test_defaults_are_cloudflare_s() -> None:
    assert ConsumerConfig().model_dump() == DEFAULTS
    assert ConsumerConfig().max_receive_count == 4


@pytest.mark.parametrize(
    ("setting", "good", "bad", "accepted"),
    [
        ("max_batch_size", [1, 100], [0, 101], "1..100"),
        ("max_batch_timeout", [0, 0.5, 60], [-0.1, 60.5], "0..60"),
        ("max_retries", [0, 100], [-1, 101], "0..100"),
        ("retry_delay", [0, 86400], [-1, 86401], "0..86400"),
        ("max_concurrency", [1, 250], [0, 251], "1..250"),
        ("visibility_timeout", [1, 43200], [0, 43201], "1..43200"),
        ("handler_timeout", [0.1, 10_000], [0, -1], "> 0"),
        ("metrics", ["off", "emf"], ["prometheus", "EMF", ""], "'off' or 'emf'"),
        (
            "metrics_namespace",
            ["sqsbatch", "Orders/Prod-1", "a" * 255],
            ["", "a b", "a" * 256],
            "A-Z",
        ),
        ("metrics_interval", [0.5, 3600], [0, -1, 3601], "float"),
        ("fifo_batches", ["by_group", "mixed"], ["groups", "BY_GROUP", "", 1], "'by_group' or"),
    ],
)
def test_bounds(setting: str, good: list[Any], bad: list[Any], accepted: str) -> None:
    for value in good:
        assert getattr(ConsumerConfig(**{setting: value}), setting) == value
    for value in bad:
        with pytest.raises(ConfigError) as caught:
            ConsumerConfig(**{setting: value})
        message = str(caught.value)
        assert setting in message and repr(value) in message and accepted in message
        assert "\n" not in message


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"max_batch_size": "ten"}, "max_batch_size='ten'"),
        ({"max_batch_size": True}, "max_batch_size=True"),
        ({"retry_delay": 1.5}, "retry_delay=1.5"),
        ({"dead_letter_queue": ""}, "dead_letter_queue=''"),
    ],
)
def test_wrong_types_are_refused_naming_the_setting(values: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        ConsumerConfig(**values)


def test_unknown_key_is_refused_with_the_known_ones() -> None:
    with pytest.raises(
        ConfigError,
        match=r"unknown setting 'max_batch' \(did .*\) \(known: circuit_failures, .*",
    ):
        ConsumerConfig(max_batch=3)  # type: ignore[call-arg]


def test_environment_and_keywords(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQSBATCH_MAX_BATCH_SIZE", "42")
    monkeypatch.setenv("SQSBATCH_DEAD_LETTER_QUEUE", "dlq")
    assert ConsumerConfig().max_batch_size == 42
    assert ConsumerConfig().dead_letter_queue == "dlq"
    assert ConsumerConfig(max_batch_size=7).max_batch_size == 7
    monkeypatch.setenv("SQSBATCH_MAX_RETRIES", "-2")
    with pytest.raises(ConfigError, match=r"max_retries='-2' .*0\.\.100"):
        ConsumerConfig()


WRANGLER_TOML = """
[[queues.producers]]
queue = "orders"
delivery_delay = 60

[[queues.consumers]]
queue = "orders"
max_batch_size = 30
retry_delay = 300
dead_letter_queue = "orders-dlq"

[[queues.consumers]]
queue = "emails"
max_retries = 0
"""


def test_toml_shaped_like_wrangler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sqsbatch.toml"
    path.write_text(WRANGLER_TOML)
    orders = ConsumerConfig.load("orders", path)
    assert (orders.max_batch_size, orders.retry_delay, orders.dead_letter_queue) == (
        30,
        300,
        "orders-dlq",
    )
    assert ConsumerConfig.load("emails", path).max_retries == 0
    assert ConsumerConfig.load("other", path) == ConsumerConfig()
    assert ProducerConfig.load("orders", path).delivery_delay == 60
    # the file is found in the working directory, and a queue URL selects by name
    monkeypatch.chdir(tmp_path)
    assert ConsumerConfig.load("http://localhost:1/123/orders").max_batch_size == 30
    # precedence: keywords > environment > file
    monkeypatch.setenv("SQSBATCH_MAX_BATCH_SIZE", "50")
    assert ConsumerConfig.load("orders").max_batch_size == 50
    assert ConsumerConfig.load("orders", max_batch_size=5).max_batch_size == 5


def test_toml_errors_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "sqsbatch.toml"
    path.write_text('[[queues.consumers]]\nqueue = "q"\nmax_batch_size = 500\n')
    with pytest.raises(ConfigError, match=r"max_batch_size=500 .*1\.\.100"):
        ConsumerConfig.load("q", path)
    path.write_text('[[queues.consumers]]\nqueue = "q"\nbatch = 5\n')
    with pytest.raises(ConfigError, match="unknown setting 'batch'"):
        ConsumerConfig.load("q", path)
    path.write_text("[[queues.consumers]]\nmax_batch_size = 5\n")
    with pytest.raises(ConfigError, match="needs queue"):
        load_file(path)
    path.write_text("[queues\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_file(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_file(tmp_path / "missing.toml")
