"""`demo`: the whole story in under a minute on an embedded local SQS, no AWS account.

Produce orders, consume them in batches with retries and backoff under a live view, watch the
outage's victims and the poison land in the DLQ, let the redrive daemon bring them back, and see
where every message ended and what it cost in SQS requests.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table

from sqsbatch.cli.common import CliError, err, out, print_json
from sqsbatch.cli.demo_story import KINDS, DemoSettings, Story
from sqsbatch.dev.server import LocalSqs

__all__ = ["app"]

app = typer.Typer()

ENDINGS = ("acked", "acked after retries", "acked after redrive", "dead-letter queue", "unsettled")


@app.command()
def demo(
    fast: Annotated[
        bool, typer.Option("--fast", help="40 messages, no waits, no live view (for tests).")
    ] = False,
    messages: Annotated[
        int | None, typer.Option(min=10, max=1000, help="How many orders (default 300; 40 fast).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")] = False,
) -> None:
    """Run the whole story on an embedded local SQS (moto): no AWS account, no setup.

    A queue and its DLQ; orders that succeed, fail once or twice (retried with exponential
    backoff), meet a downstream outage (dead-lettered, then redriven once it is over) or are
    poison (dead-lettered, redriven once, dead-lettered for good). Ends with where every message
    ended and the SQS requests it took.
    """
    _redrive_ready()
    settings = DemoSettings.fast() if fast else DemoSettings()
    if messages is not None:
        settings = DemoSettings(**{**settings.__dict__, "messages": messages})
    with _quiet_library(), LocalSqs() as local:
        story = Story(local.client(max_pool_connections=32), local.client(), settings)
        live = not (fast or as_json) and out.is_terminal
        if not as_json:
            out.print(f"local SQS at {local.endpoint_url} (moto, in this process)")
            out.print(f"queue {story.queue}, dead-letter queue {story.dlq}")
        with _live_view(story, enabled=live):
            _run(story, narrate=not (live or as_json))
        result = story.outcome()
    if as_json:
        print_json(result)
    else:
        out.print(_summary(result))
    if not result["complete"]:
        raise CliError("the demo did not settle every message before its deadline")


def _run(story: Story, *, narrate: bool) -> None:
    steps = (
        ("queue, DLQ and orders ready", story.setup),
        ("consumed: retried with backoff, dead-lettered the rest", story.consume),
        ("outage over: the redrive daemon brought the DLQ back", story.redrive),
        ("consumer stopped", story.finish),
    )
    for label, step in steps:
        step()
        if narrate:
            err.print(f"[dim]{_elapsed(story)}[/] {label}: {_counts(story)}")


def _redrive_ready() -> None:
    try:
        import redrive  # noqa: PLC0415
    except ImportError:
        raise CliError("the demo needs the redrive package (pip install sqsbatch)") from None
    if not hasattr(redrive, "Redriver"):
        raise CliError("this redrive package has no Redriver (too old?)")


def _elapsed(story: Story) -> str:
    import time  # noqa: PLC0415

    return f"{time.monotonic() - story.started:5.1f}s"


def _counts(story: Story) -> str:
    stats = story.consumer.stats.as_dict() if story.consumer else {}
    redriven = story.redriver.stats.moved if story.redriver else 0
    return (
        f"{len(story.ledger.kinds)} produced, "
        f"{story.ledger.batches} batches, {stats.get('acked', 0)} acked, "
        f"{stats.get('retried', 0)} retried, {stats.get('dead_lettered', 0)} dead-lettered, "
        f"{redriven} redriven"
    )


@contextmanager
def _quiet_library() -> Iterator[None]:
    """The handler raises on purpose: keep the library's warnings off the demo's screen."""
    loggers = [logging.getLogger(name) for name in ("sqsbatch", "redrive")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


@contextmanager
def _live_view(story: Story, *, enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    with Live(get_renderable=lambda: _view(story), console=out, refresh_per_second=8):
        yield


def _view(story: Story) -> Panel:
    stats = story.consumer.stats.as_dict() if story.consumer else {}
    total = max(1, len(story.ledger.kinds))
    acked = stats.get("acked", 0)
    table = Table.grid(padding=(0, 2))
    table.add_column(justify="right")
    table.add_column()
    rows = (
        ("produced", len(story.ledger.kinds)),
        ("batches delivered", story.ledger.batches),
        ("acked", acked),
        ("retried", stats.get("retried", 0)),
        ("dead-lettered", stats.get("dead_lettered", 0)),
        ("redriven", story.redriver.stats.moved if story.redriver else 0),
        ("SQS requests", sum(story.requests.values())),
    )
    for label, value in rows:
        table.add_row(f"[bold]{value}[/]", label)
    bar = ProgressBar(total=total, completed=min(acked, total), width=50)
    title = f"sqsbatch demo · {_elapsed(story)} · {story.phase_name}"
    return Panel(Group(table, bar), title=title, title_align="left")


def _summary(result: dict[str, Any]) -> Table:
    table = Table(
        title=f"where {result['messages']} messages ended ({result['seconds']} s, "
        f"{result['requests']} SQS requests: {result['requests_per_message']} per message)",
        title_justify="left",
    )
    table.add_column("kind")
    endings = [e for e in ENDINGS if e in result["ended"]]
    for ending in endings:
        table.add_column(ending, justify="right")
    table.add_column("total", justify="right")
    for kind in KINDS:
        counts = result["by_kind"].get(kind, {})
        if counts:
            cells = [str(counts.get(e, "")) for e in endings]
            table.add_row(kind, *cells, str(sum(counts.values())))
    ops = ", ".join(f"{op} {n}" for op, n in result["requests_by_operation"].items())
    table.caption = f"requests by operation: {ops}"
    table.caption_justify = "left"
    return table
