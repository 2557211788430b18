"""The global options of both apps (`sqsbatch`, `redrive`), and how a command line is read.

`--endpoint-url`, `--region`, `--profile` and `--json` are the app's, not a command's, and may
come before or after the command, as with the AWS CLI: `hoist` moves them in front of the
command name before the parser sees the line. A command that still declares one of them itself
(its own `--json`) keeps it, wherever it was given.

`tidy_help` makes `--help` print help texts as written: rich markup would eat `[redrive]`, and
typer would show `<list[str]>` and `<bool>` where a value name or nothing is meant.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any
from urllib.parse import urlsplit

import typer
from rich.markup import escape
from typer._click.exceptions import UsageError  # typer's vendored click
from typer.core import TyperOption

__all__ = [
    "GLOBAL_OPTIONS",
    "EndpointUrl",
    "JsonOutput",
    "Profile",
    "Region",
    "endpoint_problem",
    "hoist",
    "tidy_help",
    "version_option",
]

GLOBAL_OPTIONS = ("--endpoint-url", "--region", "--profile", "--json")
"""The app's options that may also come after the command."""


def endpoint_problem(url: str) -> str | None:
    """What is wrong with an endpoint URL, as the end of a sentence about it; None if nothing."""
    if any(character.isspace() for character in url):
        return "has a space (or another blank) in it: a URL has none"
    if "://" not in url:
        return f"has no scheme: give http://{url} or https://{url}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - reading it checks it
    except ValueError as exc:
        if "IPv6" in str(exc):
            return "has an IPv6 address that is not closed: write it as http://[::1]:4566"
        if "out of range" in str(exc):
            return "has a port out of range (accepted: 0..65535)"
        return f"has a port that is not a number ({exc})"
    if parts.scheme not in ("http", "https"):
        return f"has the scheme {parts.scheme!r}: give http:// or https://"
    if not parts.hostname:
        return "has no host"
    return None


def _check_endpoint(value: str | None) -> str | None:
    problem = None if value is None else endpoint_problem(value)
    if problem is not None:
        raise typer.BadParameter(f"{value!r} {problem}")
    return value


EndpointUrl = Annotated[
    str | None,
    typer.Option(
        "--endpoint-url",
        metavar="URL",
        callback=_check_endpoint,
        help="SQS endpoint, e.g. from `sqsbatch dev` "
        "(default: $AWS_ENDPOINT_URL_SQS, else AWS's endpoint for the region).",
        show_default=False,
    ),
]
Region = Annotated[
    str | None,
    typer.Option(
        "--region",
        metavar="REGION",
        help="AWS region (default: $AWS_REGION / the profile's).",
        show_default=False,
    ),
]
Profile = Annotated[
    str | None,
    typer.Option(
        "--profile",
        metavar="PROFILE",
        help="AWS profile (default: $AWS_PROFILE).",
        show_default=False,
    ),
]
JsonOutput = Annotated[
    bool, typer.Option("--json", help="Print JSON on stdout (for scripts), not tables.")
]


def version_option(program: str) -> Any:
    """`--version`: prints `program <sqsbatch's version>` and exits."""

    def show(value: bool) -> None:
        if value:
            from sqsbatch._version import __version__  # noqa: PLC0415 - only when asked

            typer.echo(f"{program} {__version__}")
            raise typer.Exit

    return typer.Option("--version", callback=show, is_eager=True, help="Print the version.")


# -- reading the command line ----------------------------------------------------------------

Arity = dict[str, int]
"""Option string -> how many values follow it (0 for a flag)."""


def arity(params: Iterable[Any]) -> Arity:
    """The arity table of a command's parameters."""
    table: Arity = {}
    for param in params:
        if isinstance(param, TyperOption):
            count = 0 if param.is_flag or param.count else max(1, param.nargs)
            for opt in (*param.opts, *param.secondary_opts):
                table[opt] = count
    return table


def _option(token: str, table: Arity) -> tuple[str | None, int]:
    """The option a token names (None for a value or an unknown option), and the values that
    follow it as separate tokens."""
    if token.startswith("--"):
        name, equals, _ = token.partition("=")
        if name not in table:
            return None, 0
        return name, 0 if equals else table[name]
    if token.startswith("-") and len(token) > 1 and token[:2] in table:
        name = token[:2]
        attached = len(token) > 2  # -fVALUE
        return name, max(0, table[name] - attached)
    return None, 0


def command_index(args: Sequence[str], table: Arity) -> int | None:
    """Where the command name is in a group's arguments (None: no command, or after `--`)."""
    index = 0
    while index < len(args):
        token = args[index]
        if token == "--":
            return None
        if not token.startswith("-") or token == "-":
            return index
        index += 1 + _option(token, table)[1]
    return None


def _take(tokens: Sequence[str], wanted: set[str], table: Arity) -> tuple[list[str], list[str]]:
    """(the tokens left, the wanted options with their values); values and what follows `--`
    stay put, so a value or a positional that looks like an option is never taken."""
    kept: list[str] = []
    taken: list[str] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token == "--":
            kept.extend(tokens[index:])
            break
        name, values = _option(token, table)
        end = index + 1 + values
        if name in wanted and end > len(tokens):
            raise UsageError(f"Option '{name}' requires an argument.")
        (taken if name in wanted else kept).extend(tokens[index:end])
        index = end
    return kept, taken


def hoist(
    args: Sequence[str], group: Arity, command_of: Callable[[str], Arity | None]
) -> list[str]:
    """`args` with the group's global options moved before the command name, and those the
    command declares itself moved after it. `command_of(name)` is that command's arity table
    (None for an unknown command: then `args` is returned as it is, for the parser to refuse)."""
    at = command_index(args, group)
    if at is None:
        return list(args)
    command = command_of(args[at])
    if command is None:
        return list(args)
    globals_ = {opt for opt in GLOBAL_OPTIONS if opt in group}
    own = globals_ & set(command)
    hoisted = globals_ - own
    before, moved_down = _take(args[:at], own, group)
    after, moved_up = _take(args[at + 1 :], hoisted, command | {o: group[o] for o in hoisted})
    return [*before, *moved_up, args[at], *moved_down, *after]


# -- help ------------------------------------------------------------------------------------


def tidy_help(command: Any, ctx: Any) -> None:
    """Make a command's help print as written (idempotent)."""
    if getattr(command, "_sqsbatch_tidy", False):
        return
    command._sqsbatch_tidy = True
    for field in ("help", "short_help"):
        text = getattr(command, field, None)
        if text:
            setattr(command, field, _as_written(text))
    for param in command.get_params(ctx):  # with the help option
        if getattr(param, "help", None):
            param.help = _as_written(param.help)
        if isinstance(param, TyperOption) and param.metavar is None:
            if param.is_flag or param.count:
                param.metavar = ""  # takes no value: no `<bool>`, no `<int>`
            elif param.multiple:
                param.metavar = (param.name or "value").upper()


def _as_written(text: str) -> str:
    """Help text with its brackets kept (no rich markup) and each paragraph on one line, for
    rich to wrap at the terminal's width (typer keeps a docstring's line breaks, which gives
    ragged lines in a narrower terminal). A paragraph that starts with click's `\\b` is kept."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(escape(p if p.startswith("\b") else " ".join(p.split())) for p in paragraphs)
