"""What output never shows: credentials and locals, a receipt handle in full, a message's body.

Credentials in the environment stay out of every error line, traceback and log record of both
console scripts (`sqsbatch`, `redrive`), for a user's mistake and for a bug alike, at any log
level. A receipt handle that SQS quotes back is cut short before it reaches an error or a log
line. A settle that fails is logged with the message's id, never its body.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from typer.testing import CliRunner

from redrive import BackoffPolicy, Redriver
from redrive import cli as redrive_cli
from sqsbatch import Consumer, ConsumerConfig, MessageBatch, Producer, create_queue
from sqsbatch._core.calls import BatchRun, Entry
from sqsbatch._core.closing import refusals
from sqsbatch._core.receiving import split_received
from sqsbatch._core.shapes import redact
from sqsbatch._shell.botocore import translate
from sqsbatch._sync.door import SyncSqs
from sqsbatch.cli.app import app
from sqsbatch.cli.common import Connection
from sqsbatch.dev.server import LocalSqs
from sqsbatch.limits import SqsLimits
from tests.support.faults import ClientProxy
from tests.support.redrive import dead_letter, make_queues

runner = CliRunner()

SECRETS = {
    "AWS_ACCESS_KEY_ID": "AKIAFAKESECRETKEY042",
    "AWS_SECRET_ACCESS_KEY": "fake-secret-access-key-do-not-print-0042",
    "AWS_SESSION_TOKEN": "fake-session-token-do-not-print-0042",
}
"""Recognisable credentials: moto accepts any."""

WRAPPER = """
import os, sys

from sqsbatch.cli.common import Connection
from sqsbatch._core.closing import refusals
from sqsbatch._core.receiving import split_received

def client(self, **_):
    secret = os.environ["AWS_SECRET_ACCESS_KEY"]  # a local a locals panel would show
    token = os.environ["AWS_SESSION_TOKEN"]
    raise RuntimeError("an unexpected bug")

Connection.client = client
sys.argv = [sys.argv[1], *sys.argv[2:]]
if sys.argv[0] == "redrive":
    from redrive.cli import main
else:
    from sqsbatch.cli import main
main()
"""
"""Runs a console script's entry point with a bug planted where every command passes."""


def assert_no_secrets(*outputs: str) -> None:
    for output in outputs:
        for value in SECRETS.values():
            assert value not in output
        assert "locals" not in output.lower()


def script(
    *args: str, local_sqs: LocalSqs | None = None, bug: bool = False
) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **SECRETS, "COLUMNS": "200", "AWS_REGION": "us-east-1"}
    if local_sqs is not None:
        environment["AWS_ENDPOINT_URL_SQS"] = local_sqs.endpoint_url
    command = (
        [sys.executable, "-c", WRAPPER, *args]
        if bug
        else [str(Path(sys.executable).with_name(args[0])), *args[1:]]
    )
    return subprocess.run(
        command, check=False, env=environment, capture_output=True, text=True, timeout=60
    )


# -- credentials and locals ----------------------------------------------------------------------

USER_ERRORS = [
    pytest.param(("sqsbatch", "inspect", "no-such-queue"), 1, id="missing-queue"),
    pytest.param(
        ("sqsbatch", "--endpoint-url", "http://127.0.0.1:9", "queues"), 1, id="nothing-listens"
    ),
    pytest.param(("sqsbatch", "inspect", "q", "--limit", "nope"), 2, id="bad-argument"),
    pytest.param(("redrive", "run", "--once", "--dlq", "no-such-dlq"), 1, id="redrive-missing"),
    pytest.param(
        ("redrive", "--endpoint-url", "http://127.0.0.1:9", "run", "--once", "--dlq", "d"),
        1,
        id="redrive-nothing-listens",
    ),
]


@pytest.mark.parametrize(("args", "code"), USER_ERRORS)
def test_a_user_error_is_one_line_without_credentials(
    local_sqs: LocalSqs, args: tuple[str, ...], code: int
) -> None:
    result = script(*args, local_sqs=local_sqs)
    assert result.returncode == code, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ")
    assert_no_secrets(result.stdout, result.stderr)


@pytest.mark.parametrize(
    "args",
    [("sqsbatch", "queues"), ("redrive", "run", "--once", "--dlq", "d")],
    ids=["sqsbatch", "redrive"],
)
def test_a_bug_s_traceback_shows_no_locals_and_no_credentials(
    local_sqs: LocalSqs, args: tuple[str, ...]
) -> None:
    result = script(*args, local_sqs=local_sqs, bug=True)
    assert result.returncode == 1
    assert "RuntimeError" in result.stderr and "an unexpected bug" in result.stderr
    assert_no_secrets(result.stdout, result.stderr)


