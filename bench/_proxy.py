"""Loopback proxies in front of the local SQS, each in a process of its own (asyncio).

- `DelayProxy` (bench/poller.py --delay-ms): pipes bytes, holding each request's first chunk
  for a fixed delay; it counts the requests it delays.
- `FaultProxy` (bench/faults.py, redrive_crash.py, partition.py): reads each HTTP request whole
  (botocore sends a Content-Length), then, with probability `rate`, answers it with a fault
  instead of SQS's answer. It can be switched "down": in `refuse` style nothing listens (connection
  refused) and every open connection is cut; in `blackhole` style connections are still accepted
  but no request is answered or passed on, and an answer arriving from SQS is not passed on: the
  connection stays open, silent, until the client gives up (botocore's read timeout). And it can
  SIGKILL a registered process at the first DeleteMessage(Batch) that process sends after a
  SendMessage(Batch), before passing it on: exactly "between send and delete".

Faults (`FAULTS`), each chosen uniformly among those enabled:
- `500`: HTTP 500, an `InternalError` in SQS's JSON protocol shape; the request never reached SQS.
- `throttle`: HTTP 400, `RequestThrottled` (`x-amzn-query-error: RequestThrottled;Sender`, the
  JSON body's `__type`); never reached SQS.
- `drop`: the connection is closed before the request is forwarded.
- `drop-after`: the request is forwarded and takes effect; the connection is closed before the
  answer is passed on (the client does not know whether it worked).
- `slow`: the answer is passed on 1-4 s late.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import random
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "FAULTS",
    "DelayProxy",
    "FaultControl",
    "FaultProxy",
    "ProxySettings",
    "delay_proxy",
    "fault_proxy",
]

CHUNK = 65536
FAULTS = ("500", "throttle", "drop", "drop-after", "slow")


@dataclass
class ProxySettings:
    upstream_host: str
    upstream_port: int
    delay_seconds: float
    max_connections: int
    lifetime_seconds: float


def _settings(upstream: str, delay_seconds: float, max_connections: int, life: float) -> Any:
    parts = urlsplit(upstream)
    assert parts.hostname is not None and parts.port is not None
    return ProxySettings(parts.hostname, parts.port, delay_seconds, max_connections, life)


async def _wait_for_stop(stop: Any, lifetime_seconds: float) -> None:
    parent = os.getppid()
    ends = time.monotonic() + lifetime_seconds
    while not stop.is_set() and os.getppid() == parent and time.monotonic() < ends:
        await asyncio.sleep(0.2)


# -- the delaying proxy ----------------------------------------------------------------------


class DelayProxy:
    """Pipes each client connection to the upstream; holds each request's first chunk."""

    def __init__(self, settings: ProxySettings, requests: Any) -> None:
        self.settings = settings
        self.requests = requests
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.connections >= self.settings.max_connections:
            writer.close()
            return
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(
                self.settings.upstream_host, self.settings.upstream_port
            )
        except OSError:
            self.connections -= 1
            writer.close()
            return
        replied = [True]  # the next client chunk starts a request
        try:
            await asyncio.gather(
                self.pipe(reader, up_writer, replied, upstream=True),
                self.pipe(up_reader, writer, replied, upstream=False),
            )
        except asyncio.CancelledError:
            # The proxy is stopping (`asyncio.run` cancels what is left): end quietly. Python
            # 3.11's stream server reads a done handler task's `exception()`, which raises for
            # a cancelled one, and logged a traceback per open connection at every bench's end.
            pass
        finally:
            self.connections -= 1
            for stream in (writer, up_writer):
                stream.close()

    async def pipe(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        replied: list[bool],
        *,
        upstream: bool,
    ) -> None:
        try:
            while data := await reader.read(CHUNK):
                if upstream and replied[0]:
                    replied[0] = False
                    with self.requests.get_lock():
                        self.requests.value += 1
                    await asyncio.sleep(self.settings.delay_seconds)
                elif not upstream:
                    replied[0] = True
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()  # one side ended: end the other, as a client or server would see it

    async def serve(self, port_out: Any, stop: Any) -> None:
        server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port_out.send(server.sockets[0].getsockname()[1])
        async with server:
            await _wait_for_stop(stop, self.settings.lifetime_seconds)


