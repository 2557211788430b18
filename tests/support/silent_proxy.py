"""A loopback TCP proxy to a local SQS that can go silent: after `silence()` it still accepts
connections and reads requests, and never answers (an endpoint that hangs, not one that is
down). For the health-file and stall-watchdog tests."""

from __future__ import annotations

import socket
import threading
from contextlib import closing, suppress
from urllib.parse import urlsplit

__all__ = ["SilentProxy", "silent_proxy"]


class SilentProxy:
    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.endpoint_url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        self.silent = threading.Event()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self.swallowed = 0
        """Connections accepted while silent (a client's retry opens a new one)."""
        threading.Thread(target=self._accept, daemon=True).start()

    def silence(self) -> None:
        """From now on, nothing more reaches the upstream and nothing more comes back."""
        self.silent.set()

    def resume(self) -> None:
        """New connections reach the upstream again (those accepted while silent stay silent)."""
        self.silent.clear()

    def close(self) -> None:
        self._closed.set()
        for sock in [self._server, *self._sockets]:
            with suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            self._sockets.append(client)
            if self.silent.is_set():
                self.swallowed += 1
                threading.Thread(target=self._swallow, args=(client,), daemon=True).start()
                continue
            upstream = socket.create_connection(self._upstream)
            self._sockets.append(upstream)
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, target), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket) -> None:
        with suppress(OSError):
            while chunk := source.recv(65536):
                if self.silent.is_set():
                    continue  # read and dropped: the request never arrives, no answer comes
                target.sendall(chunk)
        with suppress(OSError):
            target.shutdown(socket.SHUT_WR)

    def _swallow(self, client: socket.socket) -> None:
        with suppress(OSError):
            while client.recv(65536):
                pass


def silent_proxy(upstream: str) -> closing[SilentProxy]:
    """The proxy, closed when the block ends."""
    return closing(SilentProxy(upstream))