def test_a_bug_through_clirunner_leaks_no_credentials(
    local_sqs: LocalSqs, monkeypatch: pytest.MonkeyPatch
) -> None:
    def client(self: Connection, **_: Any) -> Any:
        secret = os.environ["AWS_SECRET_ACCESS_KEY"]
        raise RuntimeError(f"an unexpected bug ({len(secret)})")

    monkeypatch.setattr(Connection, "client", client)
    where = ["--endpoint-url", local_sqs.endpoint_url]
    for cli, args in [(app, ["queues"]), (redrive_cli.app, ["run", "--once", "--dlq", "d"])]:
        result = runner.invoke(cli, [*where, *args], env=SECRETS)
        assert isinstance(result.exception, RuntimeError)
        assert_no_secrets(result.stdout, result.stderr)
    assert app.pretty_exceptions_show_locals is False
    assert redrive_cli.app.pretty_exceptions_show_locals is False


@pytest.mark.parametrize("log_format", ["plain", "json", "rich"])
def test_debug_logs_of_both_commands_hold_no_credentials(
    local_sqs: LocalSqs, sqs: Any, name: str, tmp_path: Path, log_format: str
) -> None:
    """botocore logs every request's headers (the signature, the session token) at DEBUG:
    the commands hold the SDK's loggers at WARNING whatever the level asked."""
    (tmp_path / "secrets_handlers.py").write_text("def fail(batch):\n    raise RuntimeError('x')\n")
    sys.path.insert(0, str(tmp_path))
    try:
        source, dlq = make_queues(sqs, name)
        Producer(source, client=sqs).send("m1")
        dead_letter(sqs, dlq, source, [1])
        where = ["--endpoint-url", local_sqs.endpoint_url, "--region", "us-east-1"]
        logs = ["--log-format", log_format, "-vv"]
        consume = ["consume", "secrets_handlers:fail", "-q", source, "--once"]
        quick = ["--idle-seconds", "0.5", "--max-batch-timeout", "0"]
        consumed = runner.invoke(app, [*where, *consume, *quick, *logs], env=SECRETS)
        redriven = runner.invoke(
            redrive_cli.app,
            ["run", "--once", "--dlq", dlq, "--base-delay", "0", "--jitter", "0", *logs, *where],
            env=SECRETS,
        )
    finally:
        sys.path.remove(str(tmp_path))
    for result in (consumed, redriven):
        assert result.exit_code == 0, result.output
        assert "DEBUG" in result.stderr or "debug" in result.stderr
        assert_no_secrets(result.stdout, result.stderr)


# -- receipt handles -----------------------------------------------------------------------------

HANDLE = "AQEB" + "x7Zq" * 60 + "k3Q="


def test_redact_keeps_the_ends_of_a_receipt_handle_and_leaves_ids_and_names() -> None:
    text = f'The input receipt handle "{HANDLE}" is not a valid receipt handle.'
    assert redact(text) == 'The input receipt handle "AQEBx7Zq…k3Q=" is not a valid receipt handle.'
    untouched = "queue " + "q" * 80 + ".fifo, message 0e4c2d7e-6c1a-4b8e-9a53-2f1d5e3c9b71"
    assert redact(untouched) == untouched


def test_an_sqs_error_quoting_a_receipt_handle_is_translated_without_it() -> None:
    message = f'The input receipt handle "{HANDLE}" is not a valid receipt handle.'
    error = {"Error": {"Code": "ReceiptHandleIsInvalid", "Message": message}}
    translated = translate(ClientError(error, "DeleteMessage"), queue="q")
    assert HANDLE not in str(translated) and "AQEBx7Zq…k3Q=" in str(translated)


class Forgetful(ClientProxy):
    """Proxies an SQS client; records every message id and receipt handle received, and purges
    `queue_url` just before the first call of `op`, so that SQS refuses the handles that call
    carries (moto quotes each one in full)."""

    def __init__(self, client: Any, queue_url: str, op: str) -> None:
        super().__init__(client)
        self._queue_url = queue_url
        self._op = op
        self.handles: list[str] = []
        self.ids: list[str] = []
        self.purged = False

    def _call(self, op: str, target: Callable[..., Any], params: dict[str, Any]) -> Any:
        if op == self._op and not self.purged:  # moto: one purge a minute
            self.purged = True
            self._client.purge_queue(QueueUrl=self._queue_url)
        answer = target(**params)
        if op == "receive_message":
            self.handles += [m["ReceiptHandle"] for m in answer.get("Messages", [])]
            self.ids += [m["MessageId"] for m in answer.get("Messages", [])]
        return answer


def logged(caplog: pytest.LogCaptureFixture) -> str:
    """Every record of sqsbatch's and redrive's loggers, with its traceback and fields."""
    return "\n".join(
        f"{record.getMessage()} {record.exc_text or ''} {getattr(record, 'redrive', '')}"
        for record in caplog.records
        if record.name.partition(".")[0] in ("sqsbatch", "redrive")  # ours, not botocore's dumps
    )


