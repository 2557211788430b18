"""A CloudWatch dashboard for one consumer queue: SQS's own metrics, and sqsbatch's when on.

SQS publishes queue depth and the age of the oldest message for every queue, so those graphs are
always there. With `metrics = "emf"` the consumer's own metrics (docs/operations.md) add
throughput, failures, latency and dead-letter reasons, and the redrive daemon's moves when one
drains the queue's DLQ.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from sqsbatch.cdk.emf import (
    DEAD_LETTER_REASONS,
    FAILURES,
    OTHER_OUTCOMES,
    REDRIVE_COUNTS,
    THROUGHPUT,
    consumer_metric,
    redrive_metric,
)
from sqsbatch.cdk.queue_pair import QueueWithDlq
from sqsbatch.cdk.rules import Metrics, metrics_of

__all__ = ["QueueDashboard", "dashboard_name"]

SQS_PERIOD = Duration.minutes(1)  # SQS publishes its queue metrics once a minute
FULL_WIDTH = 24
HEIGHT = 6
MAX = cloudwatch.Stats.MAXIMUM


def dashboard_name(stack_name: str, queue_name: str) -> str:
    """`<stack>-<queue>`: dashboard names take letters, digits, `-` and `_` (no `.fifo` dot)."""
    return f"{stack_name}-{queue_name}".replace(".", "-")  # at most 128 + 1 + 80 characters


class QueueDashboard(Construct):
    """Graphs of one queue and its DLQ, plus sqsbatch's metrics when `queues.config` turns them on.

    `redrive`: the metrics settings of a redrive daemon draining the DLQ (None: no daemon, or
    its metrics are off). `oldest_message_seconds` and `message_age_seconds` draw the alarms'
    thresholds on the age graphs.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        queues: QueueWithDlq,
        dashboard_name: str | None = None,
        redrive: Metrics | None = None,
        oldest_message_seconds: int | None = None,
        message_age_seconds: int | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.queues = queues
        self.metrics = metrics_of(queues.config)
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=dashboard_name,
            default_interval=Duration.hours(3),
        )
        self.dashboard.add_widgets(self._title())
        self.dashboard.add_widgets(*self._queue_widgets(oldest_message_seconds))
        if self.metrics is not None:
            self.dashboard.add_widgets(*self._consumer_widgets(self.metrics, message_age_seconds))
            self.dashboard.add_widgets(*self._outcome_widgets(self.metrics, redrive))

    def _title(self) -> cloudwatch.TextWidget:
        queues = self.queues
        text = f"# {queues.queue_name}\nDead-letter queue: {queues.dead_letter.queue_name}. "
        if self.metrics is None:
            text += 'sqsbatch metrics are off: set `metrics = "emf"` to graph them here.'
        else:
            text += f"sqsbatch metrics: namespace `{self.metrics.namespace}`."
        return cloudwatch.TextWidget(markdown=text, width=FULL_WIDTH, height=2)

    def _queue_widgets(self, oldest_message_seconds: int | None) -> list[cloudwatch.IWidget]:
        """SQS's metrics, always published: depth, in flight, delayed, oldest message."""
        queue, dlq = self.queues.queue, self.queues.dead_letter_queue
        dlq_name = self.queues.dead_letter.queue_name
        return [
            _graph(
                f"Messages in {self.queues.queue_name}",
                [
                    queue.metric_approximate_number_of_messages_visible(
                        period=SQS_PERIOD, statistic=MAX, label="Visible"
                    ),
                    queue.metric_approximate_number_of_messages_not_visible(
                        period=SQS_PERIOD, statistic=MAX, label="In flight"
                    ),
                    queue.metric_approximate_number_of_messages_delayed(
                        period=SQS_PERIOD, statistic=MAX, label="Delayed"
                    ),
                ],
                width=8,
            ),
            _graph(
                f"Messages in {dlq_name}",
                [
                    dlq.metric_approximate_number_of_messages_visible(
                        period=SQS_PERIOD, statistic=MAX, label="Visible"
                    )
                ],
                width=8,
            ),
            _graph(
                "Age of the oldest message (s)",
                [
                    queue.metric_approximate_age_of_oldest_message(
                        period=SQS_PERIOD, statistic=MAX, label=self.queues.queue_name
                    )
                ],
                width=8,
                threshold=oldest_message_seconds,
                # Right: a DLQ's messages are days old where the queue's are seconds.
                right=[
                    dlq.metric_approximate_age_of_oldest_message(
                        period=SQS_PERIOD, statistic=MAX, label=dlq_name
                    )
                ],
            ),
        ]

    def _consumer_widgets(
        self, metrics: Metrics, message_age_seconds: int | None
    ) -> list[cloudwatch.IWidget]:
        """Throughput, failures and latency, from the consumer's EMF lines."""
        name = self.queues.queue_name

        def count(metric: str) -> cloudwatch.Metric:
            return consumer_metric(metrics, name, metric)

        def stat(metric: str, statistic: str) -> cloudwatch.Metric:
            return consumer_metric(metrics, name, metric, statistic=statistic, label=statistic)

        age_ms = None if message_age_seconds is None else message_age_seconds * 1000
        return [
            _graph("Throughput (messages)", [count(m) for m in THROUGHPUT], width=6),
            _graph("Failures", [count(m) for m in FAILURES], width=6),
            _graph(
                "Handler duration (ms)",
                [stat("HandlerDuration", "p50"), stat("HandlerDuration", "p99")],
                width=6,
            ),
            _graph(
                "Message age at delivery (ms)",
                [stat("MessageAge", cloudwatch.Stats.MAXIMUM), stat("MessageAge", "p99")],
                width=6,
                threshold=age_ms,
            ),
        ]

    def _outcome_widgets(
        self, metrics: Metrics, redrive: Metrics | None
    ) -> list[cloudwatch.IWidget]:
        """Why messages were dead-lettered, the rarer outcomes, and the redrive daemon's work."""
        name = self.queues.queue_name
        by_reason = [
            consumer_metric(metrics, name, "DeadLettered", reason=reason, label=reason)
            for reason in DEAD_LETTER_REASONS
        ]
        outcomes = [consumer_metric(metrics, name, m) for m in OTHER_OUTCOMES]
        widgets: list[cloudwatch.IWidget] = [
            _graph("Dead-lettered by reason", by_reason, width=8),
            _graph("Batches and other outcomes", outcomes, width=8),
        ]
        if redrive is not None:
            dlq = self.queues.dead_letter.queue_name
            widgets.append(
                _graph(
                    f"Redrive daemon on {dlq}",
                    [redrive_metric(redrive, dlq, m) for m in REDRIVE_COUNTS],
                    width=8,
                )
            )
        return widgets


def _graph(
    title: str,
    metrics: Sequence[cloudwatch.IMetric],
    *,
    width: int,
    threshold: float | None = None,
    right: Sequence[cloudwatch.IMetric] = (),
) -> cloudwatch.GraphWidget:
    annotations = None
    if threshold is not None:
        annotations = [cloudwatch.HorizontalAnnotation(value=threshold, label="alarm")]
    return cloudwatch.GraphWidget(
        title=title,
        left=list(metrics),
        right=list(right) or None,
        width=width,
        height=HEIGHT,
        left_annotations=annotations,
    )
