"""Large payloads in S3 read by every front end (issue 31 item 2), on moto's SQS and S3: what
AWS's Python extended client (PyPI `amazon-sqs-extended-client`) sends reaches the handler with
its payload; the object is deleted once the message is acked, and kept by every re-send (a
retry, a long retry's re-send and its delay hops, a DLQ copy, a redrive), which copies the
pointer."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from redrive.manual import move_now
from sqsbatch import Consumer, ConsumerConfig, MessageBatch, Producer, S3Payloads, create_queue
from sqsbatch._core.envelope import decode
from sqsbatch._core.fetching import FetchedDelivery
from sqsbatch._core.payloads import is_pointer
from sqsbatch.dev.server import LocalSqs
from sqsbatch.limits import SqsLimits
from tests.support.front_ends import FRONT_ENDS, EventSourceMapping, FrontEnd, load_example
from tests.support.s3 import extended_sqs, keys_in
from tests.support.sqs_helpers import depth, drain

BIG = "é" * 600_000  # 1.2 MB of UTF-8: past SQS's 1 MiB, so no copy could carry it
SHRUNK = SqsLimits(max_send_delay_seconds=1, visibility_ceiling_seconds=2)


def send_big(local_sqs: LocalSqs, bucket: str, url: str, *bodies: str) -> None:
    """AWS's extended client sends `bodies` (default: BIG and a small one)."""
    with extended_sqs(local_sqs, bucket) as aws:
        for body in bodies or (BIG, "small"):
            aws.send_message(QueueUrl=url, MessageBody=body)


class Seen:
    """What a handler saw: bodies, and whether each came through a pointer."""

    def __init__(self) -> None:
        self.bodies: list[str] = []
        self.fetched: list[bool] = []

    def saw(self, batch: MessageBatch) -> None:
        for message in batch.messages:
            self.bodies.append(message.body)
            self.fetched.append(isinstance(message._delivery, FetchedDelivery))


def config(**changes: Any) -> ConsumerConfig:
    return ConsumerConfig(**({"max_batch_timeout": 0.2, "max_retries": 3} | changes))


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_every_front_end_reads_the_payload_and_deletes_it_once_acked(
    front_end: FrontEnd, *, local_sqs: LocalSqs, sqs: Any, s3: Any, bucket: str, name: str
) -> None:
    # Given AWS's extended client sending a large message and a small one
    url = create_queue(name, client=sqs)
    send_big(local_sqs, bucket, url)
    assert len(keys_in(s3, bucket)) == 1
    # When a front end consumes them, acking both
    seen = Seen()
    front_end.consume(name, seen.saw, config(), sqs)
    # Then the handler saw the payload itself, and the object is gone with its message
    assert sorted(seen.bodies, key=len) == ["small", BIG]
    assert sorted(seen.fetched) == [False, True]
    assert keys_in(s3, bucket) == []
    assert depth(sqs, name) == 0


@pytest.mark.parametrize("front_end", FRONT_ENDS[::2], ids=lambda f: f.name)
def test_keep_payloads_keeps_the_object_of_an_acked_message(
    front_end: FrontEnd, *, local_sqs: LocalSqs, sqs: Any, s3: Any, bucket: str, name: str
) -> None:
    url = create_queue(name, client=sqs)
    send_big(local_sqs, bucket, url, BIG)
    seen = Seen()
    front_end.consume(name, seen.saw, config(keep_payloads=True), sqs)
    assert seen.bodies == [BIG] and depth(sqs, name) == 0
    assert len(keys_in(s3, bucket)) == 1


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_a_retry_and_a_long_retry_s_hops_keep_the_pointer(
    front_end: FrontEnd, *, local_sqs: LocalSqs, sqs: Any, s3: Any, bucket: str, name: str
) -> None:
    # Given a large message retried at once, then past the visibility ceiling (a re-send
    # travelling in delay hops, with SHRUNK limits), then acked
    url = create_queue(name, client=sqs)
    send_big(local_sqs, bucket, url, BIG)
    seen = Seen()

    def handler(batch: MessageBatch) -> None:
        seen.saw(batch)
        for message in batch.messages:
            if message.attempts == 1:
                message.retry()
            elif message.attempts == 2:
                message.retry(delay_seconds=3)  # past the 2 s ceiling: re-sent, in hops
            assert len(keys_in(s3, bucket)) == 1  # never deleted before the ack

    front_end.consume(name, handler, config(), sqs, limits=SHRUNK, idle_seconds=4.5)
    # Then every delivery read the payload through its pointer (a copy of the payload itself,
    # 1.2 MB, could not have been sent), and the ack deleted it
    assert seen.bodies == [BIG] * 3 and seen.fetched == [True] * 3
    assert keys_in(s3, bucket) == []
    assert depth(sqs, name) == 0


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_a_missing_payload_is_dead_lettered_with_its_pointer(
    front_end: FrontEnd, *, local_sqs: LocalSqs, sqs: Any, s3: Any, bucket: str, name: str
) -> None:
    # Given a large message whose object was deleted before it was consumed
    dlq = f"{name}-dlq"
    url = create_queue(name, dead_letter_queue=dlq, max_retries=3, client=sqs)
    send_big(local_sqs, bucket, url)
    (key,) = keys_in(s3, bucket)
    s3.delete_object(Bucket=bucket, Key=key)
    seen = Seen()
    front_end.consume(name, seen.saw, config(dead_letter_queue=dlq), sqs)
    # Then only the small one reached the handler; the pointer went to the DLQ as it came
    assert seen.bodies == ["small"]
    (copy,) = drain(sqs, dlq)
    assert is_pointer(copy["MessageAttributes"]) and key in copy["Body"]
    assert decode(copy).envelope.deaths[-1].reason == "payload_missing"
    assert depth(sqs, name) == 0


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
def test_a_dlq_copy_and_its_redrive_keep_the_pointer(
    front_end: FrontEnd, *, local_sqs: LocalSqs, sqs: Any, s3: Any, bucket: str, name: str
) -> None:
    # Given a large message dead-lettered by its handler
    dlq = f"{name}-dlq"
    url = create_queue(name, dead_letter_queue=dlq, max_retries=3, client=sqs)
    send_big(local_sqs, bucket, url, BIG)
    first = Seen()

    def refuse(batch: MessageBatch) -> None:
        first.saw(batch)
        batch.dead_letter_all("bad")

    front_end.consume(name, refuse, config(dead_letter_queue=dlq), sqs)
    assert first.bodies == [BIG] and len(keys_in(s3, bucket)) == 1
    # When it is redriven back to its queue, and consumed again
    report = move_now(dlq, client=sqs)
    assert report.moved == 1
    again = Seen()
    front_end.consume(name, again.saw, config(dead_letter_queue=dlq), sqs)
    # Then the pointer travelled both ways, and the payload is read (then deleted) again
    assert again.bodies == [BIG] and again.fetched == [True]
    assert keys_in(s3, bucket) == []


