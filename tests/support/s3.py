"""S3 on the session's moto server (it serves every service on one endpoint), and AWS's Python
extended client (`amazon-sqs-extended-client`) pointed at it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3

from sqsbatch.dev.server import LocalSqs


def s3_client(local_sqs: LocalSqs) -> Any:
    return boto3.client("s3", endpoint_url=local_sqs.endpoint_url, region_name="us-east-1")


def new_bucket(s3: Any, name: str) -> str:
    bucket = name.lower()[:63].strip("-")
    s3.create_bucket(Bucket=bucket)
    return bucket


def keys_in(s3: Any, bucket: str) -> list[str]:
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


@contextmanager
def extended_sqs(local_sqs: LocalSqs, bucket: str) -> Iterator[Any]:
    """An SQS client of AWS's extended client, offloading to `bucket`. Importing the library
    replaces `boto3.Session` for the whole process: it is put back at once, and only the
    extended session made here has the library's behaviour."""
    saved = (boto3.Session, boto3.session.Session, boto3.DEFAULT_SESSION)
    import sqs_extended_client  # noqa: PLC0415, F401 - patches boto3 on import
    from sqs_extended_client.client import SQSExtendedClientSession  # noqa: PLC0415

    boto3.Session, boto3.session.Session, boto3.DEFAULT_SESSION = saved
    assert boto3.Session is not SQSExtendedClientSession  # the rest of the run is plain boto3
    before = os.environ.get("AWS_ENDPOINT_URL_S3")
    os.environ["AWS_ENDPOINT_URL_S3"] = local_sqs.endpoint_url  # its own S3 client reads it
    try:
        session = SQSExtendedClientSession(region_name="us-east-1")  # type: ignore[no-untyped-call]
        sqs = session.client("sqs", endpoint_url=local_sqs.endpoint_url)
    finally:
        if before is None:
            os.environ.pop("AWS_ENDPOINT_URL_S3")
        else:
            os.environ["AWS_ENDPOINT_URL_S3"] = before
    sqs.large_payload_support = bucket
    sqs.delete_payload_from_s3 = True
    yield sqs
