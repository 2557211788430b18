"""README.md is a first page, not a lab notebook: short, `pip install sqsbatch` on its first
screen, the two quick-start commands, a cost summary of a few lines, and no run-by-run figures
(no dates, no clock times: those live in docs/performance.md's log)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import typer
import typer.main
from typer._click.exceptions import UsageError  # typer's vendored click, as sqsbatch/cli's
from typer.core import TyperGroup

from redrive.cli import app as redrive_app
from sqsbatch.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DATE = re.compile(r"(?<!\d)\d{4}-\d{2}-\d{2}(?!\d)")
CLOCK = re.compile(r"(?<![\d:.])\d{1,2}:\d{2}(?::\d{2})?(?![\d:])")


def lines() -> list[str]:
    return README.read_text().splitlines()


def section(title: str) -> list[str]:
    text = lines()
    start = text.index(f"## {title}")
    after = [i for i, line in enumerate(text[start + 1 :], start + 1) if line.startswith("## ")]
    return text[start : after[0] if after else len(text)]


def test_the_readme_is_at_most_250_lines() -> None:
    assert len(lines()) <= 250


def test_pip_install_is_on_the_first_screen() -> None:
    assert any("pip install sqsbatch" in line for line in lines()[:40])


def test_no_dates_or_clock_times() -> None:
    found = [
        f"line {n}: {match}"
        for n, line in enumerate(lines(), 1)
        for match in DATE.findall(line) + CLOCK.findall(line)
    ]
    assert not found, f"README.md has dates or clock times (docs/performance.md's log): {found}"


def test_the_patterns_catch_what_they_are_for() -> None:
    assert DATE.findall("on 2026-11-25, 23:49") == ["2026-11-25"]
    assert CLOCK.findall("on 2026-11-25, 23:49; at 11:02 and 8:05:59") == [
        "23:49",
        "11:02",
        "8:05:59",
    ]
    assert not CLOCK.findall("http://127.0.0.1:4566 --filter error:TimeoutError 0.2:1")


def test_the_quick_start_is_make_demo_and_make_test() -> None:
    text = README.read_text()
    assert re.search(r"^make demo\b", text, re.M) and re.search(r"^make test\b", text, re.M)


def test_the_cost_summary_is_at_most_25_lines() -> None:
    cost = section("What it costs")
    assert len(cost) <= 25, f"the cost section has {len(cost)} lines"
    assert "docs/performance.md" in "\n".join(cost)


def shell_lines(program: str) -> list[list[str]]:
    """The README's `sh` lines that run `program`, split as a shell would, comments dropped."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), re.S)
    found = [shlex.split(line, comments=True) for block in blocks for line in block.splitlines()]
    return [args[1:] for args in found if args and args[0] == program]


def parses(group: TyperGroup, args: list[str]) -> str | None:
    """None if `args` are a command line `group` accepts (parsed, not run), else why not. The
    group parses first, as it would: its options may come before or after the command."""
    try:
        context = group.make_context(group.name, list(args))
        name, *rest = [*context._protected_args, *context.args]
        command = group.get_command(context, name)
        if command is None:
            return f"no command {name!r}"
        command.make_context(name, rest, parent=context)
    except UsageError as error:
        return error.format_message()
    except typer.Exit:
        return "refused by the group (its one line is on stderr)"
    return None


def test_the_command_lines_it_shows_parse() -> None:
    sqsbatch, redrive = typer.main.get_command(app), typer.main.get_command(redrive_app)
    assert isinstance(sqsbatch, TyperGroup) and isinstance(redrive, TyperGroup)
    lines = [(sqsbatch, args) for args in shell_lines("sqsbatch")]
    lines += [(redrive, args) for args in shell_lines("redrive")]
    assert len(lines) >= 10
    refused = {shlex.join(args): parses(group, args) for group, args in lines}
    assert not {line: why for line, why in refused.items() if why}
    assert parses(sqsbatch, ["create", "orders", "--no-such-option"])
    assert parses(redrive, ["run", "--dlq"])