def _delay_main(settings: ProxySettings, requests: Any, port_out: Any, stop: Any) -> None:
    asyncio.run(DelayProxy(settings, requests).serve(port_out, stop))


@contextmanager
def delay_proxy(
    upstream: str, delay_seconds: float, max_connections: int, lifetime_seconds: float
) -> Iterator[tuple[str, Any]]:
    """(endpoint, request counter) of a DelayProxy in a child process in front of `upstream`."""
    settings = _settings(upstream, delay_seconds, max_connections, lifetime_seconds)
    context = multiprocessing.get_context("spawn")
    requests = context.Value("q", 0)
    with _child(context, _delay_main, (settings, requests)) as endpoint:
        yield endpoint, requests


@contextmanager
def _child(context: Any, target: Any, args: tuple[Any, ...]) -> Iterator[str]:
    port_in, port_out = context.Pipe(duplex=False)
    stop = context.Event()
    child = context.Process(target=target, args=(*args, port_out, stop), daemon=True)
    child.start()
    try:
        if not port_in.poll(60):
            raise RuntimeError("the proxy did not start")
        yield f"http://127.0.0.1:{port_in.recv()}"
    finally:
        stop.set()
        child.join(timeout=10)
        if child.is_alive():
            child.terminate()


# -- the fault proxy -------------------------------------------------------------------------


@dataclass
class FaultControl:
    """What the bench sets and reads while the proxy runs (shared memory)."""

    rate: Any  # Value("d"): probability of a fault per request
    down: Any  # Value("b"): 1 = unreachable
    kill_pid: Any  # Value("q"): SIGKILL this pid between its send and its delete; 0 = nobody
    kills: Any  # Value("q"): kills done
    requests: Any  # Value("q"): requests seen
    faults: Any  # Array("q", len(FAULTS)): faults injected, by kind

    def fault_counts(self) -> dict[str, int]:
        return {kind: int(self.faults[i]) for i, kind in enumerate(FAULTS)}


@dataclass
class Request:
    head: bytes
    body: bytes
    target: str  # X-Amz-Target's operation, e.g. "SendMessageBatch"


