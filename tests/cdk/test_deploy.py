"""End to end: the synthesized queues, deployed into moto's CloudFormation, dead-letter a
message on its receive number maxReceiveCount + 1: after max_retries + 1 failed deliveries, plus
the redrive headroom on a Lambda consumer's queue (there, sqsbatch dead-letters a message itself
on its delivery max_retries + 1; SQS's redrive is the backstop for receives it never saw).

moto's CloudFormation does not implement AWS::SQS::QueuePolicy (it logs "No Moto CloudFormation
support" and skips it), and the Lambda, ECS, IAM and alarm resources need assets and an account,
so the stack deployed here holds only the template's AWS::SQS::Queue resources and the KMS key
they are encrypted with, unchanged.
moto moves a message to the DLQ during a ReceiveMessage on the source, on receive number
maxReceiveCount + 1. Everything stays on 127.0.0.1 with fake credentials.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from tests.cdk.conftest import Synthesis, expected_receive_count, resources

CREDENTIALS = {
    # moto keeps one backend per account and region in the process: a region of its own keeps
    # the stack's queue names (orders, audit, ...) apart from those other tests create
    "region_name": "ap-southeast-2",
    "aws_access_key_id": "testing",
    "aws_secret_access_key": "testing",
}


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="module")
def deployed(synthesis: Synthesis, endpoint: str) -> Any:
    """The queues part of the template as a CloudFormation stack; returns an SQS client."""
    queues = resources(synthesis.template, "AWS::SQS::Queue")
    keys = resources(synthesis.template, "AWS::KMS::Key")
    cloudformation = boto3.client("cloudformation", endpoint_url=endpoint, **CREDENTIALS)
    cloudformation.create_stack(
        StackName="sqsbatch-queues", TemplateBody=json.dumps({"Resources": queues | keys})
    )
    (stack,) = cloudformation.describe_stacks(StackName="sqsbatch-queues")["Stacks"]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    return boto3.client("sqs", endpoint_url=endpoint, **CREDENTIALS)


def test_the_stack_creates_every_queue_with_its_settings(
    synthesis: Synthesis, deployed: Any
) -> None:
    for queue in synthesis.plan.queues:
        url = deployed.get_queue_url(QueueName=queue.name)["QueueUrl"]
        attributes = deployed.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
        attributes = attributes["Attributes"]
        redrive = json.loads(attributes["RedrivePolicy"])
        assert int(redrive["maxReceiveCount"]) == expected_receive_count(synthesis.plan, queue)
        assert redrive["deadLetterTargetArn"].endswith(f":{queue.dead_letter_queue}")
        assert int(attributes["VisibilityTimeout"]) == queue.config.visibility_timeout
        assert int(attributes["DelaySeconds"]) == queue.infra.delivery_delay
        assert attributes["KmsMasterKeyId"].startswith("arn:aws:kms:"), "the example sets kms"


def receive(sqs: Any, url: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=10,
        VisibilityTimeout=0,  # a failed delivery: visible again at once, no waiting
        WaitTimeSeconds=0,
        AttributeNames=["ApproximateReceiveCount"],
    ).get("Messages", [])
    return messages


@pytest.mark.parametrize("queue_name", ["orders", "audit"])
def test_a_message_that_keeps_failing_lands_in_the_dlq(
    synthesis: Synthesis, deployed: Any, queue_name: str
) -> None:
    queue = next(q for q in synthesis.plan.queues if q.name == queue_name)
    url = deployed.get_queue_url(QueueName=queue.name)["QueueUrl"]
    dlq_url = deployed.get_queue_url(QueueName=queue.dead_letter_queue)["QueueUrl"]
    body = f"poison for {queue.name}"
    # Given a message (sent without the queue's delay, so it is visible at once)
    sent = deployed.send_message(QueueUrl=url, MessageBody=body, DelaySeconds=0)
    # When every one of its maxReceiveCount receives fails (received, never deleted)
    for delivery in range(1, expected_receive_count(synthesis.plan, queue) + 1):
        (message,) = receive(deployed, url)
        assert message["MessageId"] == sent["MessageId"]
        assert int(message["Attributes"]["ApproximateReceiveCount"]) == delivery
    # Then the next receive finds the source empty, and the message waits in the DLQ
    assert receive(deployed, url) == []
    (dead,) = receive(deployed, dlq_url)
    assert (dead["MessageId"], dead["Body"]) == (sent["MessageId"], body)
    deployed.delete_message(QueueUrl=dlq_url, ReceiptHandle=dead["ReceiptHandle"])
