"""`inspect` and `queues --age`: what they escape, what they say before a peek, and how they
keep a peek from using up a message's last delivery (the queue's maxReceiveCount)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sqsbatch import Producer, create_queue
from sqsbatch._core.envelope import Envelope, ErrorInfo
from sqsbatch._sync.door import SyncSqs
from sqsbatch.cli.escape import preview, printable
from sqsbatch.cli.peek import peek
from sqsbatch.dev.server import LocalSqs
from tests.support.sqs_helpers import depth, drain

runner = CliRunner()

EVIL = "a\x1b[2J\x1b]52;c;aGk=\x07b\nc\r\td\u202ee [bold]f[/]"
"""A clear-screen, a clipboard write, a newline, a bidi override and rich markup."""


@pytest.fixture
def cli(local_sqs: LocalSqs) -> Any:
    def invoke(*args: str) -> Result:
        from sqsbatch.cli.app import app  # noqa: PLC0415

        env = {"COLUMNS": "400"}
        return runner.invoke(app, ["--endpoint-url", local_sqs.endpoint_url, *args], env=env)

    return invoke


def attributes(sqs: Any, queue: str) -> dict[str, int]:
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return {key: int(value) for key, value in found.items() if key.startswith("Approximate")}


def test_printable_escapes_controls_and_keeps_the_rest() -> None:
    assert printable(EVIL) == "a\\x1b[2J\\x1b]52;c;aGk=\\x07b\\nc\\r\\td\\u202ee [bold]f[/]"
    assert printable("café ✓ 日本") == "café ✓ 日本"
    assert preview("\x1b" * 10, 8) == "\\x1b\\x1…"
    assert preview("short", 8) == "short"


def test_inspect_escapes_bodies_attributes_ids_and_errors_in_the_table(
    cli: Any, sqs: Any, name: str
) -> None:
    create_queue(name, client=sqs)
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    error = ErrorInfo("KeyError", "e\x1b[1m", 0.0)
    envelope = Envelope(id="id\x1b[31m", timestamp=time.time(), content_type="text", error=error)
    sqs.send_message(
        QueueUrl=url,
        MessageBody=EVIL,
        MessageAttributes={
            "sqsbatch": envelope.to_attribute(),
            "tenant": {"DataType": "String", "StringValue": "t\x1b[5m"},
        },
    )
    result = cli("inspect", name)
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout
    for shown in ("id\\x1b[31m", "e\\x1b[1m", "tenant=t\\x1b[5m", "\\x1b[2J", "[bold]f[/]"):
        assert shown in result.stdout, shown
    assert "\\u202e" in result.stdout
    [message] = json.loads(cli("inspect", name, "--json").stdout)["messages"]
    assert (message["id"], message["attributes"]["tenant"]) == ("id\x1b[31m", "t\x1b[5m")
    assert message["body"] == EVIL  # JSON output is JSON: json escapes


def test_inspect_says_a_peek_is_a_receive_before_it_peeks(cli: Any, sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    empty = cli("inspect", name)
    assert empty.exit_code == 0 and empty.stderr == ""  # nothing visible: no peek, no note
    Producer(name, client=sqs).send("x")
    result = cli("inspect", name, "--json")
    [note] = result.stderr.splitlines()
    assert note.startswith("note: a peek is a receive") and "raised by 1" in note


def test_a_peek_stops_at_the_first_message_it_brings_to_max_receive_count(
    cli: Any, sqs: Any, name: str
) -> None:
    # Given a queue with maxReceiveCount 2, three messages, one already received once
    create_queue(name, dead_letter_queue=f"{name}-dlq", max_retries=1, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": b} for b in ("first", "second", "third")])
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    [once] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=once["ReceiptHandle"], VisibilityTimeout=0
    )
    # When inspect peeks (one message at a time: the queue has a RedrivePolicy)
    result = cli("inspect", name, "--json")
    # Then it stops at that message, names it, says why and what --force does, and exits 1
    assert result.exit_code == 1, result.output
    shown = json.loads(result.stdout)
    assert shown["max_receive_count"] == 2
    *before, last = shown["messages"]
    assert (last["body"], last["at_receive_limit"], last["receive_count"]) == ("first", True, 2)
    assert not any(m["at_receive_limit"] for m in before)
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(f"error: stopped peeking: this peek brought message {last['id']} ")
    assert "maxReceiveCount (2)" in error and "--force" in error
    assert "without processing it" in error
    # and only that message lost a delivery: the peek moved nothing, and did not touch the
    # messages after it
    assert depth(sqs, f"{name}-dlq") == 0
    peeked = {m["body"] for m in before}
    counts = {m["Body"]: int(m["Attributes"]["ApproximateReceiveCount"]) for m in drain(sqs, name)}
    assert counts == {b: 2 if b in peeked else 1 for b in ("second", "third")}
    assert depth(sqs, f"{name}-dlq") == 1  # the drain's receive moved `first`, as said


def test_force_peeks_on_and_names_the_messages_it_brought_to_the_limit(
    cli: Any, sqs: Any, name: str
) -> None:
    create_queue(name, dead_letter_queue=f"{name}-dlq", max_retries=0, client=sqs)  # count 1
    Producer(name, client=sqs).send_batch([{"body": b} for b in "abc"])
    result = cli("inspect", name, "--force", "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)["messages"]
    assert len(shown) == 3 and all(m["at_receive_limit"] for m in shown)
    note = result.stderr.strip().splitlines()[-1]
    assert note.startswith("note: this peek brought messages ")
    assert all(m["id"] in note for m in shown)


def test_without_force_a_limit_of_one_means_one_message_used_up_at_most(
    cli: Any, sqs: Any, name: str
) -> None:
    create_queue(name, dead_letter_queue=f"{name}-dlq", max_retries=0, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": b} for b in "abc"])
    result = cli("inspect", name)
    assert result.exit_code == 1
    assert "peeked 1 of ~3 visible" in result.stdout and " * " in result.stdout
    assert result.stderr.strip().splitlines()[-1].startswith("error: stopped peeking")
    counts = [int(m["Attributes"]["ApproximateReceiveCount"]) for m in drain(sqs, name)]
    assert counts == [1, 1]  # the two others were not touched: this drain is their first
    assert depth(sqs, f"{name}-dlq") == 1  # the drain's receive moved the peeked one, as said


def test_a_fifo_peek_takes_ten_at_a_time_and_stops_after_the_receive_at_the_limit(
    cli: Any, sqs: Any, name: str
) -> None:
    # one at a time would show one message per group: SQS holds back the rest of a group
    # while one of its messages is in flight
    roomy = f"{name}-roomy.fifo"
    create_queue(roomy, dead_letter_queue=f"{name}-dlq.fifo", max_retries=3, client=sqs)
    Producer(roomy, client=sqs).send_batch([{"body": i, "group_id": "g"} for i in range(3)])
    shown = cli("inspect", roomy, "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["peeked"] == 3
    tight = f"{name}-tight.fifo"
    create_queue(tight, dead_letter_queue=f"{name}-dlq.fifo", max_retries=0, client=sqs)
    Producer(tight, client=sqs).send_batch([{"body": i, "group_id": "g"} for i in range(12)])
    door = SyncSqs(sqs)
    peeked = peek(door, door.queue_url(tight), 12, max_receives=1)
    assert peeked.stopped and len(peeked.messages) == 10
    assert peeked.at_limit == peeked.messages


def test_queues_age_says_so_first_and_stops_at_the_limit_unless_forced(
    cli: Any, sqs: Any, name: str
) -> None:
    create_queue(name, dead_letter_queue=f"{name}-dlq", max_retries=0, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": b} for b in "ab"])
    result = cli("queues", "--prefix", name, "--age", "--json")
    assert result.exit_code == 1
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows[name]["oldest_age_seconds"] is not None
    note, error = result.stderr.strip().splitlines()
    assert note.startswith("note: a peek is a receive")
    assert error.startswith("error: stopped peeking: this peek brought message ")
    assert f"of {name} to the queue's maxReceiveCount (1)" in error
    assert attributes(sqs, name)["ApproximateNumberOfMessages"] == 2
    forced = cli("queues", "--prefix", name, "--age", "--force")
    assert forced.exit_code == 0, forced.output
    assert forced.stderr.strip().splitlines()[-1].startswith("note: this peek brought message")


def test_queues_without_age_does_not_peek_or_say_so(cli: Any, sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send("x")
    result = cli("queues", "--prefix", name)
    assert result.exit_code == 0 and result.stderr == ""
    assert attributes(sqs, name)["ApproximateNumberOfMessages"] == 1