def test_the_poller_logs_a_refused_delete_without_the_handle(
    sqs: Any, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    create_queue(name, client=sqs)
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    message_id = Producer(name, client=sqs).send("m1")
    client = Forgetful(sqs, url, "delete_message_batch")
    config = ConsumerConfig(max_batch_timeout=0)
    consumer = Consumer(name, lambda batch: None, config, client=client)
    with caplog.at_level(logging.DEBUG):
        consumer.run_until_idle(0.5)
    [handle] = client.handles
    text = logged(caplog)
    assert "ReceiptHandleIsInvalid" in text and f"{handle[:8]}…{handle[-4:]}" in text
    assert handle not in text
    assert f"message {message_id}: ReceiptHandleIsInvalid" in text  # the settle line names it
    assert consumer.stats.as_dict()["expired_receipts"] == 1


def test_redrive_reports_a_refused_delete_without_the_handle(
    sqs: Any, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [1])
    client = Forgetful(sqs, sqs.get_queue_url(QueueName=dlq)["QueueUrl"], "delete_message_batch")
    with caplog.at_level(logging.DEBUG):
        Redriver(dlq, policy=BackoffPolicy(base_delay=0, jitter=0), client=client).run_once(
            wait_seconds=0
        )
    [handle] = client.handles
    text = logged(caplog)
    assert "ReceiptHandleIsInvalid" in text and handle not in text


def test_the_cli_s_redrive_shows_a_refused_delete_without_the_handle(
    sqs: Any, name: str, local_sqs: LocalSqs, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [1])
    client = Forgetful(sqs, sqs.get_queue_url(QueueName=dlq)["QueueUrl"], "delete_message_batch")
    monkeypatch.setattr(Connection, "client", lambda self, **_: client)
    result = runner.invoke(app, ["--endpoint-url", local_sqs.endpoint_url, "redrive", dlq, "--yes"])
    assert result.exit_code == 1
    [row] = [line for line in result.stdout.splitlines() if "delete failed" in line]
    assert "ReceiptHandleIsInvalid" in row
    [handle] = client.handles
    assert handle not in result.stdout + result.stderr


# -- a failed settle names the message, not its body ---------------------------------------------

BODY = "SECRET-BODY-" + "s3cr3t" * 200


def test_a_dead_letter_copy_too_big_to_send_is_logged_by_id_not_body(
    sqs: Any, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Given a body that fits the queue but not with the failure's metadata added,
    when its last delivery fails, then the log names the message's id and not its body."""
    limits = SqsLimits(max_payload_bytes=len(BODY) + 100)
    source, dlq = make_queues(sqs, name, max_retries=0)
    Producer(source, client=sqs).send(BODY)
    config = ConsumerConfig(max_retries=0, dead_letter_queue=dlq, max_batch_timeout=0)

    def fail(batch: Any) -> None:
        raise RuntimeError("nope")

    client = Forgetful(sqs, "", "no_call")
    consumer = Consumer(source, fail, config, client=client, limits=limits)
    with caplog.at_level(logging.DEBUG):
        consumer.run_until_idle(0.5)
    [message_id] = client.ids
    refused = [r for r in caplog.records if "bytes with its attributes" in r.getMessage()]
    assert [r.levelno for r in refused] == [logging.ERROR]
    assert f"message {message_id} is " in refused[0].getMessage()
    assert "SECRET-BODY" not in logged(caplog) and "s3cr3t" not in logged(caplog)


def test_refusals_name_each_refused_entry_s_message_id_given_the_batch(sqs: Any, name: str) -> None:
    """Given received messages whose receipts SQS refuses (the queue was purged), the refusal
    lines name each message's id and neither its body nor its whole receipt handle."""
    create_queue(name, client=sqs)
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    Producer(name, client=sqs).send_batch([{"body": BODY + "-1"}, {"body": BODY + "-2"}])
    raw = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30)
    received = split_received(
        raw["Messages"], queue_url=url, received_at=0.0, visibility=30, wall_now=time.time()
    )
    batch = MessageBatch(name, received.deliveries)
    sqs.purge_queue(QueueUrl=url)
    deletes = [
        Entry(f"d{i}", "delete_message_batch", url, {"ReceiptHandle": m["ReceiptHandle"]})
        for i, m in enumerate(raw["Messages"])
    ]
    run = SyncSqs(sqs).execute(BatchRun(deletes))
    lines = [text for _, text in refusals(run, batch=batch)]
    assert sorted(line.split(":")[0] for line in lines) == sorted(
        f"message {m.id}" for m in batch.messages
    )
    text = "\n".join(lines)
    assert "s3cr3t" not in text
    assert all(m["ReceiptHandle"] not in text for m in raw["Messages"])
    assert all(line.startswith("ReceiptHandleIsInvalid") for _, line in refusals(run))
