"""Every command that does not long-poll, against an endpoint that accepts connections and never
answers: one `error:` line soon (two attempts of a short read timeout, `READ_TIMEOUT_SECONDS`),
never botocore's five attempts of a long-poll read timeout. Run as the console scripts."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sqsbatch.cli.common import CONNECT_ATTEMPTS
from sqsbatch.dev.server import LocalSqs
from tests.cli.test_cli_process import SCRIPT, env
from tests.support.silent_proxy import SilentProxy, silent_proxy

REDRIVE = SCRIPT.with_name("redrive")
GUARD_SECONDS = 90.0
"""Only a guard against a hung test."""

COMMANDS = [
    [SCRIPT, "queues"],
    [SCRIPT, "create", "q"],
    [SCRIPT, "purge", "q", "--yes"],
    [SCRIPT, "delete", "q", "--yes"],
    [SCRIPT, "stats", "q"],
    [SCRIPT, "inspect", "q"],
    [SCRIPT, "send", "q", "hello"],
    [SCRIPT, "redrive", "q-dlq", "--yes"],
    [REDRIVE, "run", "--once", "--dlq", "q-dlq"],
]


@pytest.fixture
def silent(local_sqs: LocalSqs) -> Iterator[SilentProxy]:
    with silent_proxy(local_sqs.endpoint_url) as proxy:
        proxy.silence()
        yield proxy


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(map(str, c[1:3])))
def test_a_command_against_a_silent_endpoint_fails_in_one_line_after_two_short_attempts(
    silent: SilentProxy, command: list[str | Path], tmp_path: Path
) -> None:
    result = subprocess.run(
        [str(part) for part in command],
        env=env(None, AWS_ENDPOINT_URL_SQS=silent.endpoint_url),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=GUARD_SECONDS,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: cannot reach SQS") and "Read timeout" in line, line
    assert silent.swallowed <= CONNECT_ATTEMPTS  # one connection per attempt, not botocore's 5
