"""One synthesis of the example app (infra/sqsbatch.toml) for the whole session.

The app is built as `infra/app.py` builds it, with cdk.json's context and cdk-nag's AwsSolutions
checks: `app.synth()` raises if a check fails that no acknowledgement covers.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# jsii prints a banner on Node 20 unless told not to; it reads this when it starts.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from aws_cdk import App

from sqsbatch.cdk import DeploymentPlan, build_app, load_plan
from sqsbatch.cdk.rules import max_receive_count
from sqsbatch.cdk.settings import QueuePlan

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "infra" / "sqsbatch.toml"

TOPIC = "arn:aws:sns:us-east-1:123456789012:ops"
ASSET = REPO / "infra" / "lambda_asset"
# A stack with metrics on (tests/cdk/test_metrics.py): orders, a Lambda consumer with its own
# namespace; emails, an ECS poller flushing every 90 s; audit, metrics off. Both DLQs are
# redriven, and a KMS key makes the template as scanner-clean as the example's; the idempotency
# guard's table is on (tests/cdk/test_idempotency_table.py).
METRICS_ON = f"""
[[queues.consumers]]
queue = "orders"
max_batch_size = 25
max_batch_timeout = 2
max_retries = 4
dead_letter_queue = "orders-dlq"
retry_delay = 30
max_concurrency = 5
visibility_timeout = 180
metrics = "emf"
metrics_namespace = "Shop/sqsbatch"

[[queues.consumers]]
queue = "emails"
dead_letter_queue = "shared-dlq"
max_concurrency = 4
visibility_timeout = 60
metrics = "emf"
metrics_interval = 90

[[queues.consumers]]
queue = "audit"
dead_letter_queue = "shared-dlq"

[infra]
stack_name = "sqsbatch-metrics"
alarm_topic_arn = "{TOPIC}"
kms = "create"
idempotency = true
image = {{ ecr_repository = "sqsbatch-app", tag = "v1" }}

[[infra.queues]]
queue = "orders"
consumer = "lambda"
delivery_delay = 10
redrive = true
age_alarm_seconds = 900
lambda = {{ asset = "{ASSET}", timeout_seconds = 30 }}

[[infra.queues]]
queue = "emails"
consumer = "ecs"
redrive = true
message_age_alarm_seconds = 120
ecs = {{ handler = "app.jobs:send_emails" }}
"""


def cdk_context() -> dict[str, Any]:
    """The context cdk.json gives the app, so the tests see what `cdk deploy` would."""
    context: dict[str, Any] = json.loads((REPO / "cdk.json").read_text())["context"]
    return context


@dataclass(frozen=True)
class Synthesis:
    plan: DeploymentPlan
    template: dict[str, Any]
    outdir: Path
    stack_name: str
    seconds: float  # how long build + synth took (for the record; never asserted)


@pytest.fixture(scope="session")
def synthesis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesis]:
    with pytest.MonkeyPatch.context() as patch:
        for key in list(os.environ):
            if key.startswith("SQSBATCH_"):
                patch.delenv(key)
        outdir = tmp_path_factory.mktemp("cdk.out")
        started = time.perf_counter()
        app, stack = build_app(EXAMPLE, app=App(outdir=str(outdir), context=cdk_context()))
        assembly = app.synth()
        seconds = time.perf_counter() - started
        template: dict[str, Any] = assembly.get_stack_by_name(stack.stack_name).template
        yield Synthesis(load_plan(EXAMPLE), template, outdir, stack.stack_name, seconds)


@pytest.fixture(scope="session")
def metrics_synthesis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesis]:
    """The stack of METRICS_ON, built as `infra/app.py` builds it (cdk-nag included)."""
    yield synthesized(tmp_path_factory.mktemp("metrics"), METRICS_ON)


def synthesized(folder: Path, toml: str) -> Synthesis:
    """The stack of `toml` (written to `folder/sqsbatch.toml`), built as `infra/app.py` builds
    it (cdk-nag included), with no `SQSBATCH_*` variable of the test run in the way."""
    path = folder / "sqsbatch.toml"
    path.write_text(toml)
    with pytest.MonkeyPatch.context() as patch:
        for key in list(os.environ):
            if key.startswith("SQSBATCH_"):
                patch.delenv(key)
        outdir = folder / "cdk.out"
        app, stack = build_app(path, app=App(outdir=str(outdir), context=cdk_context()))
        template = app.synth().get_stack_by_name(stack.stack_name).template
        return Synthesis(load_plan(path), template, outdir, stack.stack_name, 0.0)


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    """The resources of one CloudFormation type, by logical id."""
    found = template["Resources"].items()
    return {key: value for key, value in found if value["Type"] == kind}


def queue_id(template: dict[str, Any], name: str) -> str:
    """The logical id of the queue called `name`."""
    for key, queue in resources(template, "AWS::SQS::Queue").items():
        if queue["Properties"]["QueueName"] == name:
            return key
    raise AssertionError(f"no queue named {name!r} in the template")


def arn_of(logical_id: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id, "Arn"]}


def name_arn(name: str) -> dict[str, Any]:
    """A queue ARN built from the name, as `sqsbatch.cdk.queue_arn` writes it."""
    parts = ["arn:", {"Ref": "AWS::Partition"}, ":sqs:", {"Ref": "AWS::Region"}, ":"]
    return {"Fn::Join": ["", [*parts, {"Ref": "AWS::AccountId"}, f":{name}"]]}


def expected_receive_count(plan: DeploymentPlan, queue: QueuePlan) -> int:
    """`maxReceiveCount`: max_retries + 1, plus the headroom on a Lambda consumer's queue."""
    lambda_ = queue.infra.consumer == "lambda"
    headroom = plan.settings.redrive_headroom if lambda_ else 0
    return max_receive_count(queue.config, headroom=headroom)


def key_id(template: dict[str, Any]) -> str:
    """The logical id of the stack's one KMS key."""
    (key,) = resources(template, "AWS::KMS::Key")
    return key
