"""How the Fargate consumer scales: on the messages per running task, and from zero tasks.

Target tracking keeps `(visible + in flight) / running tasks` at `messages_per_task`: SQS's
`ApproximateNumberOfMessagesVisible` plus `ApproximateNumberOfMessagesNotVisible` (the messages
the tasks hold) over Container Insights' `RunningTaskCount`, as one metric math expression in the
policy (CloudFormation's `CustomizedMetricSpecification.Metrics`). Counting the messages in
flight keeps busy tasks from looking idle: the service scales in only when the messages per task,
held ones included, are below the target.

Target tracking cannot start the first task: with no task running the expression divides by
zero and CloudWatch gives it no data point. With `min_tasks = 0`, a step scaling policy does
that one step: an alarm on "no task running and a message waiting" adds one task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from constructs import Construct

__all__ = [
    "PER_TASK_EXPRESSION",
    "WAKE_EXPRESSION",
    "BacklogScaling",
    "scale_on_backlog",
]

PER_TASK_EXPRESSION = "(visible + inFlight) / tasks"
# 1 when no task runs (Container Insights reports none, or 0) and a message is visible or held.
WAKE_EXPRESSION = "IF(FILL(tasks, 0) < 1 AND (visible + inFlight) > 0, 1, 0)"
SCALE_IN_COOLDOWN = 120
SCALE_OUT_COOLDOWN = 60
# A first task takes a minute or two to start and to show in RunningTaskCount: the step policy
# waits this long before adding another, so one wake-up starts one task.
WAKE_COOLDOWN = 180

_Policy = appscaling.CfnScalingPolicy


@dataclass(frozen=True)
class BacklogScaling:
    """The scalable target and its policies (the wake-up ones only with `min_tasks = 0`)."""

    target: appscaling.ScalableTarget
    per_task: appscaling.CfnScalingPolicy
    wake_policy: appscaling.CfnScalingPolicy | None
    wake_alarm: cloudwatch.CfnAlarm | None


@dataclass(frozen=True)
class _Metrics:
    queue_name: str
    cluster_name: str
    service_name: str

    def sqs(self, name: str) -> tuple[str, str, Mapping[str, str]]:
        return ("AWS/SQS", name, {"QueueName": self.queue_name})

    def tasks(self) -> tuple[str, str, Mapping[str, str]]:
        dimensions = {"ClusterName": self.cluster_name, "ServiceName": self.service_name}
        return ("ECS/ContainerInsights", "RunningTaskCount", dimensions)

    def inputs(self) -> dict[str, tuple[str, str, Mapping[str, str]]]:
        """The expressions' inputs, by id."""
        return {
            "visible": self.sqs("ApproximateNumberOfMessagesVisible"),
            "inFlight": self.sqs("ApproximateNumberOfMessagesNotVisible"),
            "tasks": self.tasks(),
        }


def scale_on_backlog(
    scope: Construct,
    *,
    cluster: ecs.ICluster,
    service: ecs.FargateService,
    queue_name: str,
    min_tasks: int,
    max_tasks: int,
    per_task: int,
) -> BacklogScaling:
    """Scale `service` between `min_tasks` and `max_tasks` on its queue's messages per task."""
    metrics = _Metrics(queue_name, cluster.cluster_name, service.service_name)
    target = appscaling.ScalableTarget(
        scope,
        "ScalableTarget",
        service_namespace=appscaling.ServiceNamespace.ECS,
        resource_id=f"service/{cluster.cluster_name}/{service.service_name}",
        scalable_dimension="ecs:service:DesiredCount",
        min_capacity=min_tasks,
        max_capacity=max_tasks,
        role=iam.Role.from_role_arn(scope, "ScalingRole", _scaling_role_arn(scope)),
    )
    name = queue_name.replace(".", "-")
    configuration = _Policy.TargetTrackingScalingPolicyConfigurationProperty(
        target_value=per_task,
        customized_metric_specification=_Policy.CustomizedMetricSpecificationProperty(
            metrics=_per_task_queries(metrics)
        ),
        scale_in_cooldown=SCALE_IN_COOLDOWN,
        scale_out_cooldown=SCALE_OUT_COOLDOWN,
    )
    # CDK's TargetTrackingScalingPolicy takes no metric math, so the policy is written in L1.
    policy = _Policy(
        scope,
        "BacklogPerTask",
        policy_name=f"{name}-backlog-per-task",
        policy_type="TargetTrackingScaling",
        scaling_target_id=target.scalable_target_id,
        target_tracking_scaling_policy_configuration=configuration,
    )
    if min_tasks > 0:
        return BacklogScaling(target, policy, None, None)
    wake, alarm = _wake_from_zero(scope, target, metrics, name)
    return BacklogScaling(target, policy, wake, alarm)


