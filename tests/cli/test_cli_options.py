"""The global options of both apps: before or after the command, `--json`, `--version`, `-h`,
an endpoint without a scheme, an endpoint where nothing listens, and full-width tables in a pipe.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from redrive import cli as redrive_cli
from sqsbatch import __version__, create_queue
from sqsbatch._shell.botocore import client_config, sqs_errors
from sqsbatch.cli.app import app
from sqsbatch.cli.common import CONNECT_ATTEMPTS, CONNECT_TIMEOUT_SECONDS, Connection
from sqsbatch.cli.options import hoist
from sqsbatch.dev.server import LOCAL_CREDENTIALS, LocalSqs
from sqsbatch.errors import SqsError
from tests.support.cli_results import one_line_error
from tests.support.redrive import dead_letter, make_queues

runner = CliRunner()
BIN = Path(sys.executable).parent


def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# -- the reordering itself (pure) ------------------------------------------------------------

GROUP = {"--endpoint-url": 1, "--region": 1, "--profile": 1, "--json": 0, "--version": 0}
COMMANDS = {
    "send": {"--delay": 1, "-a": 1, "--attribute": 1, "--text": 0},
    "inspect": {"--json": 0, "--limit": 1},  # declares its own --json
}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["send", "q", "x", "--json"], ["--json", "send", "q", "x"]),
        (
            ["send", "q", "--endpoint-url", "http://h:1", "x", "--region=eu-west-1"],
            ["--endpoint-url", "http://h:1", "--region=eu-west-1", "send", "q", "x"],
        ),
        # a value of the command's own option is never taken for a global option
        (["send", "q", "-a", "--json", "x"], ["send", "q", "-a", "--json", "x"]),
        (
            ["send", "q", "--attribute=--json", "--text"],
            ["send", "q", "--attribute=--json", "--text"],
        ),
        # after `--`, everything is an argument
        (["send", "q", "--", "--json"], ["send", "q", "--", "--json"]),
        # a command's own --json stays with it, and goes to it from before the command
        (["inspect", "q", "--json"], ["inspect", "q", "--json"]),
        (["--json", "inspect", "q"], ["inspect", "--json", "q"]),
        # options before the command, with their values, are found as such
        (["--region", "send", "send", "q", "--json"], ["--region", "send", "--json", "send", "q"]),
        # unknown commands and no command are left for the parser to refuse
        (["nope", "--json"], ["nope", "--json"]),
        (["--json"], ["--json"]),
    ],
)
def test_hoist_moves_global_options_before_the_command(
    args: list[str], expected: list[str]
) -> None:
    assert hoist(args, GROUP, COMMANDS.get) == expected


# -- sqsbatch --------------------------------------------------------------------------------


def test_global_options_work_after_the_command(local_sqs: LocalSqs, name: str) -> None:
    where = ["--endpoint-url", local_sqs.endpoint_url, "--region", "us-east-1"]
    created = runner.invoke(app, ["create", name, *where, "--json"])
    assert created.exit_code == 0, created.output
    assert json.loads(created.stdout)["queue"]["action"] == "created"
    sent = runner.invoke(app, ["send", name, "hi", f"--endpoint-url={local_sqs.endpoint_url}"])
    assert sent.exit_code == 0, sent.output
    assert len(sent.stdout.strip()) == 36  # the id, as text without --json
    as_json = runner.invoke(app, ["--json", "send", name, "again", *where])
    assert as_json.exit_code == 0, as_json.output
    assert set(json.loads(as_json.stdout)) == {"message_id"}
    listed = runner.invoke(app, ["queues", "--prefix", name, *where, "--json"])
    assert [row["visible"] for row in json.loads(listed.stdout)] == [2]


def test_a_profile_after_the_command_is_used(local_sqs: LocalSqs) -> None:
    result = runner.invoke(
        app, ["queues", "--endpoint-url", local_sqs.endpoint_url, "--profile", "no-such-profile"]
    )
    one_line_error(result, 1, "no-such-profile")


def test_a_global_option_without_its_value_is_a_usage_error() -> None:
    one_line_error(runner.invoke(app, ["queues", "--endpoint-url"]), 2, "--endpoint-url")


@pytest.mark.parametrize("program", ["sqsbatch", "redrive"])
def test_both_apps_have_version_and_short_help(program: str) -> None:
    target = app if program == "sqsbatch" else redrive_cli.app
    version = runner.invoke(target, ["--version"])
    assert version.exit_code == 0 and version.stdout.strip() == f"{program} {__version__}"
    short = runner.invoke(target, ["-h"])
    assert short.exit_code == 0 and "--endpoint-url" in short.stdout


# -- endpoints -------------------------------------------------------------------------------


@pytest.mark.parametrize("program", ["sqsbatch", "redrive"])
def test_an_endpoint_flag_without_a_scheme_is_one_line(program: str) -> None:
    target = app if program == "sqsbatch" else redrive_cli.app
    command = ["queues"] if program == "sqsbatch" else ["run", "--once", "--dlq", "d"]
    result = runner.invoke(target, [*command, "--endpoint-url", "127.0.0.1:4566"])
    one_line_error(result, 2, "'127.0.0.1:4566' has no scheme", "http://127.0.0.1:4566")


@pytest.mark.parametrize("variable", ["AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL"])
def test_an_endpoint_variable_without_a_scheme_is_one_line(variable: str) -> None:
    env = {"AWS_ENDPOINT_URL_SQS": None, variable: "127.0.0.1:4566"}
    result = runner.invoke(app, ["queues"], env=env)
    one_line_error(result, 1, "'127.0.0.1:4566' has no scheme", variable)


MALFORMED = [
    ("http://127.0.0.1:99999", "has a port out of range (accepted: 0..65535)"),
    ("http://[::1", "has an IPv6 address that is not closed"),
    ("http://exa mple.com", "has a space"),
    ("ftp://127.0.0.1:4566", "has the scheme 'ftp'"),
]


@pytest.mark.parametrize("program", ["sqsbatch", "redrive"])
@pytest.mark.parametrize(("url", "says"), MALFORMED)
def test_a_malformed_endpoint_flag_is_one_line_saying_what_is_wrong(
    program: str, url: str, says: str
) -> None:
    target = app if program == "sqsbatch" else redrive_cli.app
    command = ["queues"] if program == "sqsbatch" else ["run", "--once", "--dlq", "d"]
    result = runner.invoke(target, [*command, "--endpoint-url", url])
    line = one_line_error(result, 2, repr(url), says)
    assert "no scheme" not in line


@pytest.mark.parametrize("command", [["queues"], ["consume", "x:y", "-q", "q", "--async"]])
@pytest.mark.parametrize(("url", "says"), MALFORMED)
def test_a_malformed_endpoint_variable_is_one_line_saying_what_is_wrong(
    command: list[str], url: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "x.py").write_text("async def y(batch):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, command, env={"AWS_ENDPOINT_URL_SQS": url})
    one_line_error(result, 1, repr(url), says, "AWS_ENDPOINT_URL_SQS")


def test_the_cli_client_connects_briefly_and_tries_twice_when_nothing_listens() -> None:
    # Given a command line client for a port where nothing listens
    client = Connection(f"http://127.0.0.1:{closed_port()}", "us-east-1").client()
    attempts: list[str] = []
    client.meta.events.register("before-send.sqs", lambda **_: attempts.append("sent"))
    # When a request cannot connect
    with pytest.raises(SqsError, match="cannot reach SQS"), sqs_errors():
        client.list_queues()
    # Then it gave up after CONNECT_ATTEMPTS tries (botocore's standard mode alone makes 6),
    # each with a short connect timeout; other errors keep the library's retries
    assert len(attempts) == CONNECT_ATTEMPTS
    assert client.meta.config.connect_timeout == CONNECT_TIMEOUT_SECONDS
    library = boto3.session.Session().client("sqs", "us-east-1", config=client_config())
    assert client.meta.config.retries == library.meta.config.retries


def env(**extra: str) -> dict[str, str]:
    found = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    return {**found, **LOCAL_CREDENTIALS, **extra}


@pytest.mark.parametrize(
    "command",
    [
        ["sqsbatch", "queues", "--endpoint-url", "{url}"],
        ["redrive", "run", "--once", "--dlq", "d", "--endpoint-url", "{url}", "--json"],
    ],
)
def test_the_scripts_fail_with_one_line_when_nothing_listens(command: list[str]) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    args = [str(BIN / command[0]), *(arg.format(url=url) for arg in command[1:])]
    done = subprocess.run(args, env=env(), capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.strip().splitlines()
    if command[0] == "redrive":  # --json: its logs are JSON, and so is the error line
        entry = json.loads(line)
        assert entry["level"] == "error"
        line = f"error: {entry['message']}"
    assert line == (
        f"error: cannot reach SQS{' (d)' if command[0] == 'redrive' else ''}: "
        f'Could not connect to the endpoint URL: "{url}/"'
    )
    assert done.stdout == ""


# -- redrive ---------------------------------------------------------------------------------


def test_redrive_takes_the_global_options_before_the_command(
    sqs: Any, name: str, local_sqs: LocalSqs
) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [1])
    where = ["--endpoint-url", local_sqs.endpoint_url, "--region", "us-east-1", "--json"]
    result = runner.invoke(
        redrive_cli.app, [*where, "run", "--once", "--dlq", dlq, "--base-delay", "0"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.strip().splitlines()[-1])["moved"] == 1


def test_redrive_errors_read_like_sqsbatch_errors() -> None:
    one_line_error(runner.invoke(redrive_cli.app, ["run", "--nope"]), 2, "--nope")
    one_line_error(runner.invoke(redrive_cli.app, ["nope"]), 2, "nope")


def test_the_redrive_script_reads_options_after_the_command(
    sqs: Any, name: str, local_sqs: LocalSqs
) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [2])
    command = [str(BIN / "redrive"), "run", "--once", "--dlq", dlq, "--base-delay", "0"]
    where = [f"--endpoint-url={local_sqs.endpoint_url}", "--region", "us-east-1", "--json"]
    done = subprocess.run(
        [*command, *where], env=env(), capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["moved"] == 1


# -- tables in a pipe ------------------------------------------------------------------------


def long_queues(sqs: Any, name: str) -> list[str]:
    """Three queues with long names (SQS allows 80 characters), the first with the second as
    its DLQ (max retries 3)."""
    stem = f"{name}-a-rather-long-queue-name-for-the-table"[:70]
    names = [f"{stem}-{i}" for i in range(3)]
    create_queue(names[0], dead_letter_queue=names[1], max_retries=3, client=sqs)
    create_queue(names[2], client=sqs)
    return names


def assert_whole_rows(stdout: str, names: list[str]) -> None:
    lines = stdout.splitlines()
    row = next(line for line in lines if names[0] in line and "DLQ" not in line)
    assert names[1] in row and "3" in row.split()  # name, DLQ and max retries on one line
    for queue in names[1:]:
        assert any(queue in line for line in lines), stdout
    assert max(len(line) for line in lines) > 160  # printed at its width, not folded at 80


def test_tables_are_printed_whole_through_the_runner(
    sqs: Any, name: str, local_sqs: LocalSqs
) -> None:
    names = long_queues(sqs, name)
    result = runner.invoke(
        app, ["--endpoint-url", local_sqs.endpoint_url, "queues", "--prefix", name], env={}
    )
    assert result.exit_code == 0, result.output
    assert_whole_rows(result.stdout, names)


def test_tables_are_printed_whole_into_a_pipe(sqs: Any, name: str, local_sqs: LocalSqs) -> None:
    names = long_queues(sqs, name)
    done = subprocess.run(
        [str(BIN / "sqsbatch"), "queues", "--prefix", name],
        env=env(AWS_ENDPOINT_URL_SQS=local_sqs.endpoint_url, COLUMNS="80"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert_whole_rows(done.stdout, names)
