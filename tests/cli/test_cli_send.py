"""`sqsbatch send`: --json-body, --json, --deduplication-id, and --file F --lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
from typer.testing import CliRunner, Result

from sqsbatch import MessageSendRequest, Producer, create_queue
from sqsbatch.cli.app import app
from sqsbatch.cli.common import CliError
from sqsbatch.cli.sending import Line, send_lines
from sqsbatch.dev.server import LocalSqs
from sqsbatch.errors import SendError
from tests.support.cli_results import ok, one_line_error
from tests.support.sqs_helpers import depth, drain

runner = CliRunner()


@pytest.fixture
def cli(local_sqs: LocalSqs) -> Any:
    def invoke(*args: str, input: str | None = None) -> Result:
        return runner.invoke(app, [*args, "--endpoint-url", local_sqs.endpoint_url], input=input)

    return invoke


def bodies(sqs: Any, queue: str) -> list[str]:
    return sorted(message["Body"] for message in drain(sqs, queue))


def test_json_body_parses_and_json_prints_the_id(cli: Any, sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    result = ok(cli("send", name, '{"order": 1}', "--json-body", "--json"))
    assert set(json.loads(result.stdout)) == {"message_id"}
    one_line_error(cli("send", name, "not json", "--json-body"), 2, "not valid JSON")
    assert bodies(sqs, name) == ['{"order":1}']


def test_deduplication_id_makes_a_fifo_duplicate_go_once(cli: Any, sqs: Any, name: str) -> None:
    queue = f"{name}.fifo"
    sqs.create_queue(QueueName=queue, Attributes={"FifoQueue": "true"})  # no content dedup
    one_line_error(cli("send", queue, "a", "--group-id", "g"), 1, "dedup")
    for body in ("first", "second"):
        ok(cli("send", queue, body, "--group-id", "g", "--deduplication-id", "same"))
    assert [message["Body"] for message in drain(sqs, queue)] == ["first"]


def test_lines_sends_one_message_per_line_in_batches(
    cli: Any, sqs: Any, name: str, tmp_path: Path
) -> None:
    # Given 25 JSON lines (and a blank one, and a Windows line end)
    create_queue(name, client=sqs)
    lines = [json.dumps({"n": n}) for n in range(25)]
    (tmp_path / "in.jsonl").write_text("\n".join(lines[:12]) + "\n\n" + "\r\n".join(lines[12:]))
    # When they are sent with --lines
    result = ok(cli("send", name, "--file", str(tmp_path / "in.jsonl"), "--lines"))
    # Then each line is one message, and each id is printed
    assert len(result.stdout.split()) == 25
    assert bodies(sqs, name) == sorted(
        json.dumps({"n": n}, separators=(",", ":")) for n in range(25)
    )


def test_lines_from_stdin_as_text_with_json_output(cli: Any, sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    result = ok(cli("--json", "send", name, "-f", "-", "--lines", "--text", input="a b\n42\n"))
    assert len(json.loads(result.stdout)["message_ids"]) == 2
    assert bodies(sqs, name) == ["42", "a b"]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ('{"ok": 1}\n{"ok": 2}\n{broken\n{"ok": 4}\n', ["line 3", "not JSON", "{broken"]),
        ('1\n"' + "x" * 1_100_000 + '"\n', ["line 2", "1048576", "nothing was sent"]),
    ],
)
def test_a_bad_line_is_one_error_and_nothing_is_sent(
    cli: Any, sqs: Any, name: str, content: str, words: list[str]
) -> None:
    create_queue(name, client=sqs)
    Path("in.jsonl").write_text(content)  # in the test's own directory (conftest)
    one_line_error(cli("send", name, "--file", "in.jsonl", "--lines"), 1, *words)
    assert depth(sqs, name) == 0


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--lines", "x"], ["--lines reads --file"]),
        (["--lines", "-f", "in.jsonl", "--deduplication-id", "d"], ["--deduplication-id"]),
        (["x", "--text", "--json-body"], ["--text", "--json-body"]),
    ],
)
def test_lines_usage_errors(cli: Any, name: str, args: list[str], words: list[str]) -> None:
    Path("in.jsonl").write_text("1\n")
    one_line_error(cli("send", name, *args), 2, *words)


class _Refusing:
    """A producer whose second batch has entries 1 and 2 refused by SQS."""

    queue = "q"
    delivery_delay = None

    def __init__(self) -> None:
        self.batches: list[int] = []

    def send_batch(self, requests: list[MessageSendRequest]) -> list[str]:
        self.batches.append(len(requests))
        ids = [f"id-{len(self.batches)}-{i}" for i in range(len(requests))]
        if len(self.batches) == 2:
            failed = {f"message #{i}": "InternalError: try again" for i in (1, 2)}
            raise SendError([ids[0], *ids[3:]], failed)
        return ids


def test_a_refusal_after_some_went_out_prints_them_and_names_the_lines_not_sent() -> None:
    # Given 250 lines, whose second batch of 100 has two entries refused
    producer = _Refusing()
    lines: list[Line] = [(n, n, "json") for n in range(1, 251)]
    shown: list[list[str]] = []
    # When they are sent
    with pytest.raises(CliError) as caught:
        send_lines(
            cast(Producer, producer),
            lines,
            lambda line: MessageSendRequest(line[1]),
            shown.append,
        )
    # Then the ids that went out are shown, and the error names every line that did not
    assert producer.batches == [100, 100]
    assert len(shown) == 1 and len(shown[0]) == 198
    message = str(caught.value)
    assert message.startswith("lines 102-103, 201-250 were not sent (InternalError: try again)")
    assert "198 of 250" in message
