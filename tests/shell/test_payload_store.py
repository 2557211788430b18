"""The consumers' S3 client for large payloads (`sqsbatch._shell.payload_store`): made only at the
first offloaded message, beside the SQS client (its region; its endpoint when not AWS's)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from sqsbatch import Consumer, ConsumerConfig, MessageBatch, create_queue
from sqsbatch._shell.payload_store import PayloadStore, s3_settings
from sqsbatch.errors import PayloadError


def sqs_at(endpoint: str | None) -> Any:
    return boto3.client("sqs", region_name="eu-west-1", endpoint_url=endpoint)


def test_a_local_endpoint_serves_s3_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    local = s3_settings(sqs_at("http://127.0.0.1:4566"))
    assert local == {"region_name": "eu-west-1", "endpoint_url": "http://127.0.0.1:4566"}
    # AWS's own SQS endpoint is not S3's: the region alone
    assert s3_settings(sqs_at(None)) == {"region_name": "eu-west-1"}


def test_the_environment_s_s3_endpoint_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000")
    assert s3_settings(sqs_at("http://127.0.0.1:4566")) == {"region_name": "eu-west-1"}


def test_no_client_is_made_until_a_payload_is_read() -> None:
    made: list[int] = []

    def make() -> Any:
        made.append(1)
        raise RuntimeError("no credentials")

    store = PayloadStore(make)
    assert not store.used and made == []
    with pytest.raises(PayloadError, match="no S3 client for large payloads: no credentials"):
        store.get("b", "k")  # a failure to make one is S3 unreachable: the message waits
    assert made == [1] and not store.used


def test_a_consumer_of_plain_messages_makes_no_s3_client(sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    sqs.send_message(QueueUrl=sqs.get_queue_url(QueueName=name)["QueueUrl"], MessageBody="x")
    seen: list[str] = []

    def handler(batch: MessageBatch) -> None:
        seen.extend(m.body for m in batch.messages)

    consumer = Consumer(name, handler, ConsumerConfig(max_batch_timeout=0.2), client=sqs)
    consumer.run_until_idle(0.5)
    assert seen == ["x"]
    assert not consumer._payloads.used and consumer._payloads.requests == 0
