"""No policy in the template grants more than it names, and cdk-nag agrees."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from aws_cdk import App, Stack, Validations
from aws_cdk import aws_sqs as sqs
from cdk_nag import AwsSolutionsChecks

from tests.cdk.conftest import Synthesis, resources

# AWS accepts only "*" as the resource of this one action; the image pull it allows is scoped.
UNSCOPABLE = ["ecr:GetAuthorizationToken"]
# The task role's scale-in protection on its cluster's tasks (sqsbatch.cdk.fargate.task_arns).
TASK_ARNS = "arn:<AWS::Partition>:ecs:<AWS::Region>:<AWS::AccountId>:task/<ClusterEB0386A7>/*"
EXPECTED_ACKNOWLEDGEMENTS = {
    "AwsSolutions-ECS2",
    "AwsSolutions-IAM5[Resource::*]",
    f"AwsSolutions-IAM5[Resource::{TASK_ARNS}]",
}


def documents(template: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every policy document: IAM policies, roles' inline policies, queue policies."""
    for key, policy in resources(template, "AWS::IAM::Policy").items():
        yield key, policy["Properties"]["PolicyDocument"]
    for key, role in resources(template, "AWS::IAM::Role").items():
        for inline in role["Properties"].get("Policies", []):
            yield key, inline["PolicyDocument"]
    for key, policy in resources(template, "AWS::SQS::QueuePolicy").items():
        yield key, policy["Properties"]["PolicyDocument"]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_no_statement_allows_a_wildcard_action_or_resource(synthesis: Synthesis) -> None:
    allows = 0
    for key, document in documents(synthesis.template):
        for statement in document["Statement"]:
            if statement["Effect"] != "Allow":
                continue
            allows += 1
            actions = as_list(statement["Action"])
            assert all("*" not in action for action in actions), (key, actions)
            if "*" in as_list(statement["Resource"]):
                assert actions == UNSCOPABLE, (key, statement)
    assert allows > 10


def test_roles_carry_no_managed_policies(synthesis: Synthesis) -> None:
    for key, role in resources(synthesis.template, "AWS::IAM::Role").items():
        assert "ManagedPolicyArns" not in role["Properties"], key


def test_cdk_nag_passes_with_justified_acknowledgements(synthesis: Synthesis) -> None:
    # The fixture's app.synth() raised if any AwsSolutions check had failed unacknowledged.
    report = json.loads((synthesis.outdir / "policy-validation-report.json").read_text())
    assert all(not plugin["violations"] for plugin in report["pluginReports"])
    metadata = json.loads((synthesis.outdir / f"{synthesis.stack_name}.metadata.json").read_text())
    acknowledged: dict[str, list[str]] = {}
    for entries in metadata.values():
        for entry in entries:
            if entry["type"] != "aws:cdk:acknowledged-rules":
                continue
            for rule, reason in entry["data"].items():
                if rule.startswith("Annotation::AwsSolutions"):
                    acknowledged.setdefault(rule.removeprefix("Annotation::"), []).append(reason)
    assert set(acknowledged) == EXPECTED_ACKNOWLEDGEMENTS
    for reasons in acknowledged.values():
        assert all(len(reason) > 40 for reason in reasons)


def test_cdk_nag_would_catch_a_bare_queue(tmp_path: Any) -> None:
    """The check above means something: the same plugin fails an unprotected queue."""
    app = App(outdir=str(tmp_path))
    sqs.Queue(Stack(app, "Bare"), "Queue")
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    rules = {v["ruleName"] for p in report["pluginReports"] for v in p["violations"]}
    assert {"AwsSolutions-SQS3", "AwsSolutions-SQS4"} <= rules
