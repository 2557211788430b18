"""CloudWatch alarms on a queue: the age of its oldest message and, for a DLQ, its depth."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

__all__ = ["QueueAlarms"]

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
