"""The redrive daemon's health file: touched after every completed receive (an empty long poll
too), checked by `sqsbatch health`; a bad path is one error before anything starts."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from redrive import Redriver, cli
from sqsbatch.cli.app import app
from sqsbatch.errors import ConfigError
from sqsbatch.health import age_seconds
from sqsbatch.local import LocalSqs
from tests.support.cli_results import ok, one_line_error
from tests.support.redrive import make_queues

GUARD_SECONDS = 60.0


def wait_for(state: Any, what: str) -> None:
    deadline = time.monotonic() + GUARD_SECONDS
    while not state():
        if time.monotonic() > deadline:
            raise AssertionError(f"never reached: {what}")
        time.sleep(0.05)


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
