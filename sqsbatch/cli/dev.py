"""`dev`: serve a local SQS endpoint (moto) on 127.0.0.1 until Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import threading
from typing import Annotated

import typer

from sqsbatch.cli.common import err
from sqsbatch.dev.server import LocalSqs

__all__ = ["app"]

app = typer.Typer()


@app.command()
def dev(
    port: Annotated[int, typer.Option(min=0, max=65_535, help="Port (0: a free one).")] = 0,
) -> None:
    """Serve a local SQS endpoint for development: no AWS account, nothing kept on disk.

    Prints the `export` lines that point boto3, sqsbatch and the AWS CLI at it; stops cleanly on
    Ctrl-C or SIGTERM. Queues live in memory and are gone when it stops.
    """
    server = LocalSqs(port=port).start()  # a taken port fails here, in one line
    try:
        for name, value in server.environment().items():
            typer.echo(f"export {name}={value}")
        err.print(f"local SQS at {server.endpoint_url}; Ctrl-C stops it")
        _wait_for_signal()
    finally:
        server.stop()
    err.print("stopped")


def _wait_for_signal() -> None:
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.wait(0.5):
            pass
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
