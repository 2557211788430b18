"""The whole deployment of a `sqsbatch.toml`: what `infra/app.py` synthesizes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import App, Stack, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from sqsbatch.cdk.alarms import MetricsAlarms, QueueAlarms
from sqsbatch.cdk.dashboard import QueueDashboard, dashboard_name
from sqsbatch.cdk.encryption import queue_key
from sqsbatch.cdk.fargate import FargateConsumer, RedriveService, TaskSize, container_image
from sqsbatch.cdk.idempotency import IdempotencyTable
from sqsbatch.cdk.lambda_consumer import LambdaConsumer
from sqsbatch.cdk.queue_pair import DeadLetterQueue, QueueWithDlq
from sqsbatch.cdk.rules import Metrics, metrics_of, shared_metrics
from sqsbatch.cdk.settings import (
    DeploymentPlan,
    EcsSettings,
    LambdaSettings,
    QueuePlan,
    QueueSettings,
    image_for,
    load_plan,
)

__all__ = ["SqsBatchStack", "build_app"]


class SqsBatchStack(Stack):
    """Every consumer queue of the plan with its DLQ, consumer, alarms, dashboard and redrive.

    DLQs shared by several queues are created once. Fargate services (ECS consumers, redrive)
    share one cluster with Container Insights, in a VPC of public subnets only (no NAT gateway:
    tasks get a public IP to reach SQS, ECR and CloudWatch) with flow logs. With `[infra] kms`,
    one key (`self.key`) encrypts every queue and log group.
    """

    def __init__(self, scope: Construct, id: str, *, plan: DeploymentPlan, **kwargs: Any) -> None:
        super().__init__(scope, id, **kwargs)
        self.plan = plan
        arn = plan.settings.alarm_topic_arn
        self.topic = None if arn is None else sns.Topic.from_topic_arn(self, "AlarmTopic", arn)
        settings = plan.settings
        self.key = queue_key(self, "Key", settings.kms, settings.kms_producer_services)
        self.idempotency = (
            IdempotencyTable(self, "Idempotency", encryption_key=self.key)
            if settings.idempotency
            else None
        )
        self._cluster: ecs.Cluster | None = None
        self.dead_letters: dict[str, DeadLetterQueue] = {}
        # The metrics of the redrive daemon on each DLQ (None: no daemon, or metrics off).
        self.redrive_metrics: dict[str, Metrics | None] = {}
        self.queues: dict[str, QueueWithDlq] = {}
        for dlq, group in plan.sources_by_dlq().items():
            self._add_dead_letter(dlq, group)
        for queue in plan.queues:
            self._add_queue(queue)

    @property
    def cluster(self) -> ecs.Cluster:
        """The cluster of the Fargate services, made on first use."""
        if self._cluster is None:
            vpc = ec2.Vpc(
                self,
                "Vpc",
                max_azs=2,
                nat_gateways=0,
                subnet_configuration=[
                    ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC)
                ],
            )
            if self.key is None:
                vpc.add_flow_log("FlowLog")
            else:
                logs_ = logs.LogGroup(
                    self,
                    "FlowLogs",
                    retention=logs.RetentionDays.ONE_MONTH,
                    encryption_key=self.key,
                )
                vpc.add_flow_log(
                    "FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(logs_)
                )
            self._cluster = ecs.Cluster(
                self, "Cluster", vpc=vpc, container_insights_v2=ecs.ContainerInsights.ENABLED
            )
        return self._cluster

    def _add_dead_letter(self, name: str, group: list[QueuePlan]) -> None:
        dead_letter = DeadLetterQueue(
            self,
            name,
            queue_name=name,
            source_queue_names=[q.name for q in group],
            encryption_key=self.key,
        )
        self.dead_letters[name] = dead_letter
        QueueAlarms(
            dead_letter,
            "Alarms",
            queue=dead_letter.queue,
            queue_name=name,
            oldest_message_seconds=min(q.infra.dlq_age_alarm_seconds for q in group),
            dead_letter=True,
            topic=self.topic,
        )
        self.redrive_metrics[name] = None
        if any(q.infra.redrive for q in group):
            image = image_for(self.plan, None)
            redrive = self.plan.settings.redrive
            metrics = shared_metrics([q.config for q in group], name)
            self.redrive_metrics[name] = metrics
            RedriveService(
                dead_letter,
                "Redrive",
                dead_letter=dead_letter,
                cluster=self.cluster,
                image=container_image(dead_letter, "Image", **image.model_dump()),
                desired_count=redrive.desired_count,
                size=TaskSize(redrive.cpu, redrive.memory_mb, stop_timeout_seconds=60),
                assign_public_ip=True,
                metrics=metrics,
            )

    def _add_queue(self, plan: QueuePlan) -> None:
        infra = plan.infra
        queues = QueueWithDlq(
            self,
            plan.name,
            queue_name=plan.name,
            config=plan.config,
            delivery_delay_seconds=infra.delivery_delay,
            retention_seconds=infra.retention_seconds,
            dead_letter_queue=self.dead_letters[plan.dead_letter_queue],
            encryption_key=self.key,
        )
        self.queues[plan.name] = queues
        QueueAlarms(
            queues,
            "Alarms",
            queue=queues.queue,
            queue_name=plan.name,
            oldest_message_seconds=infra.age_alarm_seconds,
            topic=self.topic,
        )
        self._observe(plan, queues)
        if infra.lambda_ is not None:
            self._add_lambda(infra.lambda_, queues)
        if infra.ecs is not None:
            self._add_ecs(infra, infra.ecs, queues)

    def _add_lambda(self, settings: LambdaSettings, queues: QueueWithDlq) -> None:
        """The queue's Lambda consumer (an SQS event source mapping)."""
        consumer = LambdaConsumer(
            queues,
            "Lambda",
            queues=queues,
            asset_path=self.plan.base_dir / settings.asset,
            handler=settings.handler,
            timeout_seconds=settings.timeout_seconds,
            memory_mb=settings.memory_mb,
            runtime=settings.runtime,
            architecture=settings.architecture,
            max_concurrency=settings.max_concurrency,
            provisioned_pollers=_pair(settings.provisioned_pollers),
            redrive_headroom=self.plan.settings.redrive_headroom,
        )
        if self.idempotency is not None:
            for name, value in self.idempotency.environment.items():
                consumer.function.add_environment(name, value)
            role = consumer.function.role
            assert role is not None  # a Function made here always has one
            self.idempotency.grant(role)

    def _add_ecs(self, infra: QueueSettings, settings: EcsSettings, queues: QueueWithDlq) -> None:
        """The queue's ECS consumer: a Fargate service scaled on the queue's depth."""
        image = image_for(self.plan, infra)
        consumer = FargateConsumer(
            queues,
            "Ecs",
            queues=queues,
            cluster=self.cluster,
            image=container_image(queues, "Image", **image.model_dump()),
            handler=settings.handler,
            min_tasks=settings.min_tasks,
            max_tasks=settings.max_tasks,
            messages_per_task=settings.messages_per_task,
            size=TaskSize(settings.cpu, settings.memory_mb, settings.stop_timeout_seconds),
            assign_public_ip=True,
        )
        if self.idempotency is not None:
            container = consumer.runner.task_definition.default_container
            assert container is not None  # the runner adds its one container
            for name, value in self.idempotency.environment.items():
                container.add_environment(name, value)
            self.idempotency.grant(consumer.runner.task_role)

    def _observe(self, plan: QueuePlan, queues: QueueWithDlq) -> None:
        """The queue's dashboard and, with metrics on, the alarms on the consumer's metrics."""
        metrics = metrics_of(plan.config)
        QueueDashboard(
            queues,
            "Dashboard",
            queues=queues,
            dashboard_name=dashboard_name(self.plan.settings.stack_name, plan.name),
            redrive=self.redrive_metrics[plan.dead_letter_queue],
            oldest_message_seconds=plan.infra.age_alarm_seconds,
            message_age_seconds=None if metrics is None else plan.message_age_alarm_seconds,
        )
        if metrics is not None:
            MetricsAlarms(
                queues,
                "MetricsAlarms",
                queue_name=plan.name,
                metrics=metrics,
                message_age_seconds=plan.message_age_alarm_seconds,
                # A Lambda consumer's event source receives, never the consumer itself.
                receive_errors=plan.infra.consumer != "lambda",
                topic=self.topic,
            )


def _pair(values: list[int] | None) -> tuple[int, int] | None:
    """`[min, max]` from the file as a pair (LambdaSettings checked its length)."""
    return None if values is None else (values[0], values[1])


def build_app(
    config_path: str | Path, *, app: App | None = None, nag: bool = True
) -> tuple[App, SqsBatchStack]:
    """`app` (default: a new `App()`) with the stack of `config_path`, checked by cdk-nag.

    With `nag`, `app.synth()` raises when an AwsSolutions check fails that no acknowledgement
    (each with its reason, in the constructs) covers.
    """
    plan = load_plan(config_path)
    app = App() if app is None else app
    stack = SqsBatchStack(app, plan.settings.stack_name, plan=plan)
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack
