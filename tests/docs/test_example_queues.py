"""The examples and the walkthrough of docs/cli.md can share one `sqsbatch dev`: the examples use
queues of their own and find the endpoint as boto3 does, never at a port of their own."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The examples that reach SQS (jobs.py is the walkthrough's own handler).
EXAMPLES = [
    "quickstart.py",
    "ecs_worker.py",
    "lambda_function.py",
    "redrive_once.py",
    "sns_envelope.py",
    "sqsbatch.toml",
]


def walkthrough_queues() -> set[str]:
    """Every queue docs/cli.md creates: `$ sqsbatch create NAME [--dlq DLQ] ...`."""
    names = set()
    for line in (ROOT / "docs" / "cli.md").read_text().splitlines():
        if line.startswith("$ sqsbatch create "):
            args = shlex.split(line)[3:]
            names.add(args[0])
            if "--dlq" in args:
                names.add(args[args.index("--dlq") + 1])
    return names


def test_the_walkthrough_creates_queues() -> None:
    assert {"orders", "orders-dlq"} <= walkthrough_queues()


@pytest.mark.parametrize("example", EXAMPLES)
def test_an_example_uses_none_of_the_walkthroughs_queues(example: str) -> None:
    quoted = set(re.findall(r"\"([^\"\s]+)\"", (ROOT / "examples" / example).read_text()))
    assert not quoted & walkthrough_queues()


@pytest.mark.parametrize("example", EXAMPLES)
def test_an_example_names_no_endpoint_or_port(example: str) -> None:
    text = (ROOT / "examples" / example).read_text()
    assert not re.search(r"127\.0\.0\.1|localhost|:\d{4,5}\b|endpoint_url", text)
