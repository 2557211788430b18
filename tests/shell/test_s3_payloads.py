"""S3 for large payloads on moto's server: the objects' calls, the errors, `S3Payloads`, and the
consumer-side fetch (not wired into intake yet)."""

from __future__ import annotations

import json
import socket
from typing import Any

import boto3
import pytest
from botocore.config import Config

from sqsbatch import ConfigError, PayloadError, PayloadMissing, S3Payloads
from sqsbatch._core.payloads import pointer_body, size_attribute
from sqsbatch._shell.s3_payloads import S3Objects, fetch_payloads
from tests.support.s3 import keys_in


def received(body: str, attributes: dict[str, Any], message_id: str = "m1") -> dict[str, Any]:
    """A message as `ReceiveMessage` returns it."""
    return {
        "MessageId": message_id,
        "ReceiptHandle": "rh",
        "Body": body,
        "MessageAttributes": attributes,
    }


def pointer_to(bucket: str, key: str, size: int, message_id: str = "m1") -> dict[str, Any]:
    return received(
        pointer_body(bucket, key), {"ExtendedPayloadSize": size_attribute(size)}, message_id
    )


def test_put_get_and_a_missing_object(s3: Any, bucket: str) -> None:
    objects = S3Objects(s3)
    objects.put(bucket, "k", b"payload")
    assert objects.get(bucket, "k") == b"payload"
    with pytest.raises(PayloadMissing) as caught:
        objects.get(bucket, "gone")
    assert str(caught.value) == f"payload s3://{bucket}/gone does not exist"
    assert objects.requests == 3


def test_deletes_of_one_bucket_go_in_one_request_and_a_single_key_in_delete_object(
    s3: Any, bucket: str
) -> None:
    objects = S3Objects(s3)
    for key in ("a", "b", "c"):
        objects.put(bucket, key, b"x")
    before = objects.requests
    # When two objects and then one are deleted
    assert objects.delete([(bucket, "a"), (bucket, "b")]) == []
    assert objects.delete([(bucket, "c")]) == []
    # Then that took one request each, and nothing is left
    assert objects.requests - before == 2
    assert keys_in(s3, bucket) == []
    # And deleting what is already gone is no error (S3 says it is deleted)
    assert objects.delete([(bucket, "a"), (bucket, "zz")]) == []


def test_an_unreachable_s3_is_a_one_line_payload_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=2),
    )
    with pytest.raises(PayloadError) as caught:
        S3Objects(client).get("b", "k")
    assert str(caught.value).startswith("GetObject s3://b/k failed: Could not connect")
    assert "\n" not in str(caught.value)
    # And the fetch leaves such a message to SQS: neither handed over nor dead-lettered
    fetched = fetch_payloads([pointer_to("b", "k", 1)], S3Objects(client))
    assert fetched.messages == [] and fetched.missing == [] and len(fetched.unread) == 1


def test_a_bucket_that_does_not_exist_is_refused_at_construction(s3: Any) -> None:
    with pytest.raises(ConfigError, match=r"^bucket 'no-such-bucket-31' does not exist$"):
        S3Payloads("no-such-bucket-31", client=s3)


def test_a_threshold_above_sqs_limit_is_refused_in_one_line(s3: Any, bucket: str) -> None:
    with pytest.raises(ConfigError) as caught:
        S3Payloads(bucket, threshold=2_000_000, client=s3)
    assert str(caught.value) == "threshold=2000000 is invalid: bytes 1..1048576 (SQS's limit)"


def test_fetch_replaces_bodies_keeps_pointers_aside_and_sorts_out_the_rest(
    s3: Any, bucket: str
) -> None:
    s3.put_object(Bucket=bucket, Key="k1", Body="é big".encode())
    s3.put_object(Bucket=bucket, Key="bin", Body=b"\xff\xfe")
    plain = received("plain", {"a": {"DataType": "String", "StringValue": "1"}}, "m0")
    messages = [
        plain,
        pointer_to(bucket, "k1", 6, "m1"),
        pointer_to(bucket, "gone", 6, "m2"),
        received("hello", {"SQSLargePayloadSize": size_attribute(5)}, "m3"),
        pointer_to(bucket, "bin", 2, "m4"),
    ]
    payloads = S3Payloads(bucket, client=s3)
    # When the messages are fetched
    fetched = payloads.fetch(messages)
    # Then the pointer's message has its payload as body, the size attribute gone
    assert [m["MessageId"] for m in fetched.messages] == ["m0", "m1"]
    assert fetched.messages[0] == plain
    assert fetched.messages[1]["Body"] == "é big"
    assert fetched.messages[1]["MessageAttributes"] == {}
    # And its pointer is kept aside, to copy on a re-send and to delete on an ack
    pointer = fetched.pointers["m1"]
    assert (pointer.bucket, pointer.key) == (bucket, "k1")
    assert pointer.body == messages[1]["Body"]
    assert list(fetched.pointers) == ["m1"]
    # And the missing object, the malformed pointer and the non-text payload are set apart
    assert [(m["MessageId"], p.key) for m, p in fetched.missing] == [("m2", "gone")]
    assert [(m["MessageId"], why) for m, why in fetched.malformed] == [
        ("m3", "SQSLargePayloadSize is set but the body is not JSON: 'hello'"),
        ("m4", f"payload s3://{bucket}/bin is not UTF-8 text"),
    ]
    # One HeadBucket, then one GetObject per pointer (the malformed one costs none)
    assert payloads.requests == 1 + 3


def test_an_ack_deletes_the_objects_in_one_request_unless_keep(s3: Any, bucket: str) -> None:
    for key in ("k1", "k2"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    messages = [pointer_to(bucket, "k1", 1, "m1"), pointer_to(bucket, "k2", 1, "m2")]
    # With keep=True, an ack deletes nothing and costs nothing
    kept = S3Payloads(bucket, keep=True, client=s3)
    assert kept.acked(list(kept.fetch(messages).pointers.values())) == []
    assert sorted(keys_in(s3, bucket)) == ["k1", "k2"]
    assert kept.requests == 1 + 2
    # By default an ack deletes both objects, in one DeleteObjects
    payloads = S3Payloads(bucket, client=s3)
    pointers = list(payloads.fetch(messages).pointers.values())
    assert payloads.acked(pointers) == []
    assert keys_in(s3, bucket) == []
    assert payloads.requests == 1 + 2 + 1


def test_the_offloaded_body_is_sqsbatch_s_encoded_body(s3: Any, bucket: str) -> None:
    payloads = S3Payloads(bucket, always=True, client=s3)
    offload, new_key = payloads.offload()
    assert (offload.bucket, offload.threshold, offload.always) == (bucket, 262_144, True)
    assert len({new_key() for _ in range(100)}) == 100  # uuid4 strings, as the clients make
    assert json.loads(pointer_body(bucket, new_key()))[1]["s3BucketName"] == bucket
