"""`[infra] idempotency = true` (issue 29, item 5): one DynamoDB table for the stack, its name in
every consumer's environment, and each consumer role granted the store's calls only. The
scanners (checkov, cfn-lint) run on this stack too: tests/cdk/test_scanners.py."""

from __future__ import annotations

from typing import Any

from sqsbatch.cdk.idempotency import STORE_ACTIONS, TABLE_ENVIRONMENT
from tests.cdk.conftest import Synthesis, resources


def the_table(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    ((logical_id, table),) = resources(template, "AWS::DynamoDB::Table").items()
    return logical_id, table["Properties"]


def test_the_table_is_on_demand_keyed_on_pk_with_ttl_pitr_and_the_stacks_key(
    metrics_synthesis: Synthesis,
) -> None:
    _, table = the_table(metrics_synthesis.template)
    assert table["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert table["AttributeDefinitions"] == [{"AttributeName": "pk", "AttributeType": "S"}]
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["TimeToLiveSpecification"] == {"AttributeName": "ttl", "Enabled": True}
    assert table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    (key_id,) = resources(metrics_synthesis.template, "AWS::KMS::Key")
    sse = table["SSESpecification"]
    assert sse["SSEEnabled"] is True and sse["KMSMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}


def test_every_consumer_gets_the_table_name_and_only_the_stores_calls(
    metrics_synthesis: Synthesis,
) -> None:
    template = metrics_synthesis.template
    table_id, _ = the_table(template)
    ref = {"Ref": table_id}
    function = next(iter(resources(template, "AWS::Lambda::Function").values()))
    assert function["Properties"]["Environment"]["Variables"][TABLE_ENVIRONMENT] == ref
    containers = [
        container
        for task in resources(template, "AWS::ECS::TaskDefinition").values()
        for container in task["Properties"]["ContainerDefinitions"]
        if any(e["Name"].startswith("SQSBATCH_") for e in container.get("Environment", []))
    ]
    assert containers  # the ECS consumer (the redrive daemon has no SQSBATCH_ settings)
    for container in containers:
        assert {"Name": TABLE_ENVIRONMENT, "Value": ref} in container["Environment"]
    on_table = [
        statement
        for policy in resources(template, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement.get("Resource") == {"Fn::GetAtt": [table_id, "Arn"]}
    ]
    assert len(on_table) == 2  # the Lambda function's role and the ECS task role
    for statement in on_table:
        assert statement["Effect"] == "Allow"
        assert sorted(statement["Action"]) == sorted(STORE_ACTIONS)
    assert not any(
        "Scan" in action or "Query" in action or action == "dynamodb:*"
        for statement in on_table
        for action in statement["Action"]
    )


def test_no_table_without_the_setting(synthesis: Synthesis) -> None:
    assert resources(synthesis.template, "AWS::DynamoDB::Table") == {}
    for function in resources(synthesis.template, "AWS::Lambda::Function").values():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        assert TABLE_ENVIRONMENT not in variables
