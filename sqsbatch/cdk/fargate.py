"""Long-running containers on Fargate: the async poller and the redrive daemon.

Both run an image that already exists (ECR repository or image URI): nothing here builds one.
Both touch a health file (`--health-file`) that the container health check reads with
`sqsbatch health` (docs/operations.md): a task whose loop stops receiving is replaced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aws_cdk import Acknowledgment, Duration, Stack, Validations
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
from sqsbatch.cdk.scaling import scale_on_backlog
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
    "sqs:ListQueueTags",  # is the queue paused (docs/pressure.md)
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
# The ECS agent makes UpdateTaskProtection with the task role when the poller asks it to
# (`PUT $ECS_AGENT_URI/task-protection/v1/state`, docs/pressure.md).
TASK_PROTECTION_ACTIONS = ["ecs:UpdateTaskProtection"]
TASK_ARN_FINDING = "arn:<AWS::Partition>:ecs:<AWS::Region>:<AWS::AccountId>:task/{cluster}/*"
TASK_ARN_REASON = (
    "Task ids are random and known only once a task starts, so a task may protect only "
    "itself by the ARN pattern of its cluster's tasks; IAM takes no narrower resource."
)
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


def task_arns(scope: Construct, cluster: ecs.ICluster) -> str:
    """`arn:PARTITION:ecs:REGION:ACCOUNT:task/CLUSTER/*`: every task of `cluster`, no other."""
    return Stack.of(scope).format_arn(
        service="ecs", resource="task", resource_name=f"{cluster.cluster_name}/*"
    )


def _task_arn_finding(cluster: ecs.ICluster) -> str:
    """`task_arns` as cdk-nag names it: a cluster of this stack as `<LogicalId>`."""
    name = Stack.of(cluster).resolve(cluster.cluster_name)
    shown = f"<{name['Ref']}>" if isinstance(name, dict) and "Ref" in name else str(name)
    return TASK_ARN_FINDING.format(cluster=shown)


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

    def allow_task_protection(self, cluster: ecs.ICluster) -> None:
        """`ecs:UpdateTaskProtection` on the tasks of `cluster` only: the narrowest resource IAM
        takes (a task ARN names its cluster and a random task id, not its service)."""
        tasks = task_arns(self, cluster)
        self.allow(TASK_PROTECTION_ACTIONS, [tasks])
        Validations.of(self.task_role).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{_task_arn_finding(cluster)}]",
                reason=TASK_ARN_REASON,
            )
        )


class FargateConsumer(Construct):
    """`sqsbatch consume HANDLER --queue Q --async` on Fargate, scaled on the backlog.

    Target tracking on visible plus in-flight messages per running task (SQS's
    `ApproximateNumberOfMessagesVisible` + `ApproximateNumberOfMessagesNotVisible` over Container
    Insights' `RunningTaskCount`, so the cluster needs Container Insights) keeps between
    `min_tasks` and `max_tasks` tasks; with `min_tasks = 0` a step policy starts the first one
    (`sqsbatch.cdk.scaling`). Unless the consumer's `scale_in_protection` is false, the task role
    may take scale-in protection on its cluster's tasks. A stopping task gets
    `stop_timeout_seconds` (default 120, ECS's maximum) to end its long poll and settle its
    in-flight batches.
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
        if not (0 <= min_tasks <= max_tasks and max_tasks >= 1):
            raise ConfigError(
                f"min_tasks={min_tasks}, max_tasks={max_tasks} is invalid "
                "(accepted: 0 <= min_tasks <= max_tasks, max_tasks >= 1)"
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
        if queues.config.scale_in_protection:
            self.runner.allow_task_protection(cluster)
        self.scaling = scale_on_backlog(
            self,
            cluster=cluster,
            service=self.service,
            queue_name=queues.queue_name,
            min_tasks=min_tasks,
            max_tasks=max_tasks,
            per_task=messages_per_task,
        )


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
