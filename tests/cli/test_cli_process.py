"""The installed `sqsbatch` console script as a subprocess: exit codes, `dev`, signals."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from sqsbatch import Producer, create_queue
from sqsbatch.dev.server import LOCAL_CREDENTIALS, LocalSqs
from tests.support.processes import PIPED, spawned
from tests.support.sqs_helpers import depth
from tests.support.waiting import GUARD_SECONDS, wait_for

SCRIPT = Path(sys.executable).with_name("sqsbatch")


def test_the_console_script_is_installed() -> None:
    """`pip install` must put the entry point next to the interpreter; never skip past that."""
    assert SCRIPT.exists(), f"{SCRIPT} is missing: the sqsbatch console script is not installed"


def env(local_sqs: LocalSqs | None = None, **extra: str) -> dict[str, str]:
    found = {**os.environ, **LOCAL_CREDENTIALS, "COLUMNS": "200", **extra}
    if local_sqs is not None:
        found["AWS_ENDPOINT_URL_SQS"] = local_sqs.endpoint_url
    return found


def run(*args: str, environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args],
        check=False,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_script_runs_commands_and_prints_json(local_sqs: LocalSqs, name: str) -> None:
    environment = env(local_sqs)
    assert run("create", name, environment=environment).returncode == 0
    assert run("send", name, '{"hello": "world"}', environment=environment).returncode == 0
    listed = run("queues", "--prefix", name, "--json", environment=environment)
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    assert row["name"] == name and row["visible"] == 1


def test_the_script_exits_1_with_one_line_for_a_missing_queue(local_sqs: LocalSqs) -> None:
    result = run("inspect", "no-such-queue", environment=env(local_sqs))
    assert result.returncode == 1
    assert result.stderr.strip() == "error: queue does not exist (no-such-queue)"
    assert result.stdout == ""


def test_the_script_exits_2_for_a_usage_error() -> None:
    result = run("inspect", "q", "--limit", "nope", environment=env())
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and "--limit" in line


@pytest.fixture
def dev_server() -> Iterator[tuple[subprocess.Popen[str], str]]:
    with spawned(
        [str(SCRIPT), "dev", "--port", "0"],
        env=env(),
        **PIPED,
    ) as process:
        assert process.stdout is not None
        first = process.stdout.readline().strip()
        assert first.startswith("export AWS_ENDPOINT_URL_SQS=http://127.0.0.1:"), first
        yield process, first.split("=", 1)[1]


def test_dev_serves_sqs_until_sigint(dev_server: tuple[subprocess.Popen[str], str]) -> None:
    process, endpoint = dev_server
    client = boto3.session.Session().client(
        "sqs",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    url = client.create_queue(QueueName="dev-check")["QueueUrl"]
    client.send_message(QueueUrl=url, MessageBody="hi")
    [message] = client.receive_message(QueueUrl=url)["Messages"]
    assert message["Body"] == "hi"
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=15) == 0
    assert process.stdout is not None
    exports = process.stdout.read()
    assert "export AWS_ACCESS_KEY_ID=local" in exports
    assert "Traceback" not in (process.stderr.read() if process.stderr else "")


def test_dev_on_a_busy_port_is_one_line(local_sqs: LocalSqs) -> None:
    port = local_sqs.endpoint_url.rsplit(":", 1)[1]
    result = run("dev", "--port", port, environment=env())
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and port in line


@pytest.mark.parametrize("logs", [[], ["--log-format", "json"]], ids=["auto", "json"])
def test_consume_stops_gracefully_on_sigterm(
    local_sqs: LocalSqs, sqs: Any, name: str, tmp_path: Path, logs: list[str]
) -> None:
    (tmp_path / "slow_handlers.py").write_text(
        "import pathlib\n"
        "def handle(batch):\n"
        "    pathlib.Path('seen').write_text(str(len(batch.messages)))\n"
    )
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": i} for i in range(3)])
    with spawned(
        [
            str(SCRIPT),
            "consume",
            "slow_handlers:handle",
            "--queue",
            name,
            "--max-batch-timeout",
            "0.2",
            "--poll-seconds",
            "1",
            "--json",
            *logs,
        ],
        env=env(local_sqs),
        cwd=tmp_path,
        **PIPED,
    ) as process:
        wait_for((tmp_path / "seen").exists, "the handler ran")
        wait_for(lambda: depth(sqs, name) == 0, "the queue drained")
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert json.loads(stdout)["stats"]["acked"] == 3
    if logs:  # every line on stderr is JSON: the banner and what the stop waits for too
        entries = [json.loads(line) for line in stderr.splitlines()]
        assert entries[0]["message"].startswith(f"consuming {name} with ")
        assert any(e["message"].startswith("SIGTERM: stopping") for e in entries), stderr


def test_dev_logs_a_failed_request_in_one_line_and_a_bad_region_fails_at_once(
    dev_server: tuple[subprocess.Popen[str], str],
) -> None:
    # Given `sqsbatch dev`, and a command for a region moto does not serve (it answers 500)
    process, endpoint = dev_server
    result = run("--endpoint-url", endpoint, "--region", "nowhere-9", "queues", environment=env())
    # Then the command fails in one line, after one request (no retries of moto's 500)
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and "HTTP 500" in line, line
    # and the server logged that request in one line, not moto's traceback
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=15) == 0
    assert process.stderr is not None
    logged = process.stderr.read()
    assert "Traceback" not in logged, logged
    [failed] = [row for row in logged.splitlines() if "request failed" in row]
    assert "KeyError: 'nowhere-9'" in failed and "region" in failed


def test_spawned_kills_and_reaps_a_child_left_running_when_its_block_fails() -> None:
    # Given a child that would run for ten minutes, and a block that fails while it runs
    children: list[subprocess.Popen[Any]] = []

    def fail_while_it_runs() -> None:
        sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
        with contextlib.suppress(RuntimeError), spawned(sleeper) as child:
            children.append(child)
            raise RuntimeError("the test failed")

    leaving = threading.Thread(target=fail_while_it_runs, daemon=True)
    leaving.start()
    leaving.join(GUARD_SECONDS)  # a hang guard: without the kill, leaving waits for the child
    # Then leaving the block killed the child and reaped it
    assert not leaving.is_alive()
    assert children[0].returncode == -signal.SIGKILL
