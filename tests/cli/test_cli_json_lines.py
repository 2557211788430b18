"""`--json` for scripts: every command prints one JSON document, on one line, on stdout, and
nothing else there (no table beside it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from redrive import cli as redrive_cli
from sqsbatch import create_queue
from sqsbatch.cli.app import app
from sqsbatch.dev.server import LocalSqs

runner = CliRunner()

COMMANDS = [
    ["queues", "--prefix", "Q"],
    ["create", "Q-new"],
    ["send", "Q", '{"a": 1}'],
    ["inspect", "Q"],
    ["stats", "Q"],
    ["purge", "Q", "--yes"],
    ["delete", "Q", "--yes"],
    ["redrive", "Q-dlq", "--yes"],
    ["redrive", "Q-dlq", "--dry-run"],
    ["consume", "jobs:handle", "-q", "Q", "--once", "--idle-seconds", "0.5"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_json_output_is_one_document_on_one_line(
    command: list[str], local_sqs: LocalSqs, name: str, tmp_path: Path
) -> None:
    client = local_sqs.client()
    url = create_queue(name, dead_letter_queue=f"{name}-dlq", client=client)
    client.send_message(QueueUrl=url, MessageBody="there")
    (tmp_path / "jobs.py").write_text("def handle(batch):\n    pass\n")
    args = [part.replace("Q", name) for part in command]
    where = ["--endpoint-url", local_sqs.endpoint_url, "--region", "us-east-1"]
    result = runner.invoke(app, [*where, "--json", *args])
    assert result.exit_code == 0, result.output
    [line] = result.stdout.splitlines()
    assert isinstance(json.loads(line), dict | list)


def test_redrive_run_once_json_is_one_line(local_sqs: LocalSqs, name: str) -> None:
    create_queue(name, dead_letter_queue=f"{name}-dlq", client=local_sqs.client())
    where = ["--endpoint-url", local_sqs.endpoint_url, "--region", "us-east-1"]
    result = runner.invoke(redrive_cli.app, ["run", "--once", "--dlq", f"{name}-dlq", *where])
    assert result.exit_code == 0, result.output
    result = runner.invoke(
        redrive_cli.app, ["run", "--once", "--dlq", f"{name}-dlq", "--json", *where]
    )
    [line] = result.stdout.splitlines()
    counters: Any = json.loads(line)
    assert "requests" in counters
