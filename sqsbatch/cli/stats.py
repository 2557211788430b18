"""`stats QUEUE [--watch] [--json]`: a queue and its DLQ at a glance, for a person.

Everything comes from `GetQueueAttributes` (one call per queue per reading): nothing is ever
received just to look, since a receive counts against the message's maxReceiveCount. Two
things SQS's API cannot give are said so rather than guessed:

- the age of the oldest message is CloudWatch's `ApproximateAgeOfOldestMessage`, not a queue
  attribute: the table shows '-' and points there (alarm on it: docs/operations.md);
- whether the DLQ is growing needs two readings: `--watch` compares each reading with the
  first one; a single reading says 'unknown'.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.live import Live
from rich.table import Table

from sqsbatch._core.shapes import queue_name
from sqsbatch._sync.door import SyncSqs
from sqsbatch.cli.common import err, out, print_json, queue_attributes, sqs_for, wants_json

__all__ = ["Depth", "Trend", "app", "trend"]

app = typer.Typer()

NO_OLDEST_AGE = (
    "oldest message age: SQS's API does not give it (CloudWatch's ApproximateAgeOfOldestMessage "
    "does; sqsbatch never receives messages just to look)"
)
ONE_READING = "DLQ growing: unknown from one reading (--watch compares readings)"
DEFAULT_INTERVAL = 5.0


@dataclass(frozen=True)
class Depth:
    """One reading of one queue's approximate counts."""

    visible: int
    in_flight: int
    delayed: int

    @property
    def total(self) -> int:
        return self.visible + self.in_flight + self.delayed

    @classmethod
    def of(cls, attributes: dict[str, str]) -> Depth:
        return cls(
            visible=int(attributes.get("ApproximateNumberOfMessages", 0)),
            in_flight=int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
            delayed=int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)),
        )


@dataclass(frozen=True)
class Trend:
    """The DLQ's change since the first reading: `growing` None when there is only one."""

    growing: bool | None
    change: int | None
    since_seconds: float | None

    def shown(self) -> str:
        if self.growing is None or self.change is None or self.since_seconds is None:
            return "unknown (one reading)"
        since = f"in {self.since_seconds:.0f} s"
        if self.change > 0:
            return f"yes, +{self.change} {since}"
        return f"no, {self.change:+d} {since}" if self.change else f"no, steady {since}"


def trend(first: tuple[float, int] | None, now: tuple[float, int]) -> Trend:
    """Growth of the DLQ between the first reading and this one ((time, total) each). SQS's
    counts are approximate: any rise counts as growing, since a DLQ should not grow at all."""
    if first is None or now[0] <= first[0]:
        return Trend(None, None, None)
    change = now[1] - first[1]
    return Trend(change > 0, change, now[0] - first[0])


@app.command()
def stats(  # noqa: PLR0917 - typer options are parameters
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(metavar="QUEUE", help="Queue name or URL.")],
    watch: Annotated[
        bool, typer.Option("--watch", "-w", help="Refresh in place until Ctrl-C.")
    ] = False,
    interval: Annotated[
        float | None,
        typer.Option(
            min=0.1,
            max=3600,
            help="With --watch: seconds between readings (default: 5).",
            show_default=False,
        ),
    ] = None,
    count: Annotated[
        int | None, typer.Option(min=1, help="With --watch: stop after this many readings.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout (for scripts).")] = False,
) -> None:
    """The queue's and its DLQ's depths, in flight, delayed, and whether the DLQ is growing.

    Reads queue attributes only (never receives). The oldest message's age is CloudWatch's
    ApproximateAgeOfOldestMessage, which SQS's API does not give: shown as '-'. Whether the
    DLQ grows needs two readings: --watch compares each reading with the first. With --json
    (and --watch) one JSON object per reading, one per line.
    """
    if not watch and (count is not None or interval is not None):
        given = "--count" if count is not None else "--interval"
        raise typer.BadParameter(
            f"{given} goes with --watch (repeated readings): add --watch, or drop {given}",
            param_hint=f"'{given}'",
        )
    sqs = sqs_for(ctx)
    as_json = as_json or wants_json(ctx)
    every = interval if interval is not None else DEFAULT_INTERVAL
    readings = _readings(sqs, queue, every, 1 if not watch else count)
    if as_json:
        for reading in readings:
            if watch:
                typer.echo(json.dumps(reading))  # JSON lines: one object per reading
            else:
                print_json(reading)
        return
    if not watch or not out.is_terminal:
        for reading in readings:
            out.print(_table(reading))
        return
    with Live(console=out, auto_refresh=False) as live:
        for reading in readings:
            live.update(_table(reading), refresh=True)


