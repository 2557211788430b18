"""Logs an operator can read: `sqsbatch.cli.logs` on its own, then through `consume` and
`redrive run` (typer's CliRunner: stderr is not a terminal, so `auto` is plain)."""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from redrive import cli as redrive_cli
from sqsbatch import Producer, create_queue
from sqsbatch.cli.app import app
from sqsbatch.cli.logs import LogFormat, LogLevel, cli_logging, log_level
from sqsbatch.dev.server import LocalSqs
from tests.support.redrive import dead_letter, make_queues

runner = CliRunner()

ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d"
"""ISO 8601 with milliseconds and a UTC offset."""

HANDLERS = """
import logging

log = logging.getLogger("cli_log_handlers")

def fail(batch):
    for message in batch.messages:
        log.warning("looking at %s\\nsecond line", message.body)
    raise RuntimeError("nope")
"""


def record(message: str, *, exc: bool = False, **extra: Any) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("inner detail")
        except ValueError:
            exc_info = sys.exc_info()
    made = logging.LogRecord("sqsbatch", logging.WARNING, __file__, 1, message, (), exc_info)
    for key, value in extra.items():
        setattr(made, key, value)
    return made


def formatted(log_format: LogFormat, made: logging.LogRecord, capsys: Any) -> str:
    with cli_logging(log_format, logging.INFO):
        logging.getLogger(made.name).handle(made)
    return str(capsys.readouterr().err)


def test_plain_is_one_line_per_record_with_an_iso_time_and_the_traceback_after(
    capsys: pytest.CaptureFixture[str],
) -> None:
    made = record("two\nlines and \x1b[2J" + "x" * 200, exc=True)
    lines = formatted(LogFormat.PLAIN, made, capsys).splitlines()
    assert re.fullmatch(rf"{ISO} WARNING sqsbatch: two\\nlines and \\x1b\[2Jx{{200}}", lines[0])
    assert lines[1] == "Traceback (most recent call last):"
    assert lines[-1] == "ValueError: inner detail"


def test_json_has_the_fields_the_exception_and_redrive_s_fields(
    capsys: pytest.CaptureFixture[str],
) -> None:
    fields = {"action": "moved", "dlq": "orders-dlq", "target": None, "level": "not this"}
    made = record("action=moved dlq=orders-dlq", exc=True, redrive=fields)
    [line] = formatted(LogFormat.JSON, made, capsys).splitlines()
    entry = json.loads(line)
    assert re.fullmatch(ISO, entry["time"])
    assert (entry["level"], entry["logger"]) == ("warning", "sqsbatch")
    assert entry["message"] == "action=moved dlq=orders-dlq"
    assert entry["exception"].startswith("Traceback (most recent call last):")
    assert entry["exception"].endswith("ValueError: inner detail")
    assert (entry["action"], entry["dlq"]) == ("moved", "orders-dlq")
    assert "target" not in entry  # None fields are left out


def test_auto_is_plain_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    assert re.match(rf"{ISO} WARNING", formatted(LogFormat.AUTO, record("hi"), capsys))


@pytest.mark.parametrize(
    ("level", "verbose", "default", "expected"),
    [
        (None, 0, logging.WARNING, logging.WARNING),
        (None, 1, logging.WARNING, logging.INFO),
        (None, 2, logging.WARNING, logging.DEBUG),
        (LogLevel.ERROR, 0, logging.INFO, logging.ERROR),
        (LogLevel.ERROR, 1, logging.WARNING, logging.INFO),  # the more verbose wins
    ],
)
def test_the_level_comes_from_log_level_and_v(
    level: LogLevel | None, verbose: int, default: int, expected: int
) -> None:
    assert log_level(level, verbose, default=default) == expected


def test_the_root_logger_is_restored_and_the_sdk_stays_quiet() -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    with cli_logging(LogFormat.PLAIN, logging.DEBUG):
        assert len(root.handlers) == len(handlers) + 1
        assert logging.getLogger("botocore").getEffectiveLevel() == logging.WARNING
        assert logging.getLogger("user.module").getEffectiveLevel() == logging.DEBUG
    assert (root.handlers, root.level) == (handlers, level)


# -- through the commands ------------------------------------------------------------------------


@pytest.fixture
def failing(local_sqs: LocalSqs, sqs: Any, name: str, tmp_path: Path) -> Any:
    """`consume` of a queue holding one message, with a handler that logs and raises."""
    (tmp_path / "cli_log_handlers.py").write_text(HANDLERS)
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send("m1")

    def consume(*args: str) -> Result:
        return runner.invoke(
            app,
            [
                "--endpoint-url",
                local_sqs.endpoint_url,
                "consume",
                "cli_log_handlers:fail",
                "-q",
                name,
                "--once",
                "--idle-seconds",
                "0.5",
                "--max-batch-timeout",
                "0",
                "--max-retries",
                "0",
                *args,
            ],
        )

    return consume


