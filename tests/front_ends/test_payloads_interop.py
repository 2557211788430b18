"""Large payloads both ways with AWS's Python extended client (PyPI `amazon-sqs-extended-client`),
and the producers writing them, on moto's SQS and S3."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from sqsbatch import AsyncProducer, Producer, QueueNotFound, S3Payloads, create_queue
from sqsbatch._core.sending import SendPlan
from sqsbatch.dev.server import LocalSqs
from tests.support.front_ends import aio_client
from tests.support.s3 import extended_sqs, keys_in
from tests.support.sqs_helpers import drain

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BIG = "é" * 200_000  # 400000 bytes of UTF-8: past the 262144 default


def load_example(stem: str) -> Any:
    spec = importlib.util.spec_from_file_location(stem, EXAMPLES / f"{stem}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def receive_all(sqs: Any, url: str) -> list[dict[str, Any]]:
    answer = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    )
    return list(answer.get("Messages", []))


@pytest.mark.parametrize("legacy", [False, True])
def test_what_aws_extended_client_sends_sqsbatch_reads(
    local_sqs: LocalSqs, sqs: Any, s3: Any, bucket: str, name: str, *, legacy: bool
) -> None:
    # Given AWS's client sending a large and a small message (legacy: Java's older attribute)
    url = create_queue(name, client=sqs)
    with extended_sqs(local_sqs, bucket) as aws:
        aws.use_legacy_attribute = legacy
        aws.send_message(QueueUrl=url, MessageBody=BIG)
        aws.send_message(QueueUrl=url, MessageBody="small")
    raw = {m["Body"] if m["Body"] == "small" else "big": m for m in receive_all(sqs, url)}
    attribute = "SQSLargePayloadSize" if legacy else "ExtendedPayloadSize"
    assert raw["big"]["MessageAttributes"][attribute]["StringValue"] == "400000"
    # When sqsbatch fetches their payloads
    payloads = S3Payloads(bucket, client=s3)
    fetched = payloads.fetch([raw["big"], raw["small"]])
    # Then the large one has its payload as body, and the small one is as it came
    assert [m["Body"] for m in fetched.messages] == [BIG, "small"]
    pointer = fetched.pointers[raw["big"]["MessageId"]]
    assert pointer.attribute == attribute
    assert keys_in(s3, bucket) == [pointer.key]
    # And its ack deletes the object
    assert payloads.acked([pointer]) == []
    assert keys_in(s3, bucket) == []


def test_what_sqsbatch_sends_aws_extended_client_reads_and_deletes(
    local_sqs: LocalSqs, sqs: Any, s3: Any, bucket: str, name: str
) -> None:
    # Given sqsbatch's producer sending a large text, a large JSON body and a small one
    url = create_queue(name, client=sqs)
    producer = Producer(name, client=sqs, large_payloads=S3Payloads(bucket, client=s3))
    producer.send(BIG)
    producer.send_batch([{"body": {"rows": ["r" * 100] * 3000}}, {"body": "small"}])
    assert len(keys_in(s3, bucket)) == 2
    # One PutObject per offloaded message (after the HeadBucket); one SendMessageBatch per send
    assert producer.large_payloads is not None
    assert producer.large_payloads.requests == 1 + 2
    assert producer.requests == 1 + 2  # GetQueueUrl, then one batch call per send
    # When AWS's client receives them
    with extended_sqs(local_sqs, bucket) as aws:
        got = aws.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
        )
        bodies = sorted(m["Body"] for m in got["Messages"])  # "s" < JSON's "{" < "é"
        # Then it resolved the payloads (sqsbatch's envelope attribute travels beside them)
        assert bodies[0] == "small"
        assert json.loads(bodies[1]) == {"rows": ["r" * 100] * 3000}
        assert bodies[2] == BIG
        # And its delete, reading the pointer it found, deletes the objects too
        for message in got["Messages"]:
            aws.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert keys_in(s3, bucket) == []


def test_the_async_producer_offloads_the_same_way(
    local_sqs: LocalSqs, sqs: Any, s3: Any, bucket: str, name: str
) -> None:
    url = create_queue(name, client=sqs)

    async def main() -> None:
        async with aio_client(sqs) as aio:
            producer = AsyncProducer(name, client=aio, large_payloads=S3Payloads(bucket, client=s3))
            await producer.send_batch([{"body": BIG}, {"body": "small"}])

    asyncio.run(main())
    fetched = S3Payloads(bucket, client=s3).fetch(receive_all(sqs, url))
    assert sorted(m["Body"] for m in fetched.messages) == sorted([BIG, "small"])
    assert len(fetched.pointers) == 1


def full_size(queue_url: str, body: Any) -> int:
    """The size SQS counts for `body` sent as sqsbatch sends it (envelope included)."""
    plan = SendPlan(queue_url, [{"body": body}], batch_delay=None, default_delay=None, wall_now=0)
    return plan.entries(queue_url, content_dedup=False)[0].size


def test_the_threshold_edges_and_always_through_the_producer(
    sqs: Any, s3: Any, bucket: str, name: str
) -> None:
    url = create_queue(name, client=sqs)
    size = full_size(url, "x" * 5000)
    # Exactly at the threshold: sent in SQS, nothing in S3
    at = S3Payloads(bucket, threshold=size, client=s3)
    Producer(name, client=sqs, large_payloads=at).send("x" * 5000)
    assert keys_in(s3, bucket) == []
    # One byte over it: through S3
    over = S3Payloads(bucket, threshold=size - 1, client=s3)
    Producer(name, client=sqs, large_payloads=over).send("x" * 5000)
    assert len(keys_in(s3, bucket)) == 1
    # always: a small message too
    always = S3Payloads(bucket, always=True, client=s3)
    Producer(name, client=sqs, large_payloads=always).send("tiny")
    assert len(keys_in(s3, bucket)) == 2
    bodies = sorted(m["Body"] for m in drain(sqs, name))
    assert bodies[2] == "x" * 5000
    assert [json.loads(b)[1]["s3BucketName"] for b in bodies[:2]] == [bucket, bucket]


def test_a_failed_send_logs_its_orphaned_payloads_and_leaves_them(
    s3: Any, sqs: Any, bucket: str, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a producer for a queue that does not exist
    producer = Producer(name, client=sqs, large_payloads=S3Payloads(bucket, client=s3))
    # When a large message is sent
    with caplog.at_level(logging.WARNING, "sqsbatch"), pytest.raises(QueueNotFound):
        producer.send(BIG)
    # Then its payload was written first, is left in S3, and the log names it
    (key,) = keys_in(s3, bucket)
    assert f"payloads left in S3 with no message (the send failed): s3://{bucket}/{key}" in (
        caplog.text
    )


def test_the_settings_file_turns_offloading_on(  # noqa: PLR0917 - fixtures
    local_sqs: LocalSqs,
    sqs: Any,
    s3: Any,
    bucket: str,
    name: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
) -> None:
    (tmp_path / "sqsbatch.toml").write_text(
        f'[[queues.producers]]\nqueue = "{name}"\n'
        f'large_payloads_bucket = "{bucket}"\nlarge_payloads_threshold = 1000\n'
    )
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", local_sqs.endpoint_url)
    create_queue(name, client=sqs)
    producer = Producer(name, client=sqs)
    assert producer.large_payloads is not None
    assert (producer.large_payloads.bucket, producer.large_payloads.threshold) == (bucket, 1000)
    producer.send("y" * 2000)
    assert len(keys_in(s3, bucket)) == 1


def test_the_example_sends_a_message_past_sqs_limit_through_s3(  # noqa: PLR0917 - fixtures
    local_sqs: LocalSqs, sqs: Any, s3: Any, bucket: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the example's environment: one local endpoint for SQS and S3
    monkeypatch.setenv("AWS_ENDPOINT_URL", local_sqs.endpoint_url)
    url = create_queue(name, client=sqs)
    example = load_example("large_payloads")
    # When it sends its 2.5 MB report
    message_id = example.send_large(name, bucket)
    # Then SQS has the pointer and a fetch gives the report back
    fetched = S3Payloads(bucket, client=s3).fetch(receive_all(sqs, url))
    assert list(fetched.pointers) == [message_id]
    assert len(json.loads(fetched.messages[0]["Body"])["rows"]) == 20_000


def test_on_a_fifo_queue_content_dedup_sees_the_pointer_not_the_payload(
    sqs: Any, s3: Any, bucket: str, name: str
) -> None:
    # Given a FIFO queue that deduplicates by content, and a producer offloading everything
    name = f"{name}.fifo"
    url = create_queue(name, client=sqs)
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"ContentBasedDeduplication": "true"})
    payloads = S3Payloads(bucket, always=True, client=s3)
    producer = Producer(name, client=sqs, large_payloads=payloads)
    # When one body is sent twice in a group, and once more with a deduplication id, twice
    producer.send("same", group_id="g")
    producer.send("same", group_id="g")
    producer.send("other", group_id="g", deduplication_id="d")
    producer.send("other", group_id="g", deduplication_id="d")
    # Then the pointers differ (a new key each), so content dedup kept both; the id deduplicated
    bodies = [m["Body"] for m in payloads.fetch(drain(sqs, name)).messages]
    assert bodies == ["same", "same", "other"]