def _readings(
    sqs: SyncSqs, queue: str, interval: float, count: int | None
) -> Iterator[dict[str, Any]]:
    """One reading after another, `interval` apart, until `count` (None: until Ctrl-C)."""
    first: tuple[float, int] | None = None
    taken = 0
    try:
        while count is None or taken < count:
            if taken:
                time.sleep(interval)
            reading = _reading(sqs, queue, first)
            if first is None and reading["dead_letter_queue"] is not None:
                first = (reading["at"], reading["dead_letter_queue"]["total"])
            taken += 1
            yield reading
    except KeyboardInterrupt:
        err.print("stopped", markup=False)


def _reading(sqs: SyncSqs, queue: str, first: tuple[float, int] | None) -> dict[str, Any]:
    attributes = queue_attributes(sqs, queue)
    at = time.time()
    policy = json.loads(attributes.get("RedrivePolicy") or "{}")
    target = policy.get("deadLetterTargetArn")
    dlq: dict[str, Any] | None = None
    if target:
        name = str(target).rsplit(":", 1)[-1]
        depth = Depth.of(queue_attributes(sqs, name))
        change = trend(first, (at, depth.total))
        dlq = {
            "name": name,
            **_depth(depth),
            "growing": change.growing,
            "change": change.change,
            "since_seconds": change.since_seconds,
        }
    count = policy.get("maxReceiveCount")
    return {
        "queue": queue_name(queue),
        "at": at,
        **_depth(Depth.of(attributes)),
        "oldest_age_seconds": None,
        "max_receive_count": int(count) if count is not None else None,
        "dead_letter_queue": dlq,
        "notes": [NO_OLDEST_AGE] + ([ONE_READING] if dlq and dlq["growing"] is None else []),
    }


def _depth(depth: Depth) -> dict[str, int]:
    return {
        "visible": depth.visible,
        "in_flight": depth.in_flight,
        "delayed": depth.delayed,
        "total": depth.total,
    }


def _table(reading: dict[str, Any]) -> Table:
    stamp = time.strftime("%H:%M:%S", time.localtime(reading["at"]))
    table = Table(title=f"{reading['queue']} at {stamp}", title_justify="left")
    table.add_column("queue", overflow="fold")
    for column in ("visible", "in flight", "delayed", "oldest", "growing"):
        table.add_column(column, justify="right")
    table.add_row(
        reading["queue"],
        str(reading["visible"]),
        str(reading["in_flight"]),
        str(reading["delayed"]),
        "-",
        "",
    )
    dlq = reading["dead_letter_queue"]
    if dlq is not None:
        change = Trend(dlq["growing"], dlq["change"], dlq["since_seconds"])
        growing = change.shown()
        if dlq["growing"]:
            growing = f"[bold red]{growing}[/]"
        table.add_row(
            f"{dlq['name']} (DLQ)",
            str(dlq["visible"]),
            str(dlq["in_flight"]),
            str(dlq["delayed"]),
            "-",
            growing,
        )
    else:
        table.add_row("(no DLQ: the queue has no RedrivePolicy)", "", "", "", "", "")
    table.caption = (
        "oldest: '-', SQS's API does not give it (CloudWatch's ApproximateAgeOfOldestMessage does)"
    )
    return table
