"""docs/cli.md: its `console` blocks run, in order, against a fresh local SQS, and exit as shown."""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sqsbatch.cli.app import app
from sqsbatch.dev.server import LocalSqs

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
FENCE = re.compile(r"```(?P<lang>\w+)\n(?P<body>.*?)```", re.S)
EXITS = re.compile(r"#\s*exits (\d+)\s*$")


def blocks() -> list[tuple[str, str]]:
    return [(m["lang"], m["body"]) for m in FENCE.finditer(DOC.read_text())]


def commands() -> list[tuple[list[str], int]]:
    found = []
    for lang, body in blocks():
        if lang != "console":
            continue
        for line in body.splitlines():
            if line.startswith("$ sqsbatch "):
                exits = EXITS.search(line)
                args = shlex.split(EXITS.sub("", line[len("$ sqsbatch ") :]))
                found.append((args, int(exits[1]) if exits else 0))
    return found


def test_the_doc_has_examples_of_every_command() -> None:
    documented = {args[0] for args, _ in commands()}
    assert documented >= {"create", "queues", "purge", "send", "inspect", "consume", "redrive"}
    text = DOC.read_text()
    assert "sqsbatch demo" in text and "sqsbatch dev" in text  # blocking: shown, not run


def test_the_console_blocks_run_as_documented(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the handler module the doc shows (tests/docs/test_examples.py keeps the doc's copy
    # verbatim),
    # imported fresh: another test's `jobs` module must not stand in for it
    for module in [name for name in sys.modules if name == "jobs" or name.startswith("jobs.")]:
        monkeypatch.delitem(sys.modules, module)
    shutil.copy(DOC.parent.parent / "examples" / "jobs.py", tmp_path / "jobs.py")
    runner = CliRunner()
    with LocalSqs() as local:  # a fresh server: the doc's queue names are its own
        env = {"AWS_ENDPOINT_URL_SQS": local.endpoint_url}
        for args, code in commands():
            result = runner.invoke(app, args, env=env)
            assert result.exit_code == code, f"sqsbatch {shlex.join(args)}\n{result.output}"
            if code:
                assert result.stderr.startswith("error: ")


@pytest.mark.parametrize("lang", ["console", "python"])
def test_the_doc_keeps_its_runnable_blocks(lang: str) -> None:
    assert any(kind == lang for kind, _ in blocks())
