"""Settings: wrangler's names and Cloudflare's defaults and bounds, mapped onto SQS.

Each setting comes, highest first, from keyword arguments, `SQSBATCH_*` environment variables,
the queue's table in `sqsbatch.toml` (shaped like wrangler's `[[queues.consumers]]` and
`[[queues.producers]]`), and the defaults below. A bad value, a wrong type or an unknown key fails
at construction with one line naming the setting, the value and the accepted range.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self, get_origin

from pydantic import BeforeValidator, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from sqsbatch.errors import ConfigError

__all__ = [
    "CONFIG_FILE_ENV",
    "MAX_TTL_SECONDS",
    "METRICS_NAMESPACE_PATTERN",
    "ConsumerConfig",
    "Count",
    "MetricsMode",
    "MetricsNamespace",
    "Number",
    "ProducerConfig",
    "check_int",
    "config_file",
    "describe_error",
    "load_file",
    "no_bool",
    "read_toml",
]

CONFIG_FILE_ENV = "SQSBATCH_CONFIG_FILE"
DEFAULT_CONFIG_FILE = "sqsbatch.toml"
MAX_DELAY_SECONDS = 86_400


def no_bool(value: Any) -> Any:
    """pydantic reads True as 1; a boolean is never a sensible count or number of seconds."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    return value


def check_int(name: str, value: object, low: int, high: int) -> None:
    """A whole number in `low..high` (never a bool), or a one-line `ConfigError` naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{name}={value!r} is invalid (accepted: int {low}..{high})")


MAX_TTL_SECONDS = 1_209_600
"""14 days, SQS's longest retention: the longest `ttl_seconds` and `max_message_age`."""
Count = Annotated[int, BeforeValidator(no_bool)]
Number = Annotated[float, BeforeValidator(no_bool)]
Seconds = Number
WholeSeconds = Count
MetricsMode = Literal["off", "emf"]
METRICS_NAMESPACE_PATTERN = r"^[A-Za-z0-9._#:/-]{1,255}$"
"""What CloudWatch accepts as a namespace (aws-embedded-metrics' own check, written out)."""
MetricsNamespace = Annotated[str, Field(pattern=METRICS_NAMESPACE_PATTERN)]

# The values read from sqsbatch.toml for the queue being configured, handed to the settings
# source below for the duration of one construction.
_file_values: ContextVar[Mapping[str, Any] | None] = ContextVar("_file_values", default=None)


class _FileSource(PydanticBaseSettingsSource):
    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return (_file_values.get() or {}).get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_file_values.get() or {})


class _Settings(BaseSettings):
    """Shared machinery: source order, strictness and one-line errors."""

    model_config = SettingsConfigDict(env_prefix="SQSBATCH_", extra="forbid", frozen=True)
    _table: ClassVar[str]

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConfigError(describe_error(type(self), exc)) from None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, _FileSource(settings_cls)

    @classmethod
    def load(cls, queue: str | None = None, path: str | Path | None = None, **values: Any) -> Self:
        """Build the settings for `queue` from keywords, the environment and the file.

        `path` defaults to `$SQSBATCH_CONFIG_FILE`, else `./sqsbatch.toml` when it exists.
        """
        table = _table_for(cls._table, queue, path)
        with _reading(table):
            return cls(**values)


class ConsumerConfig(_Settings):
    """How a consumer batches, retries and dead-letters. Seconds everywhere."""

    _table: ClassVar[str] = "consumers"

    max_batch_size: Count = Field(default=10, ge=1, le=100)
    max_batch_timeout: Seconds = Field(default=5.0, ge=0, le=60)
    max_retries: Count = Field(default=3, ge=0, le=100)
    dead_letter_queue: str | None = Field(default=None, min_length=1)
    retry_delay: WholeSeconds = Field(default=0, ge=0, le=MAX_DELAY_SECONDS)
    max_concurrency: Count = Field(default=1, ge=1, le=250)
    visibility_timeout: WholeSeconds = Field(default=30, ge=1, le=43_200)
    handler_timeout: Seconds = Field(default=900.0, gt=0)
    max_message_age: Seconds | None = Field(default=None, ge=1, le=MAX_TTL_SECONDS)
    """A deadline for every message, foreign ones too, counted from its `timestamp`; past it
    the message is dead-lettered before its handler with reason `expired`. None: no limit."""

    # Operating it (docs/operations.md): the stall watchdog and the read timeout of SQS calls.
    stall_seconds: Seconds | None = Field(default=None, gt=0, le=86_400)
    """Neither receiving nor busy this long: run() raises. None: three long polls plus
    `visibility_timeout` (`sqsbatch._core.liveness.default_stall_seconds`)."""
    read_timeout_margin: Seconds = Field(default=10.0, gt=0, le=300)
    """How long past its long-poll wait an SQS call may stay silent before it is abandoned."""
    metrics: MetricsMode = "off"
    """`emf`: CloudWatch metrics as Embedded Metric Format lines on stdout (no API call)."""
    metrics_namespace: MetricsNamespace = "sqsbatch"
    metrics_interval: Seconds = Field(default=60.0, gt=0, le=3600)
    """The pollers write their metrics once per interval; under Lambda, once per batch."""

    @property
    def max_receive_count(self) -> int:
        """The source queue's `RedrivePolicy.maxReceiveCount`: N retries are N+1 deliveries."""
        return self.max_retries + 1


