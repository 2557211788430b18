"""`health PATH --max-age SECONDS`: the container health check of a long-running process.

`sqsbatch consume --health-file PATH` and `redrive run --health-file PATH` touch PATH while
they are alive (docs/operations.md); this command exits 0 when PATH was touched within
`--max-age` seconds and 1 otherwise, with one line saying how stale it is. It makes no call
to SQS and needs no credentials.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from sqsbatch._shell.health import age_seconds
from sqsbatch.cli.common import fail, out

__all__ = ["app"]

app = typer.Typer()


@app.command()
def health(
    path: Annotated[str, typer.Argument(metavar="PATH", help="The --health-file to check.")],
    max_age: Annotated[
        float,
        typer.Option(
            "--max-age",
            help="Seconds since the last touch that still count as healthy (> 0).",
        ),
    ],
) -> None:
    """Exit 0 when PATH was touched within --max-age seconds, else 1 with how stale it is.

    For an ECS container health check: `sqsbatch health /tmp/sqsbatch.health --max-age 90`.
    """
    if not max_age > 0:
        raise typer.BadParameter(f"{max_age:g} is invalid: must be > 0", param_hint="--max-age")
    if Path(path).is_dir():
        raise typer.BadParameter(
            f"{path} is a directory: give the file that --health-file names{_nearest(Path(path))}",
            param_hint="PATH",
        )
    if not Path(path).exists():
        raise fail(f"unhealthy: {path} does not exist (no process writes it)")
    age = age_seconds(path, time.time())
    if age is None:
        raise fail(f"unhealthy: {path} not touched yet (the process has not reached SQS)")
    if age > max_age:
        raise fail(f"unhealthy: {path} last touched {age:.1f} s ago (--max-age {max_age:g})")
    out.print(f"healthy: {path} touched {max(age, 0.0):.1f} s ago", markup=False, highlight=False)


def _nearest(folder: Path) -> str:
    """`, e.g. DIR/x.health`: a health file in the directory, else the usual name there."""
    try:
        found = sorted(p for p in folder.iterdir() if p.suffix == ".health" and p.is_file())
    except OSError:
        found = []
    return f", e.g. {found[0] if found else folder / 'sqsbatch.health'}"
