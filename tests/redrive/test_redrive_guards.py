"""Redrives that would hide or circle messages are refused before any receive: `redrive run`
on a queue that is not a DLQ, and a move from a DLQ to itself."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from redrive import BackoffPolicy, Redriver, move_now, start_native_move
from redrive import cli as redrive_cli
from sqsbatch import Producer, create_queue
from sqsbatch.cli.app import app
from sqsbatch.dev.server import LocalSqs
from sqsbatch.errors import ConfigError
from tests.support.redrive import bodies, dead_letter, make_queues

runner = CliRunner()


def untouched(sqs: Any, queue: str, visible: int) -> bool:
    """All `visible` messages are still visible, and none was ever received."""
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    if (int(found[names[0]]), int(found[names[1]])) != (visible, 0):
        return False
    answer = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0, AttributeNames=["All"]
    )
    return all(m["Attributes"]["ApproximateReceiveCount"] == "1" for m in answer["Messages"])


@pytest.mark.parametrize("once", [True, False])
def test_redrive_run_refuses_a_queue_that_is_not_a_dlq(
    local_sqs: LocalSqs, sqs: Any, name: str, once: bool
) -> None:
    # Given an ordinary queue with messages (no queue dead-letters into it)
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": i} for i in range(3)])
    # When `redrive run` (forever, or --once) is pointed at it
    where = ["--endpoint-url", local_sqs.endpoint_url, "--region", "us-east-1"]
    args = ["run", "--dlq", name, "--base-delay", "0", *(["--once"] if once else []), *where]
    result = runner.invoke(redrive_cli.app, args)
    # Then it says so in one line, exits 1, and has not received (hidden) any message
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert line.split(": ", 1)[1] == (  # after the `error:` (or `redrive:`) prefix
        f"{name} is not a dead-letter queue (no queue names it in its RedrivePolicy): "
        "redriving it would hide its messages from its consumers; if it is a consumer's "
        "dead_letter_queue, give that queue a RedrivePolicy (create_queue does)"
    )
    assert untouched(sqs, name, 3)


def test_the_redriver_checks_every_dlq_and_needs_no_extra_call_to_route(
    sqs: Any, name: str
) -> None:
    source, dlq = make_queues(sqs, name)
    create_queue(f"{name}-plain", client=sqs)
    with pytest.raises(ConfigError, match=f"{name}-plain is not a dead-letter queue"):
        Redriver([dlq, f"{name}-plain"], client=sqs).run_once(wait_seconds=0)
    dead_letter(sqs, dlq, None, [1])  # no source in its metadata: routed to the only source
    redriver = Redriver(dlq, policy=BackoffPolicy(base_delay=0, jitter=0), client=sqs)
    assert redriver.run_once(wait_seconds=0).moved == 1
    assert bodies(sqs, source) == [1]
    assert redriver.requests_by_operation["list_dead_letter_source_queues"] == 1
    redriver.run_once(wait_seconds=0)  # a cron-like caller: the check is made once per Redriver
    assert redriver.requests_by_operation["list_dead_letter_source_queues"] == 1


def test_sqsbatch_redrive_to_the_dlq_itself_is_one_line_and_receives_nothing(
    local_sqs: LocalSqs, sqs: Any, name: str
) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [1, 2])
    url = sqs.get_queue_url(QueueName=dlq)["QueueUrl"]
    for to in (dlq, url):
        args = ["redrive", dlq, "--to", to, "--yes"]
        result = runner.invoke(app, ["--endpoint-url", local_sqs.endpoint_url, *args])
        assert result.exit_code == 2
        [line] = result.stderr.strip().splitlines()
        assert line.startswith("error: Invalid value for '--to': ")
        assert "is the dead-letter queue itself" in line
    assert untouched(sqs, dlq, 2)


def test_the_library_refuses_a_move_to_the_dlq_itself(sqs: Any, name: str) -> None:
    _, dlq = make_queues(sqs, name)
    with pytest.raises(ConfigError, match="is the dead-letter queue itself"):
        move_now(dlq, to=dlq, client=sqs)
    arn = f"arn:aws:sqs:us-east-1:123456789012:{dlq}"
    with pytest.raises(ConfigError, match="is the dead-letter queue itself"):
        start_native_move(arn, to=dlq, client=sqs)
