"""The extended client's pointer format, pure: recognised, parsed, built; what is offloaded."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sqsbatch._core.attributes import ATTRIBUTE as META
from sqsbatch._core.attributes import payload_size
from sqsbatch._core.calls import BatchRun, EntryResult
from sqsbatch._core.entries import Outbound
from sqsbatch._core.envelope import Envelope
from sqsbatch._core.payloads import (
    LEGACY_POINTER_CLASS,
    POINTER_CLASS,
    Offload,
    check_threshold,
    is_pointer,
    offload,
    parse_pointer,
    pointer_body,
    size_attribute,
)
from sqsbatch._core.sending import SendPlan
from sqsbatch.errors import ConfigError, MessageError, PointerError

SIZE = {"ExtendedPayloadSize": {"DataType": "Number", "StringValue": "300000"}}


def outbound(body: str, **attributes: Any) -> Outbound:
    return Outbound(body=body, envelope=Envelope(content_type="text"), attributes=attributes)


def full_size(message: Outbound) -> int:
    return payload_size(message.body, {**message.attributes, META: message.envelope.to_attribute()})


def keys() -> Any:
    made = iter(f"key-{n}" for n in range(100))
    return lambda: next(made)


def test_the_pointer_is_written_byte_for_byte_as_the_python_extended_client_writes_it() -> None:
    # The extended client: json.dumps([MESSAGE_POINTER_CLASS, {"s3BucketName":..,"s3Key":..}])
    assert pointer_body("b", "k") == (
        '["software.amazon.payloadoffloading.PayloadS3Pointer", '
        '{"s3BucketName": "b", "s3Key": "k"}]'
    )
    assert size_attribute(12) == {"DataType": "Number", "StringValue": "12"}


@pytest.mark.parametrize("attribute", ["ExtendedPayloadSize", "SQSLargePayloadSize"])
@pytest.mark.parametrize(
    "kind",
    [POINTER_CLASS, "com.amazonaws.payloadoffloading.PayloadS3Pointer", LEGACY_POINTER_CLASS],
)
def test_a_pointer_is_recognised_by_either_attribute_and_parsed(attribute: str, kind: str) -> None:
    # Java's writer (Jackson) puts no spaces in: parsed the same
    body = json.dumps([kind, {"s3BucketName": "bkt", "s3Key": "abc"}], separators=(",", ":"))
    attributes = {attribute: {"DataType": "Number", "StringValue": "5"}, "other": {}}
    assert is_pointer(attributes)
    pointer = parse_pointer(body, attributes)  # type: ignore[arg-type]
    assert (pointer.bucket, pointer.key, pointer.body) == ("bkt", "abc", body)
    # a re-send copies the pointer: the body and the size attribute as received
    assert pointer.attributes() == {attribute: {"DataType": "Number", "StringValue": "5"}}


def test_a_message_without_either_attribute_is_not_a_pointer() -> None:
    assert not is_pointer({})
    assert not is_pointer(None)
    assert not is_pointer({"sqsbatch": {"DataType": "String", "StringValue": "{}"}})


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("not json", "ExtendedPayloadSize is set but the body is not JSON: 'not json'"),
        ('{"s3Key": "k"}', "is not [class, {s3BucketName, s3Key}]"),
        (f'["{POINTER_CLASS}"]', "is not [class, {s3BucketName, s3Key}]"),
        ('["java.lang.String", {"s3BucketName": "b", "s3Key": "k"}]', "class is 'java.lang"),
        ('[7, {"s3BucketName": "b", "s3Key": "k"}]', "pointer's class is 7"),
        (f'["{POINTER_CLASS}", {{"s3Key": "k"}}]', "pointer's s3BucketName is None"),
        (f'["{POINTER_CLASS}", {{"s3BucketName": "b", "s3Key": ""}}]', "pointer's s3Key is ''"),
        (f'["{POINTER_CLASS}", {{"s3BucketName": "b", "s3Key": 3}}]', "pointer's s3Key is 3"),
    ],
)
def test_a_malformed_pointer_is_one_line_naming_what_is_wrong(body: str, says: str) -> None:
    with pytest.raises(PointerError) as caught:
        parse_pointer(body, SIZE)  # type: ignore[arg-type]
    assert says in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_message_exactly_at_the_threshold_stays_in_sqs_and_one_byte_over_goes_to_s3() -> None:
    # Given a message whose full size (body + attributes + sqsbatch's envelope) is N
    message = outbound("x" * 1000, k={"DataType": "String", "StringValue": "v"})
    size = full_size(message)
    # Then at threshold N it is sent as it is (the extended client: "> threshold")
    same, upload = offload(0, message, Offload("b", threshold=size), keys())
    assert same is message
    assert upload is None
    # And at threshold N - 1 its body goes to S3 and a pointer is sent
    sent, upload = offload(3, message, Offload("b", threshold=size - 1), keys())
    assert upload is not None
    assert (upload.index, upload.bucket, upload.key, upload.data) == (3, "b", "key-0", b"x" * 1000)
    assert sent.body == pointer_body("b", "key-0")
    assert sent.attributes == {**message.attributes, "ExtendedPayloadSize": size_attribute(1000)}
    assert sent.envelope == message.envelope  # content type etc. stay with the message


def test_the_size_counts_the_envelope_and_the_attributes_not_only_the_body() -> None:
    message = outbound("é" * 10)  # 20 bytes of UTF-8
    assert full_size(message) > 20
    _, upload = offload(0, message, Offload("b", threshold=20), keys())
    assert upload is not None
    assert upload.data == ("é" * 10).encode()
    assert size_attribute(len(upload.data))["StringValue"] == "20"


def test_always_offloads_even_a_small_message() -> None:
    _, upload = offload(0, outbound("hi"), Offload("b", always=True), keys())
    assert upload is not None
    assert upload.data == b"hi"


def test_a_reserved_attribute_is_refused_in_one_line() -> None:
    message = outbound("hi", SQSLargePayloadSize={"DataType": "Number", "StringValue": "1"})
    with pytest.raises(MessageError, match=r"^message attribute 'SQSLargePayloadSize' is reserved"):
        offload(0, message, Offload("b"), keys())


@pytest.mark.parametrize("bad", [0, -1, 1_048_577, True, 2.5, "262144", None])
def test_a_threshold_outside_1_to_sqs_limit_is_one_line(bad: object) -> None:
    with pytest.raises(ConfigError) as caught:
        check_threshold(bad)
    assert str(caught.value) == (f"threshold={bad!r} is invalid: bytes 1..1048576 (SQS's limit)")


def test_the_edges_of_the_threshold_are_accepted() -> None:
    assert check_threshold(1) == 1
    assert check_threshold(1_048_576) == 1_048_576


def test_a_send_plan_offloads_what_is_over_and_knows_which_uploads_went_unsent() -> None:
    # Given a plan of a small and a 2 MiB message (past SQS's own limit), with offloading
    big = "y" * 2_097_152
    plan = SendPlan(
        "https://sqs.local/1/q",
        [{"body": "small"}, {"body": big}],
        batch_delay=None,
        default_delay=None,
        wall_now=0.0,
        large=(Offload("b"), keys()),
    )
    # Then only the big one is uploaded, and its entry is the pointer
    assert [(u.index, u.key, len(u.data)) for u in plan.uploads] == [
        (1, "key-0", len(big))
    ]  # text: as is
    entries = plan.entries("https://sqs.local/1/q", content_dedup=False)
    assert json.loads(entries[1].params["MessageBody"])[1] == {
        "s3BucketName": "b",
        "s3Key": "key-0",
    }
    assert entries[1].params["MessageAttributes"]["ExtendedPayloadSize"]["DataType"] == "Number"
    assert entries[1].size < 1000
    # And an unknown outcome (the send raised) leaves every upload unaccounted for
    assert plan.orphans(None) == plan.uploads


def test_the_orphans_of_a_send_are_the_uploads_whose_message_sqs_did_not_take() -> None:
    # Given a plan of three messages offloaded, and SQS's answer taking the first and the third
    plan = SendPlan(
        "https://sqs.local/1/q",
        [{"body": "a"}, {"body": "b"}, {"body": "c"}],
        batch_delay=None,
        default_delay=None,
        wall_now=0.0,
        large=(Offload("b", always=True), keys()),
    )
    run = BatchRun(plan.entries("https://sqs.local/1/q", content_dedup=False))
    run.results = {
        "0": EntryResult("0", ok=True, value={"MessageId": "m0"}),
        "1": EntryResult("1", ok=False, code="InternalError"),
        "2": EntryResult("2", ok=True, value={"MessageId": "m2"}),
    }
    # Then the second message's payload is the one orphan
    assert [(u.index, u.key) for u in plan.orphans(run)] == [(1, "key-1")]
