"""docs/operations.md: its `console` blocks run in order against a fresh local SQS and exit as
shown; examples/health_watch.py, which its Python block quotes (tests/docs/test_examples.py
checks the quote), runs."""

from __future__ import annotations

import re
import shlex
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sqsbatch._shell.health import age_seconds
from sqsbatch.cli.app import app
from sqsbatch.dev.server import LocalSqs
from tests.support.front_ends import load_example
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "operations.md"
FENCE = re.compile(r"```(?P<lang>\w+)\n(?P<body>.*?)```", re.S)
EXITS = re.compile(r"#\s*exits (\d+)\s*$")


def commands() -> list[tuple[list[str], int]]:
    found = []
    for match in FENCE.finditer(DOC.read_text()):
        if match["lang"] != "console":
            continue
        for line in match["body"].splitlines():
            assert line.startswith("$ sqsbatch "), line
            exits = EXITS.search(line)
            args = shlex.split(EXITS.sub("", line[len("$ sqsbatch ") :]))
            found.append((args, int(exits[1]) if exits else 0))
    return found


def test_the_console_blocks_run_as_documented(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in [name for name in sys.modules if name == "jobs" or name.startswith("jobs.")]:
        monkeypatch.delitem(sys.modules, module)
    shutil.copy(ROOT / "examples" / "jobs.py", tmp_path / "jobs.py")
    documented = {args[0] for args, _ in commands()}
    assert documented >= {"health", "stats", "consume"}
    runner = CliRunner()
    with LocalSqs() as local:
        env = {"AWS_ENDPOINT_URL_SQS": local.endpoint_url}
        for args, code in commands():
            result = runner.invoke(app, args, env=env)
            assert result.exit_code == code, f"sqsbatch {shlex.join(args)}\n{result.output}"


def test_the_example_touches_its_health_file_and_exits_0_when_stopped(
    local_sqs: LocalSqs, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the example, with its own client at the local SQS
    local_sqs.client().create_queue(QueueName=name)
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", local_sqs.endpoint_url)
    example = load_example("health_watch")
    path = tmp_path / "health"
    made: list[object] = []
    consumer_class = example.Consumer

    def keep(*args: object, **keywords: object) -> object:
        made.append(consumer_class(*args, **keywords))
        return made[-1]

    monkeypatch.setattr(example, "Consumer", keep)
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(example.main(name, str(path))))
    thread.start()
    # When it has started and touched its file, and is stopped
    # (the consumer touches the file as it is made, to check it can: wait for it to exist too)
    wait_for(lambda: bool(made) and age_seconds(path, time.time()) is not None, "it started")
    assert age_seconds(path, time.time()) is not None
    made[0].stop()  # type: ignore[attr-defined]
    thread.join(60)
    # Then it exits 0
    assert codes == [0]
