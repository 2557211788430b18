"""The guard's settings: `idempotency_table` (`SQSBATCH_IDEMPOTENCY_TABLE`), `idempotency_ttl`,
`claim_seconds`, from keywords, the environment and sqsbatch.toml, refused in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sqsbatch import ConfigError, ConsumerConfig
from sqsbatch.idempotency import DynamoDBStore, MemoryStore, Store, store_from_config


def test_the_settings_are_unset_by_default() -> None:
    config = ConsumerConfig()
    assert (config.idempotency_table, config.idempotency_ttl, config.claim_seconds) == (
        None,
        None,
        None,
    )
    assert store_from_config(config) is None


def test_the_environment_names_a_dynamodb_table_and_that_makes_the_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SQSBATCH_IDEMPOTENCY_TABLE", "orders-idempotency")
    monkeypatch.setenv("SQSBATCH_IDEMPOTENCY_TTL", "86400")
    monkeypatch.setenv("SQSBATCH_CLAIM_SECONDS", "90.5")
    config = ConsumerConfig()
    assert config.idempotency_table == "orders-idempotency"
    assert (config.idempotency_ttl, config.claim_seconds) == (86_400, 90.5)
    store = store_from_config(config, client=object())
    assert isinstance(store, DynamoDBStore) and store.table_name == "orders-idempotency"
    assert isinstance(store, Store) and isinstance(MemoryStore(), Store)


def test_the_file_sets_them_for_its_queue(tmp_path: Path) -> None:
    path = tmp_path / "sqsbatch.toml"
    path.write_text(
        '[[queues.consumers]]\nqueue = "orders"\nidempotency_table = "idem"\n'
        "idempotency_ttl = 3600\nclaim_seconds = 60\n"
    )
    config = ConsumerConfig.load("orders", path)
    assert (config.idempotency_table, config.idempotency_ttl, config.claim_seconds) == (
        "idem",
        3600,
        60,
    )


@pytest.mark.parametrize(
    ("values", "line"),
    [
        (
            {"idempotency_table": "a b"},
            "idempotency_table='a b' is invalid: must be a DynamoDB table name: "
            "3 to 255 of the characters A-Z a-z 0-9 _ . -",
        ),
        ({"idempotency_ttl": 59}, "(accepted: int 60..31536000, or unset)"),
        ({"idempotency_ttl": 1.5}, "idempotency_ttl=1.5 is invalid"),
        ({"idempotency_ttl": True}, "a boolean is not a number"),
        ({"claim_seconds": 0}, "(accepted: float > 0, <= 43200, or unset)"),
        ({"claim_seconds": 43_201}, "claim_seconds=43201 is invalid"),
    ],
)
def test_bad_values_are_refused_in_one_line(values: dict[str, Any], line: str) -> None:
    with pytest.raises(ConfigError) as raised:
        ConsumerConfig(**values)
    assert line in str(raised.value) and "\n" not in str(raised.value)


def test_a_toml_string_for_the_ttl_is_refused_with_the_value_to_write(tmp_path: Path) -> None:
    path = tmp_path / "sqsbatch.toml"
    path.write_text('[[queues.consumers]]\nqueue = "orders"\nidempotency_ttl = "3600"\n')
    with pytest.raises(ConfigError, match="write idempotency_ttl = 3600"):
        ConsumerConfig.load("orders", path)
