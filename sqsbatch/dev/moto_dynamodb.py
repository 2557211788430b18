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
one method every DynamoDB request goes through. `LocalSqs.start()` applies it;
tests/dev/test_local_dynamodb.py shows the fault without it.

And, with requests one at a time, a transaction no longer needs a copy of each whole table: it
made every `TransactWriteItems` cost in proportion to the table (one deep copy per item of the
transaction: 20 ms for 10 puts on an empty table, 820 ms once it held 5,000 items, which made a
guarded poller's claims time out in bench/crash.py's longer runs). `apply()` also wraps
`DynamoDBBackend.transact_write_items`: it keeps a copy of the items the transaction names
(none for a key not there yet), lets moto run it with its table copies made no-ops, and puts
those items back if it fails. Where moto's models are not shaped as this expects (`Table.items`,
the key attributes, the module's `copy`), transactions keep moto's own copies.
"""

from __future__ import annotations

import copy
import functools
import threading
import types
from typing import Any

__all__ = ["apply", "is_applied", "revert"]

_lock = threading.Lock()
_one_request = threading.RLock()
_original: list[Any] = []  # moto's own call_action, while the lock is applied
_original_transact: list[Any] = []  # moto's own transact_write_items, while replaced


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
        _replace_transactions()
        return True


def revert() -> None:
    """moto's own handler again (the tests show the fault with it)."""
    with _lock:
        if _original:
            _handler_class().call_action = _original.pop()
        if _original_transact:
            _backend_class().transact_write_items = _original_transact.pop()


def _replace_transactions() -> None:
    """`DynamoDBBackend.transact_write_items` with a copy of the items it names, not of each
    table (the module's docstring); left as it is where moto is shaped otherwise."""
    from moto.dynamodb import models  # noqa: PLC0415
    from moto.dynamodb.models.table import Table  # noqa: PLC0415

    if not isinstance(getattr(models, "copy", None), types.ModuleType):
        return
    backend = _backend_class()
    own = backend.transact_write_items
    _original_transact.append(own)

    @functools.wraps(own)
    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        with _one_request:  # (held already when called through the handler)
            kept = _items_named(self, transact_items)
            if kept is None:  # not understood: moto's own copies
                own(self, transact_items)
                return
            setattr(models, "copy", _NoTableCopies(Table))  # noqa: B010 - not exported
            try:
                own(self, transact_items)
            except Exception:
                for put_back in reversed(kept):
                    put_back()
                raise
            finally:
                setattr(models, "copy", copy)  # noqa: B010

    backend.transact_write_items = transact_write_items


class _NoTableCopies:
    """The `copy` module as moto's transaction sees it: a table "copied" is the table itself
    (its rollback then assigns it back to itself); anything else is deep-copied as before."""

    def __init__(self, table_class: type) -> None:
        self._table = table_class

    def deepcopy(self, value: Any, memo: Any = None) -> Any:
        if isinstance(value, self._table):
            return value
        return copy.deepcopy(value, memo)

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)


def _items_named(backend: Any, transact_items: list[dict[str, Any]]) -> list[Any] | None:
    """For each item a transaction names, a function that puts it back as it is now (None:
    an operation or a table this does not understand)."""
    from moto.dynamodb.models.dynamo_type import DynamoType  # noqa: PLC0415

    kept: list[Any] = []
    try:
        for entry in transact_items:
            op = next(iter(entry.values()))
            table = backend.tables[op["TableName"]]
            key = op["Key"] if "Key" in op else op["Item"]
            hash_key = DynamoType(key[table.hash_key_attr])
            range_key = None
            if table.range_key_attr is not None:
                range_key = DynamoType(key[table.range_key_attr])
            kept.append(_keeper(table.items, hash_key, range_key))
    except (AttributeError, KeyError, StopIteration, TypeError):
        return None
    return kept


def _keeper(items: dict[Any, Any], hash_key: Any, range_key: Any) -> Any:
    """A function that puts an item of a table's `items` back as it is now (absent: removed);
    moto keeps `items[hash]`, or `items[hash][range]` on a table with a range key."""
    rows = items if range_key is None else items.get(hash_key, {})
    key = hash_key if range_key is None else range_key
    saved = copy.deepcopy(rows[key]) if key in rows else None

    def put_back() -> None:
        now = items if range_key is None else items.get(hash_key)
        if saved is not None:
            (items if range_key is None else items.setdefault(hash_key, {}))[key] = saved
        elif now is not None:
            now.pop(key, None)
            if range_key is not None and not now:
                items.pop(hash_key, None)

    return put_back


def is_applied() -> bool:
    return bool(_original)


def _backend_class() -> Any:
    from moto.dynamodb.models import DynamoDBBackend  # noqa: PLC0415 - moto: an optional extra

    return DynamoDBBackend


def _handler_class() -> Any:
    from moto.dynamodb.responses import DynamoHandler  # noqa: PLC0415 - moto: an optional extra

    return DynamoHandler
