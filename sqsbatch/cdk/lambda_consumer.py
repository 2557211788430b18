"""A Lambda function fed by its queue through an SQS event source mapping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from constructs import Construct

from sqsbatch.cdk.acknowledgements import skip_checkov
from sqsbatch.cdk.encryption import QUEUE_SEND, allow_key
from sqsbatch.cdk.queue_pair import QueueWithDlq
from sqsbatch.cdk.rules import LambdaSource, consumer_environment, is_fifo, lambda_source
from sqsbatch.cdk.settings import DEFAULT_REDRIVE_HEADROOM
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

# checkov findings on the function that are right not to fix (docs/infra.md lists them).
NO_VPC_REASON = (
    "The function talks only to SQS and CloudWatch Logs, public AWS endpoints reached over TLS "
    "with IAM auth; a VPC would add NAT gateways or interface endpoints and protect nothing."
)
NO_FUNCTION_DLQ_REASON = (
    "An SQS event source invokes synchronously and never uses a function's DLQ (that is for "
    "asynchronous invocations); failed messages go to the queue's DLQ, by sqsbatch or the "
    "RedrivePolicy."
)
PLAIN_ENVIRONMENT_REASON = (
    "The environment holds only sqsbatch's non-secret settings (batch size, retries, queue "
    "names); Lambda encrypts it at rest with its own key, and a customer key would protect no "
    "secret."
)


def _scaling(source: LambdaSource) -> dict[str, Any]:
    """The mapping's `MaximumConcurrency`, or in provisioned mode its `ProvisionedPollerConfig`
    (the two are exclusive)."""
    if source.pollers is None:
        return {"max_concurrency": source.max_concurrency}
    minimum, maximum = source.pollers
    config = lambda_.ProvisionedPollerConfig(minimum_pollers=minimum, maximum_pollers=maximum)
    return {"provisioned_poller_config": config}


class LambdaConsumer(Construct):
    """A function from a plain asset folder, consuming `queues.queue` in batches.

    The event source takes `batch_size = max_batch_size`, `MaximumBatchingWindowInSeconds =
    max_batch_timeout`, `ReportBatchItemFailures` and `ScalingConfig.MaximumConcurrency`; the
    function gets the consumer's settings as `SQSBATCH_*` variables and a role that may do only
    what the event source and the adapter need on the queue and its DLQ (and their KMS key, if
    any), plus write its own log group (encrypted with the queues' key, if any).
    `timeout_seconds` defaults to the longest the queue's visibility timeout allows (a sixth of
    it); a longer one is refused, as is a batch over 10 without a batching window.

    Throttling: the function's reserved concurrency is the event source's maximum concurrency,
    so the mapping never invokes more copies than the function may run. In provisioned mode
    (`provisioned_pollers = (min, max)`, exclusive with `max_concurrency`) the mapping takes no
    maximum concurrency and the function reserves what `max` pollers may invoke at once (10
    each). A throttled invocation
    still counts as a receive on SQS (the batch comes back after the visibility timeout), so the
    queue's `maxReceiveCount` gets `redrive_headroom` extra receives: a message whose receives
    were partly eaten by throttles still reaches its handler for a last delivery, on which
    sqsbatch dead-letters it (with the error) if it fails. `SQSBATCH_MAX_RETRIES` is set
    explicitly, so the headroom never raises `max_retries`.
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
        provisioned_pollers: tuple[int, int] | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        redrive_headroom: int = DEFAULT_REDRIVE_HEADROOM,
    ) -> None:
        super().__init__(scope, id)
        source = lambda_source(
            queues.config,
            fifo=is_fifo(queues.queue_name),
            timeout_seconds=timeout_seconds,
            max_concurrency=max_concurrency,
            provisioned_pollers=provisioned_pollers,
        )
        if not Path(asset_path).is_dir():
            raise ConfigError(f"lambda asset {str(asset_path)!r} is not a folder")
        if runtime not in RUNTIMES or architecture not in ARCHITECTURES:
            raise ConfigError(
                f"runtime={runtime!r}, architecture={architecture!r} is invalid "
                f"(accepted: {', '.join(RUNTIMES)}; {', '.join(ARCHITECTURES)})"
            )
        queues.add_receive_headroom(redrive_headroom)
        self.log_group = logs.LogGroup(
            self, "Logs", retention=log_retention, encryption_key=queues.encryption_key
        )
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
            reserved_concurrent_executions=source.max_concurrency,
        )
        skip_checkov(self.function, "CKV_AWS_117", NO_VPC_REASON)
        skip_checkov(self.function, "CKV_AWS_116", NO_FUNCTION_DLQ_REASON)
        skip_checkov(self.function, "CKV_AWS_173", PLAIN_ENVIRONMENT_REASON)
        window = source.window_seconds
        self.function.add_event_source(
            sources.SqsEventSource(
                queues.queue,
                batch_size=source.batch_size,
                max_batching_window=None if window is None else Duration.seconds(window),
                report_batch_item_failures=True,
                **_scaling(source),
            )
        )
        self._grant_adapter(queues)
        self._drop_redundant_dependency()

    def _drop_redundant_dependency(self) -> None:
        # CDK makes the function depend on the whole Role construct: on the role, which the
        # function's Role GetAtt already orders (cfn-lint W3005), and on its policy, which it
        # must keep (the event source mapping checks the role's permissions when it is created).
        # That construct-level dependency cannot be removed, so DependsOn is written out.
        function = self.function.node.default_child
        policy = self.role.node.try_find_child("DefaultPolicy")
        assert isinstance(function, lambda_.CfnFunction) and isinstance(policy, iam.Policy)
        cfn_policy = policy.node.default_child
        assert isinstance(cfn_policy, iam.CfnPolicy)
        function.add_override("DependsOn", [cfn_policy.logical_id])

    def _grant_adapter(self, queues: QueueWithDlq) -> None:
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=SOURCE_ACTIONS, resources=[queues.queue.queue_arn])
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=DLQ_ACTIONS, resources=[queues.dead_letter_queue.queue_arn])
        )
        allow_key(self.role, queues.encryption_key, QUEUE_SEND)
