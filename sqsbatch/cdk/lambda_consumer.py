"""A Lambda function fed by its queue through an SQS event source mapping."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from constructs import Construct

from sqsbatch.cdk.queues import QueueWithDlq
from sqsbatch.cdk.rules import consumer_environment, is_fifo, lambda_source
from sqsbatch.errors import ConfigError

__all__ = ["RUNTIMES", "LambdaConsumer"]

RUNTIMES = {
    "python3.11": lambda_.Runtime.PYTHON_3_11,
    "python3.12": lambda_.Runtime.PYTHON_3_12,
    "python3.13": lambda_.Runtime.PYTHON_3_13,
    "python3.14": lambda_.Runtime.PYTHON_3_14,
}
ARCHITECTURES = {"x86_64": lambda_.Architecture.X86_64, "arm64": lambda_.Architecture.ARM_64}

# What the sqsbatch Lambda adapter calls besides the event source mapping's receive, delete and
# get-attributes (which CDK grants with the event source): a retry with a delay changes
# visibility, a delay past SQS's limits re-sends to the source in hops, and the final failure is
# sent to the DLQ. Queue URLs come from the event's ARN, so no GetQueueUrl of its own; the
# adapter's one RedrivePolicy read per execution environment uses the event source's grant of
# GetQueueAttributes (the construct passes the DLQ and max_retries explicitly all the same).
SOURCE_ACTIONS = ["sqs:ChangeMessageVisibility", "sqs:SendMessage"]
DLQ_ACTIONS = ["sqs:SendMessage"]


class LambdaConsumer(Construct):
    """A function from a plain asset folder, consuming `queues.queue` in batches.

    The event source takes `batch_size = max_batch_size`, `MaximumBatchingWindowInSeconds =
    max_batch_timeout`, `ReportBatchItemFailures` and `ScalingConfig.MaximumConcurrency`; the
    function gets the consumer's settings as `SQSBATCH_*` variables and a role that may do only
    what the event source and the adapter need on the queue and its DLQ, plus write its own log
    group. `timeout_seconds` defaults to the longest the queue's visibility timeout allows (a
    sixth of it); a longer one is refused, as is a batch over 10 without a batching window.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        queues: QueueWithDlq,
        asset_path: str | Path,
        handler: str = "handler.handler",
        timeout_seconds: int | None = None,
        memory_mb: int = 256,
        runtime: str = "python3.14",
        architecture: str = "x86_64",
        max_concurrency: int | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
    ) -> None:
        super().__init__(scope, id)
        source = lambda_source(
            queues.config,
            fifo=is_fifo(queues.queue_name),
            timeout_seconds=timeout_seconds,
            max_concurrency=max_concurrency,
        )
        if not Path(asset_path).is_dir():
            raise ConfigError(f"lambda asset {str(asset_path)!r} is not a folder")
        if runtime not in RUNTIMES or architecture not in ARCHITECTURES:
            raise ConfigError(
                f"runtime={runtime!r}, architecture={architecture!r} is invalid "
                f"(accepted: {', '.join(RUNTIMES)}; {', '.join(ARCHITECTURES)})"
            )
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        self.log_group.grant_write(self.role)
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIMES[runtime],
            architecture=ARCHITECTURES[architecture],
            handler=handler,
            code=lambda_.Code.from_asset(str(asset_path)),
            timeout=Duration.seconds(source.timeout_seconds),
            memory_size=memory_mb,
            role=self.role,
            log_group=self.log_group,
            environment=consumer_environment(queues.config),
        )
        window = source.window_seconds
        self.function.add_event_source(
            sources.SqsEventSource(
                queues.queue,
                batch_size=source.batch_size,
                max_batching_window=None if window is None else Duration.seconds(window),
                report_batch_item_failures=True,
                max_concurrency=source.max_concurrency,
            )
        )
        self._grant_adapter(queues)

    def _grant_adapter(self, queues: QueueWithDlq) -> None:
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=SOURCE_ACTIONS, resources=[queues.queue.queue_arn])
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=DLQ_ACTIONS, resources=[queues.dead_letter_queue.queue_arn])
        )
