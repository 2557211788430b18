"""What `send` reads: a body from a file or stdin, or one message per line of a JSON-lines file.

`send --lines` checks every line (JSON, and the library's own checks: size, attributes, FIFO)
before it sends anything, so a bad line costs no message; then it sends in batches of
`MAX_SEND_BATCH` (10 per SQS call). If SQS refuses some, the ids that went out are printed
and the error names the lines that did not: nothing is sent twice or lost without a word.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sqsbatch._core.envelope import ContentType
from sqsbatch._core.sending import MAX_SEND_BATCH, MessageSendRequest, SendPlan
from sqsbatch._sync.producer import Producer
from sqsbatch.cli.common import CliError
from sqsbatch.errors import SendError, SqsBatchError

__all__ = ["Line", "check_lines", "read_input", "read_lines", "send_lines"]

Line = tuple[int, Any, ContentType]
"""A line to send: its number in the file (from 1), its body, and the body's content type."""

Request = Callable[[Line], MessageSendRequest]


def read_input(file: Path) -> bytes:
    """The bytes of a file, or of stdin for `-`; one error line if it cannot be read."""
    if str(file) == "-":
        return sys.stdin.buffer.read()
    try:
        return file.read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {file}: {exc.strerror}") from None


def read_lines(file: Path, *, text: bool) -> list[Line]:
    """The non-blank lines of a UTF-8 file: each a JSON value (or, with `text`, a string)."""
    try:
        content = read_input(file).decode("utf-8")
    except UnicodeDecodeError:
        raise CliError(f"{file} is not UTF-8 text") from None
    lines: list[Line] = []
    for number, raw in enumerate(content.split("\n"), 1):  # JSON lines: split at \n only
        line = raw.removesuffix("\r")
        if not line.strip():
            continue
        if text:
            lines.append((number, line, "text"))
            continue
        try:
            lines.append((number, json.loads(line), "json"))
        except ValueError as exc:
            shown = line if len(line) <= 40 else line[:39] + "…"
            raise CliError(f"{file} line {number} is not JSON ({exc}): {shown!r}") from None
    if not lines:
        raise CliError(f"{file} has no lines to send")
    return lines


def check_lines(producer: Producer, lines: Sequence[Line], request: Request) -> None:
    """Every check the library makes before a send, per line: one error naming the line."""
    now = time.time()
    for line in lines:
        try:
            SendPlan(
                producer.queue,
                [request(line)],
                batch_delay=None,
                default_delay=producer.delivery_delay,
                wall_now=now,
            )
        except SqsBatchError as exc:
            raise CliError(f"line {line[0]}: {exc} (nothing was sent)") from None


def send_lines(
    producer: Producer, lines: Sequence[Line], request: Request, show: Callable[[list[str]], None]
) -> list[str]:
    """Send the lines in batches; their message ids, in order. On an error after some went
    out, `show` those ids, then raise one error naming the lines that were not sent."""
    sent: list[str] = []
    for start in range(0, len(lines), MAX_SEND_BATCH):
        batch = lines[start : start + MAX_SEND_BATCH]
        try:
            sent.extend(producer.send_batch([request(line) for line in batch]))
        except SqsBatchError as exc:
            failed = _failed(exc, len(batch))
            sent.extend(exc.sent_ids if isinstance(exc, SendError) else [])
            if not sent:
                raise  # nothing went out: the error as it is
            show(sent)
            unsent = [batch[i][0] for i in failed] + [n for n, _, _ in lines[start + len(batch) :]]
            raise CliError(
                f"lines {_ranges(unsent)} were not sent ({_reason(exc)}); the other "
                f"{len(sent)} of {len(lines)} were: their ids are on stdout"
            ) from None
    return sent


def _failed(exc: SqsBatchError, size: int) -> list[int]:
    """Which entries of a batch did not go out: those a `SendError` names, else all."""
    if not isinstance(exc, SendError):
        return list(range(size))
    return sorted(int(key.rsplit("#", 1)[-1]) for key in exc.failed)


def _reason(exc: SqsBatchError) -> str:
    if isinstance(exc, SendError):
        return "; ".join(sorted(set(exc.failed.values())))
    return str(exc)


def _ranges(numbers: Sequence[int]) -> str:
    """`1-3, 7, 9-10` for [1, 2, 3, 7, 9, 10]."""
    spans: list[list[int]] = []
    for number in numbers:
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
