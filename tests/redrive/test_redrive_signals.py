"""Signals during a redrive (issue 27, item 10): `sqsbatch redrive` reports what was moved when
interrupted, and a second SIGINT stops `redrive run` at once, as it stops `consume`.

The manual move runs in-process (typer's CliRunner, on the main thread, where its signal
handlers live); the signals are raised right after a batch's calls, so the test knows what
moved. `redrive run` runs as a subprocess: its second signal ends the process.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

import redrive.manual
from redrive.daemon import execute as execute_for_real
from sqsbatch.cli.app import app
from sqsbatch.dev.server import LocalSqs
from tests.support.processes import PIPED, spawned
from tests.support.redrive import dead_letter, make_queues
from tests.support.silent_proxy import silent_proxy
from tests.support.sqs_helpers import depth
from tests.support.waiting import wait_for

runner = CliRunner()


def redrive_now(local_sqs: LocalSqs, *args: str) -> Result:
    return runner.invoke(app, ["--endpoint-url", local_sqs.endpoint_url, "redrive", *args])


def signalled_after(
    monkeypatch: pytest.MonkeyPatch, call: int, signals: int, *, before: bool = False
) -> None:
    """`signals` SIGINTs to this process around the move's `call`-th batch of calls (after its
    sends and deletes; or `before` them)."""
    real: Callable[..., Any] = execute_for_real
    calls = [0]

    def execute(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if before and calls[0] == call:
            for _ in range(signals):
                signal.raise_signal(signal.SIGINT)
        done = real(*args, **kwargs)
        if not before and calls[0] == call:
            for _ in range(signals):
                signal.raise_signal(signal.SIGINT)
        return done

    monkeypatch.setattr(redrive.manual, "execute", execute)


def test_sigint_during_redrive_stops_after_the_batch_and_prints_what_was_moved(
    local_sqs: LocalSqs, sqs: Any, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given 25 dead-lettered messages, and SIGINT once the first batch has moved
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, list(range(25)))
    signalled_after(monkeypatch, call=1, signals=1)

    # When the operator redrives them all
    result = redrive_now(local_sqs, dlq, "--yes", "--json")

    # Then the move stopped after that batch, printed its report, and exited 130
    assert result.exit_code == 130, result.output
    report = json.loads(result.stdout)
    moved = [row for row in report["messages"] if row["action"] == "moved"]
    assert report["moved"] == len(moved) > 0
    assert depth(sqs, source) == len(moved)
    assert depth(sqs, dlq) == 25 - len(moved)  # the rest stay, nothing lost
    assert "SIGINT: stopped early" in result.stderr
    assert "Traceback" not in result.output


def test_a_second_sigint_during_redrive_stops_at_once_and_says_what_was_moved(
    local_sqs: LocalSqs, sqs: Any, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given 25 dead-lettered messages, and SIGINT twice as the second batch starts moving
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, list(range(25)))
    signalled_after(monkeypatch, call=2, signals=2, before=True)

    # When the operator redrives them all
    result = redrive_now(local_sqs, dlq, "--yes", "--json")

    # Then it stopped at once, exit 130, saying how many the first batch moved
    assert result.exit_code == 130, result.output
    moved = depth(sqs, source)
    assert moved > 0
    [line] = [x for x in result.stderr.splitlines() if "again: stopped" in x]
    assert f"SIGINT again: stopped at once; moved {moved} message(s) before" in line
    assert depth(sqs, dlq) == 25 - moved  # the batch under way is hidden, not lost
    assert "Traceback" not in result.output


def test_a_second_sigint_stops_redrive_run_at_once_with_130(
    local_sqs: LocalSqs, sqs: Any, name: str
) -> None:
    # Given `redrive run` (forever, 20 s long polls) that has moved one message, behind a
    # proxy that then goes silent: its next call hangs, so its graceful stop cannot end before
    # the second signal comes (on a loaded machine the first one could end it first)
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [4])
    script = Path(sys.executable).parent / "redrive"
    command = [str(script), "run", "--dlq", dlq, "--base-delay", "0", "--jitter", "0"]
    lines: list[str] = []
    with silent_proxy(local_sqs.endpoint_url) as proxy:
        env = {**os.environ, **local_sqs.environment(), "REDRIVE_WAIT_SECONDS": "20"}
        env["AWS_ENDPOINT_URL_SQS"] = proxy.endpoint_url
        with spawned(command, env=env, **PIPED) as daemon:
            assert daemon.stderr is not None
            reader = threading.Thread(target=lambda: lines.extend(daemon.stderr or []), daemon=True)
            reader.start()
            wait_for(lambda: depth(sqs, source) > 0, "the daemon moved a message")
            proxy.silence()
            # When it gets SIGINT, says so, and gets SIGINT again
            daemon.send_signal(signal.SIGINT)
            wait_for(lambda: any("SIGINT" in line for line in lines), "SIGINT on stderr")
            daemon.send_signal(signal.SIGINT)
            daemon.wait(timeout=30)
            reader.join(10)
    # Then it stopped at once, as `consume` does: exit 130, one line saying what that leaves
    errors = "".join(lines)
    assert daemon.returncode == 130, errors
    assert "Ctrl-C again stops at once" in errors
    assert "SIGINT again: stopped at once" in errors
    assert "Traceback" not in errors
