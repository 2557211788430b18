"""The per-message features wherever settings live (issue 27, item 7) and `--idle-seconds`
without `--once` (item 8), on the command line, against moto's server: `send --ttl` and
`ttl_seconds` in `[[queues.producers]]`, `consume --max-message-age` and `--body-model`."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sqsbatch import AsyncProducer, Producer, create_queue
from sqsbatch._core.envelope import Envelope, decode
from sqsbatch.cli.app import app
from sqsbatch.dev.server import LocalSqs
from tests.support.cli_results import ok, one_line_error
from tests.support.front_ends import aio_client
from tests.support.sqs_helpers import depth, drain

runner = CliRunner()

MODULE = """
import json
from pydantic import BaseModel

class Order(BaseModel):
    id: int

NOT_A_TYPE = object()

def record(batch):
    with open("seen.jsonl", "a") as out:
        for m in batch.messages:
            out.write(json.dumps([type(m.body).__name__, m.id]) + "\\n")
"""


@pytest.fixture
def module(tmp_path: Path) -> Path:
    """A handler and a body model in the current directory (conftest chdirs into tmp_path)."""
    (tmp_path / "per_message.py").write_text(MODULE)
    return tmp_path


def cli(local_sqs: LocalSqs, *args: str, env: Any = None) -> Result:
    return runner.invoke(app, ["--endpoint-url", local_sqs.endpoint_url, *args], env=env)


def seen(folder: Path) -> list[list[str]]:
    path = folder / "seen.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines]


def deadline(sqs: Any, queue: str) -> list[float | None]:
    return [decode(raw).envelope.expires_at for raw in drain(sqs, queue)]


def reasons(sqs: Any, dlq: str) -> dict[str, str]:
    return {raw["Body"]: decode(raw).envelope.deaths[-1].reason for raw in drain(sqs, dlq)}


def test_send_ttl_gives_the_message_a_deadline(local_sqs: LocalSqs, sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    before = time.time()
    ok(cli(local_sqs, "send", name, '{"order": 1}', "--ttl", "60"))
    after = time.time()
    (expires_at,) = deadline(sqs, name)
    assert expires_at is not None and before + 60 <= expires_at <= after + 60
    result = cli(local_sqs, "send", name, "x", "--ttl", "0")
    one_line_error(result, 2, "--ttl")


def test_ttl_seconds_in_a_producers_table(
    local_sqs: LocalSqs, sqs: Any, name: str, tmp_path: Path
) -> None:
    create_queue(name, client=sqs)
    (tmp_path / "sqsbatch.toml").write_text(
        f'[[queues.producers]]\nqueue = "{name}"\nttl_seconds = 120\n'
    )
    before = time.time()
    ok(cli(local_sqs, "send", name, '{"order": 1}'))
    Producer(name, client=sqs).send({"order": 2})
    Producer(name, client=sqs).send({"order": 3}, ttl_seconds=5)  # its own wins
    after = time.time()
    found = sorted(value or 0 for value in deadline(sqs, name))
    assert before + 5 <= found[0] <= after + 5
    assert all(before + 120 <= value <= after + 120 for value in found[1:]), found


def test_ttl_seconds_in_a_producers_table_for_the_async_producer(
    sqs: Any, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_queue(name, client=sqs)
    (tmp_path / "sqsbatch.toml").write_text(
        f'[[queues.producers]]\nqueue = "{name}"\nttl_seconds = 120\n'
    )
    monkeypatch.setenv("SQSBATCH_TTL_SECONDS", "300")  # the environment wins over the file

    async def main() -> None:
        async with aio_client(sqs) as aio:
            await AsyncProducer(name, client=aio).send({"order": 1})

    before = time.time()
    asyncio.run(main())
    after = time.time()
    (expires_at,) = deadline(sqs, name)
    assert expires_at is not None and before + 300 <= expires_at <= after + 300


def consume_once(module: Path, name: str, kind: list[str]) -> list[str]:
    """`consume --once` of `record` from the module, or (`kind` ["--async"]) of an async copy."""
    handler = "per_message:record" if not kind else "per_message_async:record"
    if kind:
        (module / "per_message_async.py").write_text(
            MODULE.replace("def record", "async def record")
        )
    return ["consume", handler, "-q", name, "--once", "--idle-seconds", "0.5", *kind]


def _old(sqs: Any, queue: str, body: str, age: float) -> None:
    """A message sqsbatch sent `age` seconds ago (its `timestamp`), already on the queue."""
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    envelope = Envelope(id=f"id-{body}", timestamp=time.time() - age)
    sqs.send_message(
        QueueUrl=url,
        MessageBody=json.dumps(body),
        MessageAttributes={"sqsbatch": envelope.to_attribute()},
    )


@pytest.mark.parametrize("kind", [[], ["--async"]], ids=["sync", "async"])
def test_consume_max_message_age(
    local_sqs: LocalSqs, sqs: Any, name: str, module: Path, kind: list[str]
) -> None:
    dlq = f"{name}-dlq"
    create_queue(name, dead_letter_queue=dlq, client=sqs)
    _old(sqs, name, "old", 3600)
    _old(sqs, name, "new", 0)
    args = consume_once(module, name, kind)
    result = ok(cli(local_sqs, *args, "--max-message-age", "600", "--json"))
    assert json.loads(result.stdout)["stats"]["dead_lettered"] == 1
    assert [message_id for _, message_id in seen(module)] == ["id-new"]
    assert reasons(sqs, dlq) == {'"old"': "expired"}
    assert depth(sqs, name) == 0


@pytest.mark.parametrize("kind", [[], ["--async"]], ids=["sync", "async"])
def test_consume_body_model(
    local_sqs: LocalSqs, sqs: Any, name: str, module: Path, kind: list[str]
) -> None:
    dlq = f"{name}-dlq"
    create_queue(name, dead_letter_queue=dlq, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": {"id": 1}}, {"body": {"id": "x"}}])
    args = consume_once(module, name, kind)
    ok(cli(local_sqs, *args, "--body-model", "per_message:Order", "--max-batch-timeout", "0.2"))
    assert [kind_ for kind_, _ in seen(module)] == ["Order"]
    assert reasons(sqs, dlq) == {'{"id":"x"}': "invalid_body"}


@pytest.mark.parametrize(
    ("spec", "code", "words"),
    [
        ("Order", 2, ["expected MODULE:NAME"]),
        ("per_message:Nothing", 1, ["has no 'Nothing'"]),
        ("per_message:NOT_A_TYPE", 1, ["body_model=", "not a type pydantic can validate"]),
    ],
)
def test_a_bad_body_model_is_one_line(
    local_sqs: LocalSqs, module: Path, spec: str, code: int, words: list[str]
) -> None:
    args = ["consume", "per_message:record", "-q", "never-reached", "--once"]
    one_line_error(cli(local_sqs, *args, "--body-model", spec), code, *words)


def test_idle_seconds_without_once_is_refused(local_sqs: LocalSqs, module: Path) -> None:
    # refused before any call: the queue need not exist (without the check: "does not exist")
    args = ["consume", "per_message:record", "-q", "never-reached", "--idle-seconds", "1"]
    one_line_error(cli(local_sqs, *args), 2, "--idle-seconds goes with --once", "add --once")
