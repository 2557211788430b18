"""The `sqsbatch` app: global options, the command modules, and the one place errors are caught.

Errors a user can cause (a missing queue, no credentials, a bad argument, a bad module path) are
printed as one `error: ...` line on stderr (`common.user_errors`); usage errors exit 2, the
others 1. Anything else is a bug and gets typer's traceback, without local variables
(credentials live in locals).
"""

from __future__ import annotations

from typing import Annotated

import typer

from sqsbatch.cli import consume, demo, dev, dlq, health, keda, messages, pause, queue_admin, stats
from sqsbatch.cli.common import Connection, guarded_group, remember_options
from sqsbatch.cli.options import EndpointUrl, JsonOutput, Profile, Region, version_option

__all__ = ["app"]


app = typer.Typer(
    name="sqsbatch",
    cls=guarded_group(),
    help="Cloudflare Queues' consumer model on Amazon SQS: queues, messages, consumers, DLQs.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    add_completion=False,
)


@app.callback()
def _options(  # noqa: PLR0917 - typer options are parameters
    ctx: typer.Context,
    endpoint_url: EndpointUrl = None,
    region: Region = None,
    profile: Profile = None,
    as_json: JsonOutput = False,
    version: Annotated[bool, version_option("sqsbatch")] = False,
) -> None:
    """Every command takes a queue name or URL. The options above may also come after the
    command (`sqsbatch queues --json`)."""
    where = Connection(endpoint_url=endpoint_url, region=region, profile=profile)
    remember_options(ctx, where, as_json=as_json)


for _module in (queue_admin, pause, stats, messages, consume, health, keda, dlq, demo, dev):
    app.add_typer(_module.app)
