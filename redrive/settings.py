"""The daemon's settings: flags, then `REDRIVE_*`, then `SQSBATCH_REDRIVE_*`, then the file.

The file is `sqsbatch.toml` (or `$SQSBATCH_CONFIG_FILE`), table `[redrive]`, with the field
names below (`dlqs = ["orders-dlq"]`, `base_delay = 60`, ...). In the environment a list is
comma-separated: `REDRIVE_DLQS=orders-dlq,billing-dlq`. A bad value, a wrong type or an unknown
key fails with one line naming the setting, the value and what is accepted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from redrive.daemon import Redriver
from redrive.policy import BackoffPolicy
from redrive.reasons import Reasons
from sqsbatch.config import (
    Count,
    MetricsMode,
    MetricsNamespace,
    Number,
    check_numbers,
    config_file,
    describe_error,
    read_toml,
    warn_unknown_environment,
)
from sqsbatch.errors import ConfigError

__all__ = ["RedriveSettings", "read_table"]

TABLE = "redrive"


def _queue_list(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


QueueList = Annotated[list[str], NoDecode, BeforeValidator(_queue_list)]


class RedriveSettings(BaseSettings):
    """Everything `redrive run` needs; the backoff bounds are checked by `BackoffPolicy`."""

    model_config = SettingsConfigDict(env_prefix="REDRIVE_", extra="forbid", frozen=True)

    dlqs: QueueList = Field(default_factory=list)
    to: str | None = Field(None, min_length=1)
    base_delay: Number = 60.0
    factor: Number = 2.0
    max_delay: Number = 3600.0
    jitter: Number | None = None
    max_redrives: Count = 5
    hold_seconds: Count = 300
    rate: Number | None = Field(None, gt=0)
    parking_queue: str | None = Field(None, min_length=1)
    native: bool = False
    visibility_timeout: Count = Field(30, ge=1, le=43_200)
    wait_seconds: Count = Field(20, ge=1, le=20)
    stall_seconds: Number | None = Field(None, gt=0, le=86_400)
    """The daemon's watchdog (default: three long polls plus `visibility_timeout`)."""
    endpoint_url: str | None = None
    region: str | None = None
    reasons: QueueList | None = None
    """Dead-letter reasons to bring back (`all` for every one); default: all but `expired`
    and `invalid_body`. `REDRIVE_REASONS=retries_exhausted,moved_by_sqs`."""
    metrics: MetricsMode = "off"
    """`emf`: each DLQ's counts as CloudWatch EMF lines on stdout (docs/operations.md)."""
    metrics_namespace: MetricsNamespace = "sqsbatch"
    metrics_interval: Number = Field(60.0, gt=0, le=3600)

    def __init__(self, **values: Any) -> None:
        for prefix in ("REDRIVE_", "SQSBATCH_REDRIVE_"):
            known = {prefix + name.upper() for name in type(self).model_fields}
            warn_unknown_environment(prefix, known)
        check_numbers(type(self), read_table(), where=f"[{TABLE}]")
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConfigError(describe_error(type(self), exc, what="redrive setting")) from None
        self.policy()  # the backoff bounds fail here, before any client is made
        Reasons.of(self.reasons)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sqsbatch_env = EnvSettingsSource(settings_cls, env_prefix="SQSBATCH_REDRIVE_")
        return init_settings, env_settings, sqsbatch_env, _TableSource(settings_cls)

    def policy(self) -> BackoffPolicy:
        return BackoffPolicy(
            base_delay=self.base_delay,
            factor=self.factor,
            max_delay=self.max_delay,
            jitter=self.jitter,
            max_redrives=self.max_redrives,
            hold_seconds=self.hold_seconds,
        )

    def redriver(self, client: Any) -> Redriver:
        if not self.dlqs:
            raise ConfigError("no DLQ given: pass --dlq QUEUE (or REDRIVE_DLQS, or [redrive] dlqs)")
        return Redriver(
            self.dlqs,
            policy=self.policy(),
            to=self.to,
            parking_queue=self.parking_queue,
            rate=self.rate,
            client=client,
            visibility_timeout=self.visibility_timeout,
            wait_seconds=self.wait_seconds,
            reasons=self.reasons,
            metrics=self.metrics,
            metrics_namespace=self.metrics_namespace,
            metrics_interval=self.metrics_interval,
            stall_seconds=self.stall_seconds,
        )


def read_table(path: str | Path | None = None) -> dict[str, Any]:
    """The `[redrive]` table of the config file; {} when there is no file or no table."""
    path = config_file(path)
    if path is None:
        return {}
    document = read_toml(path)
    table = document.get(TABLE, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [{TABLE}] must be a table")
    return table


class _TableSource(PydanticBaseSettingsSource):
    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return read_table().get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return read_table()
