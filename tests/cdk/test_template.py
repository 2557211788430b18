"""Every setting of infra/sqsbatch.toml lands in the synthesized template, and nothing more.

Expected values come from the settings (`ConsumerConfig.load` and `[infra]`), not from literals,
so a drift between the library's settings and the infrastructure fails here.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from sqsbatch._core.queue_settings import resolve_settings
from sqsbatch.cdk.encryption import QUEUE_RECEIVE, QUEUE_SEND
from sqsbatch.cdk.fargate import with_health_file
from sqsbatch.cdk.rules import VISIBILITY_FACTOR, consumer_environment
from sqsbatch.cdk.scaling import PER_TASK_EXPRESSION
from sqsbatch.cdk.settings import FOURTEEN_DAYS, QueuePlan
from sqsbatch.config import ConsumerConfig
from tests.cdk.conftest import (
    Synthesis,
    arn_of,
    expected_receive_count,
    key_id,
    name_arn,
    queue_id,
    resources,
)

Statements = set[tuple[str, str]]


def plan_for(synthesis: Synthesis, consumer: str) -> QueuePlan:
    return next(q for q in synthesis.plan.queues if q.infra.consumer == consumer)


def role_statements(template: dict[str, Any], role_id: str) -> Statements:
    """(action, resource) pairs that the role's policies allow."""
    pairs: Statements = set()
    for policy in resources(template, "AWS::IAM::Policy").values():
        if {"Ref": role_id} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow"
            actions = statement["Action"]
            targets = statement["Resource"]
            for action in [actions] if isinstance(actions, str) else actions:
                for target in targets if isinstance(targets, list) else [targets]:
                    pairs.add((action, json.dumps(target, sort_keys=True)))
    return pairs


def allowed(actions: list[str], resource: Any) -> Statements:
    return {(action, json.dumps(resource, sort_keys=True)) for action in actions}


def test_each_queue_dead_letters_after_max_retries_plus_one(synthesis: Synthesis) -> None:
    """Plus the headroom for throttled invocations on a Lambda consumer's queue."""
    template = Template.from_json(synthesis.template)
    headroom = synthesis.plan.settings.redrive_headroom
    assert headroom > 0, "the example gives its Lambda consumer headroom"
    for queue in synthesis.plan.queues:
        count = expected_receive_count(synthesis.plan, queue)
        lambda_ = queue.infra.consumer == "lambda"
        assert count == queue.config.max_retries + 1 + (headroom if lambda_ else 0)
        template.has_resource_properties(
            "AWS::SQS::Queue",
            {
                "QueueName": queue.name,
                "RedrivePolicy": {
                    "maxReceiveCount": count,
                    "deadLetterTargetArn": arn_of(
                        queue_id(synthesis.template, queue.dead_letter_queue)
                    ),
                },
            },
        )


def test_queue_attributes_come_from_the_settings(synthesis: Synthesis) -> None:
    template = Template.from_json(synthesis.template)
    for queue in synthesis.plan.queues:
        template.has_resource_properties(
            "AWS::SQS::Queue",
            {
                "QueueName": queue.name,
                "VisibilityTimeout": queue.config.visibility_timeout,
                "DelaySeconds": queue.infra.delivery_delay,
                "MessageRetentionPeriod": queue.infra.retention_seconds,
            },
        )
    assert {q.infra.delivery_delay for q in synthesis.plan.queues} != {0}, "example sets a delay"


def test_dlqs_outlive_their_sources_and_allow_only_them(synthesis: Synthesis) -> None:
    template = synthesis.template
    for dlq, sources in synthesis.plan.sources_by_dlq().items():
        properties = template["Resources"][queue_id(template, dlq)]["Properties"]
        assert properties["MessageRetentionPeriod"] == FOURTEEN_DAYS
        assert all(q.infra.retention_seconds <= FOURTEEN_DAYS for q in sources)
        assert properties["RedriveAllowPolicy"] == {
            "redrivePermission": "byQueue",
            "sourceQueueArns": [name_arn(q.name) for q in sources],
        }
        # Built from names: the DLQ refers to no source queue resource, so there is no cycle.
        for source in sources:
            assert queue_id(template, source.name) not in json.dumps(properties)


