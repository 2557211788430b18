"""Settings: wrangler's names and Cloudflare's defaults and bounds, mapped onto SQS.

Each setting comes, highest first, from keyword arguments, `SQSBATCH_*` environment variables,
the queue's table in `sqsbatch.toml` (shaped like wrangler's `[[queues.consumers]]` and
`[[queues.producers]]`), and the defaults below. A bad value, a wrong type or an unknown key fails
at construction with one line naming the setting, the value and the accepted range.
"""

from __future__ import annotations

import difflib
import logging
import os
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, ClassVar, Literal, Self, Union, get_args, get_origin

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
    "FifoBatches",
    "MetricsMode",
    "MetricsNamespace",
    "Number",
    "ProducerConfig",
    "accepted_text",
    "check_int",
    "check_numbers",
    "config_file",
    "describe_error",
    "did_you_mean",
    "load_file",
    "no_bool",
    "queue_of",
    "read_toml",
    "warn_unknown_environment",
]

CONFIG_FILE_ENV = "SQSBATCH_CONFIG_FILE"
DEFAULT_CONFIG_FILE = "sqsbatch.toml"
MAX_DELAY_SECONDS = 86_400
log = logging.getLogger("sqsbatch")


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
FifoBatches = Literal["by_group", "mixed"]
METRICS_NAMESPACE_PATTERN = r"^[A-Za-z0-9._#:/-]{1,255}$"
"""What CloudWatch accepts as a namespace (aws-embedded-metrics' own check, written out)."""
MetricsNamespace = Annotated[str, Field(pattern=METRICS_NAMESPACE_PATTERN)]
DYNAMODB_TABLE_PATTERN = r"^[A-Za-z0-9_.-]{3,255}$"
"""What DynamoDB accepts as a table name."""
DynamoDBTable = Annotated[str, Field(pattern=DYNAMODB_TABLE_PATTERN)]
MAX_IDEMPOTENCY_TTL = 31_536_000
"""365 days: the longest `idempotency_ttl` (its default is at most 28; see docs/idempotency.md)."""

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
        warn_unknown_environment("SQSBATCH_", _known_variables(), others=("SQSBATCH_REDRIVE_",))
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
        check_numbers(cls, table, where=f"[[queues.{cls._table}]] queue={queue_of(queue)!r}")
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
    fifo_batches: FifoBatches = "by_group"
    """FIFO queues, pollers with `max_concurrency` > 1: `by_group` hands each group's messages to
    a slot of their own (one group a batch), `mixed` keeps a window's groups in one batch
    (docs/delays-and-fifo.md)."""
    envelope: Literal["sns", "eventbridge"] | None = None
    """Every body is an SNS notification or an EventBridge event: the handler gets the inner
    message, `message.envelope` the rest; another body is dead-lettered (`invalid_body`)."""

    # Operating it (docs/operations.md): the stall watchdog and the read timeout of SQS calls.
    stall_seconds: Seconds | None = Field(default=None, gt=0, le=86_400)
    """Neither receiving nor busy this long: run() raises. None: three long polls plus
    `visibility_timeout`, plus 21 s with the idempotency guard (its claims'
    time; `sqsbatch._core.liveness.default_stall_seconds`)."""
    read_timeout_margin: Seconds = Field(default=10.0, gt=0, le=300)
    """How long past its long-poll wait an SQS call may stay silent before it is abandoned."""
    metrics: MetricsMode = "off"
    """`emf`: CloudWatch metrics as Embedded Metric Format lines on stdout (no API call)."""
    metrics_namespace: MetricsNamespace = "sqsbatch"
    metrics_interval: Seconds = Field(default=60.0, gt=0, le=3600)
    """The pollers write their metrics once per interval; under Lambda, once per batch."""

    # The idempotency guard (docs/idempotency.md).
    idempotency_table: DynamoDBTable | None = None
    """A DynamoDB table (key `pk`): the guard's store. None: no guard from the settings."""
    idempotency_ttl: WholeSeconds | None = Field(default=None, ge=60, le=MAX_IDEMPOTENCY_TTL)
    """Seconds a completed key is kept. None: the queue's retention plus its DLQ's, at most
    28 days (`sqsbatch._core.idempotency.default_ttl`)."""
    claim_seconds: Seconds | None = Field(default=None, gt=0, le=43_200)
    """How long a claim lasts. None: as long as sqsbatch holds the message."""
    # Holding back (docs/pressure.md): the pollers act on them before each receive.
    pause_check_seconds: Seconds = Field(default=60.0, ge=1, le=3600)
    """How often a poller reads the queue's pause tags (one `ListQueueTags` each time)."""
    circuit_failures: Count | None = Field(default=None, ge=1, le=1000)
    """Failed batches in a row that open the circuit. None: only `Overloaded` opens it."""
    circuit_probe_size: Count = Field(default=1, ge=1, le=100)
    """Messages in the one batch that probes a half-open circuit."""
    circuit_open_seconds: Seconds = Field(default=30.0, gt=0, le=43_200)
    """How long the circuit first stays open (and `Overloaded` without `retry_after` holds)."""
    circuit_max_open_seconds: Seconds = Field(default=900.0, gt=0, le=43_200)
    """The longest it stays open: each failed probe doubles the open time up to this."""
    max_messages_per_second: Number | None = Field(default=None, gt=0, le=100_000)
    """Per process: never more received than this, on average. None: no limit."""
    scale_in_protection: bool = True
    """On ECS (`ECS_AGENT_URI` set): protect the task from scale-in while it holds a batch."""
    overloaded_fails_invocation: bool = False
    """Lambda: a handler that raises `Overloaded` also fails the invocation (its acked messages
    deleted first), so that the event source mapping backs off."""
    keep_payloads: bool = False
    """Large payloads in S3 (docs/payloads.md): an acked message's object stays (default: it is
    deleted once SQS accepted the message's delete), as `S3Payloads(keep=True)`."""

    def model_post_init(self, context: Any, /) -> None:
        """The settings that are checked together (one line for the first problem)."""
        if self.circuit_max_open_seconds < self.circuit_open_seconds:
            raise ConfigError(
                f"circuit_max_open_seconds={self.circuit_max_open_seconds!r} is invalid: must be "
                f">= circuit_open_seconds ({self.circuit_open_seconds!r})"
            )

    @property
    def max_receive_count(self) -> int:
        """The source queue's `RedrivePolicy.maxReceiveCount`: N retries are N+1 deliveries."""
        return self.max_retries + 1


