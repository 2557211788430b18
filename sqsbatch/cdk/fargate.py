"""Long-running containers on Fargate: the async poller and the redrive daemon.

Both run an image that already exists (ECR repository or image URI): nothing here builds one.
Both touch a health file (`--health-file`) that the container health check reads with
`sqsbatch health` (docs/operations.md): a task whose loop stops receiving is replaced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Acknowledgment, Duration, Stack, Validations
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from sqsbatch.cdk.encryption import QUEUE_SEND, allow_key
from sqsbatch.cdk.queue_pair import DeadLetterQueue, QueueWithDlq, queue_arn
from sqsbatch.cdk.rules import Metrics, consumer_environment, metrics_environment
from sqsbatch.errors import ConfigError

__all__ = ["FargateConsumer", "RedriveService", "TaskSize", "container_image"]

ECS_MAX_STOP_TIMEOUT = 120
HEALTH_FILE = "/tmp/sqsbatch.health"
"""Where the consumer and the daemon touch their health file inside the container."""
HEALTH_MAX_AGE_SECONDS = 60
"""Three long polls of 20 s: a loop that has not completed a receive (nor kept every slot busy)
for that long fails its check; the stall watchdog (default 90 s) then exits the process."""


def with_health_file(command: Sequence[str]) -> list[str]:
    """`command` with `--health-file`, and the ECS container health check that reads the file."""
    return [*command, "--health-file", HEALTH_FILE]


def _health_check() -> ecs.HealthCheck:
    check = f"sqsbatch health {HEALTH_FILE} --max-age {HEALTH_MAX_AGE_SECONDS}"
    return ecs.HealthCheck(
        command=["CMD-SHELL", check],
        interval=Duration.seconds(30),
        timeout=Duration.seconds(10),
        retries=3,
        start_period=Duration.seconds(60),
    )


CONSUMER_QUEUE_ACTIONS = [
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueAttributes",
    "sqs:GetQueueUrl",
    "sqs:SendMessage",  # delays past SQS's limits are re-sent to the queue in hops
]
CONSUMER_DLQ_ACTIONS = ["sqs:SendMessage", "sqs:GetQueueUrl"]
REDRIVE_DLQ_ACTIONS = [
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueAttributes",
    "sqs:GetQueueUrl",
    "sqs:ListDeadLetterSourceQueues",
]
REDRIVE_SOURCE_ACTIONS = ["sqs:SendMessage", "sqs:GetQueueUrl"]
ENV_REASON = (
    "The container's environment holds only sqsbatch's non-secret settings (batch size, "
    "retries, queue names); there are no secrets to move to Secrets Manager."
)
ECR_TOKEN_REASON = (
    "ecr:GetAuthorizationToken cannot be scoped to a resource (AWS accepts only '*'); the image "
    "pull itself is limited to the one repository."
)


@dataclass(frozen=True)
class TaskSize:
    """Fargate task size and how long a stopping task may take (ECS's maximum is 120 s)."""

    cpu: int = 256
    memory_mb: int = 512
    stop_timeout_seconds: int = ECS_MAX_STOP_TIMEOUT


def container_image(
    scope: Construct,
    id: str,
    *,
    uri: str | None = None,
    ecr_repository: str | None = None,
    tag: str = "latest",
) -> ecs.ContainerImage:
    """An existing image: `uri` (any registry) or an ECR repository of this account + `tag`."""
    if (uri is None) == (ecr_repository is None):
        raise ConfigError("a container image needs exactly one of uri or ecr_repository")
    if uri is not None:
        return ecs.ContainerImage.from_registry(uri)
    repository = ecr.Repository.from_repository_name(scope, id, str(ecr_repository))
    return ecs.ContainerImage.from_ecr_repository(repository, tag)


class _Service(Construct):
    """A Fargate service of one container with its own log group (encrypted with `encryption_key`
    when given) and a bare task role."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: ecs.ICluster,
        image: ecs.ContainerImage,
        command: Sequence[str],
        environment: Mapping[str, str],
        size: TaskSize,
        desired_count: int,
        assign_public_ip: bool,
        vpc_subnets: ec2.SubnetSelection | None,
        encryption_key: kms.IKey | None,
    ) -> None:
        super().__init__(scope, id)
        if not 2 <= size.stop_timeout_seconds <= ECS_MAX_STOP_TIMEOUT:
            raise ConfigError(
                f"stop_timeout_seconds={size.stop_timeout_seconds} is invalid (accepted: 2..120)"
            )
        self.log_group = logs.LogGroup(
            self, "Logs", retention=logs.RetentionDays.ONE_MONTH, encryption_key=encryption_key
        )
        self.task_definition = ecs.FargateTaskDefinition(
            self, "Task", cpu=size.cpu, memory_limit_mib=size.memory_mb
        )
        self.task_definition.add_container(
            "Container",
            image=image,
            command=with_health_file(command),
            environment=dict(environment),
            stop_timeout=Duration.seconds(size.stop_timeout_seconds),
            logging=ecs.LogDrivers.aws_logs(stream_prefix=id, log_group=self.log_group),
            health_check=_health_check(),
        )
        self.service = ecs.FargateService(
            self,
            "Service",
            cluster=cluster,
            task_definition=self.task_definition,
            desired_count=desired_count,
            assign_public_ip=assign_public_ip,
            vpc_subnets=vpc_subnets,
            min_healthy_percent=100,
            max_healthy_percent=200,
            circuit_breaker=ecs.DeploymentCircuitBreaker(rollback=True),
        )
        self.task_role = self.task_definition.task_role
        if environment:
            Validations.of(self.task_definition).acknowledge(
                Acknowledgment(id="AwsSolutions-ECS2", reason=ENV_REASON)
            )
        if isinstance(image, ecs.EcrImage):
            Validations.of(self.task_definition).acknowledge(
                Acknowledgment(id="AwsSolutions-IAM5[Resource::*]", reason=ECR_TOKEN_REASON)
            )

    def allow(self, actions: Sequence[str], resources: Sequence[str]) -> None:
        self.task_role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(actions), resources=list(resources))
        )


class FargateConsumer(Construct):
    """`sqsbatch consume HANDLER --queue Q --async` on Fargate, scaled on the backlog.

    Target tracking on visible messages per running task (SQS `ApproximateNumberOfMessagesVisible`
    over Container Insights' `RunningTaskCount`, so the cluster needs Container Insights) keeps
    between `min_tasks` and `max_tasks` tasks. A stopping task gets `stop_timeout_seconds`
    (default 120, ECS's maximum) to end its long poll and settle its in-flight batches.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        queues: QueueWithDlq,
        cluster: ecs.ICluster,
        image: ecs.ContainerImage,
        handler: str,
        min_tasks: int = 1,
        max_tasks: int = 4,
        messages_per_task: int = 100,
        size: TaskSize | None = None,
        assign_public_ip: bool = False,
        vpc_subnets: ec2.SubnetSelection | None = None,
    ) -> None:
        super().__init__(scope, id)
        if not 1 <= min_tasks <= max_tasks:
            raise ConfigError(
                f"min_tasks={min_tasks}, max_tasks={max_tasks} is invalid "
                "(accepted: 1 <= min_tasks <= max_tasks)"
            )
        self.runner = _Service(
            self,
            "Consumer",
            cluster=cluster,
            image=image,
            command=["sqsbatch", "consume", handler, "--queue", queues.queue_name, "--async"],
            environment=consumer_environment(queues.config),
            size=size or TaskSize(),
            desired_count=min_tasks,
            assign_public_ip=assign_public_ip,
            vpc_subnets=vpc_subnets,
            encryption_key=queues.encryption_key,
        )
        self.service = self.runner.service
        self.runner.allow(CONSUMER_QUEUE_ACTIONS, [queues.queue.queue_arn])
        self.runner.allow(CONSUMER_DLQ_ACTIONS, [queues.dead_letter_queue.queue_arn])
        allow_key(self.runner.task_role, queues.encryption_key, QUEUE_SEND)
        self.scaling = _scale_on_backlog(
            self,
            cluster=cluster,
            service=self.service,
            queue_name=queues.queue_name,
            min_tasks=min_tasks,
            max_tasks=max_tasks,
            per_task=messages_per_task,
        )


def _scale_on_backlog(
    scope: Construct,
    *,
    cluster: ecs.ICluster,
    service: ecs.FargateService,
    queue_name: str,
    min_tasks: int,
    max_tasks: int,
    per_task: int,
) -> appscaling.CfnScalingPolicy:
    # CDK's TargetTrackingScalingPolicy takes no metric math, so the policy is written in L1.
    role_arn = Stack.of(scope).format_arn(
        service="iam",
        region="",
        resource="role",
        resource_name="aws-service-role/ecs.application-autoscaling.amazonaws.com/"
        "AWSServiceRoleForApplicationAutoScaling_ECSService",
    )
    target = appscaling.ScalableTarget(
        scope,
        "ScalableTarget",
        service_namespace=appscaling.ServiceNamespace.ECS,
        resource_id=f"service/{cluster.cluster_name}/{service.service_name}",
        scalable_dimension="ecs:service:DesiredCount",
        min_capacity=min_tasks,
        max_capacity=max_tasks,
        role=iam.Role.from_role_arn(scope, "ScalingRole", role_arn),
    )
    policy = appscaling.CfnScalingPolicy
    configuration = policy.TargetTrackingScalingPolicyConfigurationProperty(
        target_value=per_task,
        customized_metric_specification=policy.CustomizedMetricSpecificationProperty(
            metrics=_backlog_per_task(cluster, service, queue_name)
        ),
        scale_in_cooldown=120,
        scale_out_cooldown=60,
    )
    return policy(
        scope,
        "BacklogPerTask",
        policy_name=f"{queue_name}-backlog-per-task".replace(".", "-"),
        policy_type="TargetTrackingScaling",
        scaling_target_id=target.scalable_target_id,
        target_tracking_scaling_policy_configuration=configuration,
    )


def _backlog_per_task(
    cluster: ecs.ICluster, service: ecs.FargateService, queue_name: str
) -> list[appscaling.CfnScalingPolicy.TargetTrackingMetricDataQueryProperty]:
    """Metric math: the queue's visible messages over the service's running tasks."""
    policy = appscaling.CfnScalingPolicy

    def stat(namespace: str, name: str, dimensions: Mapping[str, str]) -> Any:
        return policy.TargetTrackingMetricStatProperty(
            metric=policy.TargetTrackingMetricProperty(
                namespace=namespace,
                metric_name=name,
                dimensions=[
                    policy.TargetTrackingMetricDimensionProperty(name=key, value=value)
                    for key, value in dimensions.items()
                ],
            ),
            stat="Average",
        )

    backlog = stat("AWS/SQS", "ApproximateNumberOfMessagesVisible", {"QueueName": queue_name})
    tasks = stat(
        "ECS/ContainerInsights",
        "RunningTaskCount",
        {"ClusterName": cluster.cluster_name, "ServiceName": service.service_name},
    )
    query = policy.TargetTrackingMetricDataQueryProperty
    return [
        query(id="backlog", metric_stat=backlog, return_data=False),
        query(id="tasks", metric_stat=tasks, return_data=False),
        query(
            id="perTask",
            expression="backlog / tasks",
            label="Visible messages per task",
            return_data=True,
        ),
    ]


class RedriveService(Construct):
    """`redrive run --dlq DLQ` on Fargate: drains one DLQ back to its source queues.

    The task may receive, delete, hide and inspect messages on the DLQ and list its sources,
    and only send to the DLQ's source queues (named in the `DeadLetterQueue`). With a KMS key it
    may use the DLQ's key to decrypt and encrypt: the sources must share that key. With
    `metrics`, it writes its EMF metrics there (`REDRIVE_METRICS*` in its environment).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        dead_letter: DeadLetterQueue,
        cluster: ecs.ICluster,
        image: ecs.ContainerImage,
        desired_count: int = 1,
        size: TaskSize | None = None,
        assign_public_ip: bool = False,
        vpc_subnets: ec2.SubnetSelection | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.metrics = metrics
        self.runner = _Service(
            self,
            "Daemon",
            cluster=cluster,
            image=image,
            command=["redrive", "run", "--dlq", dead_letter.queue_name],
            environment=metrics_environment(metrics, "REDRIVE_"),
            size=size or TaskSize(stop_timeout_seconds=60),
            desired_count=desired_count,
            assign_public_ip=assign_public_ip,
            vpc_subnets=vpc_subnets,
            encryption_key=dead_letter.encryption_key,
        )
        self.service = self.runner.service
        # One key for the DLQ and its sources (each DeadLetterQueue's own, shared with them).
        allow_key(self.runner.task_role, dead_letter.encryption_key, QUEUE_SEND)
        self.runner.allow(REDRIVE_DLQ_ACTIONS, [dead_letter.queue.queue_arn])
        sources = [queue_arn(self, name) for name in dead_letter.source_queue_names]
        self.runner.allow(REDRIVE_SOURCE_ACTIONS, sources)
