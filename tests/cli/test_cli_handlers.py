"""`consume`'s handler: `module:function` or `path/to/file.py:function`, and a module that does
not import is one line naming the file and the line."""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sqsbatch import Producer, create_queue
from sqsbatch.cli.app import app
from sqsbatch.cli.common import CliError
from sqsbatch.cli.consume import load_handler
from sqsbatch.dev.server import LocalSqs
from tests.support.sqs_helpers import depth

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(autouse=True)
def _forget_imports(tmp_path: Path) -> Iterator[None]:
    """Each test imports its own modules from tmp_path: they leave sys.modules and sys.path."""
    path = list(sys.path)
    yield
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]
    sys.path[:] = path


def test_a_file_path_names_the_handler_and_its_folder_is_importable(tmp_path: Path) -> None:
    folder = tmp_path / "app" / "workers"
    folder.mkdir(parents=True)
    (folder / "helpers_for_file_form.py").write_text("def double(x):\n    return 2 * x\n")
    (folder / "file_form_jobs.py").write_text(
        "from helpers_for_file_form import double\n\ndef handle(batch):\n    return double(21)\n"
    )
    handler = load_handler("app/workers/file_form_jobs.py:handle")
    assert handler(None) == 42


def test_consume_finds_the_repository_s_example_by_its_path(
    local_sqs: LocalSqs, sqs: Any, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, "jobs", raising=False)  # another test's jobs.py
    shutil.copytree(EXAMPLES, tmp_path / "examples")  # as in a checkout: examples/jobs.py
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send("hello")
    args = ["consume", "examples/jobs.py:handle", "-q", name, "--once", "--idle-seconds", "0.5"]
    result = runner.invoke(
        app, ["--endpoint-url", local_sqs.endpoint_url, *args, "--max-batch-timeout", "0"]
    )
    assert result.exit_code == 0, result.output
    assert depth(sqs, name) == 0


@pytest.mark.parametrize(
    ("source", "spec", "says"),
    [
        (
            "def handle(batch)\n    pass\n",
            "broken_syntax:handle",
            "SyntaxError at broken_syntax.py:1",
        ),
        (
            "import os\nimport no_such_dependency_xyz\n",
            "broken_import:handle",
            "ModuleNotFoundError at broken_import.py:2: No module named 'no_such_dependency_xyz'",
        ),
        (
            "\n\nSETTINGS = {}['missing']\n",
            "broken_at_import.py:handle",
            "KeyError at broken_at_import.py:3: 'missing'",
        ),
        (
            "import sys\nsys.exit(3)\n",
            "exits_at_import:handle",
            "SystemExit at exits_at_import.py:2",
        ),
    ],
)
def test_a_module_that_does_not_import_names_the_file_and_line(
    tmp_path: Path, source: str, spec: str, says: str
) -> None:
    (tmp_path / (spec.partition(":")[0].removesuffix(".py") + ".py")).write_text(source)
    with pytest.raises(CliError) as caught:
        load_handler(spec)
    assert says in str(caught.value)
    assert str(caught.value).startswith("cannot import ")


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("nowhere/jobs.py:handle", "nowhere/jobs.py: no such Python file"),
        ("no_such_module_xyz:handle", "cannot import 'no_such_module_xyz'"),
        ("json.py:handle", "the module name 'json' is taken by"),
    ],
)
def test_missing_files_modules_and_taken_names_are_refused(
    tmp_path: Path, spec: str, says: str
) -> None:
    (tmp_path / "json.py").write_text("def handle(batch):\n    pass\n")
    with pytest.raises(CliError, match=re.escape(says)):
        load_handler(spec)


def test_consume_prints_an_import_failure_as_one_line_and_nothing_else(
    local_sqs: LocalSqs, name: str, tmp_path: Path
) -> None:
    (tmp_path / "raises_on_import.py").write_text("x = 1\nraise RuntimeError('no config')\n")
    result = runner.invoke(
        app,
        [
            "--endpoint-url",
            local_sqs.endpoint_url,
            "consume",
            "./raises_on_import.py:handle",
            "-q",
            name,
            "--once",
        ],
    )
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: cannot import ./raises_on_import.py: RuntimeError at raises_on_import.py:2: "
        "no config"
    )


def test_a_consumer_that_cannot_be_made_fails_before_it_says_consuming(
    local_sqs: LocalSqs, sqs: Any, name: str, tmp_path: Path
) -> None:
    (tmp_path / "fine_jobs.py").write_text("def handle(batch):\n    pass\n")
    create_queue(name, client=sqs)
    args = ["consume", "fine_jobs:handle", "-q", name, "--dead-letter-queue", name, "--json"]
    result = runner.invoke(app, ["--endpoint-url", local_sqs.endpoint_url, *args])
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and "consuming" not in result.stderr
    assert result.stdout == ""