def test_consume_logs_the_handler_s_own_records_and_the_traceback(failing: Any) -> None:
    result = failing()
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert any(
        re.fullmatch(rf"{ISO} WARNING cli_log_handlers: looking at m1\\nsecond line", line)
        for line in lines
    ), result.stderr
    raised = next(i for i, line in enumerate(lines) if "raised RuntimeError('nope')" in line)
    assert re.match(rf"{ISO} WARNING sqsbatch: ", lines[raised])
    assert lines[raised + 1] == "Traceback (most recent call last):"
    assert "RuntimeError: nope" in lines[raised + 2 :]
    assert " INFO " not in result.stderr  # WARNING and up by default


def test_consume_json_logs_carry_the_traceback_in_a_field(failing: Any) -> None:
    result = failing("--log-format", "json")
    assert result.exit_code == 0, result.output
    entries = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    raised = next(e for e in entries if "raised RuntimeError" in e["message"])
    assert "RuntimeError: nope" in raised["exception"]
    assert any(e["logger"] == "cli_log_handlers" for e in entries)


def test_consume_json_logs_make_every_stderr_line_json_the_banner_too(failing: Any) -> None:
    result = failing("--log-format", "json", "--json")
    assert result.exit_code == 0, result.output
    entries = [json.loads(line) for line in result.stderr.splitlines()]  # each line, JSON
    assert entries[0]["message"].startswith("consuming ") and entries[0]["level"] == "info"
    assert "stall_seconds=" in entries[0]["message"]
    [document] = result.stdout.splitlines()  # --json: one document, on one line
    assert json.loads(document)["stats"]["received"] == 1


def test_consume_json_logs_make_its_error_line_json_too(
    local_sqs: LocalSqs, tmp_path: Path
) -> None:
    (tmp_path / "cli_log_handlers.py").write_text(HANDLERS)
    where = ["--endpoint-url", local_sqs.endpoint_url]
    args = [*where, "consume", "cli_log_handlers:fail", "-q", "no-such-queue", "--once"]
    result = runner.invoke(app, [*args, "--log-format", "json"])
    assert result.exit_code == 1
    *_, last = [json.loads(line) for line in result.stderr.splitlines()]
    assert last["level"] == "error" and "queue does not exist" in last["message"]


def test_consume_v_shows_info_and_log_level_error_hides_warnings(failing: Any) -> None:
    verbose = failing("-v")
    assert re.search(rf"{ISO} INFO sqsbatch: consumer of .* stopped", verbose.stderr)
    quiet = failing("--log-level", "error")
    assert quiet.exit_code == 0, quiet.output
    assert "WARNING" not in quiet.stderr


def redrive_run(local_sqs: LocalSqs, dlq: str, *args: str) -> Result:
    where = ["--endpoint-url", local_sqs.endpoint_url, "--region", "us-east-1"]
    common = ["--once", "--dlq", dlq, "--base-delay", "0", "--jitter", "0"]
    return runner.invoke(redrive_cli.app, ["run", *common, *args, *where])


def test_redrive_run_logs_plain_lines_with_time_level_and_fields(
    sqs: Any, name: str, local_sqs: LocalSqs
) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [1])
    result = redrive_run(local_sqs, dlq)
    assert result.exit_code == 0, result.output
    [line] = result.stderr.splitlines()
    assert re.fullmatch(rf"{ISO} INFO redrive: action=moved dlq={dlq} .*target={source}.*", line)


def test_redrive_run_json_is_a_shorthand_for_json_logs_unless_log_format_says(
    sqs: Any, name: str, local_sqs: LocalSqs
) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [1])
    both = redrive_run(local_sqs, dlq, "--json")
    assert json.loads(both.stdout)["moved"] == 1
    [entry] = [json.loads(line) for line in both.stderr.splitlines()]
    assert (entry["action"], entry["target"], entry["logger"]) == ("moved", source, "redrive")
    assert re.fullmatch(ISO, entry["time"])
    dead_letter(sqs, dlq, source, [2])
    plain = redrive_run(local_sqs, dlq, "--json", "--log-format", "plain")
    assert json.loads(plain.stdout)["moved"] == 1
    assert re.match(rf"{ISO} INFO redrive: action=moved", plain.stderr)
    dead_letter(sqs, dlq, source, [3])
    quiet = redrive_run(local_sqs, dlq, "--log-level", "warning")
    assert quiet.exit_code == 0 and quiet.stderr == ""
