"""Property tests: settings from keywords, the environment and `sqsbatch.toml`, fuzzed."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import event as outcome
from hypothesis import example, given
from hypothesis import strategies as st

from redrive.settings import RedriveSettings, read_table
from sqsbatch.config import ConsumerConfig, ProducerConfig, load_file
from sqsbatch.errors import ConfigError
from tests.support.fuzzing import FUZZ, values

CONSUMER = sorted(ConsumerConfig.model_fields)
PRODUCER = sorted(ProducerConfig.model_fields)
REDRIVE = sorted(RedriveSettings.model_fields)
samples = st.sampled_from(["", "nan", "inf", "-1", "1e999", "true", "[1]", "{}", "a,b", "[1"])
text_values = st.text() | samples
numbers = st.integers(-(10**30), 10**30) | st.floats() | st.booleans()


def keywords(names: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    keys = st.sampled_from([*names, "unknown"])
    return st.dictionaries(keys, values | numbers | text_values, max_size=4)


def one_line(error: ConfigError) -> bool:
    return "\n" not in str(error) and bool(str(error))


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def build(kind: Any, **kwargs: Any) -> None:
    name = getattr(kind, "__self__", kind).__name__
    try:
        kind(**kwargs)
    except ConfigError as exc:
        assert one_line(exc)
        outcome(f"{name}: ConfigError")
    else:
        outcome(f"{name}: settings")


@FUZZ
@given(keywords(CONSUMER), keywords(PRODUCER), keywords(REDRIVE))
@example({"max_batch_timeout": float("nan")}, {}, {"base_delay": float("nan")})
@example({}, {"delivery_delay": 10**30}, {"dlqs": [1, None]})
def test_any_keywords_give_settings_or_one_config_error(
    consumer: dict[str, Any], producer: dict[str, Any], redrive: dict[str, Any]
) -> None:
    build(ConsumerConfig.load, **consumer)
    build(ProducerConfig.load, **producer)
    build(RedriveSettings, **redrive)


env_text = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=20
)


@FUZZ
@given(
    st.dictionaries(st.sampled_from(CONSUMER + PRODUCER), env_text | samples, max_size=3),
    st.dictionaries(st.sampled_from(REDRIVE), env_text | samples, max_size=3),
)
@example({"max_batch_size": "[1]"}, {"dlqs": "[1"})
@example({"dead_letter_queue": "{}"}, {"jitter": "nan"})
def test_any_environment_gives_settings_or_one_config_error(
    ours: dict[str, str], redrive: dict[str, str]
) -> None:
    variables = {f"SQSBATCH_{key.upper()}": value for key, value in ours.items()}
    variables |= {f"REDRIVE_{key.upper()}": value for key, value in redrive.items()}
    with environment(variables):
        build(ConsumerConfig.load)
        build(ProducerConfig.load)
        build(RedriveSettings)


def toml_value(value: Any) -> str:
    """A TOML literal for simple values; anything else as a quoted string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(str(value), repr(value))
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return '"' + str(value).encode("unicode_escape").decode().replace('"', '\\"') + '"'


tables = st.sampled_from(
    ["[[queues.consumers]]", "[[queues.producers]]", "[queues]", "[queues.other]", "[redrive]"]
)
entries = st.lists(
    st.tuples(st.sampled_from([*CONSUMER, *PRODUCER, *REDRIVE, "queue", "x"]), values | numbers),
    max_size=4,
)
documents = st.lists(st.tuples(tables, st.booleans(), entries), max_size=3).map(
    lambda parts: "\n".join(
        "\n".join(
            [table, *(['queue = "orders"'] if named else [])]
            + [f"{key} = {toml_value(value)}" for key, value in pairs]
        )
        for table, named, pairs in parts
    )
)


@FUZZ
@given(documents | st.text())
@example("[queues]\nconsumers = 1")
@example('[[queues.consumers]]\nqueue = "orders"\nmax_retries = 1e999')
@example("redrive = 1")
@example("\x00")
def test_any_config_file_gives_settings_or_one_config_error(document: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "sqsbatch.toml"
        path.write_text(document, encoding="utf-8")
        with environment({"SQSBATCH_CONFIG_FILE": str(path)}):
            for read in (
                lambda: load_file(path),
                lambda: ConsumerConfig.load("orders"),
                lambda: ProducerConfig.load("orders"),
                read_table,
                RedriveSettings,
            ):
                try:
                    read()
                except ConfigError as exc:
                    assert one_line(exc), str(exc)
                    outcome("a ConfigError")
