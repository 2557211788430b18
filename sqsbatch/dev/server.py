"""An SQS endpoint on this machine, with no AWS account: moto's server mode on loopback.

Used by the tests, `sqsbatch demo` and `sqsbatch dev`. Needs the `local` extra
(`pip install 'sqsbatch[local]'`). `start()` applies `sqsbatch.dev.moto_speedup` to moto 5.2 in this
process, so that receives and sends stay fast as queues grow; another moto runs unpatched.
"""

from __future__ import annotations

import logging
import socket
from types import TracebackType
from typing import Any, Self

from sqsbatch._shell.botocore import client_config
from sqsbatch.dev import moto_dynamodb, moto_speedup
from sqsbatch.errors import SqsBatchError

__all__ = ["LOCAL_CREDENTIALS", "LocalSqs"]

LOCAL_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class _OneLineErrors(logging.Filter):
    """A request moto failed on (werkzeug's `Error on request:` and a traceback) as one line:
    the exception's, with a hint when it is an unknown region."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith("Error on request"):
            last = message.strip().splitlines()[-1]
            hint = ""
            if last.startswith("KeyError: '"):
                hint = " (a region moto does not know? it serves AWS's regions, e.g. us-east-1)"
            record.msg, record.args = f"local SQS: a request failed: {last}{hint}", ()
            record.exc_info = record.exc_text = None
        return True


_ONE_LINE = _OneLineErrors()


class LocalSqs:
    """A moto server on `host:port` (port 0 picks a free one). Use as a context manager."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host = host
        self._port = port
        self._server: Any = None
        self.endpoint_url = ""

    def start(self) -> Self:
        try:
            from moto.server import ThreadedMotoServer  # noqa: PLC0415 - an optional extra
        except ImportError as exc:
            raise SqsBatchError("the local SQS needs moto: pip install 'sqsbatch[local]'") from exc
        if self._port:
            _check_free(self._host, self._port)
        moto_speedup.apply()  # once per process; a moto it does not fit logs one line, unpatched
        moto_dynamodb.apply()  # DynamoDB requests one at a time, as its transactions need
        # moto logs every request through werkzeug; only errors are worth showing, each in one
        # line (werkzeug logs a failed request with moto's whole traceback).
        werkzeug = logging.getLogger("werkzeug")
        werkzeug.setLevel(logging.ERROR)
        if _ONE_LINE not in werkzeug.filters:
            werkzeug.addFilter(_ONE_LINE)
        self._server = ThreadedMotoServer(ip_address=self._host, port=self._port, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint_url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def environment(self) -> dict[str, str]:
        """The variables that point boto3 (and the sqsbatch CLI) at this endpoint."""
        return {"AWS_ENDPOINT_URL_SQS": self.endpoint_url, **LOCAL_CREDENTIALS}

    def client(self, **config: Any) -> Any:
        """A boto3 SQS client for this endpoint."""
        import boto3  # noqa: PLC0415 - boto3 is slow to import; most users never call this

        return boto3.session.Session().client(
            "sqs",
            endpoint_url=self.endpoint_url,
            region_name=LOCAL_CREDENTIALS["AWS_DEFAULT_REGION"],
            aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            config=client_config(**config),
        )

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def _check_free(host: str, port: int) -> None:
    """Fail at once on a taken port: moto's server thread would only log it, and start() hang."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as werkzeug binds
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise SqsBatchError(
                f"cannot serve a local SQS on {host}:{port}: {exc.strerror}"
            ) from None
