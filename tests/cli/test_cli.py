"""The `sqsbatch` commands through typer's CliRunner, against the session's moto server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sqsbatch import Consumer, ConsumerConfig, MessageBatch, Producer, create_queue
from sqsbatch.cli.app import app
from sqsbatch.dev.server import LocalSqs
from tests.support.cli_results import ok, one_line_error
from tests.support.sqs_helpers import depth, drain

runner = CliRunner()


@pytest.fixture
def cli(local_sqs: LocalSqs) -> Any:
    """Run `sqsbatch --endpoint-url <moto> ARGS...`."""

    def invoke(*args: str, input: str | None = None, env: Any = None) -> Result:
        return runner.invoke(
            app, ["--endpoint-url", local_sqs.endpoint_url, *args], input=input, env=env
        )

    return invoke


def test_create_then_queues_shows_depths_dlq_link_and_max_retries(cli: Any, name: str) -> None:
    created = json.loads(
        ok(cli("create", name, "--dlq", f"{name}-dlq", "--max-retries", "4", "--json")).stdout
    )
    assert created["queue_url"].endswith(f"/{name}")
    assert created["dead_letter_queue_url"].endswith(f"/{name}-dlq")
    ok(cli("send", name, "hello"))
    rows = json.loads(ok(cli("queues", "--prefix", name, "--json")).stdout)
    by_name = {row["name"]: row for row in rows}
    assert by_name[name]["visible"] == 1
    assert by_name[name]["dead_letter_queue"] == f"{name}-dlq"
    assert by_name[name]["max_retries"] == 4
    assert by_name[name]["oldest_age_seconds"] is None
    assert by_name[f"{name}-dlq"]["dead_letter_sources"] == [name]
    table = ok(cli("queues", "--prefix", name)).stdout
    assert name[:10] in table and "--age" in table


def test_queues_age_comes_from_a_peek(cli: Any, sqs: Any, name: str) -> None:
    ok(cli("create", name))
    ok(cli("send", name, "x"))
    [row] = json.loads(ok(cli("queues", "--prefix", name, "--age", "--json")).stdout)
    assert row["oldest_age_seconds"] is not None and row["oldest_age_seconds"] >= 0
    assert depth(sqs, name) == 1


def test_send_types_attributes_and_file(cli: Any, sqs: Any, name: str, tmp_path: Path) -> None:
    ok(cli("create", name))
    ok(cli("send", name, '{"order": 1}'))
    ok(cli("send", name, "42", "--text"))
    ok(cli("send", name, "plain words", "-a", "tenant=acme"))
    (tmp_path / "body.json").write_text('["from", "file"]')
    ok(cli("send", name, "--file", str(tmp_path / "body.json")))
    (tmp_path / "blob").write_bytes(b"\xff\x00\xfe")
    message_id = ok(cli("send", name, "--file", str(tmp_path / "blob"))).stdout.strip()
    assert len(message_id) > 10
    peeked = json.loads(ok(cli("inspect", name, "--json")).stdout)["messages"]
    seen = {(m["content_type"], m["body"]) for m in peeked}
    assert ("json", '{"order":1}') in seen
    assert ("text", "42") in seen
    assert ("json", '["from","file"]') in seen
    assert any(m["content_type"] == "bytes" and m["id"] == message_id for m in peeked)
    assert any(m["attributes"] == {"tenant": "acme"} for m in peeked)


def test_send_with_a_delay_is_counted_as_delayed(cli: Any, name: str) -> None:
    ok(cli("create", name))
    ok(cli("send", name, "later", "--delay", "60"))
    shown = json.loads(ok(cli("inspect", name, "--json")).stdout)
    assert shown["delayed"] == 1 and shown["messages"] == []


def test_inspect_peeks_without_consuming_and_counts_hidden(cli: Any, sqs: Any, name: str) -> None:
    ok(cli("create", name))
    for body in ("a", "b", "c"):
        ok(cli("send", name, body))
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=60)  # in flight
    shown = json.loads(ok(cli("inspect", name, "--json")).stdout)
    assert shown["peeked"] == 2 and shown["in_flight"] == 1
    assert {m["attempts"] for m in shown["messages"]} == {1}  # this peek's receive
    table = ok(cli("inspect", name, "--limit", "1")).stdout
    assert "1 in flight" in table
    assert len(drain(sqs, name)) == 2  # released at once: visible again


def test_inspect_shows_a_fair_queues_tenant_and_the_idempotency_key(
    cli: Any, sqs: Any, name: str
) -> None:
    ok(cli("create", name))
    ok(cli("send", name, "a", "--group-id", "tenant-7", "--idempotency-key", "job-1"))
    ok(cli("send", name, "b"))
    shown = json.loads(ok(cli("inspect", name, "--json")).stdout)
    rows = {m["body"]: (m["group_id"], m["idempotency_key"], m["id"]) for m in shown["messages"]}
    assert rows["a"][:2] == ("tenant-7", "job-1")
    assert rows["b"][0] is None and rows["b"][1] == rows["b"][2]  # the key is its id
    assert "tenant-7" in ok(cli("inspect", name)).stdout


def test_inspect_shows_dead_letter_metadata(cli: Any, sqs: Any, name: str) -> None:
    create_queue(name, dead_letter_queue=f"{name}-dlq", max_retries=0, client=sqs)
    Producer(name, client=sqs).send({"order": 7})

    def handler(batch: MessageBatch) -> None:
        raise TimeoutError("payments timed out")

    config = ConsumerConfig.load(
        name, max_retries=0, dead_letter_queue=f"{name}-dlq", max_batch_timeout=0
    )
    Consumer(name, handler, config, client=sqs).run_until_idle(0.5)
    [message] = json.loads(ok(cli("inspect", f"{name}-dlq", "--json")).stdout)["messages"]
    assert message["error"]["type"] == "TimeoutError"
    assert message["source_queue"] == name
    table = ok(cli("inspect", f"{name}-dlq")).stdout
    assert "TimeoutError" in table


def test_purge_asks_first(cli: Any, sqs: Any, name: str) -> None:
    ok(cli("create", name))
    ok(cli("send", name, "x"))
    refused = cli("purge", name, input="n\n")
    assert refused.exit_code == 1
    assert refused.stderr.strip().endswith("error: not purged (answer y, or pass --yes)")
    assert depth(sqs, name) == 1
    ok(cli("purge", name, input="y\n"))
    assert depth(sqs, name) == 0


def test_purge_yes(cli: Any, sqs: Any, name: str) -> None:
    ok(cli("create", name))
    ok(cli("send", name, "x"))
    ok(cli("purge", name, "--yes"))
    assert depth(sqs, name) == 0


def test_the_queue_may_be_given_by_url(cli: Any, sqs: Any, name: str) -> None:
    url = json.loads(ok(cli("create", name, "--json")).stdout)["queue_url"]
    ok(cli("send", url, "by url"))
    assert json.loads(ok(cli("inspect", url, "--json")).stdout)["peeked"] == 1


def test_endpoint_from_the_environment(local_sqs: LocalSqs, name: str) -> None:
    env = {"AWS_ENDPOINT_URL_SQS": local_sqs.endpoint_url}
    ok(runner.invoke(app, ["create", name], env=env))
    rows = json.loads(
        ok(runner.invoke(app, ["queues", "--prefix", name, "--json"], env=env)).stdout
    )
    assert [row["name"] for row in rows] == [name]


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "no-such-queue"],
        ["send", "no-such-queue", "x"],
        ["purge", "no-such-queue", "--yes"],
        ["redrive", "no-such-queue", "--yes"],
    ],
)
def test_a_missing_queue_is_one_line_and_exit_1(cli: Any, args: list[str]) -> None:
    one_line_error(cli(*args), 1, "no-such-queue")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["inspect", "q", "--limit", "0"], ["--limit"]),
        (["no-such-command"], ["no-such-command"]),
        (["send", "q"], ["BODY"]),
        (["send", "q", "x", "--text", "--json-body"], ["--text"]),
        (["send", "q", "{not json", "--json-body"], ["JSON"]),
        (["send", "q", "x", "-a", "novalue"], ["NAME=VALUE"]),
        (["create", "q", "--max-retries", "101"], ["--max-retries"]),
        (["redrive", "q", "--native", "--dry-run"], ["--native"]),
        (["redrive", "q", "--filter", "re:("], ["regex"]),
        (["consume", "no-colon", "--queue", "q"], ["MODULE:FUNCTION"]),
        (["consume", "m:f"], ["--queue"]),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(cli: Any, args: list[str], words: list[str]) -> None:
    one_line_error(cli(*args), 2, *words)


def test_no_credentials_is_one_line_and_exit_1(
    local_sqs: LocalSqs, tmp_path: Path, name: str
) -> None:
    (tmp_path / "empty").write_text("")
    env = {
        "AWS_ACCESS_KEY_ID": None,
        "AWS_SECRET_ACCESS_KEY": None,
        "AWS_SESSION_TOKEN": None,
        "AWS_PROFILE": None,
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "empty"),
        "AWS_CONFIG_FILE": str(tmp_path / "empty"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": None,
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": None,
    }
    result = runner.invoke(
        app, ["--endpoint-url", local_sqs.endpoint_url, "inspect", name], env=env
    )
    one_line_error(result, 1, "credentials")


def test_an_unknown_profile_is_one_line(cli: Any) -> None:
    one_line_error(cli("--profile", "no-such-profile", "queues"), 1, "no-such-profile")


def test_every_command_has_help() -> None:
    for command in (
        "queues",
        "inspect",
        "send",
        "create",
        "purge",
        "consume",
        "redrive",
        "demo",
        "dev",
    ):
        result = runner.invoke(app, [command, "--help"])
        assert result.exit_code == 0, result.output
    assert "peek" in runner.invoke(app, ["inspect", "--help"]).stdout.lower()
    assert runner.invoke(app, ["--version"]).stdout.startswith("sqsbatch ")
