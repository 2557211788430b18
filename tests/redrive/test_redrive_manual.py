"""The operator's moves: `move_now` on moto's server, `start_native_move` with botocore's Stubber.

moto does not implement `StartMessageMoveTask` (its server answers 500), so the native move is
checked for its request shape only, with Stubber on a real boto3 client.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from redrive import MoveReport, move_now, start_native_move
from redrive.plan import MoveRow
from sqsbatch.errors import ConfigError
from tests.support.redrive import bodies, contents, dead_letter, make_queues
from tests.support.sqs_helpers import depth

ACCOUNT = "123456789012"


def visible(sqs: Any, queue: str) -> int:
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    names = ["ApproximateNumberOfMessages"]
    return int(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"][names[0]])


def test_move_now_moves_every_message_whatever_its_backoff(sqs: Any, name: str) -> None:
    # Given messages dead-lettered just now (the daemon would wait a minute for them)
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [1, 2, 3], redrives=9)
    seen: list[MoveRow] = []
    # When an operator moves them now
    report = move_now(dlq, client=sqs, on_message=seen.append)
    # Then all are back in the source, with one more redrive, and the DLQ is empty
    assert (report.moved, report.skipped, report.failed) == (3, 0, 0)
    assert [row.action for row in seen] == ["moved"] * 3
    assert {(row.source, row.target, row.error_type) for row in seen} == {
        (source, source, "RuntimeError")
    }
    copies = contents(sqs, source)
    assert sorted(c["body"] for c in copies) == [1, 2, 3]
    assert {c["meta"]["rd"] for c in copies} == {10}
    assert depth(sqs, dlq) == 0


def test_move_now_with_select_moves_the_chosen_and_releases_the_rest(sqs: Any, name: str) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, list(range(6)))
    report = move_now(dlq, client=sqs, select=lambda m: m.body % 2 == 0)
    assert (report.moved, report.skipped) == (3, 3)
    assert bodies(sqs, source) == [0, 2, 4]
    assert visible(sqs, dlq) == 3  # released at once, not left hidden


def test_move_now_stops_at_the_limit(sqs: Any, name: str) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, list(range(5)))
    report = move_now(dlq, client=sqs, limit=2)
    assert report.moved == 2
    assert depth(sqs, source) == 2
    assert visible(sqs, dlq) == 3


def test_a_dry_run_lists_without_moving_and_releases_what_it_peeked(sqs: Any, name: str) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [1, 2, 3, 4])
    report = move_now(dlq, client=sqs, dry_run=True, select=lambda m: m.body != 4)
    assert isinstance(report, MoveReport) and report.dry_run
    assert (report.moved, report.skipped) == (3, 1)
    would = [row for row in report.rows if row.action == "would-move"]
    assert {row.target for row in would} == {source}
    assert depth(sqs, source) == 0
    assert visible(sqs, dlq) == 4


def test_move_now_to_sends_everything_to_one_queue(sqs: Any, name: str) -> None:
    source, dlq = make_queues(sqs, name)
    other = f"{name}-other"
    sqs.create_queue(QueueName=other)
    dead_letter(sqs, dlq, source, [1, 2])
    report = move_now(dlq, to=other, client=sqs)
    assert report.moved == 2
    assert bodies(sqs, other) == [1, 2]
    assert depth(sqs, source) == 0


def test_move_now_reports_what_has_nowhere_to_go(sqs: Any, name: str) -> None:
    lone = f"{name}-lone"
    sqs.create_queue(QueueName=lone)
    dead_letter(sqs, lone, None, [1])
    report = move_now(lone, client=sqs)
    assert (report.moved, report.failed) == (0, 1)
    assert report.rows[0].action == "unroutable"
    assert visible(sqs, lone) == 1


def test_move_now_refuses_a_bad_limit(sqs: Any) -> None:
    with pytest.raises(ConfigError, match="limit=-1 is invalid"):
        move_now("whatever", limit=-1, client=sqs)


# -- the native move, request shape only (moto has no StartMessageMoveTask) -----------------------


def stubbed() -> tuple[Any, Stubber]:
    client = boto3.session.Session().client("sqs", region_name="us-east-1")
    return client, Stubber(client)


def expect_arn(stubber: Stubber, queue: str) -> str:
    url = f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/{queue}"
    arn = f"arn:aws:sqs:us-east-1:{ACCOUNT}:{queue}"
    stubber.add_response("get_queue_url", {"QueueUrl": url}, {"QueueName": queue})
    stubber.add_response(
        "get_queue_attributes",
        {"Attributes": {"QueueArn": arn}},
        {"QueueUrl": url, "AttributeNames": ["QueueArn"]},
    )
    return arn


def test_native_move_starts_sqs_move_task_with_destination_and_rate() -> None:
    client, stubber = stubbed()
    source_arn = expect_arn(stubber, "orders-dlq")
    destination_arn = expect_arn(stubber, "orders")
    stubber.add_response(
        "start_message_move_task",
        {"TaskHandle": "task-1"},
        {
            "SourceArn": source_arn,
            "DestinationArn": destination_arn,
            "MaxNumberOfMessagesPerSecond": 50,
        },
    )
    with stubber:
        handle = start_native_move("orders-dlq", to="orders", rate=50, client=client)
    assert handle == "task-1"
    stubber.assert_no_pending_responses()


def test_native_move_without_options_sends_only_the_source_arn() -> None:
    client, stubber = stubbed()
    arn = f"arn:aws:sqs:us-east-1:{ACCOUNT}:orders-dlq"
    stubber.add_response("start_message_move_task", {"TaskHandle": "task-2"}, {"SourceArn": arn})
    with stubber:
        assert start_native_move(arn, client=client) == "task-2"
    stubber.assert_no_pending_responses()


@pytest.mark.parametrize("rate", [0, 501, 2.5, True])
def test_native_move_refuses_a_bad_rate(rate: Any) -> None:
    client, _ = stubbed()
    with pytest.raises(ConfigError, match=r"rate=.* is invalid \(accepted: int 1..500\)"):
        start_native_move("orders-dlq", rate=rate, client=client)
