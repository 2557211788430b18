"""`sqsbatch pause` / `resume`, and PAUSED in `sqsbatch queues`, against the local moto server
(SQS and Lambda's event source mappings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sqsbatch import create_queue
from sqsbatch.cli.app import app
from sqsbatch.dev.server import LOCAL_CREDENTIALS, LocalSqs
from tests.support.cli_results import ok, one_line_error
from tests.support.lambdas import mapping, state

runner = CliRunner()


@pytest.fixture
def cli(local_sqs: LocalSqs) -> Any:
    def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
        return runner.invoke(app, ["--endpoint-url", local_sqs.endpoint_url, *args], env=env)

    return invoke


def listed(cli: Any, name: str) -> dict[str, Any]:
    [row] = json.loads(ok(cli("queues", "--prefix", name, "--json")).stdout)
    return dict(row)


def test_pause_for_a_while_shows_in_queues_until_resumed(cli: Any, sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    paused = ok(cli("pause", name, "--for", "15m", "--reason", "db down"))
    line = paused.stdout.splitlines()[0]
    assert line.startswith(f"paused {name} until 20") and line.endswith("Z (db down)")
    assert "Lambda event source mappings not checked" in paused.stderr  # a local SQS
    row = listed(cli, name)
    assert row["paused_until"] == line.split(" until ")[1].split(" ")[0]
    assert row["pause_reason"] == "db down"
    table = ok(cli("queues", "--prefix", name)).stdout
    assert f"PAUSED until {row['paused_until']}" in table
    resumed = ok(cli("resume", name))
    assert resumed.stdout.strip() == f"resumed {name}"
    assert listed(cli, name)["paused_until"] is None
    assert "PAUSED" not in ok(cli("queues", "--prefix", name)).stdout


def test_pause_without_for_lasts_until_resumed(cli: Any, sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    shown = json.loads(ok(cli("pause", name, "--json")).stdout)
    assert shown["paused"] is True and shown["until"] == "indefinitely"
    assert listed(cli, name)["paused_until"] == "indefinitely"


def test_a_queue_consumed_by_lambda_has_its_mappings_switched(
    cli: Any, local_sqs: LocalSqs, sqs: Any, name: str
) -> None:
    create_queue(name, client=sqs)
    uuid = mapping(local_sqs, sqs, name, f"{name}-fn")
    lambda_env = {"AWS_ENDPOINT_URL_LAMBDA": local_sqs.endpoint_url}
    paused = ok(cli("pause", name, env=lambda_env)).stdout.splitlines()
    assert paused[1] == f"  disabled event source mapping {uuid} ({name}-fn)"
    assert state(local_sqs, uuid) == "Disabled"
    resumed = ok(cli("resume", name, "--json", env=lambda_env))
    assert json.loads(resumed.stdout)["mappings_changed"] == [f"{uuid} ({name}-fn)"]
    assert state(local_sqs, uuid) == "Enabled"
    untouched = ok(cli("pause", name, "--no-lambda", env=lambda_env))
    assert "disabled" not in untouched.stdout and state(local_sqs, uuid) == "Enabled"


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--for", "15x"], 2, ("'15x'", "90s, 15m, 2h")),
        (["--for", "30d"], 2, ("'30d'", "14d")),
        (["--reason", "a;b"], 1, ("reason holds ';'",)),
    ],
)
def test_bad_options_are_one_line(
    cli: Any, sqs: Any, name: str, args: list[str], *, code: int, words: tuple[str, ...]
) -> None:
    create_queue(name, client=sqs)
    one_line_error(cli("pause", name, *args), code, *words)
    assert listed(cli, name)["paused_until"] is None


def test_a_missing_queue_is_one_line(cli: Any, name: str) -> None:
    one_line_error(cli("pause", name), 1, name)
    one_line_error(cli("resume", name), 1, name)


SCRIPT = Path(sys.executable).with_name("sqsbatch")


def test_pause_and_resume_as_a_process(local_sqs: LocalSqs, sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    # AWS_ENDPOINT_URL serves SQS and Lambda alike: the pause asks Lambda too (none found)
    env = {**os.environ, **LOCAL_CREDENTIALS, "AWS_ENDPOINT_URL": local_sqs.endpoint_url}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60, check=False
        )

    paused = run("pause", name, "--for", "2h", "--reason", "deploy")
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.startswith(f"paused {name} until ") and paused.stderr == ""
    assert json.loads(run("queues", "--prefix", name, "--json").stdout)[0]["paused_until"]
    bad = run("pause", name, "--for", "soon")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "Traceback" not in bad.stderr
    assert run("resume", name).returncode == 0
    assert json.loads(run("queues", "--prefix", name, "--json").stdout)[0]["paused_until"] is None
