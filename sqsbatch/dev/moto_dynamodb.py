"""moto's DynamoDB, one request at a time: a lock around its request handler, in this process.

The local server (`sqsbatch.dev.server.LocalSqs`) also serves DynamoDB, for the idempotency
guard's table (docs/idempotency.md). moto 5.2 runs requests on threads at once, and its
`TransactWriteItems` is not safe beside another write: it deep-copies each table it writes
before it starts, to put that copy back if a condition fails. A write made by another request
meanwhile is then undone (a completed record gone, a claim lost: the guard would run a message
twice), and a copy taken while another request changes the table fails the request with
`RuntimeError: dictionary changed size during iteration`. Real DynamoDB has neither fault.

`apply()` makes each DynamoDB request run alone (one lock for the process), which is what a
transaction promises; moto's answers are unchanged. It wraps `DynamoHandler.call_action`, the
one method every DynamoDB request goes through, and needs nothing else of moto's source.
`LocalSqs.start()` applies it; tests/dev/test_local_dynamodb.py shows the fault without it.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

__all__ = ["apply", "is_applied", "revert"]

_lock = threading.Lock()
_one_request = threading.RLock()
_original: list[Any] = []  # moto's own call_action, while the lock is applied


def apply() -> bool:
    """Serialize moto's DynamoDB requests (once per process); True when applied."""
    with _lock:
        if _original:
            return True
        handler = _handler_class()
        own = handler.call_action
        _original.append(own)

        @functools.wraps(own)
        def call_action(self: Any) -> Any:
            with _one_request:
                return own(self)

        handler.call_action = call_action
        return True


def revert() -> None:
    """moto's own handler again (the tests show the fault with it)."""
    with _lock:
        if _original:
            _handler_class().call_action = _original.pop()


def is_applied() -> bool:
    return bool(_original)


def _handler_class() -> Any:
    from moto.dynamodb.responses import DynamoHandler  # noqa: PLC0415 - moto: an optional extra

    return DynamoHandler
