"""`--filter EXPR` of `redrive` (which dead-lettered messages to move) and `inspect` (which
peeked messages to show). Pure: no I/O.

    TEXT              the body contains TEXT (the body as sent, e.g. JSON text)
    body:TEXT         the same, for a TEXT that starts with one of these prefixes
    re:REGEX          the body matches REGEX (Python `re.search`)
    attr:NAME=VALUE   the message attribute NAME equals VALUE
    attr:NAME         the message has an attribute NAME
    error:TYPE        the last error's type is TYPE (`TimeoutError` also matches
                      `asyncio.TimeoutError`)
    reason:REASON     the last dead-letter reason is in the category REASON:
                      retries_exhausted, expired, invalid_body, moved_by_sqs (SQS's
                      RedrivePolicy moved it), requested (any reason a handler gave
                      dead_letter()); or it is exactly the text REASON a handler gave
    !EXPR             not EXPR

Several `--filter` options must all match.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import typer

from sqsbatch._core.envelope import DecodedMessage, death_reason
from sqsbatch._core.reasons import matches

__all__ = ["Select", "parse_filter", "parse_filters"]

Select = Callable[[DecodedMessage], bool]


def parse_filters(expressions: Sequence[str]) -> Select | None:
    """One predicate for all `expressions` (None when there are none: everything matches)."""
    if not expressions:
        return None
    predicates = [parse_filter(expression) for expression in expressions]
    return lambda message: all(predicate(message) for predicate in predicates)


def parse_filter(expression: str) -> Select:
    """The predicate for one expression; `typer.BadParameter` when it cannot be one."""
    positive = expression.lstrip("!")
    if (len(expression) - len(positive)) % 2 == 1:  # an odd number of `!`: not EXPR
        inner = _positive(positive, expression)
        return lambda message: not inner(message)
    return _positive(positive, expression)


def _positive(expression: str, given: str) -> Select:
    """The predicate for an expression without a leading `!` (`given` is what was typed)."""
    kind, sep, rest = expression.partition(":")
    if not sep or kind not in ("body", "re", "attr", "error", "reason"):
        kind, rest = "body", expression
    if not rest:
        raise typer.BadParameter(f"--filter {given!r} is empty after the prefix")
    if kind == "re":
        return _regex(rest)
    if kind == "attr":
        return _attribute(rest)
    if kind == "error":
        return _error(rest)
    if kind == "reason":
        return lambda message: matches(death_reason(message.envelope), rest)
    return lambda message: rest in message.raw_body


def _regex(pattern: str) -> Select:
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise typer.BadParameter(f"--filter re:{pattern!r} is not a valid regex: {exc}") from None
    return lambda message: compiled.search(message.raw_body) is not None


def _attribute(spec: str) -> Select:
    name, sep, value = spec.partition("=")
    if not name:
        raise typer.BadParameter(f"--filter attr:{spec!r}: expected attr:NAME=VALUE or attr:NAME")
    if not sep:
        return lambda message: name in message.attributes
    return lambda message: _text(message.attributes.get(name)) == value


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _error(wanted: str) -> Select:
    def matches(message: DecodedMessage) -> bool:
        error = message.envelope.error
        if error is None:
            return False
        return error.type == wanted or error.type.rsplit(".", 1)[-1] == wanted

    return matches
