"""Redrive and the CLI know why a message died (issue 12): the daemon's `reasons`, the
`--filter reason:...` of a manual redrive, and what `inspect` shows, against moto's server."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from typer.testing import CliRunner

from redrive import BackoffPolicy, Redriver
from redrive.decide import DlqMessage
from redrive.reasons import Reasons
from redrive.settings import RedriveSettings
from sqsbatch import Consumer, ConsumerConfig, MessageBatch, Producer
from sqsbatch._core.envelope import MOVED_BY_SQS, Death, Envelope, death_reason, decode
from sqsbatch.cli.app import app
from sqsbatch.cli.filters import parse_filter
from sqsbatch.dev.server import LocalSqs
from sqsbatch.errors import ConfigError
from tests.support.redrive import bodies, dead_letter, make_queues
from tests.support.sqs_helpers import depth

NOW = BackoffPolicy(base_delay=0, jitter=0)
runner = CliRunner()


def dead(sqs: Any, dlq: str, source: str) -> None:
    """One message per reason in the DLQ, body = its reason (a foreign one: SQS moved it)."""
    for reason in ("retries_exhausted", "expired", "invalid_body", "tenant gone"):
        dead_letter(sqs, dlq, source, [reason], reason=reason)
    url = sqs.get_queue_url(QueueName=dlq)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="crashed")  # what SQS's RedrivePolicy moves


@pytest.mark.parametrize(
    ("envelope", "reason"),
    [
        (Envelope(), MOVED_BY_SQS),
        (Envelope().died(Death("expired", "q", 0, 1.0)), "expired"),
        # redriven after its death, then moved by SQS: no entry since the redrive
        (Envelope(redrives=1).died(Death("expired", "q", 0, 1.0)), MOVED_BY_SQS),
        (Envelope(redrives=1).died(Death("a", "q", 0, 1.0)).died(Death("b", "q", 1, 2.0)), "b"),
        # as a redrive records it: the dead count at the redrive, then moved by SQS
        (
            Envelope(redrives=1, dead_count=1, dead_count_at_redrive=1).died(
                Death("a", "q", 0, 1.0)
            ),
            "a",
        ),
        (
            replace(Envelope().died(Death("a", "q", 0, 1.0)), redrives=1, dead_count_at_redrive=1),
            MOVED_BY_SQS,
        ),
        # moved by SQS first (no death), redriven, then dead-lettered by sqsbatch: its reason
        (
            Envelope(redrives=1, dead_count_at_redrive=0).died(Death("expired", "q", 0, 1.0)),
            "expired",
        ),
    ],
)
def test_the_reason_is_the_last_death_or_moved_by_sqs(envelope: Envelope, reason: str) -> None:
    assert death_reason(envelope) == reason


def test_the_daemon_keeps_expired_and_invalid_bodies_by_default(sqs: Any, name: str) -> None:
    source, dlq = make_queues(sqs, name)
    dead(sqs, dlq, source)
    stats = Redriver(dlq, policy=NOW, client=sqs).run_once(wait_seconds=0)
    assert (stats.moved, stats.kept) == (3, 2)
    assert sorted(bodies(sqs, source)) == ["crashed", "retries_exhausted", "tenant gone"]
    assert depth(sqs, dlq) == 2  # kept: hidden, reported every hold_seconds


def test_kept_reasons_go_to_the_parking_queue_when_one_is_set(sqs: Any, name: str) -> None:
    source, dlq = make_queues(sqs, name)
    parking = f"{name}-parked"
    sqs.create_queue(QueueName=parking)
    dead(sqs, dlq, source)
    stats = Redriver(dlq, policy=NOW, parking_queue=parking, client=sqs).run_once(wait_seconds=0)
    assert (stats.moved, stats.parked) == (3, 2)
    assert sorted(bodies(sqs, parking)) == ["expired", "invalid_body"]


@pytest.mark.parametrize(
    ("reasons", "moved"),
    [
        (["expired"], ["expired"]),
        (["moved_by_sqs", "requested:tenant gone"], ["crashed", "tenant gone"]),
        (["requested"], ["tenant gone"]),
        (["all"], ["crashed", "expired", "invalid_body", "retries_exhausted", "tenant gone"]),
    ],
)
def test_reasons_chooses_what_comes_back(
    sqs: Any, name: str, reasons: list[str], moved: list[str]
) -> None:
    source, dlq = make_queues(sqs, name)
    dead(sqs, dlq, source)
    Redriver(dlq, policy=NOW, client=sqs, reasons=reasons).run_once(wait_seconds=0)
    assert sorted(bodies(sqs, source)) == moved


def test_reasons_from_the_environment_and_bad_ones_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REDRIVE_REASONS", "retries_exhausted, expired")
    assert RedriveSettings(dlqs=["d"]).reasons == ["retries_exhausted", "expired"]
    with pytest.raises(ConfigError, match=r"^reasons=\[''\] is invalid: give reasons") as raised:
        Reasons.of([""])
    assert "\n" not in str(raised.value)
    monkeypatch.setenv("REDRIVE_REASONS", ",")
    with pytest.raises(ConfigError, match="reasons"):
        RedriveSettings(dlqs=["d"])


def test_filter_by_reason() -> None:
    expired = DlqMessage(decode(_raw(Envelope().died(Death("expired", "q", 0, 1.0)))), "r", "m")
    moved = DlqMessage(decode(_raw(Envelope())), "r", "m")
    assert parse_filter("reason:expired")(expired.message)
    assert not parse_filter("reason:expired")(moved.message)
    assert parse_filter("!reason:expired")(moved.message)
    assert parse_filter("reason:moved_by_sqs")(moved.message)


def _raw(envelope: Envelope) -> dict[str, Any]:
    return {
        "MessageId": "m",
        "ReceiptHandle": "r",
        "Body": "1",
        "Attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000"},
        "MessageAttributes": {"sqsbatch": dict(envelope.to_attribute())},
    }


def test_manual_redrive_filters_on_the_last_reason(
    local_sqs: LocalSqs, sqs: Any, name: str
) -> None:
    source, dlq = make_queues(sqs, name)
    dead(sqs, dlq, source)
    args = ["--endpoint-url", local_sqs.endpoint_url, "redrive", dlq, "--yes", "--json"]
    result = runner.invoke(
        app, [*args, "--filter", "!reason:expired", "--filter", "!reason:invalid_body"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["moved"] == 3
    skipped = {row["reason"] for row in report["messages"] if row["action"] == "skipped"}
    assert skipped == {"expired", "invalid_body"}
    result = runner.invoke(app, [*args, "--filter", "reason:expired", "--reasons", "expired"])
    assert json.loads(result.stdout)["moved"] == 1
    assert sorted(bodies(sqs, source)) == ["crashed", "expired", "retries_exhausted", "tenant gone"]


def test_inspect_shows_the_last_reason_and_the_count_of_deaths(
    local_sqs: LocalSqs, sqs: Any, name: str
) -> None:
    # Given a consumer that dead-letters one message, and one message SQS moved itself
    source, dlq = make_queues(sqs, name)
    Producer(source, client=sqs).send({"tenant": 7})

    def handler(batch: MessageBatch) -> None:
        batch.messages[0].dead_letter("tenant 7 deleted")

    config = ConsumerConfig(max_batch_timeout=0, dead_letter_queue=dlq, max_retries=1)
    Consumer(source, handler, config, client=sqs).run_until_idle(1.0)
    url = sqs.get_queue_url(QueueName=dlq)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="crashed")
    # When inspect peeks at the DLQ
    base = ["--endpoint-url", local_sqs.endpoint_url, "inspect", dlq]
    shown = json.loads(runner.invoke(app, [*base, "--json"]).stdout)["messages"]
    # Then each message says why it is there, and how often it died
    found = {m["body"]: (m["reason"], m["deaths"]) for m in shown}
    assert found == {'{"tenant":7}': ("tenant 7 deleted", 1), "crashed": (MOVED_BY_SQS, 0)}
    table = runner.invoke(app, base, env={"COLUMNS": "400"}).stdout
    assert "tenant 7 deleted" in table and "moved by SQS (maxReceiveCount)" in table
    assert "last reason" in table and "deaths" in table