class ProducerConfig(_Settings):
    """How a producer sends. `delivery_delay` applies to messages sent without a delay."""

    _table: ClassVar[str] = "producers"

    delivery_delay: WholeSeconds | None = Field(default=None, ge=0, le=MAX_DELAY_SECONDS)
    ttl_seconds: Seconds | None = Field(default=None, ge=1, le=MAX_TTL_SECONDS)
    """A deadline for messages sent without one, seconds from the send: past it the consumer
    dead-letters the message with reason `expired`. None: no deadline."""
    large_payloads_bucket: str | None = Field(default=None, min_length=1)
    """Messages past `large_payloads_threshold` go through this S3 bucket (docs/payloads.md)."""
    large_payloads_threshold: Count | None = Field(default=None, ge=1, le=1_048_576)
    """Bytes (body + attributes) above which a message goes to S3; None: 262144."""


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
        seen: set[str] = set()
        for entry in entries:
            if not isinstance(entry.get("queue"), str):
                raise ConfigError(f'{path}: every [[queues.{kind}]] needs queue = "name"')
            if entry["queue"] in seen:
                raise ConfigError(
                    f"{path}: queue={entry['queue']!r} has two [[queues.{kind}]] tables: "
                    "keep one (the settings of a queue go in one table)"
                )
            seen.add(entry["queue"])
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
    """The whole document, or a one-line `ConfigError` for a file that is missing, not UTF-8
    (naming the line and column of the first bad byte) or not TOML."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        byte = data[exc.start : exc.start + 1].hex()
        where = f"byte 0x{byte} at line {line}, column {column}"
        raise ConfigError(f"{path} is not UTF-8: {where} (TOML is UTF-8)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None


def _table_for(kind: str, queue: str | None, path: str | Path | None) -> dict[str, Any]:
    path = config_file(path)
    if path is None or queue is None:
        return {}
    name = queue_of(queue)
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
    together = error.get("ctx", {}).get("error")
    if not error["loc"] and isinstance(together, ConfigError):  # settings checked together
        return str(together)
    name = str(error["loc"][0]) if error["loc"] else "?"
    if error["type"] == "extra_forbidden":
        known = ", ".join(sorted(cls.model_fields))
        return f"unknown {what} {name!r}{did_you_mean(name, cls.model_fields)} (known: {known})"
    field = cls.model_fields.get(name)
    if error["type"] == "string_pattern_mismatch":  # the regex is the whole message
        accepted = _PATTERNS.get(str(error.get("ctx", {}).get("pattern")), "")
        return f"{name}={error.get('input')!r} is invalid: must be {accepted}"
    accepted = f" (accepted: {accepted_text(field)})" if field is not None else ""
    if field is not None and get_origin(field.annotation) is Literal:
        accepted = ""  # pydantic's message lists the accepted values
    message = error["msg"]
    return f"{name}={error.get('input')!r} is invalid: {message[:1].lower()}{message[1:]}{accepted}"


_PATTERNS = {
    METRICS_NAMESPACE_PATTERN: "1 to 255 of the characters A-Z a-z 0-9 . _ # : / -",
    DYNAMODB_TABLE_PATTERN: "a DynamoDB table name: 3 to 255 of the characters A-Z a-z 0-9 _ . -",
}
_KINDS = {int: "int", float: "float", str: "text", bool: "true or false"}


def accepted_text(field: FieldInfo) -> str:
    """What a field accepts, in words: `int 1..100`, `float > 0, <= 3600`, `float >= 1, or
    unset`, `non-empty text, or unset`. Never a Python type expression."""
    base, optional = _base_type(field.annotation)
    if get_origin(base) is Literal:
        words = " or ".join(repr(value) for value in get_args(base))
    elif get_origin(base) is list:
        words = "a list of text (comma-separated in the environment)"
    else:
        words = _KINDS.get(base, getattr(base, "__name__", "a value"))
        bounds = _bounds(field)
        if bounds:
            words += f" {bounds}"
    return words + (", or unset" if optional else "")


def _base_type(annotation: Any) -> tuple[Any, bool]:
    """(the type, whether None is accepted too) of `X | None`, `Optional[X]` or `X`."""
    optional = False
    if get_origin(annotation) in (Union, UnionType):
        args = [arg for arg in get_args(annotation) if arg is not type(None)]
        optional, annotation = True, (args[0] if len(args) == 1 else annotation)
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation, optional


def _bounds(field: FieldInfo) -> str:
    found: dict[str, Any] = {}
    for item in field.metadata:
        for attr in ("ge", "gt", "le", "lt", "min_length"):
            if getattr(item, attr, None) is not None:
                found[attr] = getattr(item, attr)
    if found.get("min_length") == 1:
        return "(not empty)"
    if "ge" in found and "le" in found:
        return f"{found['ge']}..{found['le']}"
    signs = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
    return ", ".join(f"{signs[attr]} {value}" for attr, value in found.items())


def did_you_mean(value: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the nearest of `choices`, or "" when none is near."""
    names = list(choices)
    found = difflib.get_close_matches(value, names, n=1)
    found = found or [name for name in names if value and name.startswith(value)][:1]
    return f" (did you mean {found[0]!r}?)" if found else ""


