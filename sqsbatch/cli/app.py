"""The `sqsbatch` app: global options, the command modules, and the one place errors are caught.

Errors a user can cause (a missing queue, no credentials, a bad argument, a bad module path) are
printed as one `error: ...` line on stderr; usage errors exit 2, the others 1. Anything else is a
bug and gets typer's traceback, without local variables (credentials live in locals).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from sqsbatch import __version__
from sqsbatch.cli import consume, demo, dev, dlq, messages, queues
from sqsbatch.cli.common import CliError, Connection, fail, guarded_group
from sqsbatch.errors import SqsBatchError

__all__ = ["app"]


@contextmanager
def _user_errors() -> Iterator[None]:
    """Turn the errors a user can cause into one line and an exit code."""
    from typer._click.exceptions import (  # noqa: PLC0415 - typer's vendored click
        ClickException,
        NoArgsIsHelpError,
        UsageError,
    )

    try:
        yield
    except NoArgsIsHelpError:
        raise  # shows the help, as asked
    except UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        raise fail(exc.format_message() + hint, exc.exit_code) from None
    except ClickException as exc:
        raise fail(exc.format_message(), exc.exit_code) from None
    except (SqsBatchError, CliError) as exc:
        raise fail(str(exc), 1) from None


app = typer.Typer(
    name="sqsbatch",
    cls=guarded_group(_user_errors),
    help="Cloudflare Queues' consumer model on Amazon SQS: queues, messages, consumers, DLQs.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"sqsbatch {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    ctx: typer.Context,
    endpoint_url: Annotated[
        str | None,
        typer.Option(
            help="SQS endpoint, e.g. from `sqsbatch dev` "
            "(default: $AWS_ENDPOINT_URL_SQS, else AWS's endpoint for the region)",
            show_default=False,
        ),
    ] = None,
    region: Annotated[
        str | None,
        typer.Option(help="AWS region (default: $AWS_REGION / the profile's)", show_default=False),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option(help="AWS profile (default: $AWS_PROFILE)", show_default=False),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Every command takes a queue name or URL. Scripts: add `--json` where offered."""
    ctx.obj = Connection(endpoint_url=endpoint_url, region=region, profile=profile)


for _module in (queues, messages, consume, dlq, demo, dev):
    app.add_typer(_module.app)
