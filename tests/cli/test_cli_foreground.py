"""`sqsbatch consume` in the foreground, as a real process: Ctrl-C once (graceful, and said at
once), Ctrl-C twice (at once, exit 130), live counters on a terminal only (a pseudo-terminal
here), plain logs in a pipe. Every wait polls for a state, with generous deadlines."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from sqsbatch import Producer, create_queue
from sqsbatch.dev.server import LOCAL_CREDENTIALS, LocalSqs
from tests.support.processes import spawned
from tests.support.waiting import wait_for

SCRIPT = Path(sys.executable).with_name("sqsbatch")
DEADLINE_SECONDS = 60.0

HANDLERS = """
import asyncio, logging, pathlib, time

log = logging.getLogger("held_handlers")

def _wait_for_go():
    pathlib.Path("started").touch()
    log.warning("holding a batch until ./go exists")
    deadline = time.monotonic() + 120
    while not pathlib.Path("go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)

def hold(batch):
    _wait_for_go()

async def hold_async(batch):
    await asyncio.to_thread(_wait_for_go)
"""


def environment(local_sqs: LocalSqs) -> dict[str, str]:
    env = {**os.environ, **LOCAL_CREDENTIALS, "AWS_ENDPOINT_URL_SQS": local_sqs.endpoint_url}
    for noisy in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE"):
        env.pop(noisy, None)
    return env | {"TERM": "xterm-256color"}


class Consume:
    """`sqsbatch consume held_handlers:FUNCTION` with its output collected as it comes."""

    def __init__(self, process: subprocess.Popen[bytes], streams: dict[str, int]) -> None:
        self.process = process
        self.output = {name: bytearray() for name in streams}
        self._readers = [
            threading.Thread(target=self._read, args=(name, fd), daemon=True)
            for name, fd in streams.items()
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, name: str, fd: int) -> None:
        while True:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if not ready:
                if self.process.poll() is not None and not select.select([fd], [], [], 0)[0]:
                    return
                continue
            try:
                data = os.read(fd, 65536)
            except OSError:  # the pty's other side is closed
                return
            if not data:
                return
            self.output[name] += data

    def text(self, name: str) -> str:
        return self.output[name].decode("utf-8", "replace")

    def wait_for_text(self, name: str, text: str) -> None:
        wait_for(lambda: text in self.text(name), f"{text!r} on {name}")

    def finish(self) -> int:
        code = self.process.wait(timeout=DEADLINE_SECONDS)
        for reader in self._readers:
            reader.join(timeout=DEADLINE_SECONDS)
        return code


@pytest.fixture
def consume(local_sqs: LocalSqs, tmp_path: Path) -> Iterator[Callable[..., Consume]]:
    (tmp_path / "held_handlers.py").write_text(HANDLERS)
    children = ExitStack()  # on leaving: every child killed if it still runs, and reaped

    def start(*args: str, tty: bool = False) -> Consume:
        command = [str(SCRIPT), "consume", *args, "--max-batch-timeout", "0", "--poll-seconds", "1"]
        where: dict[str, Any] = {"env": environment(local_sqs), "cwd": tmp_path}
        if tty:
            leader, follower = pty.openpty()
            children.callback(os.close, leader)  # closed after the child is reaped
            fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
            process = children.enter_context(
                spawned(command, **where, stdin=follower, stdout=follower, stderr=follower)
            )
            os.close(follower)
            return Consume(process, {"tty": leader})
        process = children.enter_context(
            spawned(
                command, **where,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )
        )  # fmt: skip
        assert process.stdout is not None and process.stderr is not None
        return Consume(
            process, {"stdout": process.stdout.fileno(), "stderr": process.stderr.fileno()}
        )

    with children:
        yield start
        (tmp_path / "go").touch()


def counts(sqs: Any, queue: str) -> tuple[int, int]:
    """(visible, in flight) messages of `queue`."""
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return int(found[names[0]]), int(found[names[1]])


@pytest.mark.parametrize("function", ["hold", "hold_async"])
def test_the_first_ctrl_c_says_what_it_waits_for_then_stops_gracefully(
    consume: Callable[..., Consume], sqs: Any, name: str, tmp_path: Path, function: str
) -> None:
    # Given a consumer in a pipe, with one message in its handler's hands
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send("one")
    extra = ["--async"] if function == "hold_async" else []
    running = consume(f"held_handlers:{function}", "-q", name, "--json", *extra)
    wait_for((tmp_path / "started").exists, "the handler to start")
    # When Ctrl-C comes
    running.process.send_signal(signal.SIGINT)
    # Then it says at once, before the handler returns, that it stops and what it waits for
    running.wait_for_text("stderr", "SIGINT: stopping")
    [line] = [x for x in running.text("stderr").splitlines() if x.startswith("SIGINT")]
    assert "waiting for 1 message(s) in flight" in line
    assert "current long poll (up to 1 s)" in line and "Ctrl-C again stops at once" in line
    assert running.process.poll() is None  # still waiting for the handler
    # and once the handler returns, it settles the batch and exits 0
    (tmp_path / "go").touch()
    assert running.finish() == 0, running.text("stderr")
    assert json.loads(running.text("stdout"))["stats"]["acked"] == 1
    assert counts(sqs, name) == (0, 0)
    assert "╭" not in running.text("stderr")  # no live view in a pipe


def test_a_second_ctrl_c_stops_at_once_with_130_and_leaves_messages_to_sqs(
    consume: Callable[..., Consume], sqs: Any, name: str, tmp_path: Path
) -> None:
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send("one")
    running = consume("held_handlers:hold", "-q", name, "--visibility-timeout", "60")
    wait_for((tmp_path / "started").exists, "the handler to start")
    running.process.send_signal(signal.SIGINT)
    running.wait_for_text("stderr", "SIGINT: stopping")
    running.process.send_signal(signal.SIGINT)
    assert running.finish() == 130
    last = running.text("stderr").strip().splitlines()[-1]
    assert last.startswith("SIGINT again: stopped at once; 1 message(s) in flight")
    assert "visibility timeout ends (60 s" in last
    assert running.text("stdout") == ""
    assert counts(sqs, name) == (0, 1)  # not settled, not lost: SQS gives it back later


def test_on_a_terminal_it_shows_live_counters_and_rich_logs(
    consume: Callable[..., Consume], sqs: Any, name: str, tmp_path: Path
) -> None:
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send("one")
    running = consume("held_handlers:hold", "-q", name, tty=True)
    wait_for((tmp_path / "started").exists, "the handler to start")
    running.wait_for_text("tty", "in flight")
    running.wait_for_text("tty", "holding a batch")
    (tmp_path / "go").touch()
    wait_for(lambda: counts(sqs, name) == (0, 0), "the message to be acked")
    running.process.send_signal(signal.SIGINT)
    assert running.finish() == 0
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", running.text("tty"))
    assert "consuming " in screen and "received" in screen and "dead-lettered" in screen
    log_line = next(line for line in screen.splitlines() if "holding a batch" in line)
    assert "WARNING" in log_line and "held_handlers:" in log_line
    assert not re.search(r"\d{4}-\d\d-\d\dT", log_line)  # rich's view, not the plain line
    assert "consumer of" in screen  # the final table


def test_in_a_pipe_logs_are_plain_lines(
    consume: Callable[..., Consume], sqs: Any, name: str, tmp_path: Path
) -> None:
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send("one")
    running = consume("held_handlers:hold", "-q", name, "--once", "--idle-seconds", "0.5")
    (tmp_path / "go").touch()
    assert running.finish() == 0
    assert re.search(
        r"^\S+T\S+ WARNING held_handlers: holding a batch until \./go exists$",
        running.text("stderr"),
        re.M,
    )
