"""Lambda event source mappings on the local moto server (it serves Lambda beside SQS)."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import boto3

from sqsbatch.dev.server import LOCAL_CREDENTIALS, LocalSqs


def lambda_client(local: LocalSqs) -> Any:
    return boto3.session.Session().client(
        "lambda",
        endpoint_url=local.endpoint_url,
        region_name=LOCAL_CREDENTIALS["AWS_DEFAULT_REGION"],
    )


def queue_arn(sqs: Any, queue: str) -> str:
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    answer = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    return str(answer["Attributes"]["QueueArn"])


def mapping(local: LocalSqs, sqs: Any, queue: str, function: str) -> str:
    """A function `function` and an enabled event source mapping from `queue` to it: its UUID."""
    iam = boto3.session.Session().client(
        "iam", endpoint_url=local.endpoint_url, region_name=LOCAL_CREDENTIALS["AWS_DEFAULT_REGION"]
    )
    role = iam.create_role(RoleName=f"{function}-role", AssumeRolePolicyDocument="{}")
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("handler.py", "def handle(event, context):\n    return {}\n")
    client = lambda_client(local)
    client.create_function(
        FunctionName=function,
        Runtime="python3.12",
        Role=role["Role"]["Arn"],
        Handler="handler.handle",
        Code={"ZipFile": code.getvalue()},
    )
    made = client.create_event_source_mapping(
        EventSourceArn=queue_arn(sqs, queue), FunctionName=function, BatchSize=10
    )
    return str(made["UUID"])


def state(local: LocalSqs, uuid: str) -> str:
    return str(lambda_client(local).get_event_source_mapping(UUID=uuid)["State"])
