"""Logging for a long-running command (`sqsbatch consume`, `redrive run`), on stderr.

One handler on the ROOT logger, so that the library's records and those of the user's own code
(`logging.getLogger(__name__).warning(...)` in a handler module) come out the same way:

- `rich` (the default on a terminal): rich's log view, with rich tracebacks (no locals).
- `plain` (the default in a pipe or a container): one line per record, never wrapped,
  `2026-11-22T10:17:12.345+00:00 WARNING sqsbatch: message`; control characters in the
  message are escaped, so a record is one line; a traceback follows its line.
- `json`: one JSON object per line with `time`, `level`, `logger`, `message`, `exception`
  (the traceback, as a string) when there is one, and the structured fields a record carries
  as `record.redrive` (the redrive daemon's `action`, `dlq`, `id`, ...): what CloudWatch Logs
  Insights reads as fields.

Times are ISO 8601 with the local UTC offset. The level applies to every logger except the
AWS SDK's and urllib3's, which stay at WARNING (their DEBUG records are request dumps).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, TextIO

import typer

from sqsbatch.cli.common import STDERR, err
from sqsbatch.cli.escape import printable

__all__ = [
    "LogFormat",
    "LogFormatOption",
    "LogLevel",
    "LogLevelOption",
    "VerboseOption",
    "cli_logging",
    "log_level",
]

SDK_LOGGERS = ("boto3", "botocore", "aioboto3", "aiobotocore", "s3transfer", "urllib3", "aiohttp")
"""Held at WARNING or above whatever the level: their DEBUG output is every request."""


class LogFormat(StrEnum):
    AUTO = "auto"
    PLAIN = "plain"
    JSON = "json"
    RICH = "rich"


class LogLevel(StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"


LogFormatOption = Annotated[
    LogFormat,
    typer.Option(
        "--log-format",
        case_sensitive=False,
        help="auto: rich on a terminal, plain otherwise; plain: one line per record; "
        "json: one JSON object per line (CloudWatch Logs Insights).",
    ),
]
LogLevelOption = Annotated[
    LogLevel | None,
    typer.Option("--log-level", case_sensitive=False, help="Show records of this level and up."),
]
VerboseOption = Annotated[
    int,
    typer.Option(
        "--verbose", "-v", count=True, show_default=False, help="-v: INFO records too, -vv: DEBUG."
    ),
]


def log_level(level: LogLevel | None, verbose: int, *, default: int) -> int:
    """The level a run logs at: the more verbose of `--log-level` and `-v`, else `default`."""
    chosen: list[int] = []
    if level is not None:
        chosen.append(logging.getLevelNamesMapping()[level.value])
    if verbose:
        chosen.append(logging.INFO if verbose == 1 else logging.DEBUG)
    return min(chosen) if chosen else default


@contextmanager
def cli_logging(log_format: LogFormat, level: int) -> Iterator[None]:
    """Log every record of `level` and up on stderr in `log_format`, for the block; the root
    logger's handlers and the levels touched are restored afterwards."""
    handler = _handler(log_format)
    root = logging.getLogger()
    touched = [root, *(logging.getLogger(n) for n in ("sqsbatch", "redrive", *SDK_LOGGERS))]
    saved = [(logger, logger.level, logger.propagate) for logger in touched]
    root.addHandler(handler)
    root.setLevel(level)
    for name in ("sqsbatch", "redrive"):
        logging.getLogger(name).setLevel(logging.NOTSET)  # the root's level decides
        logging.getLogger(name).propagate = True
    for name in SDK_LOGGERS:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
    # notes and the error line too, until the next command starts (`remember_options`)
    STDERR.json = log_format is LogFormat.JSON
    try:
        yield
    finally:
        root.removeHandler(handler)
        for logger, old_level, propagate in saved:
            logger.setLevel(old_level)
            logger.propagate = propagate


def _handler(log_format: LogFormat) -> logging.Handler:
    if log_format is LogFormat.AUTO:
        log_format = LogFormat.RICH if err.is_terminal else LogFormat.PLAIN
    if log_format is LogFormat.RICH:
        from rich.logging import RichHandler  # noqa: PLC0415

        rich = RichHandler(console=err, show_path=False, markup=False, rich_tracebacks=True)
        rich.setFormatter(_RichMessage())
        return rich
    handler = _Stderr()
    handler.setFormatter(_Json() if log_format is LogFormat.JSON else _Plain())
    return handler


class _Stderr(logging.StreamHandler[TextIO]):
    """A stream handler on whatever `sys.stderr` is when a record comes (tests swap it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def _time(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created).astimezone().isoformat(timespec="milliseconds")


class _Plain(logging.Formatter):
    """`TIME LEVEL LOGGER: message` on one line; the traceback, if any, on the lines after."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return f"{_time(record)} {record.levelname} {record.name}: {printable(record.message)}"


class _RichMessage(logging.Formatter):
    """rich shows the time and level; the message says which logger, escaped."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return f"{record.name}: {printable(record.message)}"


class _Json(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _time(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info and record.exc_info[0] is not None:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        fields = getattr(record, "redrive", None)
        if isinstance(fields, Mapping):
            for key, value in fields.items():
                if value is not None:
                    line.setdefault(str(key), value)
        return json.dumps(line, default=str)