def test_one_key_encrypts_every_queue_and_log_group(synthesis: Synthesis) -> None:
    assert synthesis.plan.settings.kms == "create", "the example creates its key"
    template = synthesis.template
    key = arn_of(key_id(template))
    for name, queue in resources(template, "AWS::SQS::Queue").items():
        assert queue["Properties"]["KmsMasterKeyId"] == key, name
        assert "SqsManagedSseEnabled" not in queue["Properties"], name
    groups = resources(template, "AWS::Logs::LogGroup")
    assert len(groups) == 5  # Lambda, ECS consumer, two redrive daemons, VPC flow logs
    for name, group in groups.items():
        assert group["Properties"]["KmsKeyId"] == key, name
    properties = template["Resources"][key_id(template)]["Properties"]
    assert properties["EnableKeyRotation"] is True
    (logs,) = [s for s in properties["KeyPolicy"]["Statement"] if "Service" in s["Principal"]]
    assert logs["Principal"]["Service"] == {
        "Fn::Join": ["", ["logs.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]
    }
    condition = logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"]
    assert json.dumps(condition).endswith(':log-group:*"]]}')


def test_every_queue_denies_requests_without_tls(synthesis: Synthesis) -> None:
    template = synthesis.template
    policies = resources(template, "AWS::SQS::QueuePolicy").values()
    for key in resources(template, "AWS::SQS::Queue"):
        statements = [
            statement
            for policy in policies
            if policy["Properties"]["Queues"] == [{"Ref": key}]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        ]
        assert {
            "Action": "sqs:*",
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Resource": arn_of(key),
        } in statements, key


def test_lambda_event_source_follows_the_consumer_settings(synthesis: Synthesis) -> None:
    queue = plan_for(synthesis, "lambda")
    config = queue.config
    assert config.max_batch_size > 10, "the example exercises the batching-window rule"
    Template.from_json(synthesis.template).has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": arn_of(queue_id(synthesis.template, queue.name)),
            "BatchSize": config.max_batch_size,
            "MaximumBatchingWindowInSeconds": int(config.max_batch_timeout),
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "ScalingConfig": {"MaximumConcurrency": config.max_concurrency},
        },
    )


def test_lambda_function_gets_the_settings_and_a_timeout_the_queue_allows(
    synthesis: Synthesis,
) -> None:
    queue = plan_for(synthesis, "lambda")
    assert queue.infra.lambda_ is not None
    (function,) = resources(synthesis.template, "AWS::Lambda::Function").values()
    properties = function["Properties"]
    assert properties["Timeout"] == queue.infra.lambda_.timeout_seconds
    assert queue.config.visibility_timeout >= VISIBILITY_FACTOR * properties["Timeout"]
    assert properties["Handler"] == queue.infra.lambda_.handler
    assert properties["Runtime"] == queue.infra.lambda_.runtime
    assert properties["Environment"]["Variables"] == consumer_environment(queue.config)
    # max_retries stays explicit: the headroom on maxReceiveCount never raises it.
    assert properties["Environment"]["Variables"]["SQSBATCH_MAX_RETRIES"] == str(
        queue.config.max_retries
    )
    # As many copies may run as the event source invokes at most: none is throttled by it.
    assert properties["ReservedConcurrentExecutions"] == queue.config.max_concurrency
    # The role is ordered by the Role GetAtt (cfn-lint W3005); its policy by DependsOn.
    (depends_on,) = function["DependsOn"]
    assert resources(synthesis.template, "AWS::IAM::Policy")[depends_on]
    # A plain folder asset: staged as is, never built in a container.
    staged = synthesis.outdir / f"asset.{properties['Code']['S3Key'].removesuffix('.zip')}"
    assert (staged / "handler.py").is_file()
    assert "bundling" not in json.dumps(
        json.loads(next(synthesis.outdir.glob("*.assets.json")).read_text())
    )


