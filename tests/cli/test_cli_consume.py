"""`sqsbatch consume`: settings from flags, SQSBATCH_* and sqsbatch.toml; --once; bad handlers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from sqsbatch import Producer, create_queue
from sqsbatch.cli.app import app
from sqsbatch.dev.server import LocalSqs
from tests.support.emf import check_lines, metric
from tests.support.sqs_helpers import depth

runner = CliRunner()

HANDLERS = """
import json, pathlib

def record(batch):
    with open("batches.jsonl", "a") as out:
        out.write(json.dumps(sorted(m.body for m in batch.messages)) + "\\n")

def fail(batch):
    raise RuntimeError("nope")

async def later(batch):
    pass

not_callable = 42
"""


@pytest.fixture
def handlers(tmp_path: Path) -> Path:
    """A handler module in the current directory (conftest chdirs into tmp_path)."""
    (tmp_path / "cli_handlers.py").write_text(HANDLERS)
    return tmp_path


def consume(local_sqs: LocalSqs, *args: str, env: Any = None) -> Result:
    idle = ["--idle-seconds", "0.5"] if "--once" in args else []  # it goes with --once
    return runner.invoke(
        app, ["--endpoint-url", local_sqs.endpoint_url, "consume", *args, *idle], env=env
    )


def stats(result: Result) -> Any:
    """The stats a `consume --json` that succeeded printed: its whole stdout, one document."""
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["stats"]


QUICK_JSON = ("--max-batch-timeout", "0.2", "--json")
"""Close a batch 0.2 s after its first message; print the stats as JSON."""


def batches(folder: Path) -> list[list[int]]:
    lines = (folder / "batches.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def fill(sqs: Any, name: str, count: int) -> None:
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": i} for i in range(count)])


def test_once_consumes_until_idle_and_prints_stats(
    local_sqs: LocalSqs, sqs: Any, name: str, handlers: Path
) -> None:
    fill(sqs, name, 5)
    counts = stats(consume(local_sqs, "cli_handlers:record", "-q", name, "--once", *QUICK_JSON))
    assert counts["acked"] == 5 and counts["received"] == 5
    assert sorted(b for batch in batches(handlers) for b in batch) == [0, 1, 2, 3, 4]
    assert depth(sqs, name) == 0


def test_settings_come_from_the_file_the_environment_and_the_flags_in_that_order(
    local_sqs: LocalSqs, sqs: Any, name: str, handlers: Path
) -> None:
    fill(sqs, name, 6)
    (handlers / "sqsbatch.toml").write_text(
        f'[[queues.consumers]]\nqueue = "{name}"\nmax_batch_size = 2\nmax_batch_timeout = 0.2\n'
    )
    assert consume(local_sqs, "cli_handlers:record", "-q", name, "--once").exit_code == 0
    assert [len(b) for b in batches(handlers)] == [2, 2, 2]

    (handlers / "batches.jsonl").unlink()
    fill(sqs, name, 6)
    env = {"SQSBATCH_MAX_BATCH_SIZE": "3"}
    assert consume(local_sqs, "cli_handlers:record", "-q", name, "--once", env=env).exit_code == 0
    assert [len(b) for b in batches(handlers)] == [3, 3]

    (handlers / "batches.jsonl").unlink()
    fill(sqs, name, 6)
    args = ("cli_handlers:record", "-q", name, "--once", "--max-batch-size", "6")
    assert consume(local_sqs, *args, env=env).exit_code == 0
    assert [len(b) for b in batches(handlers)] == [6]


def test_async_handlers_run_with_async(
    local_sqs: LocalSqs, sqs: Any, name: str, handlers: Path
) -> None:
    fill(sqs, name, 3)
    result = consume(local_sqs, "cli_handlers:later", "-q", name, "--async", "--once", *QUICK_JSON)
    assert stats(result)["acked"] == 3
    assert depth(sqs, name) == 0


def test_a_failing_handler_dead_letters_after_max_retries(
    local_sqs: LocalSqs, sqs: Any, name: str, handlers: Path
) -> None:
    create_queue(name, dead_letter_queue=f"{name}-dlq", max_retries=1, client=sqs)
    Producer(name, client=sqs).send("x")
    result = consume(
        local_sqs,
        "cli_handlers:fail",
        "-q",
        name,
        "--once",
        "--max-retries",
        "1",
        "--dead-letter-queue",
        f"{name}-dlq",
        "--max-batch-timeout",
        "0",
        "--json",
    )
    assert stats(result)["dead_lettered"] == 1
    assert depth(sqs, f"{name}-dlq") == 1


def test_the_readme_walkthrough_dead_letters_to_the_dlq_create_made(
    local_sqs: LocalSqs, sqs: Any, name: str, handlers: Path
) -> None:
    # Given `sqsbatch create Q --dlq Q-dlq` and a consume with no DLQ or retry settings
    created = runner.invoke(
        app,
        ["--endpoint-url", local_sqs.endpoint_url, "create", name, "--dlq", f"{name}-dlq"],
    )
    assert created.exit_code == 0, created.output
    Producer(name, client=sqs).send("poison")
    # When its handler always fails
    result = consume(
        local_sqs, "cli_handlers:fail", "-q", name, "--once", "--json", "--max-batch-timeout", "0"
    )
    # Then the message went to the DLQ (nothing deleted), and the start line said where from
    assert stats(result)["dead_lettered"] == 1
    assert depth(sqs, f"{name}-dlq") == 1 and depth(sqs, name) == 0
    assert "dead_letter_queue=(the queue's)" in result.stderr


def test_settings_out_of_range_are_one_line_from_a_flag_or_the_environment(
    local_sqs: LocalSqs, name: str, handlers: Path
) -> None:
    flag = consume(local_sqs, "cli_handlers:record", "-q", name, "--max-batch-size", "500")
    assert flag.exit_code == 2, flag.output  # a bad command line
    env = consume(
        local_sqs, "cli_handlers:record", "-q", name, env={"SQSBATCH_MAX_BATCH_SIZE": "500"}
    )
    assert env.exit_code == 1, env.output
    for result, words in ((flag, ["--max-batch-size", "100"]), (env, ["max_batch_size", "100"])):
        [line] = result.stderr.strip().splitlines()
        assert line.startswith("error: ") and all(word in line for word in words), line


@pytest.mark.parametrize(
    ("handler", "extra", "words"),
    [
        ("no_such_module:f", [], ["no_such_module"]),
        ("cli_handlers:missing", [], ["missing"]),
        ("cli_handlers:not_callable", [], ["not callable"]),
        ("cli_handlers:later", [], ["--async"]),
        ("cli_handlers:record", ["--async"], ["drop --async"]),
        ("cli_handlers:record", ["--dead-letter-queue", "SELF"], ["queue itself"]),
    ],
)
def test_bad_handlers_and_settings_are_one_line_and_exit_1(
    local_sqs: LocalSqs,
    name: str,
    handlers: Path,
    *,
    handler: str,
    extra: list[str],
    words: list[str],
) -> None:
    extra = [name if arg == "SELF" else arg for arg in extra]
    result = consume(local_sqs, handler, "-q", name, "--once", *extra)
    assert result.exit_code == 1, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and "Traceback" not in result.output
    for word in words:
        assert word in line


def test_a_missing_queue_is_one_line(local_sqs: LocalSqs, handlers: Path) -> None:
    result = consume(local_sqs, "cli_handlers:record", "-q", "no-such-queue", "--once")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1].startswith("error: queue does not exist")


def test_metrics_on_from_the_environment_are_emf_lines_before_the_json_stats(
    local_sqs: LocalSqs, sqs: Any, name: str, handlers: Path
) -> None:
    fill(sqs, name, 3)
    env = {"SQSBATCH_METRICS": "emf", "SQSBATCH_METRICS_NAMESPACE": "Shop/Orders"}
    result = consume(local_sqs, "cli_handlers:record", "-q", name, "--once", *QUICK_JSON, env=env)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    *metric_lines, last = lines  # the stats come last, one line, as each metric line is
    assert json.loads(last)["stats"]["acked"] == 3
    documents = check_lines("\n".join(metric_lines))
    assert sum(metric(documents, "Acked", QueueName=name)) == 3
    assert {d["_aws"]["CloudWatchMetrics"][0]["Namespace"] for d in documents} == {"Shop/Orders"}


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"SQSBATCH_METRICS": "prometheus"}, ["metrics='prometheus'", "'off' or 'emf'"]),
        ({"SQSBATCH_METRICS_NAMESPACE": "my metrics"}, ["metrics_namespace='my metrics'"]),
        ({"SQSBATCH_METRICS_INTERVAL": "0"}, ["metrics_interval='0'", "> 0"]),
    ],
)
def test_bad_metrics_settings_are_one_line_and_exit_1(
    local_sqs: LocalSqs, name: str, handlers: Path, env: dict[str, str], words: list[str]
) -> None:
    result = consume(local_sqs, "cli_handlers:record", "-q", name, env=env)
    assert result.exit_code == 1, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and all(word in line for word in words), line