class FaultProxy:
    """An HTTP/1.1 proxy that answers a share of requests with faults (module docstring)."""

    def __init__(
        self,
        settings: ProxySettings,
        control: FaultControl,
        kinds: list[str],
        seed: int,
        style: str,
    ) -> None:
        self.settings = settings
        self.control = control
        self.kinds = kinds
        self.random = random.Random(seed)
        self.style = style  # "refuse" or "blackhole", when down
        self.writers: set[asyncio.StreamWriter] = set()
        self.sent = False  # the registered process sent since it was registered

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while (request := await _read_request(reader)) is not None:
                if self.control.down.value:
                    await self._unreachable(reader)
                    break
                if upstream is None:
                    upstream = await asyncio.open_connection(
                        self.settings.upstream_host, self.settings.upstream_port
                    )
                if not await self.exchange(request, writer, *upstream):
                    if self.control.down.value:  # the outage began during this exchange
                        await self._unreachable(reader)
                    break
        except (ConnectionError, OSError, asyncio.IncompleteReadError, ValueError):
            pass
        except asyncio.CancelledError:
            pass  # the proxy is stopping: as in `DelayProxy.handle`
        finally:
            self.writers.discard(writer)
            writer.close()
            if upstream is not None:
                upstream[1].close()

    async def _unreachable(self, reader: asyncio.StreamReader) -> None:
        """While down: "refuse" closes at once; "blackhole" never answers (the client gives up)."""
        if self.style == "blackhole":
            while await reader.read(CHUNK):
                pass

    async def exchange(
        self,
        request: Request,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> bool:
        """Pass one request on (or not); False when the client connection must close."""
        with self.control.requests.get_lock():
            self.control.requests.value += 1
        if self._kill_before(request):
            return False
        fault = self._fault()
        if fault in ("500", "throttle"):
            writer.write(_error_response(fault))
            await writer.drain()
            return True
        if fault == "drop":
            return False
        up_writer.write(request.head + request.body)
        await up_writer.drain()
        response = await _read_response(up_reader)
        if fault == "drop-after" or self.control.down.value:
            return False
        if fault == "slow":
            await asyncio.sleep(self.random.uniform(1.0, 4.0))
        writer.write(response)
        await writer.drain()
        return True

    def _kill_before(self, request: Request) -> bool:
        pid = self.control.kill_pid.value
        if not pid:
            self.sent = False
            return False
        if request.target.startswith("SendMessage"):
            self.sent = True
        elif request.target.startswith("DeleteMessage") and self.sent:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            self.control.kill_pid.value = 0
            self.sent = False
            with self.control.kills.get_lock():
                self.control.kills.value += 1
            return True
        return False

    def _fault(self) -> str | None:
        if not self.kinds or self.random.random() >= self.control.rate.value:
            return None
        kind = self.random.choice(self.kinds)
        with self.control.faults.get_lock():
            self.control.faults[FAULTS.index(kind)] += 1
        return kind

    async def serve(self, port_out: Any, stop: Any) -> None:
        server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        port_out.send(port)
        watcher = asyncio.create_task(_wait_for_stop(stop, self.settings.lifetime_seconds))
        while not watcher.done():
            if self.control.down.value and self.style == "refuse" and server.is_serving():
                server.close()  # nothing listens: connection refused
                for writer in list(self.writers):
                    writer.transport.abort()  # every open connection is cut
            elif not self.control.down.value and not server.is_serving():
                server = await asyncio.start_server(
                    self.handle, "127.0.0.1", port, reuse_address=True
                )
            await asyncio.sleep(0.05)
        server.close()


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    headers = _headers(head)
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    target = headers.get("x-amz-target", "").rsplit(".", 1)[-1]
    return Request(head, body, target)


async def _read_response(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    headers = _headers(head)
    if "content-length" in headers:
        return head + await reader.readexactly(int(headers["content-length"]))
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size_line = await reader.readuntil(b"\r\n")
            chunk = await reader.readexactly(int(size_line.split(b";")[0], 16) + 2)
            body += size_line + chunk
            if size_line.strip() == b"0":
                return head + body
    return head + await reader.read()


def _headers(head: bytes) -> dict[str, str]:
    lines = head.decode("latin-1").split("\r\n")[1:]
    pairs = (line.split(":", 1) for line in lines if ":" in line)
    return {name.strip().lower(): value.strip() for name, value in pairs}


def _error_response(fault: str) -> bytes:
    if fault == "500":
        status, code, kind, text = "500 Internal Server Error", "InternalError", "Receiver", "fault"
    else:
        status, code, kind, text = "400 Bad Request", "RequestThrottled", "Sender", "Rate exceeded"
    body = json.dumps({"__type": f"com.amazonaws.sqs#{code}", "message": text}).encode()
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: application/x-amz-json-1.0\r\n"
        f"x-amzn-query-error: {code};{kind}\r\nx-amzn-RequestId: fault-proxy\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def _fault_main(
    settings: ProxySettings, control: FaultControl, options: tuple[list[str], int, str], *rest: Any
) -> None:
    kinds, seed, style = options
    port_out, stop = rest
    asyncio.run(FaultProxy(settings, control, kinds, seed=seed, style=style).serve(port_out, stop))


@contextmanager
def fault_proxy(
    upstream: str,
    kinds: list[str],
    *,
    seed: int = 1,
    style: str = "refuse",
    lifetime_seconds: float = 3600.0,
) -> Iterator[tuple[str, FaultControl]]:
    """(endpoint, control) of a FaultProxy in a child process in front of `upstream`."""
    unknown = set(kinds) - set(FAULTS)
    if unknown:
        raise ValueError(f"unknown faults {sorted(unknown)}; known: {', '.join(FAULTS)}")
    settings = _settings(upstream, 0.0, 0, lifetime_seconds)
    context = multiprocessing.get_context("spawn")
    control = FaultControl(
        rate=context.Value("d", 0.0),
        down=context.Value("b", 0),
        kill_pid=context.Value("q", 0),
        kills=context.Value("q", 0),
        requests=context.Value("q", 0),
        faults=context.Array("q", len(FAULTS)),
    )
    with _child(context, _fault_main, (settings, control, (kinds, seed, style))) as endpoint:
        yield endpoint, control