def test_the_lambda_consumer_keeps_max_retries_under_the_raised_receive_count(
    synthesis: Synthesis, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """What the deployed adapter concludes at start-up, from the function's environment and its
    queue's RedrivePolicy: the same max_retries and DLQ as the settings, and nothing to warn
    about (a maxReceiveCount above max_retries + 1 is headroom)."""
    template = synthesis.template
    queue = plan_for(synthesis, "lambda")
    (function,) = resources(template, "AWS::Lambda::Function").values()
    monkeypatch.chdir(tmp_path)  # no sqsbatch.toml: the environment alone, as on Lambda
    for key, value in function["Properties"]["Environment"]["Variables"].items():
        monkeypatch.setenv(key, value)
    policy = template["Resources"][queue_id(template, queue.name)]["Properties"]["RedrivePolicy"]
    assert policy["maxReceiveCount"] > queue.config.max_retries + 1
    dlq_arn = f"arn:aws:sqs:us-east-1:123456789012:{queue.dead_letter_queue}"
    redrive = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": policy["maxReceiveCount"]}
    attributes = {"RedrivePolicy": json.dumps(redrive)}
    settings = resolve_settings(queue.name, ConsumerConfig.load(queue.name), attributes)
    assert settings.config.max_retries == queue.config.max_retries
    assert settings.config.dead_letter_queue == queue.dead_letter_queue
    assert settings.notes == ()


def test_lambda_role_allows_exactly_what_the_adapter_uses(synthesis: Synthesis) -> None:
    template = synthesis.template
    queue = plan_for(synthesis, "lambda")
    (function,) = resources(template, "AWS::Lambda::Function").values()
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    log_group = function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    source = arn_of(queue_id(template, queue.name))
    dlq = arn_of(queue_id(template, queue.dead_letter_queue))
    # The event source mapping's grant (CDK's grantConsumeMessages also names GetQueueUrl and
    # ChangeMessageVisibility), then what the adapter calls on its own.
    consume = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"]
    adapter = ["sqs:ChangeMessageVisibility", "sqs:SendMessage", "sqs:GetQueueUrl"]
    assert role_statements(template, role_id) == (
        allowed(consume + adapter, source)
        | allowed(["sqs:SendMessage"], dlq)
        | allowed(["logs:CreateLogStream", "logs:PutLogEvents"], arn_of(log_group))
        | allowed(QUEUE_SEND + QUEUE_RECEIVE, arn_of(key_id(template)))
    )
    assert "ManagedPolicyArns" not in template["Resources"][role_id]["Properties"]


def task_definition(synthesis: Synthesis, command: list[str]) -> dict[str, Any]:
    for task in resources(synthesis.template, "AWS::ECS::TaskDefinition").values():
        (container,) = task["Properties"]["ContainerDefinitions"]
        if container["Command"] == with_health_file(command):  # docs/operations.md
            return dict(task["Properties"])
    raise AssertionError(f"no task runs {command}")


def test_fargate_consumer_runs_the_async_poller_and_scales_on_backlog(
    synthesis: Synthesis,
) -> None:
    queue = plan_for(synthesis, "ecs")
    ecs = queue.infra.ecs
    assert ecs is not None
    command = ["sqsbatch", "consume", ecs.handler, "--queue", queue.name, "--async"]
    (container,) = task_definition(synthesis, command)["ContainerDefinitions"]
    assert container["StopTimeout"] == ecs.stop_timeout_seconds == 120
    environment = {item["Name"]: item["Value"] for item in container["Environment"]}
    assert environment == consumer_environment(queue.config)
    template = Template.from_json(synthesis.template)
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {
            "MinCapacity": ecs.min_tasks,
            "MaxCapacity": ecs.max_tasks,
            "ScalableDimension": "ecs:service:DesiredCount",
        },
    )

    def sqs(name: str) -> dict[str, Any]:
        dimensions = [{"Name": "QueueName", "Value": queue.name}]
        metric = {"Namespace": "AWS/SQS", "MetricName": name, "Dimensions": dimensions}
        return {"Metric": metric, "Stat": "Average"}

    visible = {"Id": "visible", "ReturnData": False}
    visible["MetricStat"] = sqs("ApproximateNumberOfMessagesVisible")
    in_flight = {"Id": "inFlight", "ReturnData": False}
    in_flight["MetricStat"] = sqs("ApproximateNumberOfMessagesNotVisible")
    per_task = {"Id": "perTask", "Expression": PER_TASK_EXPRESSION, "ReturnData": True}
    assert PER_TASK_EXPRESSION == "(visible + inFlight) / tasks"
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": {
                "TargetValue": ecs.messages_per_task,
                "CustomizedMetricSpecification": {
                    "Metrics": Match.array_with(
                        [
                            visible,
                            in_flight,
                            Match.object_like({"Id": "tasks"}),
                            Match.object_like(per_task),
                        ]
                    )
                },
            },
        },
    )
    template.has_resource_properties(
        "AWS::ECS::Cluster",
        {"ClusterSettings": [{"Name": "containerInsights", "Value": "enabled"}]},
    )


