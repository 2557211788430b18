"""sqsbatch's own metrics as CloudWatch metric objects, for the dashboard and the alarms.

The consumers and the redrive daemon write them as Embedded Metric Format lines when `metrics =
"emf"` (docs/operations.md); CloudWatch Logs extracts them from the log groups the constructs
make. The names, units and dimensions are the library's public ones, written once here for the
infrastructure: a consumer's metrics carry `QueueName` (the source queue), `DeadLettered` also
`QueueName` + `Reason`, the daemon's `QueueName` (the DLQ).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

from sqsbatch._core.metrics import DEAD_LETTER_REASONS, REDRIVE_METRICS
from sqsbatch.cdk.rules import Metrics

__all__ = [
    "DEAD_LETTER_REASONS",
    "FAILURES",
    "OTHER_OUTCOMES",
    "REDRIVE_COUNTS",
    "THROUGHPUT",
    "consumer_metric",
    "redrive_metric",
]

THROUGHPUT = ("Received", "Acked", "Retried", "DeadLettered")
FAILURES = (
    "HandlerErrors",
    "HandlerTimeouts",
    "SettleFailures",
    "ReceiveErrors",
    "ExpiredReceipts",
)
OTHER_OUTCOMES = (
    "Batches",
    "Postponed",
    "LeftToRedrivePolicy",
    "Dropped",
    "CircuitOpen",
    "PausedSeconds",
    "DuplicatesSkipped",
)
"""Counts (unit Count): the outcomes of every received message, what went wrong, and holding
back (the circuit's openings, seconds paused), the idempotency guard's duplicates."""
REDRIVE_COUNTS = tuple(dict.fromkeys(REDRIVE_METRICS.values()))
"""The redrive daemon's counts, with `QueueName` = the DLQ it drains (the `Reason` values of
`DeadLettered` are the library's `DEAD_LETTER_REASONS`, imported here)."""
# Distributions, one value per batch: BatchSize (Count), HandlerDuration and MessageAge
# (Milliseconds; MessageAge is the batch's oldest message's age at delivery).


def consumer_metric(
    metrics: Metrics,
    queue_name: str,
    name: str,
    *,
    statistic: str = cloudwatch.Stats.SUM,
    reason: str | None = None,
    label: str | None = None,
) -> cloudwatch.Metric:
    """A consumer's metric `name` for `queue_name`, by `Reason` when `reason` is given.

    No `label` for alarms: with one, CDK writes the alarm as metric math (`Metrics`).
    """
    dimensions = {"QueueName": queue_name}
    if reason is not None:
        dimensions["Reason"] = reason
    return cloudwatch.Metric(
        namespace=metrics.namespace,
        metric_name=name,
        dimensions_map=dimensions,
        statistic=statistic,
        period=Duration.seconds(metrics.period_seconds),
        label=label,
    )


def redrive_metric(metrics: Metrics, dead_letter_queue: str, name: str) -> cloudwatch.Metric:
    """The redrive daemon's count `name` for the DLQ it drains, summed per period."""
    return consumer_metric(metrics, dead_letter_queue, name)
