"""The Fargate consumer's scaling (issue 30 item 4): messages per task counting the ones in flight,
a step policy from zero tasks, and scale-in protection on its own cluster's tasks only."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import lint_file

from sqsbatch.cdk import load_plan
from sqsbatch.cdk.scaling import WAKE_COOLDOWN, WAKE_EXPRESSION
from sqsbatch.errors import ConfigError
from tests.cdk.conftest import Synthesis, resources, synthesized
from tests.cdk.test_scanners import run_checkov, template_path

CONSUMER = """
[[queues.consumers]]
queue = "jobs"
dead_letter_queue = "jobs-dlq"
scale_in_protection = false

[infra]
image = { uri = "public.ecr.aws/me/app:1" }
kms = "create"

[[infra.queues]]
queue = "jobs"
consumer = "ecs"
ecs = { handler = "app:run", min_tasks = 0, max_tasks = 3 }
"""


@pytest.fixture(scope="module")
def zero(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesis]:
    """A Fargate consumer with min_tasks = 0 and scale-in protection off, built as
    `infra/app.py` builds it (cdk-nag included)."""
    yield synthesized(tmp_path_factory.mktemp("zero"), CONSUMER)


def policies(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    found = resources(template, "AWS::ApplicationAutoScaling::ScalingPolicy")
    return {key: p for key, p in found.items() if p["Properties"]["PolicyType"] == kind}


def test_min_tasks_zero_wakes_the_service_with_one_step(zero: Synthesis) -> None:
    template = zero.template
    (target,) = resources(template, "AWS::ApplicationAutoScaling::ScalableTarget").values()
    assert target["Properties"]["MinCapacity"] == 0
    ((step_id, step),) = policies(template, "StepScaling").items()
    configuration = step["Properties"]["StepScalingPolicyConfiguration"]
    assert configuration["AdjustmentType"] == "ChangeInCapacity"
    assert configuration["StepAdjustments"] == [
        {"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}
    ]
    assert configuration["Cooldown"] == WAKE_COOLDOWN
    (alarm,) = [
        a["Properties"]
        for a in resources(template, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("AlarmActions") == [{"Ref": step_id}]
    ]
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["Threshold"] == 1
    queries = {q["Id"]: q for q in alarm["Metrics"]}
    assert queries["wake"] == {"Id": "wake", "Expression": WAKE_EXPRESSION, "ReturnData": True}
    names = {
        key: q["MetricStat"]["Metric"]["MetricName"] for key, q in queries.items() if key != "wake"
    }
    assert names == {
        "visible": "ApproximateNumberOfMessagesVisible",
        "inFlight": "ApproximateNumberOfMessagesNotVisible",
        "tasks": "RunningTaskCount",
    }
    dimensions = queries["tasks"]["MetricStat"]["Metric"]["Dimensions"]
    assert {d["Name"] for d in dimensions} == {"ClusterName", "ServiceName"}


def test_the_wake_expression_fires_only_with_no_task_and_a_message() -> None:
    """The expression's meaning, evaluated as CloudWatch would on the three inputs."""

    def wake(tasks: float | None, visible: float, in_flight: float) -> int:
        expression = WAKE_EXPRESSION.replace("FILL(tasks, 0)", "(0 if tasks is None else tasks)")
        expression = expression.replace("AND", "and").replace("inFlight", "in_flight")
        condition, _, _ = expression.removeprefix("IF(").rpartition(", 1, 0)")
        return 1 if eval(condition) else 0

    assert wake(None, 5, 0) == 1
    assert wake(0, 0, 3) == 1
    assert wake(0, 0, 0) == 0
    assert wake(1, 500, 10) == 0


def test_min_tasks_above_zero_needs_no_wake_policy(synthesis: Synthesis) -> None:
    ecs = next(q.infra.ecs for q in synthesis.plan.queues if q.infra.ecs is not None)
    assert ecs.min_tasks >= 1
    assert policies(synthesis.template, "StepScaling") == {}
    assert len(policies(synthesis.template, "TargetTrackingScaling")) == 1


def test_no_protection_grant_when_the_consumer_turns_it_off(zero: Synthesis) -> None:
    assert not zero.plan.queues[0].config.scale_in_protection
    text = json.dumps(resources(zero.template, "AWS::IAM::Policy"))
    assert "ecs:UpdateTaskProtection" not in text
    assert "sqs:ReceiveMessage" in text


def test_the_scanners_pass_on_the_wake_alarm_and_step_policy(zero: Synthesis) -> None:
    """cdk-nag ran in the fixture; cfn-lint and checkov find nothing in what min_tasks = 0 adds."""
    assert [str(match) for match in lint_file(template_path(zero))] == []
    report = run_checkov(zero)
    assert report["summary"]["parsing_errors"] == 0
    assert [(f["check_id"], f["resource"]) for f in report["results"]["failed_checks"]] == []


@pytest.mark.parametrize(
    ("ecs", "message"),
    [
        (
            "min_tasks = -1",
            "infra.queues[0].ecs.min_tasks=-1 is invalid: input should be greater than or equal "
            "to 0",
        ),
        (
            "min_tasks = 0, max_tasks = 0",
            "infra.queues[0].ecs.max_tasks=0 is invalid: input should be greater than or equal "
            "to 1",
        ),
    ],
)
def test_task_bounds_are_checked_in_one_line(tmp_path: Path, ecs: str, message: str) -> None:
    path = tmp_path / "sqsbatch.toml"
    path.write_text(CONSUMER.replace("min_tasks = 0, max_tasks = 3", ecs))
    with pytest.raises(ConfigError) as caught:
        load_plan(path)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
