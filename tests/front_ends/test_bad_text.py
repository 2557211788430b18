"""Text that is not text: a `str` UTF-8 cannot encode (a lone surrogate) in a body or an
attribute, and a settings file that is not UTF-8. Each is one clear error before any call,
naming what and where; nothing is sent. On the producers (sync and async), the CLI's `send`,
the settings API and the commands that read the file."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aioboto3
import pytest
from typer.testing import CliRunner

from redrive import cli as redrive_cli
from sqsbatch import AsyncProducer, ConsumerConfig, Producer
from sqsbatch.cli.app import app
from sqsbatch.dev.server import LocalSqs
from sqsbatch.errors import ConfigError, MessageError
from tests.support.cli_results import one_line_error

runner = CliRunner()
SURROGATE = "\ud800"


def visible(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


CASES = [
    (SURROGATE, None, r"body has a lone surrogate '\\ud800' at character 0"),
    ({"name": f"a{SURROGATE}"}, None, "body has a lone surrogate"),
    ("fine", {"tenant": SURROGATE}, "message attribute 'tenant' has a lone surrogate"),
]


@pytest.mark.parametrize("case", CASES, ids=["body", "json", "attribute"])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_lone_surrogate_is_a_message_error_and_nothing_is_sent(
    kind: str, case: tuple[Any, Any, str], sqs: Any, name: str, local_sqs: LocalSqs
) -> None:
    body, attributes, says = case
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    with pytest.raises(MessageError, match=says) as caught:
        if kind == "sync":
            Producer(name, client=sqs).send(body, attributes=attributes)
        else:

            async def send() -> None:
                session = aioboto3.Session()
                async with session.client("sqs", endpoint_url=local_sqs.endpoint_url) as client:
                    await AsyncProducer(name, client=client).send(body, attributes=attributes)

            asyncio.run(send())
    assert "\n" not in str(caught.value)
    assert visible(sqs, url) == 0


def test_the_cli_s_send_of_a_lone_surrogate_is_one_line(
    sqs: Any, name: str, local_sqs: LocalSqs
) -> None:
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    where = ["--endpoint-url", local_sqs.endpoint_url, "--region", "us-east-1"]
    result = runner.invoke(app, [*where, "send", name, f"caf{SURROGATE}"])
    one_line_error(result, 1, "lone surrogate")
    assert visible(sqs, url) == 0


LATIN_1 = b'[[queues.consumers]]\nqueue = "q"\n# caf\xe9\nmax_batch_size = 5\n'


def test_a_settings_file_that_is_not_utf8_is_a_config_error_naming_it_and_where(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sqsbatch.toml"
    path.write_bytes(LATIN_1)
    with pytest.raises(ConfigError) as caught:
        ConsumerConfig.load("q", path)
    assert str(caught.value) == (
        f"{path} is not UTF-8: byte 0xe9 at line 3, column 6 (TOML is UTF-8)"
    )


def test_the_commands_that_read_a_settings_file_that_is_not_utf8_say_so_in_one_line(
    tmp_path: Path, local_sqs: LocalSqs
) -> None:
    (tmp_path / "sqsbatch.toml").write_bytes(LATIN_1)  # the tests run in tmp_path
    (tmp_path / "jobs.py").write_text("def handle(batch):\n    pass\n")
    where = ["--endpoint-url", local_sqs.endpoint_url, "--region", "us-east-1"]
    consume = runner.invoke(app, [*where, "consume", "jobs:handle", "-q", "q", "--once"])
    one_line_error(consume, 1, "sqsbatch.toml is not UTF-8: byte 0xe9 at line 3, column 6")
    redrive = runner.invoke(redrive_cli.app, ["run", "--once", "--dlq", "d", *where])
    one_line_error(redrive, 1, "sqsbatch.toml is not UTF-8: byte 0xe9 at line 3, column 6")
