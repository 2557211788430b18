"""`sqsbatch health PATH --max-age SECONDS` and `consume --health-file`, through typer's runner and
as the installed console script (the ECS health check runs the script)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sqsbatch import create_queue
from sqsbatch._shell.health import HealthFile
from sqsbatch.cli.app import app
from sqsbatch.dev.server import LocalSqs
from tests.cli.test_cli_process import SCRIPT, env
from tests.support.cli_results import ok, one_line_error
from tests.support.processes import PIPED, spawned
from tests.support.silent_proxy import SilentProxy, silent_proxy
from tests.support.sqs_helpers import visible
from tests.support.waiting import wait_for

runner = CliRunner()
GUARD_SECONDS = 90.0


def health(path: Path, *extra: str) -> Any:
    return runner.invoke(app, ["health", str(path), *extra])


def touched(path: Path, seconds_ago: float) -> Path:
    path.write_text("")
    then = time.time() - seconds_ago
    os.utime(path, (then, then))
    return path


def test_a_fresh_file_is_healthy(tmp_path: Path) -> None:
    result = ok(health(touched(tmp_path / "h", 1), "--max-age", "30"))
    assert result.stdout.startswith("healthy: ")


def test_a_stale_file_is_exit_1_with_one_line_saying_how_stale(tmp_path: Path) -> None:
    line = one_line_error(health(touched(tmp_path / "h", 125), "--max-age", "60"), 1, "unhealthy")
    assert "last touched 12" in line and "s ago (--max-age 60)" in line


def test_a_missing_file_and_one_not_touched_yet_are_unhealthy(tmp_path: Path) -> None:
    one_line_error(health(tmp_path / "none", "--max-age", "60"), 1, "does not exist")
    HealthFile(tmp_path / "new")  # what a consumer makes at construction
    one_line_error(health(tmp_path / "new", "--max-age", "60"), 1, "not touched yet")


@pytest.mark.parametrize("max_age", ["0", "-5"])
def test_a_max_age_that_is_not_positive_is_a_usage_error(tmp_path: Path, max_age: str) -> None:
    one_line_error(health(touched(tmp_path / "h", 0), "--max-age", max_age), 2, "--max-age")


def test_max_age_is_required(tmp_path: Path) -> None:
    assert health(touched(tmp_path / "h", 0)).exit_code == 2


def test_the_console_script_exits_0_then_1(tmp_path: Path) -> None:
    path = touched(tmp_path / "h", 0)
    fresh = subprocess.run(
        [str(SCRIPT), "health", str(path), "--max-age", "60"], capture_output=True, check=False
    )
    assert fresh.returncode == 0, fresh.stderr
    touched(path, 120)
    stale = subprocess.run(
        [str(SCRIPT), "health", str(path), "--max-age", "60"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert stale.returncode == 1 and stale.stderr.count("\n") == 1
    assert "unhealthy" in stale.stderr and "Traceback" not in stale.stderr


@pytest.mark.parametrize("kind", [[], ["--async"]])
def test_consume_refuses_a_bad_health_file_before_it_starts(
    local_sqs: LocalSqs, tmp_path: Path, name: str, kind: list[str]
) -> None:
    create_queue(name, client=local_sqs.client())
    args = consume_once(local_sqs, tmp_path, name, *kind)
    result = runner.invoke(app, [*args, "--health-file", str(tmp_path / "no" / "h")])
    one_line_error(result, 1, "health_file=", "no directory")
    assert "consuming" not in result.stderr


@pytest.mark.parametrize("value", ["0", "soon"])
def test_consume_refuses_a_bad_stall_seconds(
    local_sqs: LocalSqs, tmp_path: Path, name: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SQSBATCH_STALL_SECONDS", value)
    result = runner.invoke(app, consume_once(local_sqs, tmp_path, name))
    one_line_error(result, 1, "stall_seconds=")


def consume_once(local_sqs: LocalSqs, folder: Path, name: str, *extra: str) -> list[str]:
    """`consume --once` of a handler that does nothing, from a file in `folder`, on the local
    endpoint; `--async` in `extra` makes it an `async def`."""
    where = ["--endpoint-url", local_sqs.endpoint_url, "--region", "us-east-1"]
    spec = handler_file(folder, is_async="--async" in extra)
    return [*where, "consume", spec, "--queue", name, "--once", *extra]


def handler_file(folder: Path, *, is_async: bool) -> str:
    """A handler in a file of a name no other test imported (modules are cached by name)."""
    stem = f"jobs_{uuid.uuid4().hex[:8]}"
    source = (
        "async def handle(batch):\n    pass\n" if is_async else "def handle(batch):\n    pass\n"
    )
    (folder / f"{stem}.py").write_text(source)
    return f"{folder / stem}.py:handle"


def watched_through(proxy: SilentProxy, **extra: str) -> dict[str, str]:
    """The environment of a `consume` that reaches SQS through `proxy`, with its watchdog set
    short (3 s) and read timeouts 1 s past a long poll; `extra` on top."""
    return env(
        None,
        AWS_ENDPOINT_URL_SQS=proxy.endpoint_url,
        SQSBATCH_STALL_SECONDS="3",
        SQSBATCH_READ_TIMEOUT_MARGIN="1",
        **extra,
    )


def script_health(path: Path) -> int:
    args = [str(SCRIPT), "health", str(path), "--max-age", "2"]
    return subprocess.run(args, capture_output=True, check=False).returncode


@pytest.mark.parametrize("kind", [[], ["--async"]])
def test_consume_whose_endpoint_stops_answering_fails_its_health_check_and_exits_non_zero(
    local_sqs: LocalSqs, tmp_path: Path, name: str, kind: list[str]
) -> None:
    # Given `sqsbatch consume --health-file`, through a proxy, with the watchdog set short
    create_queue(name, client=local_sqs.client())
    path = tmp_path / "health"
    with silent_proxy(local_sqs.endpoint_url) as proxy:
        environment = watched_through(proxy)
        spec = handler_file(tmp_path, is_async=bool(kind))
        command = [str(SCRIPT), "consume", spec, "--queue", name, "--poll-seconds", "1"]
        with spawned(
            [*command, *kind, "--health-file", str(path)],
            cwd=tmp_path,
            env=environment,
            **PIPED,
        ) as process:
            wait_for(lambda: script_health(path) == 0, "the file fresh")
            # When the endpoint accepts connections and never answers
            proxy.silence()
            # Then the health check fails and the process exits non-zero, saying why
            wait_for(lambda: script_health(path) == 1, "sqsbatch health fails")
            _, stderr = process.communicate(timeout=GUARD_SECONDS)
    assert process.returncode == 1, stderr
    assert "stalled" in stderr and "Traceback" not in stderr


def test_consume_refuses_a_stall_seconds_flag_of_0(
    local_sqs: LocalSqs, tmp_path: Path, name: str
) -> None:
    args = consume_once(local_sqs, tmp_path, name, "--stall-seconds", "0")
    one_line_error(runner.invoke(app, args), 2, "--stall-seconds")


HELD_HANDLER = """
import os, time
def handle(batch):
    open("held", "w").close()
    while not os.path.exists("release"):
        time.sleep(0.05)
