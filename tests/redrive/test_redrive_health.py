"""The redrive daemon's health file: touched after every completed receive (an empty long poll
too), checked by `sqsbatch health`; a bad path is one error before anything starts."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from redrive import Redriver, cli
from redrive.watchdog import Watchdog
from sqsbatch._shell.health import age_seconds
from sqsbatch._sync.flavour import default_client
from sqsbatch.cli.app import app
from sqsbatch.dev.server import LocalSqs
from sqsbatch.errors import ConfigError, SqsBatchError
from tests.cli.test_cli_process import SCRIPT, env
from tests.support.cli_results import ok, one_line_error
from tests.support.processes import PIPED, spawned
from tests.support.redrive import make_queues
from tests.support.silent_proxy import silent_proxy
from tests.support.waiting import wait_for

GUARD_SECONDS = 60.0


def test_the_daemon_touches_its_health_file_after_empty_long_polls(
    sqs: Any, name: str, tmp_path: Path
) -> None:
    # Given an empty DLQ and a daemon with a health file
    _, dlq = make_queues(sqs, name)
    path = tmp_path / "health"
    redriver = Redriver(dlq, client=sqs, wait_seconds=1, health_file=path)
    assert redriver.health_file == path
    assert age_seconds(path, time.time()) is None  # made stale: not touched yet
    thread = threading.Thread(target=redriver.run, daemon=True)
    thread.start()
    # When it has long-polled a few times
    wait_for(lambda: age_seconds(path, time.time()) is not None, "a first touch")
    first = os.stat(path).st_mtime_ns
    wait_for(lambda: os.stat(path).st_mtime_ns > first, "a later touch")
    # Then `sqsbatch health` says it is healthy
    ok(CliRunner().invoke(app, ["health", str(path), "--max-age", "30"]))
    redriver.stop()
    thread.join(GUARD_SECONDS)
    assert not thread.is_alive()


def test_redrive_run_once_with_health_file_touches_it(
    local_sqs: LocalSqs, sqs: Any, name: str, tmp_path: Path
) -> None:
    _, dlq = make_queues(sqs, name)
    path = tmp_path / "health"
    where = ["--endpoint-url", local_sqs.endpoint_url, "--region", "us-east-1"]
    args = ["run", "--dlq", dlq, "--once", "--health-file", str(path), *where]
    ok(CliRunner().invoke(cli.app, args))
    assert age_seconds(path, time.time()) is not None


@pytest.mark.parametrize(("where", "says"), [("missing/h", "no directory"), (".", "directory")])
def test_a_bad_health_file_is_refused_before_anything_starts(
    local_sqs: LocalSqs, where: str, says: str, tmp_path: Path
) -> None:
    path = tmp_path / where
    with pytest.raises(ConfigError, match=says):
        Redriver("some-dlq", client=object(), health_file=path)
    endpoint = ["--endpoint-url", local_sqs.endpoint_url, "--region", "us-east-1"]
    args = ["run", "--dlq", "never-looked-up", "--health-file", str(path), *endpoint]
    one_line_error(CliRunner().invoke(cli.app, args), 1, "health_file=", says)


# -- the watchdog ------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_watchdog_fires_once_no_receive_completed_for_stall_seconds_unless_busy() -> None:
    clock = FakeClock()
    quiet: list[float] = []
    watchdog = Watchdog(10, clock=clock, on_stall=quiet.append)
    clock.now = 9.0
    watchdog.alive()  # a receive at 9 s
    with watchdog.busy():  # waiting for the rate limit's tokens is work
        clock.now = 30.0
        assert not watchdog.look()
    clock.now = 39.0
    assert not watchdog.look()
    assert watchdog.look(stopping=True) is False  # a stopping loop is not stalled
    clock.now = 45.0  # 15 s after the wait ended
    assert watchdog.look()
    assert quiet == [15.0]


def test_a_daemon_whose_endpoint_stops_answering_raises_the_watchdog_s_error(
    local_sqs: LocalSqs, sqs: Any, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a daemon with a short watchdog, long-polling an empty DLQ through a proxy
    _, dlq = make_queues(sqs, name)
    path = tmp_path / "health"
    with silent_proxy(local_sqs.endpoint_url) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", proxy.endpoint_url)
        client = default_client(long_poll_seconds=1, margin_seconds=1)
        redriver = Redriver(dlq, client=client, wait_seconds=1, health_file=path, stall_seconds=3)
        errors: list[BaseException] = []

        def run() -> None:
            try:
                redriver.run()
            except BaseException as exc:  # handed to the test
                errors.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        wait_for(lambda: age_seconds(path, time.time()) is not None, "a first receive")
        # When the endpoint accepts connections and never answers
        proxy.silence()
        # Then run() ends with the watchdog's error, naming the DLQ and the limit
        wait_for(lambda: not thread.is_alive(), "the watchdog stops the daemon")
    [error] = errors
    assert isinstance(error, SqsBatchError) and redriver.stalled
    assert f"redrive of {dlq} stalled" in str(error) and "stall_seconds=3" in str(error)


def test_redrive_run_exits_1_with_its_counters_when_the_watchdog_fires(
    local_sqs: LocalSqs, sqs: Any, name: str, tmp_path: Path
) -> None:
    _, dlq = make_queues(sqs, name)
    with silent_proxy(local_sqs.endpoint_url) as proxy:
        environment = env(None, AWS_ENDPOINT_URL_SQS=proxy.endpoint_url, REDRIVE_WAIT_SECONDS="1")
        path = tmp_path / "health"
        command = [str(SCRIPT.with_name("redrive")), "run", "--dlq", dlq, "--stall-seconds", "3"]
        with spawned(
            [*command, "--json", "--health-file", str(path)],
            env=environment,
            **PIPED,
        ) as process:
            wait_for(lambda: age_seconds(path, time.time()) is not None, "a first receive")
            proxy.silence()
            stdout, stderr = process.communicate(timeout=GUARD_SECONDS)
    assert process.returncode == 1, stderr
    last = json.loads(stderr.strip().splitlines()[-1])  # --json: JSON logs, the error too
    assert last["level"] == "error" and "stalled" in last["message"]
    assert "requests" in json.loads(stdout)