@pytest.fixture
def s3_unreachable() -> Iterator[None]:
    """S3 at a port where nothing listens (boto3 reads the variable; SQS is unaffected)."""
    before = os.environ.get("AWS_ENDPOINT_URL_S3")
    os.environ["AWS_ENDPOINT_URL_S3"] = "http://127.0.0.1:9"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("AWS_ENDPOINT_URL_S3")
        else:
            os.environ["AWS_ENDPOINT_URL_S3"] = before


def test_s3_unreachable_leaves_the_message_to_sqs_for_a_poller(
    local_sqs: LocalSqs, sqs: Any, bucket: str, name: str, s3_unreachable: None
) -> None:
    url = create_queue(name, client=sqs)
    with pytest.MonkeyPatch.context() as patch:  # the extended client writes to moto's S3
        patch.delenv("AWS_ENDPOINT_URL_S3")
        send_big(local_sqs, bucket, url)
    seen = Seen()
    Consumer(name, seen.saw, config(visibility_timeout=60), client=sqs).run_until_idle(1.0)
    assert seen.bodies == ["small"]
    assert depth(sqs, name) == 1  # in flight: SQS delivers it again after its visibility


def test_s3_unreachable_reports_the_record_to_lambda(
    local_sqs: LocalSqs, sqs: Any, bucket: str, name: str, s3_unreachable: None
) -> None:
    from sqsbatch import lambda_handler  # noqa: PLC0415

    url = create_queue(name, client=sqs)
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("AWS_ENDPOINT_URL_S3")
        send_big(local_sqs, bucket, url)
    seen = Seen()
    function = lambda_handler(config=config(), client=sqs)(seen.saw)
    mapping = EventSourceMapping(sqs, name, batch_size=10, window=0.2)
    messages = mapping.receive(1)
    while len(messages) < 2:
        messages += mapping.receive(1)
    failed = mapping.invoke(function, messages)
    big = next(m["MessageId"] for m in messages if m["Body"] != "small")
    assert failed == {big} and seen.bodies == ["small"]
    assert depth(sqs, name) == 1


def test_a_producer_s_offloaded_json_reaches_the_handler_decoded(
    sqs: Any, s3: Any, bucket: str, name: str
) -> None:
    create_queue(name, client=sqs)
    rows = {"rows": ["r" * 100] * 3000}
    Producer(name, client=sqs, large_payloads=S3Payloads(bucket, client=s3)).send(rows)
    seen = Seen()
    Consumer(name, seen.saw, config(), client=sqs).run_until_idle(1.0)
    assert seen.bodies == [rows] and seen.fetched == [True]  # type: ignore[comparison-overlap]
    assert keys_in(s3, bucket) == []


def test_the_example_consumes_what_it_sent(
    local_sqs: LocalSqs, s3: Any, bucket: str, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the example's environment: one local endpoint for SQS and S3, no client given
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ENDPOINT_URL", local_sqs.endpoint_url)
        create_queue(name, client=local_sqs.client())
        example = load_example("large_payloads")
        message_id = example.send_large(name, bucket)
        # When its consumer runs
        example.consume_large(name)
    # Then its handler read the 2.5 MB report, and the object went with the ack
    assert f"{message_id}: 20000 rows" in capsys.readouterr().out
    assert keys_in(s3, bucket) == []


def test_a_warm_lambda_s_short_path_never_takes_a_pointer(
    local_sqs: LocalSqs, sqs: Any, s3: Any, bucket: str, name: str
) -> None:
    from sqsbatch import lambda_handler  # noqa: PLC0415

    # Given a function warmed by a plain event (its short path now applies to plain events)
    url = create_queue(name, client=sqs)
    seen = Seen()
    function = lambda_handler(config=config(), client=sqs)(seen.saw)
    mapping = EventSourceMapping(sqs, name, batch_size=10, window=0.2)
    sqs.send_message(QueueUrl=url, MessageBody="plain")
    assert mapping.invoke(function, mapping.receive(1)) == set()
    assert function._warm  # the short path is ready
    # When a pointer's record comes next
    send_big(local_sqs, bucket, url, BIG)
    assert mapping.invoke(function, mapping.receive(1)) == set()
    # Then it went through intake: its payload read, then deleted
    assert seen.bodies == ["plain", BIG] and seen.fetched == [False, True]
    assert keys_in(s3, bucket) == []
