"""`redrive DLQ`: a one-shot operator redrive, with a progress bar and a summary table.

Moves matching dead-lettered messages now, whatever their backoff (`redrive.move_now`), or starts
SQS's own move task (`--native`). The daemon that redrives on a schedule is the `redrive` command
of the `redrive` package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

if TYPE_CHECKING:
    from redrive import MoveReport, MoveRow

from sqsbatch._core.envelope import MOVED_BY_SQS, MOVED_BY_SQS_TEXT
from sqsbatch._core.shapes import queue_name
from sqsbatch.cli.common import CliError, ask, err, fail, out, print_json, queue_attributes, sqs_for
from sqsbatch.cli.filters import Select, parse_filters
from sqsbatch.cli.interrupt import Interrupt
from sqsbatch.errors import ConfigError

__all__ = ["app"]

app = typer.Typer()


@app.command("redrive")
def redrive_command(
    ctx: typer.Context,
    dlq: Annotated[str, typer.Argument(help="Dead-letter queue name or URL.")],
    *,
    to: Annotated[
        str | None, typer.Option(help="Target queue (default: each message's source queue).")
    ] = None,
    filters: Annotated[
        list[str] | None,
        typer.Option(
            "--filter",
            help="TEXT (body contains), re:REGEX, attr:NAME=VALUE, error:TYPE, !EXPR; "
            "repeat to require all.",
        ),
    ] = None,
    reasons: Annotated[
        str | None,
        typer.Option(
            metavar="R1,R2",
            help="Dead-letter reasons to move, comma-separated: retries_exhausted, expired, "
            "invalid_body, requested (any a handler gave), requested:TEXT, moved_by_sqs, or all "
            "(default: all but expired,invalid_body, which would die again).",
        ),
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Move at most this many.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would move.")] = False,
    native: Annotated[
        bool,
        typer.Option(
            "--native",
            help="Start SQS's StartMessageMoveTask instead: moves all, asynchronously; messages "
            "the sqsbatch consumer dead-lettered itself need --to.",
        ),
    ] = False,
    rate: Annotated[
        int | None, typer.Option(min=1, max=500, help="With --native: messages per second.")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Move dead-lettered messages back now, regardless of their backoff.

    Messages go to their source queue (from sqsbatch's metadata, else the DLQ's only source),
    or to --to. Each is sent before it is deleted from the DLQ: a crash can duplicate one, never
    lose it. Messages dead-lettered as expired or invalid_body stay (they would die again)
    unless --reasons names them. Asks first, unless --yes or --dry-run.
    """
    select = parse_filters(filters or [])
    chosen = _reasons(reasons)
    if native and (select is not None or limit is not None or dry_run or reasons is not None):
        raise typer.BadParameter(
            "--native moves every message: no --filter, --reasons, --limit or --dry-run"
        )
    if rate is not None and not native:
        raise typer.BadParameter("--rate goes with --native")
    import redrive  # noqa: PLC0415 - the sibling package; only this command needs it

    _check_destination(dlq, to)
    sqs = sqs_for(ctx)
    depth = int(queue_attributes(sqs, dlq).get("ApproximateNumberOfMessages", 0))
    name = queue_name(dlq)
    where = f"to {queue_name(to)}" if to else "to their source queues"
    if not (yes or dry_run):
        which = "matching messages" if select is not None else "messages"
        count = min(depth, limit) if limit is not None else depth
        if not ask(f"Move up to {count} {which} of {name} (~{depth} visible) {where}?"):
            raise CliError("nothing moved (answer y, or pass --yes)")
    if native:
        handle = redrive.start_native_move(dlq, to=to, rate=rate, client=sqs.client)
        if as_json:
            print_json({"dlq": name, "task_handle": handle})
        else:
            out.print(f"started SQS message move task from {name} {where}: {handle}")
        return
    stop = Interrupt()  # Ctrl-C: the report of what moved, then exit 130
    report = _move(
        dlq=dlq,
        client=sqs.client,
        to=to,
        select=select,
        limit=limit,
        dry_run=dry_run,
        depth=depth,
        stop=stop,
        reasons=chosen,
    )
    _show(name, report, dry_run=dry_run, as_json=as_json, kept=_kept_note(chosen, report.kept))
    stop.exit(name)


def _reasons(given: str | None) -> list[str] | None:
    """`--reasons`, checked before anything is asked or received (a typo: one line)."""
    if given is None:
        return None
    from redrive.reasons import Reasons  # noqa: PLC0415

    chosen = [item.strip() for item in given.split(",")]
    try:
        Reasons.of(chosen)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--reasons'") from None
    return chosen


def _kept_note(reasons: list[str] | None, kept: int) -> str | None:
    """What stayed for its reason, and how to move it, or None when nothing did."""
    from redrive.reasons import Reasons  # noqa: PLC0415

    if not kept:
        return None
    which = ",".join(Reasons.of(reasons).kept())
    return (
        f"kept {kept} message(s) dead-lettered as {which.replace(',', ' or ')} where they are "
        f"(they would die again); --reasons {which} moves them too"
    )


def _check_destination(dlq: str, to: str | None) -> None:
    """`--to` the DLQ itself is refused before anything is asked or received."""
    from redrive.manual import check_destination  # noqa: PLC0415

    try:
        check_destination(dlq, to)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--to'") from None


def _move(
    *,
    dlq: str,
    client: Any,
    to: str | None,
    select: Select | None,
    limit: int | None,
    dry_run: bool,
    depth: int,
    stop: Interrupt,
    reasons: list[str] | None,
) -> MoveReport:
    from redrive import move_now  # noqa: PLC0415

    with (
        Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        ) as progress,
        stop,
    ):
        task = progress.add_task("checking" if dry_run else "moving", total=depth or None)

        def advance(row: MoveRow) -> None:
            progress.advance(task)
            stop.rows.append(row)

        return move_now(
            dlq,
            to=to,
            select=select,
            limit=limit,
            dry_run=dry_run,
            client=client,
            on_message=advance,
            stop=stop.asked,
            reasons=reasons,
        )


def _show(name: str, report: MoveReport, *, dry_run: bool, as_json: bool, kept: str | None) -> None:
    would = sum(1 for row in report.rows if row.action == "would-move")
    moved = would if dry_run else report.moved
    if as_json:
        print_json(
            {
                "dlq": name,
                "dry_run": dry_run,
                "moved": moved,
                "skipped": report.skipped,
                "kept": report.kept,
                "failed": report.failed,
                "messages": [row.as_dict() for row in report.rows],
            }
        )
    else:
        verb = "would move" if dry_run else "moved"
        table = Table(
            title=f"{name}: {verb} {moved}, failed {report.failed}, kept {report.kept}, "
            f"skipped {report.skipped} (not selected, or past --limit)",
            title_justify="left",
        )
        for column in ("id", "from", "to", "last reason", "last error", "action"):
            table.add_column(column, overflow="fold")
        for row in report.rows:
            if row.action != "skipped":
                action = row.action + (f": {row.error}" if row.error else "")
                reason = MOVED_BY_SQS_TEXT if row.reason == MOVED_BY_SQS else row.reason
                cells = (row.id, row.source or "-", row.target or "-", reason, row.error_type)
                table.add_row(*cells, action)
        out.print(table)
    if kept is not None:
        err.print(f"note: {kept}", markup=False, soft_wrap=True)
    if report.failed:
        raise fail(f"{report.failed} message(s) could not be moved; they stay in {name}")
