"""What the benchmarks share: the local SQS in a child process, and the command line to print.

The SQS server runs in a process of its own so that its CPU is not the client's; it prints its
endpoint, and serves until its stdin closes (the bench ends) or SIGALRM (a bound on its life).
`local_sqs` runs moto's (`sqsbatch.dev.server.LocalSqs`); bench/_lean_sqs.py's `lean_sqs`
runs a lean in-memory one through `child_server`, for benches where moto's CPU would be the
bottleneck.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqsbatch._core.shapes import RECEIVE_SYSTEM_ATTRIBUTES

__all__ = ["Server", "child_server", "command", "hand_round", "local_sqs"]

SERVER_CODE = """
import json, signal, sys
from sqsbatch.dev import moto_speedup
from sqsbatch.dev.server import LocalSqs
signal.alarm(int(sys.argv[1]))
with LocalSqs() as server:
    info = {"endpoint": server.endpoint_url, "speedup": moto_speedup.is_applied()}
    print(json.dumps(info), flush=True)
    sys.stdin.read()
"""


@dataclass(frozen=True)
class Server:
    """The local SQS child: its endpoint, whether moto is patched, its pid, which server it is
    ("moto": moto's, `local_sqs`; "lean": bench/_lean_sqs.py's, no moto in it; "stub": none,
    bench/_stub_sqs.py answers in the client's process)."""

    endpoint: str
    speedup: bool
    pid: int
    kind: str = "moto"

    def cpu_seconds(self) -> float:
        """utime + stime of the server process so far (Linux /proc; 0 elsewhere, or no server)."""
        if self.kind == "stub":
            return 0.0
        try:
            with open(f"/proc/{self.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def versions(self, *packages: str) -> str:
        """What the figures were measured with: Python, `packages`, CPUs, the local SQS (moto's,
        with or without the speed-up, or the lean one)."""
        found = [f"{name} {_version(name)}" for name in packages]
        if self.kind == "moto":
            server = f"moto speed-up {'applied' if self.speedup else 'not applied'}"
        elif self.kind == "stub":
            server = "no server: bench/_stub_sqs.py answers in the client's process"
        else:
            server = "local SQS: bench/_lean_sqs.py (in memory, no moto)"
        python = f"Python {platform.python_version()}"
        return f"{python}, {', '.join(found)}; {os.cpu_count()} CPUs; {server}"


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


@contextmanager
def local_sqs(lifetime_seconds: int) -> Iterator[Server]:
    """A LocalSqs in a child process, ended when the block ends (or after `lifetime_seconds`)."""
    with child_server([sys.executable, "-c", SERVER_CODE, str(lifetime_seconds)], "moto") as server:
        yield server


@contextmanager
def child_server(args: list[str], kind: str) -> Iterator[Server]:
    """The SQS server that `args` starts: it prints `{"endpoint", "speedup"}` as one JSON line,
    and serves until its stdin closes (when the block ends)."""
    child = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        info = json.loads(child.stdout.readline())
        yield Server(info["endpoint"], info["speedup"], child.pid, kind)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)


def command() -> str:
    """The command line that made this run, to print beside its figures."""
    exe = os.path.relpath(sys.executable)
    return shlex.join([sys.executable if exe.startswith("..") else exe, *sys.argv])


def hand_round(client: Any, url: str, handle: Callable[[str], object]) -> int:
    """One round of the hand-written baseline loop, as a user would write it: receive 10 (the
    attributes the pollers ask for), `handle` each body, delete them in one batch call. Returns
    how many came (0: the queue looked empty, nothing to delete)."""
    messages = client.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=10,
        WaitTimeSeconds=1,
        MessageSystemAttributeNames=RECEIVE_SYSTEM_ATTRIBUTES,
        MessageAttributeNames=["All"],
    ).get("Messages", [])
    if not messages:
        return 0
    for message in messages:
        handle(message["Body"])
    entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
    client.delete_message_batch(QueueUrl=url, Entries=entries)
    return len(messages)


async def async_hand_round(client: Any, url: str, handle: Callable[[str], object]) -> int:
    """`hand_round` for an aiobotocore client (or any with `async def` calls)."""
    answer = await client.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=10,
        WaitTimeSeconds=1,
        MessageSystemAttributeNames=RECEIVE_SYSTEM_ATTRIBUTES,
        MessageAttributeNames=["All"],
    )
    messages = answer.get("Messages", [])
    if not messages:
        return 0
    for message in messages:
        handle(message["Body"])
    entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
    await client.delete_message_batch(QueueUrl=url, Entries=entries)
    return len(messages)
