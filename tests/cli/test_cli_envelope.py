"""`consume --envelope` (issue 31 item 4) through typer's runner, against moto's server: the
handler gets each SNS notification's message and EventBridge event's detail, the setting comes
from the flag or `SQSBATCH_ENVELOPE` as every setting does, and a bad value is one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sqsbatch import create_queue
from sqsbatch._core.envelope import decode
from sqsbatch._core.unwrap import ENVELOPES, wrap
from sqsbatch.cli.app import app
from sqsbatch.cli.consume import Envelope
from sqsbatch.dev.server import LocalSqs
from tests.support.cli_results import ok, one_line_error
from tests.support.sqs_helpers import depth, drain

runner = CliRunner()

MODULE = """
import json

def record(batch):
    with open("seen.jsonl", "a") as out:
        for m in batch.messages:
            out.write(json.dumps([m.body, dict(m.envelope or {})]) + "\\n")
"""


@pytest.fixture
def module(tmp_path: Path) -> Path:
    """The handler, in the current directory (conftest chdirs into tmp_path)."""
    (tmp_path / "enveloped.py").write_text(MODULE)
    (tmp_path / "enveloped_async.py").write_text(MODULE.replace("def record", "async def record"))
    return tmp_path


def cli(local_sqs: LocalSqs, *args: str, env: Any = None) -> Result:
    return runner.invoke(app, ["--endpoint-url", local_sqs.endpoint_url, *args], env=env)


def consume(name: str, kind: list[str]) -> list[str]:
    handler = "enveloped_async:record" if kind else "enveloped:record"
    return ["consume", handler, "-q", name, "--once", "--idle-seconds", "0.5", *kind]


def seen(folder: Path) -> list[list[Any]]:
    path = folder / "seen.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_flag_offers_what_the_setting_accepts() -> None:
    assert tuple(Envelope) == ENVELOPES


@pytest.mark.parametrize("kind", [[], ["--async"]], ids=["sync", "async"])
def test_consume_envelope_sns_unwraps_and_dead_letters_the_rest(
    local_sqs: LocalSqs, sqs: Any, name: str, module: Path, kind: list[str]
) -> None:
    dlq = f"{name}-dlq"
    url = create_queue(name, dead_letter_queue=dlq, client=sqs)
    notification = wrap("sns", {"order": 1}, message_id="n-1", sent_at=1_700_000_000.0)
    sqs.send_message(QueueUrl=url, MessageBody=notification)
    sqs.send_message(QueueUrl=url, MessageBody="plain")
    args = [*consume(name, kind), "--envelope", "sns", "--max-batch-timeout", "0.2", "--json"]
    result = ok(cli(local_sqs, *args))
    assert json.loads(result.stdout)["stats"]["dead_lettered"] == 1
    [[body, fields]] = seen(module)
    assert body == {"order": 1} and fields["MessageId"] == "n-1"
    assert [decode(raw).envelope.deaths[-1].reason for raw in drain(sqs, dlq)] == ["invalid_body"]
    assert depth(sqs, name) == 0


def test_the_environment_sets_the_envelope_as_any_setting(
    local_sqs: LocalSqs, sqs: Any, name: str, module: Path
) -> None:
    url = create_queue(name, client=sqs)
    event = wrap("eventbridge", {"order": 2}, message_id="e-1", sent_at=1_700_000_000.0)
    sqs.send_message(QueueUrl=url, MessageBody=event)
    env = {"SQSBATCH_ENVELOPE": "eventbridge"}
    ok(cli(local_sqs, *consume(name, []), "--max-batch-timeout", "0.2", env=env))
    [[body, fields]] = seen(module)
    assert body == {"order": 2} and fields["id"] == "e-1" and "detail" not in fields


def test_a_bad_envelope_is_one_line(local_sqs: LocalSqs, module: Path) -> None:
    args = consume("never-reached", [])
    one_line_error(cli(local_sqs, *args, "--envelope", "sqs"), 2, "--envelope", "'sqs'")
    bad = {"SQSBATCH_ENVELOPE": "sqs"}
    one_line_error(cli(local_sqs, *args, env=bad), 1, "envelope='sqs' is invalid", "'sns'")
