"""A loopback HTTP proxy to a local SQS that holds back the requests of one queue: while `hold`
is armed, a request whose operation and body match it waits until `release()` (or a bound) before
it is passed on; every other request passes at once. An endpoint that is slow for one queue, for
the redrive daemon's test that one slow DLQ does not hold up the others. One request per client
connection (botocore opens another), so a held request never delays a request behind it."""

from __future__ import annotations

import socket
import threading
from contextlib import closing, suppress
from urllib.parse import urlsplit

__all__ = ["HoldingProxy", "holding_proxy"]

BOUND_SECONDS = 120.0
"""The longest a request is held, whatever happens to the test."""


class HoldingProxy:
    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.endpoint_url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        self._hold: tuple[str, str] | None = None
        self._released = threading.Event()
        self._closed = threading.Event()
        self.held = 0
        """Requests held so far."""
        self.passed: list[str] = []
        """The operations passed on, in order."""
        threading.Thread(target=self._accept, daemon=True).start()

    def hold(self, operation: str, marker: str) -> None:
        """Hold each `operation` request whose body contains `marker` until `release()`."""
        self._released.clear()
        self._hold = (operation, marker)

    def release(self) -> None:
        self._hold = None
        self._released.set()

    def close(self) -> None:
        self.release()
        self._closed.set()
        with suppress(OSError):
            self._server.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with client, suppress(OSError):
            request, operation = _read_message(client, request=True)
            if not request:
                return
            hold = self._hold
            if hold is not None and operation == hold[0] and hold[1].encode() in request:
                self.held += 1
                self._released.wait(BOUND_SECONDS)
            self.passed.append(operation)
            with socket.create_connection(self._upstream) as upstream:
                upstream.sendall(request)
                response, _ = _read_message(upstream, request=False)
            client.sendall(response)


def _read_message(sock: socket.socket, *, request: bool) -> tuple[bytes, str]:
    """One HTTP message (head and Content-Length body) and, for a request, its operation."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data, ""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (
            line.partition(":") for line in head.decode("latin-1").split("\r\n")[1:]
        )
    }
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    operation = headers.get("x-amz-target", "").rsplit(".", 1)[-1] if request else ""
    return head + b"\r\n\r\n" + body, operation


def holding_proxy(upstream: str) -> closing[HoldingProxy]:
    """The proxy, closed when the block ends."""
    return closing(HoldingProxy(upstream))