def _scaling_role_arn(scope: Construct) -> str:
    return Stack.of(scope).format_arn(
        service="iam",
        region="",
        resource="role",
        resource_name="aws-service-role/ecs.application-autoscaling.amazonaws.com/"
        "AWSServiceRoleForApplicationAutoScaling_ECSService",
    )


def _per_task_queries(metrics: _Metrics) -> list[_Policy.TargetTrackingMetricDataQueryProperty]:
    """Metric math: visible plus in-flight messages over the service's running tasks."""

    def stat(
        namespace: str, name: str, dimensions: Mapping[str, str]
    ) -> _Policy.TargetTrackingMetricStatProperty:
        return _Policy.TargetTrackingMetricStatProperty(
            metric=_Policy.TargetTrackingMetricProperty(
                namespace=namespace,
                metric_name=name,
                dimensions=[
                    _Policy.TargetTrackingMetricDimensionProperty(name=key, value=value)
                    for key, value in dimensions.items()
                ],
            ),
            stat="Average",
        )

    query = _Policy.TargetTrackingMetricDataQueryProperty
    inputs = [
        query(id=key, metric_stat=stat(*value), return_data=False)
        for key, value in metrics.inputs().items()
    ]
    label = "Visible and in-flight messages per task"
    per_task = query(id="perTask", expression=PER_TASK_EXPRESSION, label=label, return_data=True)
    return [*inputs, per_task]


def _wake_from_zero(
    scope: Construct, target: appscaling.ScalableTarget, metrics: _Metrics, name: str
) -> tuple[appscaling.CfnScalingPolicy, cloudwatch.CfnAlarm]:
    """A step policy adding one task, and the alarm that runs it while none runs and a message
    waits (once a task runs, target tracking takes over)."""
    step = _Policy.StepScalingPolicyConfigurationProperty(
        adjustment_type="ChangeInCapacity",
        cooldown=WAKE_COOLDOWN,
        metric_aggregation_type="Maximum",
        step_adjustments=[
            _Policy.StepAdjustmentProperty(scaling_adjustment=1, metric_interval_lower_bound=0)
        ],
    )
    policy = _Policy(
        scope,
        "WakeFromZero",
        policy_name=f"{name}-wake-from-zero",
        policy_type="StepScaling",
        scaling_target_id=target.scalable_target_id,
        step_scaling_policy_configuration=step,
    )
    alarm = cloudwatch.CfnAlarm(
        scope,
        "WakeAlarm",
        alarm_description=f"{metrics.queue_name}: a message waits and no task runs",
        comparison_operator="GreaterThanOrEqualToThreshold",
        threshold=1,
        evaluation_periods=1,
        treat_missing_data="notBreaching",
        metrics=_wake_queries(metrics),
        alarm_actions=[policy.ref],
    )
    return policy, alarm


def _wake_queries(metrics: _Metrics) -> list[cloudwatch.CfnAlarm.MetricDataQueryProperty]:
    query = cloudwatch.CfnAlarm.MetricDataQueryProperty
    inputs = [
        query(
            id=key,
            return_data=False,
            metric_stat=cloudwatch.CfnAlarm.MetricStatProperty(
                metric=cloudwatch.CfnAlarm.MetricProperty(
                    namespace=namespace,
                    metric_name=metric,
                    dimensions=[
                        cloudwatch.CfnAlarm.DimensionProperty(name=k, value=v)
                        for k, v in dimensions.items()
                    ],
                ),
                period=60,
                stat="Maximum",
            ),
        )
        for key, (namespace, metric, dimensions) in metrics.inputs().items()
    ]
    return [*inputs, query(id="wake", expression=WAKE_EXPRESSION, return_data=True)]
