"""Every command's `--help`, of both apps, reads as written: brackets kept (`[redrive]`,
`[[queues.consumers]]` are not rich markup), value names instead of `<list[str]>`, no `<bool>`
after a flag, and ranges shown as ranges (`[0<=x<=100]`) where the help names one."""

from __future__ import annotations

import re
from typing import Annotated, Any

import pytest
import typer
from typer.main import get_command
from typer.testing import CliRunner

from redrive import cli as redrive_cli
from sqsbatch.cli.app import app
from sqsbatch.cli.common import guarded_group

runner = CliRunner()
APPS = {"sqsbatch": app, "redrive": redrive_cli.app}
RANGE_IN_WORDS = re.compile(r"\b\d+\.\.\d+\b")  # "1..100" in a help text
# consume.py states its ranges in words (its options default to None: "not given"); typer can
# show min/max on such options too. Owned elsewhere: remove this mark once it is done.


def commands() -> list[tuple[str, str | None]]:
    found: list[tuple[str, str | None]] = []
    for program, target in APPS.items():
        group: Any = get_command(target)
        found += [(program, None), *((program, name) for name in group.commands)]
    return found


def fresh(program: str, command: str | None) -> Any:
    """The click command as typer builds it, before any help was shown."""
    group: Any = get_command(APPS[program])
    return group if command is None else group.commands[command]


def render(program: str, command: str | None) -> str:
    args = [command, "--help"] if command else ["--help"]
    result = runner.invoke(APPS[program], args, env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"})
    assert result.exit_code == 0, result.output
    return result.stdout


def help_texts(command: Any) -> list[str]:
    texts = [command.help or ""]
    texts += [param.help or "" for param in command.params]
    return texts


IDS = [f"{program} {command or ''}".strip() for program, command in commands()]


@pytest.mark.parametrize(("program", "command"), commands(), ids=IDS)
def test_help_keeps_every_bracket(program: str, command: str | None) -> None:
    shown = render(program, command)
    words = {
        word.rstrip(".,;:)")
        for text in help_texts(fresh(program, command))
        for word in text.split()
        if "[" in word
    }
    for word in words:
        assert word in shown, f"{word!r} lost from `{program} {command} --help`"


@pytest.mark.parametrize(("program", "command"), commands(), ids=IDS)
def test_help_shows_value_names_not_python_types(program: str, command: str | None) -> None:
    shown = render(program, command)
    assert "<list[" not in shown
    assert "<bool>" not in shown  # a flag takes no value


@pytest.mark.parametrize(("program", "command"), commands(), ids=IDS)
def test_ranges_are_shown_as_ranges(program: str, command: str | None) -> None:
    for param in fresh(program, command).params:
        if RANGE_IN_WORDS.search(param.help or ""):
            assert getattr(param, "min", None) is not None, (
                f"`{program} {command}` {param.opts}: a range in words, not min/max"
            )


def test_the_help_test_sees_what_it_checks() -> None:
    """A help text with markup-like brackets and a list option: the checks above would fail
    on typer's own rendering, and pass on ours."""
    probe = typer.Typer(cls=guarded_group())

    @probe.command()
    def one(
        tags: Annotated[
            list[str] | None, typer.Option("--tag", help="Tags [[queues.consumers]].")
        ] = None,
        yes: Annotated[bool, typer.Option("--yes", help="In the [redrive] table.")] = False,
    ) -> None:
        """A command [redrive]."""

    @probe.command()
    def two() -> None:
        """Another."""

    shown = runner.invoke(probe, ["one", "--help"], env={"COLUMNS": "200"}).stdout
    assert "[[queues.consumers]]" in shown and "In the [redrive] table." in shown
    assert "A command [redrive]." in shown
    assert "<list[" not in shown and "TAG" in shown and "<bool>" not in shown
    plain = typer.Typer()
    plain.command()(one)
    plain.command()(two)
    shown = runner.invoke(plain, ["one", "--help"], env={"COLUMNS": "200"}).stdout
    assert "[redrive]" not in shown and "<list[str]>" in shown  # what typer does alone
