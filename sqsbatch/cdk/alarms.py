"""CloudWatch alarms on a queue (the age of its oldest message and, for a DLQ, its depth) and,
with `metrics = "emf"`, on what its consumer reports (docs/operations.md says what to do)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from sqsbatch.cdk.emf import consumer_metric
from sqsbatch.cdk.rules import Metrics

__all__ = ["MetricsAlarms", "QueueAlarms"]

PERIOD = Duration.minutes(1)


class QueueAlarms(Construct):
    """Alarms for one queue, each notifying `topic` when one is given.

    - `OldestMessage`: `ApproximateAgeOfOldestMessage` (Maximum, 1 min) above
      `oldest_message_seconds`: a consumer that has stopped or fallen behind.
    - `Depth`, with `dead_letter=True`: `ApproximateNumberOfMessagesVisible` (Maximum, 1 min)
      above 0: any message in a DLQ is a failure someone should look at.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        queue: sqs.IQueue,
        queue_name: str,
        oldest_message_seconds: int,
        dead_letter: bool = False,
        topic: sns.ITopic | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.oldest_message = cloudwatch.Alarm(
            self,
            "OldestMessage",
            alarm_description=f"A message in {queue_name} is older than {oldest_message_seconds} s",
            metric=queue.metric_approximate_age_of_oldest_message(
                period=PERIOD, statistic=cloudwatch.Stats.MAXIMUM
            ),
            threshold=oldest_message_seconds,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.alarms = [self.oldest_message]
        self.depth: cloudwatch.Alarm | None = None
        if dead_letter:
            self.depth = cloudwatch.Alarm(
                self,
                "Depth",
                alarm_description=f"Messages are waiting in the dead-letter queue {queue_name}",
                metric=queue.metric_approximate_number_of_messages_visible(
                    period=PERIOD, statistic=cloudwatch.Stats.MAXIMUM
                ),
                threshold=0,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            self.alarms.append(self.depth)
        if topic is not None:
            for alarm in self.alarms:
                alarm.add_alarm_action(actions.SnsAction(topic))


# Missing data, for every alarm below: a consumer metric exists only while a consumer writes it
# (a poller writes every interval, zeros too; Lambda writes per batch, so an idle function
# writes nothing). No datapoint is no evidence of a fault, so it does not breach; a consumer
# that stopped altogether is the OldestMessage alarm's to catch, from SQS's own metrics, which
# exist whether or not a consumer runs. "missing" would instead leave every idle Lambda queue's
# alarms in INSUFFICIENT_DATA, which reads as broken and hides the real state.
NOT_BREACHING = cloudwatch.TreatMissingData.NOT_BREACHING
# "Sustained": in 3 of the last 5 periods. Flushes are not aligned with periods, so a period
# can hold no line even while the fault lasts; 3 of 5 rides over such gaps.
SUSTAINED_DATAPOINTS, SUSTAINED_PERIODS = 3, 5


class MetricsAlarms(Construct):
    """Alarms on a consumer's own metrics (`QueueName` = `queue_name`), each notifying `topic`.

    - `HandlerTimeouts` (Sum > 0 in one period): a handler ran past `handler_timeout`; its
      batch was retried while the handler may still be running.
    - `SettleFailures` (Sum > 0 in one period): an ack, retry or dead-lettering call failed
      for good; those messages come back (duplicates) or are left to the RedrivePolicy.
    - `ReceiveErrors` (Sum > 0 in 3 of 5 periods), with `receive_errors`: the poller cannot
      receive (permissions, KMS, network). One error is retried with backoff and is no alarm.
      A Lambda consumer never receives itself (its event source does), so it has none.
    - `MessageAge` (p99 above `message_age_seconds`, in 3 of 5 periods): messages wait longer
      than they should before their handler sees them; a backlog is building.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        queue_name: str,
        metrics: Metrics,
        message_age_seconds: int,
        receive_errors: bool = True,
        topic: sns.ITopic | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.queue_name = queue_name
        self.metrics = metrics
        self.handler_timeouts = self._alarm(
            "HandlerTimeouts", f"A handler of {queue_name} ran past its handler_timeout"
        )
        self.settle_failures = self._alarm(
            "SettleFailures", f"Settling messages of {queue_name} failed: they may come back"
        )
        self.alarms = [self.handler_timeouts, self.settle_failures]
        self.receive_errors: cloudwatch.Alarm | None = None
        if receive_errors:
            self.receive_errors = self._alarm(
                "ReceiveErrors",
                f"The consumer of {queue_name} keeps failing to receive",
                sustained=True,
            )
            self.alarms.append(self.receive_errors)
        self.message_age = self._alarm(
            "MessageAge",
            f"Messages of {queue_name} are older than {message_age_seconds} s when delivered "
            "(p99): a backlog is building",
            statistic="p99",
            threshold=message_age_seconds * 1000,  # the metric is in milliseconds
            sustained=True,
        )
        self.alarms.append(self.message_age)
        if topic is not None:
            for alarm in self.alarms:
                alarm.add_alarm_action(actions.SnsAction(topic))

    def _alarm(
        self,
        name: str,
        description: str,
        *,
        statistic: str = cloudwatch.Stats.SUM,
        threshold: float = 0,
        sustained: bool = False,
    ) -> cloudwatch.Alarm:
        """Metric `name` above `threshold`: in one period, or `sustained` in 3 of the last 5."""
        periods, datapoints = (SUSTAINED_PERIODS, SUSTAINED_DATAPOINTS) if sustained else (1, 1)
        percentile = statistic.startswith("p")
        return cloudwatch.Alarm(
            self,
            name,
            alarm_description=description,
            metric=consumer_metric(self.metrics, self.queue_name, name, statistic=statistic),
            threshold=threshold,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=periods,
            datapoints_to_alarm=datapoints,
            treat_missing_data=NOT_BREACHING,
            # CloudWatch deems a p99 significant only from 1000 values a period (MessageAge has
            # one per batch); "ignore" below that would silence the alarm on most queues.
            # Evaluated, a quiet period's p99 is close to its maximum: still the age to act on.
            evaluate_low_sample_count_percentile="evaluate" if percentile else None,
        )
