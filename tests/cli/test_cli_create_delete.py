"""`sqsbatch create` says created, updated (and what changed) or unchanged; `sqsbatch delete`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sqsbatch import create_queue
from sqsbatch.cli.app import app
from sqsbatch.dev.server import LocalSqs
from tests.support.cli_results import ok

runner = CliRunner()


@pytest.fixture
def cli(local_sqs: LocalSqs) -> Any:
    def invoke(*args: str, input: str | None = None) -> Result:
        return runner.invoke(app, ["--endpoint-url", local_sqs.endpoint_url, *args], input=input)

    return invoke


def exists(sqs: Any, name: str) -> bool:
    return any(
        url.endswith(f"/{name}")
        for url in sqs.list_queues(QueueNamePrefix=name).get("QueueUrls", [])
    )


def test_create_says_created_then_unchanged(cli: Any, name: str) -> None:
    first = ok(cli("create", name, "--dlq", f"{name}-dlq")).stdout.splitlines()
    assert first[0].startswith(f"created {name}  http") and "max retries 3" in first[0]
    assert first[1].startswith(f"created dead-letter queue {name}-dlq  http")
    again = ok(cli("create", name, "--dlq", f"{name}-dlq")).stdout.splitlines()
    assert again[0].startswith(f"unchanged {name}  ")
    assert again[1].startswith(f"unchanged dead-letter queue {name}-dlq  ")
    assert len(again) == 2


def test_create_on_an_existing_queue_says_what_changed(cli: Any, sqs: Any, name: str) -> None:
    # Given a queue with a DLQ, max retries 3, visibility 30 s, no delay
    create_queue(name, dead_letter_queue=f"{name}-dlq", client=sqs)
    # When it is created again with other settings
    result = ok(
        cli("create", name, "--dlq", f"{name}-dlq", "--max-retries", "5",
            "--visibility-timeout", "90", "--delivery-delay", "7")
    )  # fmt: skip
    # Then it says updated, and each change, before -> after
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"updated {name}  ")
    assert set(lines[1:4]) == {
        "  DelaySeconds: 0 -> 7",
        f"  RedrivePolicy: DLQ {name}-dlq, max retries 3 -> DLQ {name}-dlq, max retries 5",
        "  VisibilityTimeout: 30 -> 90",
    }
    assert lines[4].startswith(f"unchanged dead-letter queue {name}-dlq")


def test_create_json_names_the_changes(cli: Any, sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    result = ok(cli("create", name, "--visibility-timeout", "45", "--json"))
    shown = json.loads(result.stdout)
    assert shown["queue_url"].endswith(f"/{name}") and shown["dead_letter_queue_url"] is None
    assert shown["queue"]["action"] == "updated"
    assert shown["queue"]["changes"] == {"VisibilityTimeout": {"before": "30", "after": "45"}}
    assert shown["dead_letter_queue"] is None


def test_delete_asks_first(cli: Any, sqs: Any, name: str) -> None:
    create_queue(name, dead_letter_queue=f"{name}-dlq", client=sqs)
    refused = cli("delete", f"{name}-dlq", input="n\n")
    assert refused.exit_code == 1
    assert f"the dead-letter queue of {name}" in refused.stderr  # the question says so
    assert refused.stderr.strip().splitlines()[-1].endswith("not deleted (answer y, or pass --yes)")
    assert exists(sqs, f"{name}-dlq")
    accepted = ok(cli("delete", f"{name}-dlq", "--json", input="y\n"))
    shown = json.loads(accepted.stdout)  # only the JSON on stdout: the question is on stderr
    assert shown.pop("url").endswith(f"/{name}-dlq")
    assert shown == {"deleted": f"{name}-dlq", "messages": 0, "dead_letter_of": [name]}
    assert not exists(sqs, f"{name}-dlq")


def test_delete_yes_prints_what_it_deleted(cli: Any, sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    sqs.send_message(QueueUrl=sqs.get_queue_url(QueueName=name)["QueueUrl"], MessageBody="x")
    result = ok(cli("delete", name, "-y"))
    assert result.stdout.startswith(f"deleted {name}  http") and "(~1 messages)" in result.stdout
    assert not exists(sqs, name)


def test_deleting_a_missing_queue_is_one_line(cli: Any, name: str) -> None:
    result = cli("delete", name, "--yes")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [f"error: queue does not exist ({name})"]
