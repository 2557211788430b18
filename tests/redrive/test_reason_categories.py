"""Reasons across the CLI (issue 27, items 8 and 9): `reason:` matches a category or a handler's
exact text, `inspect --filter` has redrive's grammar, the manual redrive keeps `expired` and
`invalid_body` unless `--reasons` names them, and an unknown reason is refused in one line
naming the nearest valid one, wherever reasons are given. Against moto's server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from redrive import move_now
from redrive.cli import app as redrive_app
from redrive.reasons import Reasons
from redrive.settings import RedriveSettings
from sqsbatch._core.envelope import Death, Envelope, decode
from sqsbatch.cli.app import app
from sqsbatch.cli.filters import parse_filter
from sqsbatch.dev.server import LocalSqs
from sqsbatch.errors import ConfigError
from tests.support.cli_results import ok, one_line_error
from tests.support.redrive import bodies, dead_letter, make_queues
from tests.support.sqs_helpers import depth

runner = CliRunner()
REASONS = ("retries_exhausted", "expired", "invalid_body", "tenant gone")


def dead(sqs: Any, dlq: str, source: str) -> None:
    """One message per reason in the DLQ, body = its reason; "crashed": SQS moved it."""
    for reason in REASONS:
        dead_letter(sqs, dlq, source, [reason], reason=reason)
    url = sqs.get_queue_url(QueueName=dlq)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="crashed")


def _message(reason: str | None) -> Any:
    envelope = Envelope() if reason is None else Envelope().died(Death(reason, "q", 0, 1.0))
    raw = {
        "MessageId": "m",
        "ReceiptHandle": "r",
        "Body": "1",
        "Attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000"},
        "MessageAttributes": {"sqsbatch": dict(envelope.to_attribute())},
    }
    return decode(raw)


@pytest.mark.parametrize(
    ("expression", "selected"),
    [
        ("reason:requested", {"tenant gone", "requested"}),
        ("reason:tenant gone", {"tenant gone"}),
        ("reason:expired", {"expired"}),
        ("reason:moved_by_sqs", {None}),
        ("!reason:requested", {"retries_exhausted", "expired", "invalid_body", None}),
    ],
)
def test_reason_matches_a_category_or_the_exact_text(expression: str, selected: set[Any]) -> None:
    # "requested" as a handler's own text is a handler's reason too
    reasons = [*REASONS, "requested", None]
    select = parse_filter(expression)
    assert {r for r in reasons if select(_message(r))} == selected


@pytest.mark.parametrize(
    ("given", "nearest"),
    [
        ("retries_exhausetd", "retries_exhausted"),
        ("expird", "expired"),
        ("retries", "retries_exhausted"),
        ("tenant gone", "requested:tenant gone"),
    ],
)
def test_an_unknown_reason_is_refused_naming_the_nearest(given: str, nearest: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Reasons.of(["expired", given])
    message = str(raised.value)
    assert f"{given!r} is not a reason (did you mean {nearest!r}?)" in message
    assert "\n" not in message
    assert Reasons.of(["requested:tenant gone"]).brings_back("tenant gone")
    assert not Reasons.of(["requested:tenant gone"]).brings_back("tenant")
    assert Reasons.of(["requested"]).brings_back("tenant")


def test_unknown_reasons_are_refused_in_the_environment_and_the_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("REDRIVE_REASONS", "retries_exhausted,expird")
    with pytest.raises(ConfigError, match=r"'expird' is not a reason \(did you mean 'expired'"):
        RedriveSettings(dlqs=["d"])
    monkeypatch.delenv("REDRIVE_REASONS")
    path = tmp_path / "sqsbatch.toml"
    path.write_text('[redrive]\nreasons = ["invalid_bdy"]\n')
    monkeypatch.setenv("SQSBATCH_CONFIG_FILE", str(path))
    with pytest.raises(ConfigError, match=r"did you mean 'invalid_body'"):
        RedriveSettings(dlqs=["d"])
    result = runner.invoke(redrive_app, ["run", "--dlq", "d", "--once", "--reasons", "requsted"])
    one_line_error(result, 1, "'requsted' is not a reason", "did you mean 'requested'")


def test_the_manual_redrive_refuses_an_unknown_reason_before_receiving(
    local_sqs: LocalSqs, sqs: Any, name: str
) -> None:
    source, dlq = make_queues(sqs, name)
    dead(sqs, dlq, source)
    args = ["--endpoint-url", local_sqs.endpoint_url, "redrive", dlq, "--yes"]
    result = runner.invoke(app, [*args, "--reasons", "expired,retries_exhausetd"])
    one_line_error(result, 2, "did you mean 'retries_exhausted'")
    assert depth(sqs, dlq) == 5 and bodies(sqs, source) == []


def test_the_manual_redrive_keeps_expired_and_invalid_bodies_unless_asked(
    local_sqs: LocalSqs, sqs: Any, name: str
) -> None:
    source, dlq = make_queues(sqs, name)
    dead(sqs, dlq, source)
    args = ["--endpoint-url", local_sqs.endpoint_url, "redrive", dlq, "--yes", "--json"]
    # The dry run says what stays, and how to move it
    dry = ok(runner.invoke(app, [*args, "--dry-run"]))
    report = json.loads(dry.stdout)
    assert (report["moved"], report["kept"]) == (3, 2)
    kept = {row["reason"] for row in report["messages"] if row["action"] == "kept"}
    assert kept == {"expired", "invalid_body"}
    assert "kept 2 message(s)" in dry.stderr and "--reasons expired,invalid_body" in dry.stderr
    # The redrive leaves them in the DLQ
    report = json.loads(ok(runner.invoke(app, args)).stdout)
    assert (report["moved"], report["kept"]) == (3, 2)
    assert sorted(bodies(sqs, source)) == ["crashed", "retries_exhausted", "tenant gone"]
    # Asked for, they move
    report = json.loads(ok(runner.invoke(app, [*args, "--reasons", "expired"])).stdout)
    assert (report["moved"], report["kept"]) == (1, 1)
    assert "expired" in bodies(sqs, source)
    assert depth(sqs, dlq) == 1


def test_move_now_keeps_by_default_and_takes_reasons(sqs: Any, name: str) -> None:
    source, dlq = make_queues(sqs, name)
    dead(sqs, dlq, source)
    assert move_now(dlq, client=sqs, reasons=["requested:tenant gone"]).moved == 1
    report = move_now(dlq, client=sqs)
    assert (report.moved, report.kept) == (2, 2)
    assert sorted(bodies(sqs, source)) == ["crashed", "retries_exhausted", "tenant gone"]


def test_inspect_filters_with_the_grammar_of_redrive(
    local_sqs: LocalSqs, sqs: Any, name: str
) -> None:
    source, dlq = make_queues(sqs, name)
    dead(sqs, dlq, source)
    base = ["--endpoint-url", local_sqs.endpoint_url, "inspect", dlq, "--json"]
    shown = json.loads(ok(runner.invoke(app, [*base, "--filter", "reason:requested"])).stdout)
    assert [m["body"] for m in shown["messages"]] == ['"tenant gone"']
    assert (shown["peeked"], shown["shown"]) == (5, 1)
    both = ["--filter", "!reason:expired", "--filter", "attr:tenant=acme"]
    shown = json.loads(ok(runner.invoke(app, [*base, *both])).stdout)
    found = sorted(m["reason"] for m in shown["messages"])
    assert found == ["invalid_body", "retries_exhausted", "tenant gone"]
    table = ok(runner.invoke(app, [*base[:-1], "--filter", "reason:expired"])).stdout
    assert "peeked 5 of ~5 visible, 1 match --filter" in table
    bad = runner.invoke(app, [*base, "--filter", "re:("])
    one_line_error(bad, 2, "not a valid regex")