def test_fargate_consumer_role_is_least_privilege(synthesis: Synthesis) -> None:
    template = synthesis.template
    queue = plan_for(synthesis, "ecs")
    assert queue.infra.ecs is not None
    command = ["sqsbatch", "consume", queue.infra.ecs.handler, "--queue", queue.name, "--async"]
    role_id = task_definition(synthesis, command)["TaskRoleArn"]["Fn::GetAtt"][0]
    source = arn_of(queue_id(template, queue.name))
    dlq = arn_of(queue_id(template, queue.dead_letter_queue))
    on_source = [
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
        "sqs:SendMessage",
        "sqs:ListQueueTags",
    ]
    (cluster,) = resources(template, "AWS::ECS::Cluster")
    tasks = ["arn:", {"Ref": "AWS::Partition"}, ":ecs:", {"Ref": "AWS::Region"}, ":"]
    tasks += [{"Ref": "AWS::AccountId"}, ":task/", {"Ref": cluster}, "/*"]
    assert queue.config.scale_in_protection
    assert role_statements(template, role_id) == (
        allowed(on_source, source)
        | allowed(["sqs:SendMessage", "sqs:GetQueueUrl"], dlq)
        | allowed(QUEUE_SEND, arn_of(key_id(template)))
        | allowed(["ecs:UpdateTaskProtection"], {"Fn::Join": ["", tasks]})
    )


def test_redrive_daemon_drains_each_dlq_to_its_sources_only(synthesis: Synthesis) -> None:
    template = synthesis.template
    groups = synthesis.plan.sources_by_dlq()
    redriven = [dlq for dlq, group in groups.items() if any(q.infra.redrive for q in group)]
    assert redriven, "the example runs the redrive daemon"
    on_dlq = [
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
        "sqs:ListDeadLetterSourceQueues",
    ]
    for dlq in redriven:
        task = task_definition(synthesis, ["redrive", "run", "--dlq", dlq])
        expected = allowed(on_dlq, arn_of(queue_id(template, dlq)))
        expected |= allowed(QUEUE_SEND, arn_of(key_id(template)))
        for source in groups[dlq]:
            expected |= allowed(["sqs:SendMessage", "sqs:GetQueueUrl"], name_arn(source.name))
        role_id = task["TaskRoleArn"]["Fn::GetAtt"][0]
        assert role_statements(template, role_id) == expected


def alarm(template: dict[str, Any], queue: str, metric: str) -> dict[str, Any]:
    for found in resources(template, "AWS::CloudWatch::Alarm").values():
        properties = found["Properties"]
        value = {"Fn::GetAtt": [queue_id(template, queue), "QueueName"]}
        if properties["MetricName"] == metric and properties["Dimensions"] == [
            {"Name": "QueueName", "Value": value}
        ]:
            return dict(properties)
    raise AssertionError(f"no {metric} alarm on {queue}")


def test_alarms_watch_dlq_depth_and_the_oldest_message(synthesis: Synthesis) -> None:
    template = synthesis.template
    for dlq, group in synthesis.plan.sources_by_dlq().items():
        depth = alarm(template, dlq, "ApproximateNumberOfMessagesVisible")
        assert (depth["Threshold"], depth["ComparisonOperator"]) == (0, "GreaterThanThreshold")
        age = alarm(template, dlq, "ApproximateAgeOfOldestMessage")
        assert age["Threshold"] == min(q.infra.dlq_age_alarm_seconds for q in group)
    for queue in synthesis.plan.queues:
        age = alarm(template, queue.name, "ApproximateAgeOfOldestMessage")
        assert age["Threshold"] == queue.infra.age_alarm_seconds
        assert age["ComparisonOperator"] == "GreaterThanThreshold"
        with pytest.raises(AssertionError):
            alarm(template, queue.name, "ApproximateNumberOfMessagesVisible")
    queues = len(synthesis.plan.queues) + len(synthesis.plan.sources_by_dlq())
    assert len(resources(template, "AWS::CloudWatch::Alarm")) == queues + len(
        synthesis.plan.sources_by_dlq()
    )
