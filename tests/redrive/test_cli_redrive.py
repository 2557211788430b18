"""`sqsbatch redrive DLQ`: filters, --dry-run, --limit, --to, confirmation, --json."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

from sqsbatch import Consumer, ConsumerConfig, MessageBatch, Producer, create_queue
from sqsbatch._core.envelope import DecodedMessage, Envelope, ErrorInfo
from sqsbatch.cli.app import app
from sqsbatch.cli.filters import parse_filter, parse_filters
from sqsbatch.dev.server import LocalSqs
from tests.support.sqs_helpers import depth

runner = CliRunner()


def message(body: str, *, error: str | None = None, **attributes: str) -> DecodedMessage:
    failure = ErrorInfo(error, "boom", 0.0) if error else None
    return DecodedMessage(
        id="m",
        body=body,
        timestamp=datetime.now(UTC),
        attempts=1,
        attributes=dict(attributes),
        envelope=Envelope(error=failure),
        raw_body=body,
        raw_attributes={},
    )


@pytest.mark.parametrize(
    ("expression", "matching", "other"),
    [
        ("order-7", message('{"id":"order-7"}'), message('{"id":"order-8"}')),
        ("body:re:x", message("a re:x b"), message("re-x")),
        ('re:^\\{"id":"order-\\d"', message('{"id":"order-7"}'), message('{"id":"x"}')),
        ("attr:tenant=acme", message("x", tenant="acme"), message("x", tenant="other")),
        ("attr:tenant", message("x", tenant="acme"), message("x")),
        ("error:TimeoutError", message("x", error="asyncio.TimeoutError"), message("x")),
        ("error:ValueError", message("x", error="ValueError"), message("x", error="KeyError")),
        ("!error:ValueError", message("x", error="KeyError"), message("x", error="ValueError")),
    ],
)
def test_filter_expressions(expression: str, matching: Any, other: Any) -> None:
    select = parse_filter(expression)
    assert select(matching) and not select(other)


def test_several_filters_must_all_match() -> None:
    select = parse_filters(["attr:tenant=acme", "error:ValueError"])
    assert select is not None
    assert select(message("x", error="ValueError", tenant="acme"))
    assert not select(message("x", error="ValueError", tenant="other"))
    assert parse_filters([]) is None


@pytest.mark.parametrize("expression", ["re:(", "attr:", "attr:=x", "error:"])
def test_bad_filters_are_usage_errors(expression: str) -> None:
    with pytest.raises(typer.BadParameter):
        parse_filter(expression)


@pytest.fixture
def dead(sqs: Any, name: str) -> str:
    """Four messages dead-lettered by the consumer: two ValueError (one for acme), two KeyError."""
    dlq = f"{name}-dlq"
    create_queue(name, dead_letter_queue=dlq, max_retries=0, client=sqs)
    producer = Producer(name, client=sqs)
    producer.send({"n": 1, "fail": "ValueError"}, attributes={"tenant": "acme"})
    producer.send({"n": 2, "fail": "ValueError"})
    producer.send({"n": 3, "fail": "KeyError"})
    producer.send({"n": 4, "fail": "KeyError"})

    def handler(batch: MessageBatch) -> None:
        raise {"ValueError": ValueError, "KeyError": KeyError}[batch.messages[0].body["fail"]]()

    config = ConsumerConfig.load(
        name, max_retries=0, dead_letter_queue=dlq, max_batch_size=1, max_batch_timeout=0
    )
    Consumer(name, handler, config, client=sqs).run_until_idle(0.5)
    assert depth(sqs, dlq) == 4
    return dlq


def redrive(local_sqs: LocalSqs, *args: str, input: str | None = None) -> Result:
    return runner.invoke(
        app, ["--endpoint-url", local_sqs.endpoint_url, "redrive", *args], input=input
    )


def test_dry_run_lists_and_moves_nothing(local_sqs: LocalSqs, sqs: Any, dead: str) -> None:
    result = redrive(local_sqs, dead, "--filter", "error:ValueError", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dry_run"] is True and report["moved"] == 2
    would = [row for row in report["messages"] if row["action"] == "would-move"]
    assert {row["error_type"] for row in would} == {"ValueError"}
    assert depth(sqs, dead) == 4
    table = redrive(local_sqs, dead, "--dry-run").stdout
    assert "would move 4" in table


def test_filter_then_move_to_the_source(local_sqs: LocalSqs, sqs: Any, dead: str) -> None:
    source = dead.removesuffix("-dlq")
    result = redrive(local_sqs, dead, "--filter", "error:KeyError", "--yes", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["moved"] == 2 and report["failed"] == 0
    assert {row["target"] for row in report["messages"] if row["action"] == "moved"} == {source}
    assert depth(sqs, source) == 2 and depth(sqs, dead) == 2
    shown = runner.invoke(
        app, ["--endpoint-url", local_sqs.endpoint_url, "inspect", source, "--json"]
    )
    assert {m["redrives"] for m in json.loads(shown.stdout)["messages"]} == {1}


def test_attribute_filter_limit_and_to(local_sqs: LocalSqs, sqs: Any, dead: str, name: str) -> None:
    create_queue(f"{name}-elsewhere", client=sqs)
    result = redrive(
        local_sqs,
        dead,
        "--filter",
        "attr:tenant=acme",
        "--to",
        f"{name}-elsewhere",
        "--yes",
        "--json",
    )
    assert json.loads(result.stdout)["moved"] == 1
    assert depth(sqs, f"{name}-elsewhere") == 1
    result = redrive(local_sqs, dead, "--limit", "1", "--yes")
    assert result.exit_code == 0, result.output
    assert depth(sqs, dead) == 2


def test_asks_first(local_sqs: LocalSqs, sqs: Any, dead: str) -> None:
    refused = redrive(local_sqs, dead, input="n\n")
    assert refused.exit_code == 1 and "nothing moved" in refused.stderr
    assert depth(sqs, dead) == 4
    assert redrive(local_sqs, dead, input="y\n").exit_code == 0
    assert depth(sqs, dead) == 0


def test_a_message_with_nowhere_to_go_stays_and_exits_1(
    local_sqs: LocalSqs, sqs: Any, name: str
) -> None:
    create_queue(name, client=sqs)  # a DLQ of nothing: no source queue known
    Producer(name, client=sqs).send("orphan")
    result = redrive(local_sqs, name, "--yes")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1].startswith("error: 1 message(s) could not")
    assert "unroutable" in result.stdout
    assert depth(sqs, name) == 1