class ProducerConfig(_Settings):
    """How a producer sends. `delivery_delay` applies to messages sent without a delay."""

    _table: ClassVar[str] = "producers"

    delivery_delay: WholeSeconds | None = Field(default=None, ge=0, le=MAX_DELAY_SECONDS)


def load_file(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """Read a wrangler-shaped `sqsbatch.toml`: `{"consumers": [...], "producers": [...]}`.

    Tables other than `[queues]` are left to their readers (the CDK app reads `[infra]`).
    """
    queues = read_toml(path).get("queues", {})
    if not isinstance(queues, dict):
        raise ConfigError(f"{path}: [queues] must be a table")
    unknown = sorted(set(queues) - {"consumers", "producers"})
    if unknown:
        known = "consumers, producers"
        raise ConfigError(f"{path}: unknown table queues.{unknown[0]} (known: {known})")
    tables: dict[str, list[dict[str, Any]]] = {}
    for kind in ("consumers", "producers"):
        entries = queues.get(kind, [])
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise ConfigError(f"{path}: queues.{kind} must be [[queues.{kind}]] tables")
        for entry in entries:
            if not isinstance(entry.get("queue"), str):
                raise ConfigError(f'{path}: every [[queues.{kind}]] needs queue = "name"')
        tables[kind] = entries
    return tables


def config_file(path: str | Path | None = None) -> str | Path | None:
    """`path`, else `$SQSBATCH_CONFIG_FILE`, else `./sqsbatch.toml` when it exists, else None."""
    if path is not None:
        return path
    path = os.environ.get(CONFIG_FILE_ENV)
    if path is None and Path(DEFAULT_CONFIG_FILE).is_file():
        return DEFAULT_CONFIG_FILE
    return path


def read_toml(path: str | Path) -> dict[str, Any]:
    """The whole document, or a one-line `ConfigError` for a file that is missing or not TOML."""
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None


def _table_for(kind: str, queue: str | None, path: str | Path | None) -> dict[str, Any]:
    path = config_file(path)
    if path is None or queue is None:
        return {}
    name = queue.rstrip("/").rsplit("/", 1)[-1]
    for entry in load_file(path)[kind]:
        if entry["queue"] == name:
            return {key: value for key, value in entry.items() if key != "queue"}
    return {}


@contextmanager
def _reading(values: Mapping[str, Any]) -> Iterator[None]:
    token = _file_values.set(values)
    try:
        yield
    finally:
        _file_values.reset(token)


def describe_error(cls: type[BaseSettings], exc: ValidationError, *, what: str = "setting") -> str:
    """One line for the first problem: the setting, the value and what is accepted."""
    error = exc.errors()[0]
    name = str(error["loc"][0]) if error["loc"] else "?"
    if error["type"] == "extra_forbidden":
        known = ", ".join(sorted(cls.model_fields))
        return f"unknown {what} {name!r} (known: {known})"
    field = cls.model_fields.get(name)
    if error["type"] == "string_pattern_mismatch":  # the regex is the whole message
        accepted = _PATTERNS.get(str(error.get("ctx", {}).get("pattern")), "")
        return f"{name}={error.get('input')!r} is invalid: must be {accepted}"
    accepted = _accepted(field) if field is not None else ""
    message = error["msg"]
    return f"{name}={error.get('input')!r} is invalid: {message[:1].lower()}{message[1:]}{accepted}"


_PATTERNS = {
    METRICS_NAMESPACE_PATTERN: "1 to 255 of the characters A-Z a-z 0-9 . _ # : / -",
}


def _accepted(field: FieldInfo) -> str:
    bounds: dict[str, Any] = {}
    for item in field.metadata:
        for attr in ("ge", "gt", "le", "min_length"):
            if getattr(item, attr, None) is not None:
                bounds[attr] = getattr(item, attr)
    if get_origin(field.annotation) is Literal:
        return ""  # pydantic's message lists the accepted values
    kind = getattr(field.annotation, "__name__", str(field.annotation))
    if "ge" in bounds and "le" in bounds:
        return f" (accepted: {kind} {bounds['ge']}..{bounds['le']})"
    if "gt" in bounds:
        return f" (accepted: {kind} > {bounds['gt']})"
    return f" (accepted: {kind})"
