"""infra/own_app.py, the bring-your-own-app example of docs/infra.md, synthesizes and passes
cdk-nag."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import App, Validations
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks

from infra.own_app import HERE, build
from sqsbatch.cdk.settings import DEFAULT_REDRIVE_HEADROOM
from sqsbatch.config import ConsumerConfig


def test_own_app_builds_the_queue_consumer_alarms_and_dashboard(tmp_path: Path) -> None:
    app = App(outdir=str(tmp_path))
    stack = build(app)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    assembly = app.synth()  # raises if an AwsSolutions check fails
    template = Template.from_json(assembly.get_stack_by_name(stack.stack_name).template)
    config = ConsumerConfig.load("orders", HERE / "sqsbatch.toml")
    template.has_resource_properties(
        "AWS::SQS::Queue",
        {
            "QueueName": "orders",
            "DelaySeconds": 10,
            # A Lambda consumer's queue: room for throttled invocations (the default headroom).
            "RedrivePolicy": Match.object_like(
                {"maxReceiveCount": config.max_retries + 1 + DEFAULT_REDRIVE_HEADROOM}
            ),
            "SqsManagedSseEnabled": True,  # no key given: SQS-managed SSE
        },
    )
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {"BatchSize": config.max_batch_size, "FunctionResponseTypes": ["ReportBatchItemFailures"]},
    )
    template.resource_count_is("AWS::CloudWatch::Alarm", 3)
    template.resource_count_is("AWS::CloudWatch::Dashboard", 1)
