"""What the consumer settings mean for Lambda and ECS: decided here once, without CDK.

The constructs call these and turn the answers into resources; the tests can check the answers
without a synthesis. Every refusal is a `ConfigError` with one line naming the setting, the value
and what would be accepted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sqsbatch.config import ConsumerConfig
from sqsbatch.errors import ConfigError

__all__ = [
    "DEFAULT_METRICS_INTERVAL",
    "DEFAULT_METRICS_NAMESPACE",
    "ESM_DEFAULT_CONCURRENCY",
    "INVOKES_PER_POLLER",
    "METRICS_SETTINGS",
    "VISIBILITY_FACTOR",
    "LambdaSource",
    "Metrics",
    "check_pollers",
    "consumer_environment",
    "default_lambda_timeout",
    "is_fifo",
    "lambda_source",
    "max_receive_count",
    "metrics_environment",
    "metrics_of",
    "shared_metrics",
]

VISIBILITY_FACTOR = 6  # AWS: a queue's visibility timeout >= 6x its Lambda consumer's timeout
ESM_MAX_WINDOW_SECONDS = 300
ESM_UNBATCHED_SIZE = 10  # above this many messages the event source mapping needs a window
ESM_MIN_CONCURRENCY, ESM_MAX_CONCURRENCY = 2, 1000
ESM_DEFAULT_CONCURRENCY = ESM_MIN_CONCURRENCY  # the poller's default is 1; Lambda's floor is 2
FIFO_MAX_BATCH = 10
# The consumer settings that turn on EMF metrics (docs/operations.md). With `metrics = "off"`
# (the default) the other two do nothing, so none of them reaches an environment.
METRICS_SETTINGS = ("metrics", "metrics_namespace", "metrics_interval")
DEFAULT_METRICS_NAMESPACE = "sqsbatch"
DEFAULT_METRICS_INTERVAL = 60.0
CLOUDWATCH_MINUTE = 60
# Provisioned mode of an SQS event source mapping (docs/infra.md): the bounds aws-cdk-lib 2.275.0
# enforces for SQS (aws-lambda-event-sources/lib/sqs.js). Lambda's API reference now accepts up
# to 10,000 MaximumPollers for SQS; the pinned CDK refuses more than 2000, so sqsbatch does too.
SQS_MIN_POLLERS = (2, 200)
SQS_MAX_POLLERS = (2, 2000)
# AWS: one SQS event poller makes up to 10 concurrent invocations (2000 pollers: 20,000).
INVOKES_PER_POLLER = 10


@dataclass(frozen=True)
class LambdaSource:
    """The event source mapping and function settings derived from a `ConsumerConfig`."""

    batch_size: int
    window_seconds: int | None  # None: no batching window (FIFO queues take none)
    max_concurrency: int  # the most invocations at once: the function's reserved concurrency
    timeout_seconds: int
    # Provisioned mode: (minimum, maximum) event pollers. The mapping then takes no maximum
    # concurrency; `max_concurrency` is what the most pollers may invoke at once.
    pollers: tuple[int, int] | None = None


def is_fifo(queue_name: str) -> bool:
    return queue_name.endswith(".fifo")


def default_lambda_timeout(config: ConsumerConfig) -> int:
    """The longest function timeout the queue's visibility timeout allows (at least 1 s)."""
    return max(1, config.visibility_timeout // VISIBILITY_FACTOR)


def lambda_source(
    config: ConsumerConfig,
    *,
    fifo: bool,
    timeout_seconds: int | None = None,
    max_concurrency: int | None = None,
    provisioned_pollers: Sequence[int] | None = None,
) -> LambdaSource:
    """Check that a Lambda consumer can honour `config`, and say how."""
    timeout = default_lambda_timeout(config) if timeout_seconds is None else timeout_seconds
    if config.visibility_timeout < VISIBILITY_FACTOR * timeout:
        raise ConfigError(
            f"visibility_timeout={config.visibility_timeout} is too short for a Lambda timeout of "
            f"{timeout} s: SQS needs at least {VISIBILITY_FACTOR}x the function timeout "
            f"(accepted: visibility_timeout >= {VISIBILITY_FACTOR * timeout}, or a timeout <= "
            f"{config.visibility_timeout // VISIBILITY_FACTOR} s)"
        )
    window = _window(config, fifo)
    if provisioned_pollers is not None:
        pollers = _provisioned(config, provisioned_pollers, max_concurrency)
        return LambdaSource(
            config.max_batch_size, window, pollers[1] * INVOKES_PER_POLLER, timeout, pollers
        )
    return LambdaSource(
        batch_size=config.max_batch_size,
        window_seconds=window,
        max_concurrency=_concurrency(config, max_concurrency),
        timeout_seconds=timeout,
    )


def check_pollers(pollers: Sequence[int]) -> tuple[int, int]:
    """`[min, max]` event pollers, within what provisioned mode takes for SQS; else one line."""
    low, high = SQS_MIN_POLLERS, SQS_MAX_POLLERS
    if len(pollers) == 2:
        minimum, maximum = pollers
        if low[0] <= minimum <= low[1] and high[0] <= maximum <= high[1] and minimum <= maximum:
            return minimum, maximum
    raise ConfigError(
        f"provisioned_pollers={list(pollers)} is invalid (accepted: [min, max] with min "
        f"{low[0]}..{low[1]}, max {high[0]}..{high[1]} and min <= max)"
    )


def _provisioned(
    config: ConsumerConfig, pollers: Sequence[int], override: int | None
) -> tuple[int, int]:
    checked = check_pollers(pollers)
    if override is not None:
        given = f"lambda.max_concurrency={override}"
    elif "max_concurrency" in config.model_fields_set:
        given = f"max_concurrency={config.max_concurrency}"
    else:
        return checked
    raise ConfigError(
        f"provisioned_pollers={list(pollers)} and {given} cannot both be set: Lambda's "
        "provisioned mode replaces the event source's maximum concurrency (drop one)"
    )


def _window(config: ConsumerConfig, fifo: bool) -> int | None:
    timeout = config.max_batch_timeout
    if timeout != math.floor(timeout):
        raise ConfigError(
            f"max_batch_timeout={timeout!r} cannot be a Lambda batching window "
            "(accepted: whole seconds 0..60)"
        )
    window = int(timeout)
    if fifo:
        if window != 0 or config.max_batch_size > FIFO_MAX_BATCH:
            raise ConfigError(
                f"max_batch_size={config.max_batch_size}, max_batch_timeout={timeout!r} do not "
                f"suit a FIFO queue's Lambda event source (accepted: max_batch_size 1..10 with "
                "max_batch_timeout = 0)"
            )
        return None
    if config.max_batch_size > ESM_UNBATCHED_SIZE and window < 1:
        raise ConfigError(
            f"max_batch_size={config.max_batch_size} needs a batching window on Lambda, but "
            f"max_batch_timeout={timeout!r} (accepted: max_batch_timeout >= 1 when "
            f"max_batch_size > {ESM_UNBATCHED_SIZE})"
        )
    return window


def _concurrency(config: ConsumerConfig, override: int | None) -> int:
    if override is not None:
        value, name = override, "lambda.max_concurrency"
    elif "max_concurrency" in config.model_fields_set:
        value, name = config.max_concurrency, "max_concurrency"
    else:
        return ESM_DEFAULT_CONCURRENCY
    if not ESM_MIN_CONCURRENCY <= value <= ESM_MAX_CONCURRENCY:
        raise ConfigError(
            f"{name}={value} cannot be a Lambda event source's maximum concurrency "
            f"(accepted: {ESM_MIN_CONCURRENCY}..{ESM_MAX_CONCURRENCY})"
        )
    return value


def max_receive_count(config: ConsumerConfig, *, headroom: int = 0) -> int:
    """A queue's `RedrivePolicy.maxReceiveCount`: `max_retries + 1`, plus `headroom` receives.

    sqsbatch dead-letters a message itself when its delivery `max_retries + 1` fails (a copy
    with the error, to the DLQ); the RedrivePolicy is the backstop for deliveries the consumer
    never saw. On Lambda a throttled invocation counts as a receive, so a Lambda consumer's queue
    gets `headroom` extra receives: the message still reaches its handler for the last time.
    """
    if headroom < 0:
        raise ConfigError(f"redrive_headroom={headroom} is invalid (accepted: 0 or more)")
    return config.max_receive_count + headroom


def consumer_environment(config: ConsumerConfig) -> dict[str, str]:
    """`SQSBATCH_*` variables that make a consumer's `ConsumerConfig()` equal `config`."""
    env: dict[str, str] = {}
    for name, value in config.model_dump().items():
        if value is not None and name not in METRICS_SETTINGS:
            env[f"SQSBATCH_{name.upper()}"] = str(value)
    return env | metrics_environment(metrics_of(config), "SQSBATCH_")


@dataclass(frozen=True)
class Metrics:
    """Where a consumer (or the redrive daemon) sends its EMF metrics, when they are on."""

    namespace: str = DEFAULT_METRICS_NAMESPACE
    interval_seconds: float = DEFAULT_METRICS_INTERVAL

    @property
    def period_seconds(self) -> int:
        """The CloudWatch period of graphs and alarms: whole minutes holding at least one flush.

        The pollers and the daemon write one line per `interval_seconds`; a shorter period
        would show gaps between flushes as zeros (and make a missing datapoint of every other
        period). Under Lambda a line is written per batch, which any period holds.
        """
        return CLOUDWATCH_MINUTE * max(1, math.ceil(self.interval_seconds / CLOUDWATCH_MINUTE))


def metrics_of(config: ConsumerConfig) -> Metrics | None:
    """The consumer's metrics settings, or None when `metrics` is off (the default)."""
    if config.metrics == "off":
        return None
    return Metrics(config.metrics_namespace, config.metrics_interval)


def metrics_environment(metrics: Metrics | None, prefix: str) -> dict[str, str]:
    """The variables that turn metrics on in a process whose settings read `prefix*`.

    `SQSBATCH_` for a consumer, `REDRIVE_` for the redrive daemon. Nothing when off: a
    process without them emits no metrics, which is the default.
    """
    if metrics is None:
        return {}
    return {
        f"{prefix}METRICS": "emf",
        f"{prefix}METRICS_NAMESPACE": metrics.namespace,
        f"{prefix}METRICS_INTERVAL": str(metrics.interval_seconds),
    }


def shared_metrics(configs: Sequence[ConsumerConfig], dead_letter_queue: str) -> Metrics | None:
    """The redrive daemon's metrics for a DLQ: on when any of its sources has them on.

    The daemon writes to one namespace, so its sources must agree on it; it flushes as often
    as the most frequent of them.
    """
    found = [m for m in map(metrics_of, configs) if m is not None]
    if not found:
        return None
    namespaces = sorted({m.namespace for m in found})
    if len(namespaces) > 1:
        raise ConfigError(
            f"the queues that dead-letter into {dead_letter_queue!r} send metrics to "
            f"{' and '.join(map(repr, namespaces))}, but its redrive daemon writes to one "
            "namespace (accepted: one metrics_namespace for all of them)"
        )
    return Metrics(namespaces[0], min(m.interval_seconds for m in found))
