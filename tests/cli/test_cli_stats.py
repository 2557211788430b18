"""`sqsbatch stats QUEUE`: depths of a queue and its DLQ, whether the DLQ grows, never a receive."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from typer.testing import CliRunner

from sqsbatch import create_queue
from sqsbatch.cli.app import app
from sqsbatch.cli.stats import Trend, trend
from sqsbatch.dev.server import LocalSqs
from tests.cli.test_cli_process import SCRIPT, env
from tests.support.cli_results import ok, one_line_error
from tests.support.processes import spawned

runner = CliRunner()


def stats(local_sqs: LocalSqs, *args: str) -> Any:
    where = ["--endpoint-url", local_sqs.endpoint_url, "--region", "us-east-1"]
    return runner.invoke(app, [*where, "stats", *args])


@pytest.fixture
def queues(sqs: Any, name: str) -> tuple[str, str]:
    """A queue with two visible messages, one in flight, and a DLQ holding one message."""
    dlq = f"{name}-dlq"
    url = create_queue(name, dead_letter_queue=dlq, max_retries=2, client=sqs)
    for body in ("a", "b", "c"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=600)
    sqs.send_message(QueueUrl=sqs.get_queue_url(QueueName=dlq)["QueueUrl"], MessageBody="dead")
    return name, dlq


@pytest.mark.parametrize(
    ("first", "now", "expected"),
    [
        (None, (10.0, 5), Trend(None, None, None)),  # one reading cannot show growth
        ((0.0, 5), (0.0, 9), Trend(None, None, None)),  # the same reading
        ((0.0, 5), (10.0, 6), Trend(True, 1, 10.0)),
        ((0.0, 5), (10.0, 5), Trend(False, 0, 10.0)),
        ((0.0, 5), (10.0, 2), Trend(False, -3, 10.0)),
    ],
)
def test_growth_needs_two_readings(
    first: tuple[float, int] | None, now: tuple[float, int], expected: Trend
) -> None:
    assert trend(first, now) == expected


def test_json_gives_depths_of_the_queue_and_its_dlq(
    local_sqs: LocalSqs, queues: tuple[str, str]
) -> None:
    name, dlq = queues
    reading = json.loads(ok(stats(local_sqs, name, "--json")).stdout)
    assert (reading["visible"], reading["in_flight"], reading["delayed"]) == (2, 1, 0)
    assert reading["max_receive_count"] == 3
    assert reading["oldest_age_seconds"] is None
    assert reading["dead_letter_queue"]["name"] == dlq
    assert reading["dead_letter_queue"]["total"] == 1
    assert reading["dead_letter_queue"]["growing"] is None
    assert any("ApproximateAgeOfOldestMessage" in note for note in reading["notes"])


def test_the_table_says_what_sqs_cannot_tell(local_sqs: LocalSqs, queues: tuple[str, str]) -> None:
    name, dlq = queues
    shown = ok(stats(local_sqs, name)).stdout
    assert name in shown and f"{dlq} (DLQ)" in shown
    assert "unknown (one reading)" in shown
    assert "ApproximateAgeOfOldestMessage" in " ".join(shown.split())


def test_looking_never_receives(local_sqs: LocalSqs, sqs: Any, queues: tuple[str, str]) -> None:
    name, dlq = queues
    ok(stats(local_sqs, name, "--watch", "--count", "3", "--interval", "0.1"))
    url = sqs.get_queue_url(QueueName=dlq)["QueueUrl"]
    (message,) = sqs.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"]
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"  # our receive, the first


def test_watch_json_is_one_line_per_reading_comparing_the_dlq_with_the_first(
    local_sqs: LocalSqs, sqs: Any, queues: tuple[str, str]
) -> None:
    name, dlq = queues
    where = env(local_sqs)
    command = [str(SCRIPT), "stats", name, "--watch", "--json", "--count", "2", "--interval", "2"]
    with spawned(command, env=where, stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        first = json.loads(process.stdout.readline())
        url = sqs.get_queue_url(QueueName=dlq)["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="another")  # the DLQ grows
        second = json.loads(process.stdout.readline())
        assert process.wait(timeout=60) == 0
    assert first["dead_letter_queue"]["growing"] is None
    assert second["dead_letter_queue"]["growing"] is True
    assert second["dead_letter_queue"]["change"] == 1


def test_a_queue_without_a_dlq_says_so(local_sqs: LocalSqs, sqs: Any, name: str) -> None:
    sqs.create_queue(QueueName=name)
    reading = json.loads(ok(stats(local_sqs, name, "--json")).stdout)
    assert reading["dead_letter_queue"] is None
    assert "no RedrivePolicy" in ok(stats(local_sqs, name)).stdout


def test_a_missing_queue_is_one_line(local_sqs: LocalSqs) -> None:
    one_line_error(stats(local_sqs, "no-such-queue"), 1, "no-such-queue")