"""
HELD_ASYNC_HANDLER = """
import asyncio, os
async def handle(batch):
    open("held", "w").close()
    while not os.path.exists("release"):
        await asyncio.sleep(0.05)
"""


@pytest.mark.parametrize("kind", [[], ["--async"]])
def test_consume_caught_settling_by_a_silent_endpoint_exits_with_its_stats_and_loses_nothing(
    local_sqs: LocalSqs, tmp_path: Path, name: str, kind: list[str]
) -> None:
    # Given `sqsbatch consume` holding a batch, through a proxy, with the watchdog set short
    client = local_sqs.client()
    url = create_queue(name, client=client)
    client.send_message(QueueUrl=url, MessageBody="caught")
    (tmp_path / "held_jobs.py").write_text(HELD_ASYNC_HANDLER if kind else HELD_HANDLER)
    with silent_proxy(local_sqs.endpoint_url) as proxy:
        environment = watched_through(proxy, SQSBATCH_VISIBILITY_TIMEOUT="5")
        command = [str(SCRIPT), "consume", "held_jobs.py:handle", "--queue", name, *kind]
        with spawned(
            [*command, "--poll-seconds", "1", "--json"],
            cwd=tmp_path,
            env=environment,
            **PIPED,
        ) as process:
            wait_for((tmp_path / "held").exists, "the handler holds the batch")
            # When the endpoint goes silent just as the batch's delete goes out
            proxy.silence()
            (tmp_path / "release").touch()
            # Then the process exits 1, saying why, after printing its stats
            stdout, stderr = process.communicate(timeout=GUARD_SECONDS)
    assert process.returncode == 1, stderr
    assert "stalled" in stderr.splitlines()[-1] and "Traceback" not in stderr
    assert "stall_seconds=3" in stderr.splitlines()[0]  # the banner's effective value
    stats = json.loads(stdout)["stats"]
    assert stats["received"] == 1 and stats["acked"] == 0
    # and the message, not deleted, is back once its visibility timeout is over
    wait_for(lambda: visible(client, name) == 1, "the message visible again")


@pytest.mark.parametrize("kind", [[], ["--async"]])
def test_consume_shows_the_default_stall_seconds_in_its_banner(
    local_sqs: LocalSqs, tmp_path: Path, name: str, kind: list[str]
) -> None:
    create_queue(name, client=local_sqs.client())
    args = consume_once(local_sqs, tmp_path, name, "--poll-seconds", "1", *kind)
    result = ok(runner.invoke(app, [*args, "--idle-seconds", "0.5"]))
    banner = result.stderr.splitlines()[0]
    assert "stall_seconds=33 (default)" in banner  # three 1 s polls + 30 s visibility
