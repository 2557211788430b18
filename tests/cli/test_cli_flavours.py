"""`sqsbatch consume deco:handle`: an `async def` under a plain decorator (issue 27, item 1).

The decorator's sync wrapper returns the coroutine unawaited: without --async it is refused in
one line before anything is received; with --async it runs, and what it returns is awaited.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sqsbatch import Producer, create_queue
from sqsbatch.cli.app import app
from sqsbatch.dev.server import LocalSqs
from tests.support.sqs_helpers import depth

runner = CliRunner()

DECO = """
from __future__ import annotations
import functools, json
from collections.abc import Awaitable

def logged(fn):
    @functools.wraps(fn)
    def wrapper(batch):
        return fn(batch)
    return wrapper

@logged
async def handle(batch):
    with open("handled.jsonl", "a") as out:
        for message in batch.messages:
            out.write(json.dumps(message.body) + "\\n")

def returning(batch) -> Awaitable[None]:  # a def, no decorator, that says what it returns
    return handle.__wrapped__(batch)
"""


@pytest.fixture(autouse=True)
def _forget_deco() -> Iterator[None]:
    """Each test imports its own deco.py from its own folder."""
    sys.modules.pop("deco", None)
    yield
    sys.modules.pop("deco", None)


def consume(local_sqs: LocalSqs, *args: str) -> Result:
    return runner.invoke(
        app,
        ["--endpoint-url", local_sqs.endpoint_url, "consume", *args, "--idle-seconds", "0.5"],
    )


def fill(sqs: Any, name: str, count: int) -> None:
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": i} for i in range(count)])


@pytest.mark.parametrize(("function", "says"), [("handle", "wraps"), ("returning", "annotated")])
def test_a_sync_callable_returning_a_coroutine_without_async_is_refused_and_nothing_is_deleted(
    local_sqs: LocalSqs, sqs: Any, name: str, tmp_path: Path, *, function: str, says: str
) -> None:
    (tmp_path / "deco.py").write_text(DECO)
    fill(sqs, name, 20)
    result = consume(local_sqs, f"deco:{function}", "-q", name, "--once")
    assert result.exit_code == 1, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and "--async" in line and says in line, line
    assert depth(sqs, name) == 20
    assert not (tmp_path / "handled.jsonl").exists()


@pytest.mark.parametrize("function", ["handle", "returning"])
def test_a_sync_callable_returning_a_coroutine_runs_with_async(
    local_sqs: LocalSqs, sqs: Any, name: str, tmp_path: Path, *, function: str
) -> None:
    (tmp_path / "deco.py").write_text(DECO)
    fill(sqs, name, 20)
    args = (f"deco:{function}", "-q", name, "--async", "--once", "--max-batch-timeout", "0.2")
    result = consume(local_sqs, *args, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["stats"]["acked"] == 20
    handled = [json.loads(x) for x in (tmp_path / "handled.jsonl").read_text().splitlines()]
    assert sorted(handled) == list(range(20))
    assert depth(sqs, name) == 0