def queue_of(queue: str | None) -> str:
    """A queue's name, from its name or URL ("" for none)."""
    return "" if queue is None else queue.rstrip("/").rsplit("/", 1)[-1]


def check_numbers(cls: type[BaseSettings], table: Mapping[str, Any], *, where: str) -> None:
    """A TOML table's numbers are numbers: `max_batch_size = "5"` is refused in one line
    naming the value to write (the environment's strings are converted; a file's are not)."""
    for key, value in table.items():
        field = cls.model_fields.get(key)
        if field is None or not isinstance(value, str):
            continue
        base, _ = _base_type(field.annotation)
        if base not in (int, float):
            continue
        hint = f": write {key} = {value.strip()}" if _is_number(value) else ""
        raise ConfigError(
            f"{where}: {key}={value!r} is invalid: a string where a number belongs "
            f"(accepted: {accepted_text(field)}){hint}"
        )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


_warned: set[str] = set()


def warn_unknown_environment(
    prefix: str, known: Iterable[str], *, others: Iterable[str] = ()
) -> None:
    """A WARNING, once per process, for each `prefix*` variable that names no setting (a
    typo there would otherwise be ignored without a word), with the nearest known name.
    Variables that start with one of `others` belong to another reader."""
    names = set(known)
    for variable in sorted(os.environ):
        if not variable.startswith(prefix) or variable in names or variable in _warned:
            continue
        if any(variable.startswith(other) for other in others):
            continue
        _warned.add(variable)
        tails = {name.removeprefix(prefix): name for name in names if name.startswith(prefix)}
        nearest = difflib.get_close_matches(variable.removeprefix(prefix), list(tails), n=1)
        log.warning(
            "unknown environment variable %s is ignored%s",
            variable,
            f" (did you mean {tails[nearest[0]]!r}?)" if nearest else " (it names no setting)",
        )


def _known_variables() -> set[str]:
    fields = {*ConsumerConfig.model_fields, *ProducerConfig.model_fields}
    return {CONFIG_FILE_ENV} | {f"SQSBATCH_{name.upper()}" for name in fields}
