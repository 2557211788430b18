"""`redrive run` through typer's CliRunner and once as a real subprocess, against moto's server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from typer.testing import CliRunner

from redrive import cli
from redrive.settings import RedriveSettings
from sqsbatch.dev.server import LocalSqs
from sqsbatch.errors import ConfigError
from tests.support.processes import PIPED, spawned
from tests.support.redrive import bodies, dead_letter, make_queues
from tests.support.sqs_helpers import depth
from tests.support.waiting import wait_for

runner = CliRunner()


def invoke(local_sqs: LocalSqs, *args: str) -> Any:
    where = ["--endpoint-url", local_sqs.endpoint_url, "--region", "us-east-1"]
    return runner.invoke(cli.app, ["run", *args, *where])


def test_run_once_moves_what_is_due_and_prints_counters(
    sqs: Any, name: str, local_sqs: LocalSqs
) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [1, 2])
    result = invoke(
        local_sqs, "--once", "--dlq", dlq, "--base-delay", "0", "--jitter", "0", "--json"
    )
    assert result.exit_code == 0, result.output
    counters = json.loads(result.stdout.strip().splitlines()[-1])
    assert (counters["moved"], counters["delayed"], counters["failed"]) == (2, 0, 0)
    assert counters["requests"] > 0
    logged = [json.loads(line) for line in result.stderr.splitlines()]
    assert [entry["action"] for entry in logged] == ["moved", "moved"]
    assert {entry["target"] for entry in logged} == {source}
    assert bodies(sqs, source) == [1, 2]


def test_settings_come_from_the_file_and_the_environment(
    sqs: Any, name: str, local_sqs: LocalSqs, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [1], redrives=1)
    Path("sqsbatch.toml").write_text(f'[redrive]\ndlqs = ["{dlq}"]\nbase_delay = 0\njitter = 0\n')
    monkeypatch.setenv("REDRIVE_MAX_REDRIVES", "1")
    result = invoke(local_sqs, "--once")
    assert result.exit_code == 0, result.output
    assert "exhausted" in result.stdout
    assert "action=exhausted" in result.stderr
    assert depth(sqs, dlq) == 1


def test_settings_precedence_flags_env_sqsbatch_env_file(monkeypatch: pytest.MonkeyPatch) -> None:
    Path("sqsbatch.toml").write_text("[redrive]\nbase_delay = 1\nfactor = 3\nmax_redrives = 7\n")
    monkeypatch.setenv("SQSBATCH_REDRIVE_FACTOR", "4")
    monkeypatch.setenv("SQSBATCH_REDRIVE_MAX_REDRIVES", "8")
    monkeypatch.setenv("REDRIVE_MAX_REDRIVES", "9")
    monkeypatch.setenv("REDRIVE_DLQS", "a-dlq, b-dlq")
    settings = RedriveSettings(rate=5)
    assert (settings.base_delay, settings.factor, settings.max_redrives) == (1, 4, 9)
    assert (settings.dlqs, settings.rate) == (["a-dlq", "b-dlq"], 5)


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ("max_delay = -3", "max_delay=-3.0 is invalid (accepted: seconds 0..1209600)"),
        ("rate = 0", "rate=0 is invalid: input should be greater than 0"),
        ("surprise = 1", "unknown redrive setting 'surprise'"),
    ],
)
def test_bad_settings_in_the_file_fail_with_one_line(table: str, says: str) -> None:
    Path("sqsbatch.toml").write_text(f"[redrive]\n{table}\n")
    with pytest.raises(ConfigError) as caught:
        RedriveSettings()
    assert says in str(caught.value)


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["--factor", "0.5"], 2, "error: Invalid value for '--factor'"),
        (["--base-delay", "soon"], 2, "error: Invalid value for '--base-delay'"),
        (["--jitter", "-1"], 2, "error: Invalid value for '--jitter'"),
        ([], 1, "error: no DLQ given: pass --dlq QUEUE (or REDRIVE_DLQS, or [redrive] dlqs)"),
    ],
)
def test_bad_flags_print_one_line_and_exit_non_zero(
    local_sqs: LocalSqs, args: list[str], code: int, says: str
) -> None:
    dlq = ["--dlq", "some-dlq"] if args else []
    result = invoke(local_sqs, "--once", *dlq, *args)
    assert result.exit_code == code
    assert result.stderr.strip().startswith(says)
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_an_unknown_dlq_is_one_line(local_sqs: LocalSqs, name: str) -> None:
    result = invoke(local_sqs, "--once", "--dlq", f"{name}-nope")
    assert result.exit_code == 1
    assert result.stderr.strip() == f"error: queue does not exist ({name}-nope)"


def test_missing_credentials_are_one_line(
    local_sqs: LocalSqs, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    result = invoke(local_sqs, "--once", "--dlq", "any-dlq")
    assert result.exit_code == 1
    assert result.stderr.strip().startswith("error: no AWS credentials found")


def test_native_asks_sqs_for_a_move_task(monkeypatch: pytest.MonkeyPatch) -> None:
    # moto has no StartMessageMoveTask: the request is checked with botocore's Stubber.
    client = boto3.session.Session().client("sqs", region_name="us-east-1")
    stubber = Stubber(client)
    arn = "arn:aws:sqs:us-east-1:123456789012:orders-dlq"
    expected = {"SourceArn": arn, "MaxNumberOfMessagesPerSecond": 10}
    stubber.add_response("start_message_move_task", {"TaskHandle": "task-9"}, expected)
    monkeypatch.setattr(cli, "make_client", lambda settings, profile=None: client)
    with stubber:
        result = runner.invoke(cli.app, ["run", "--native", "--dlq", arn, "--rate", "10", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"tasks": {arn: "task-9"}}
    stubber.assert_no_pending_responses()


def test_the_redrive_script_runs_as_a_subprocess(sqs: Any, name: str, local_sqs: LocalSqs) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [3])
    script = Path(sys.executable).parent / "redrive"
    env = {**os.environ, **local_sqs.environment(), "REDRIVE_BASE_DELAY": "0"}
    done = subprocess.run(
        [str(script), "run", "--once", "--dlq", dlq, "--jitter", "0", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["moved"] == 1
    assert '"action": "moved"' in done.stderr
    assert bodies(sqs, source) == [3]


def test_sigterm_stops_the_daemon_gracefully(sqs: Any, name: str, local_sqs: LocalSqs) -> None:
    # Given `redrive run` (forever) with a short long poll, moving one message
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [4])
    script = Path(sys.executable).parent / "redrive"
    env = {**os.environ, **local_sqs.environment(), "REDRIVE_WAIT_SECONDS": "1"}
    command = [str(script), "run", "--dlq", dlq, "--base-delay", "0", "--jitter", "0", "--json"]
    with spawned(command, env=env, **PIPED) as daemon:
        wait_for(lambda: depth(sqs, source) > 0, "the daemon moved the message")
        # When it gets SIGTERM
        daemon.send_signal(signal.SIGTERM)
        out, errors = daemon.communicate(timeout=30)
    # Then it finishes, exits 0 and prints its counters
    assert daemon.returncode == 0, errors
    assert json.loads(out)["moved"] == 1
    assert "SIGTERM" in errors
