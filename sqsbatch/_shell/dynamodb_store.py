"""The DynamoDB idempotency store (public as `sqsbatch.idempotency.DynamoDBStore`).

Claims, extensions and releases are conditional writes, sent as few at a time as DynamoDB
allows: one `TransactWriteItems` of up to 100 items. A transaction is all or nothing, so a key
whose condition fails cancels it; DynamoDB then says which item failed (with the record that
blocked it, `ALL_OLD`), and the rest are sent again in one more transaction. A duplicate thus
costs one failed conditional write. Where transactions are refused (an emulator without them)
or keep being cancelled, each key falls back to its own conditional write. Completions are
unconditional puts (an acked message's work is done, whoever holds the claim now): in
`BatchWriteItem`s of 25, or, carried (`complete(..., carry=True)`), inside the next claims'
transaction. docs/idempotency.md gives the requests and write units per message.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from sqsbatch._core.idempotency import CLAIMED, COMPLETED, Claims, Record
from sqsbatch.errors import StoreUnavailable

__all__ = ["MAX_TRANSACTION_ITEMS", "DynamoDBStore"]

MAX_TRANSACTION_ITEMS = 100
"""DynamoDB's most items in one `TransactWriteItems`."""
_BATCH_WRITE_ITEMS = 25
_BATCH_GET_KEYS = 100
_ROUNDS = 3
"""Transactions tried on a batch before its undecided keys fall back to one write each."""
_CONDITION_FAILED = "ConditionalCheckFailedException"
_NO_TRANSACTIONS = frozenset({"UnknownOperationException"})


@dataclass(frozen=True)
class _Op:
    key: str
    kind: str  # Put, Delete or Update, as in TransactWriteItems
    body: dict[str, Any]


class DynamoDBStore:
    """A DynamoDB table with a string partition key `pk` (TTL on its `ttl` attribute).

    `client`: a boto3 DynamoDB client (default: one from the environment, with short timeouts
    so that an unreachable table is noticed in seconds). `clock` (epoch seconds) and `sleep`
    are injectable for tests.
    """

    def __init__(
        self,
        table_name: str,
        *,
        client: Any = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.table_name = table_name
        self._client = client if client is not None else _default_client()
        self._clock = clock
        self._sleep = sleep
        self._transactions = True
        self._carried: dict[str, _Op] = {}
        self._lock = threading.Lock()

    # The Store protocol ---------------------------------------------------------------------

    def claim(self, keys: Sequence[str], *, owner: str, expires: float) -> Claims:
        now = self._clock()
        with self._lock:
            carried, self._carried = self._carried, {}
        blocked: dict[str, Record | None] = {}
        for key, op in carried.items():
            if key in keys:  # completed a moment ago, not written yet: a duplicate
                blocked[key] = _record(op.body["Item"])
        todo = [self._claim_op(key, owner, expires, now) for key in dict.fromkeys(keys)]
        todo = [op for op in todo if op.key not in blocked]
        extra = list(carried.values())
        done: set[str] = set()
        try:
            if len(todo) + len(extra) > MAX_TRANSACTION_ITEMS:
                self._batch_write(extra)
                extra = []
            failed = self._apply(todo, extra, done)
        except StoreUnavailable:
            with self._lock:
                self._carried = {**carried, **self._carried}
            self._let_go(done, owner)
            raise
        blocked.update(failed)
        unknown = [key for key, record in blocked.items() if record is None]
        if unknown:
            blocked.update(self.read(unknown))
        # A claim blocked by our own token is ours: a retried request whose first try landed
        # (a per-item put has no idempotency token; moto ignores a transaction's).
        mine = {key for key, record in blocked.items() if _claimed_by(record, owner)}
        blocked = {key: record for key, record in blocked.items() if key not in mine}
        return Claims(frozenset(done | mine), blocked)

    def extend(self, keys: Sequence[str], *, owner: str, expires: float) -> frozenset[str]:
        ops = [
            _Op(key, "Update", _set_expiry(self._ours(key, owner), expires))
            for key in dict.fromkeys(keys)
        ]
        done: set[str] = set()
        self._apply(ops, [], done)
        return frozenset(done)

    def complete(
        self, keys: Sequence[str], *, owner: str, ttl_seconds: float, carry: bool = False
    ) -> None:
        expires = self._clock() + ttl_seconds
        ops = [self._completion_op(key, owner, expires) for key in dict.fromkeys(keys)]
        if carry:
            with self._lock:
                self._carried.update((op.key, op) for op in ops)
            return
        self._batch_write(ops)

    def release(self, keys: Sequence[str], *, owner: str) -> None:
        ops = [_Op(key, "Delete", self._ours(key, owner)) for key in dict.fromkeys(keys)]
        self._apply(ops, [], set())

    def read(self, keys: Sequence[str]) -> dict[str, Record]:
        found: dict[str, Record] = {}
        wanted = list(dict.fromkeys(keys))
        for start in range(0, len(wanted), _BATCH_GET_KEYS):
            request: dict[str, Any] = {
                self.table_name: {
                    "Keys": [{"pk": {"S": key}} for key in wanted[start : start + _BATCH_GET_KEYS]],
                    "ConsistentRead": True,
                }
            }
            for _ in range(_ROUNDS + 2):
                with self._calls():
                    answer = self._client.batch_get_item(RequestItems=request)
                for item in answer.get("Responses", {}).get(self.table_name, []):
                    record = _record(item)
                    found[record.key] = record
                request = answer.get("UnprocessedKeys") or {}
                if not request:
                    break
                self._sleep(0.05)
            else:
                raise StoreUnavailable(f"idempotency store {self.table_name}: reads left unread")
        return found

    def flush(self) -> None:
        with self._lock:
            carried, self._carried = self._carried, {}
        try:
            self._batch_write(list(carried.values()))
        except StoreUnavailable:
            with self._lock:
                self._carried = {**carried, **self._carried}
            raise

    # Requests -------------------------------------------------------------------------------

    def _claim_op(self, key: str, owner: str, expires: float, now: float) -> _Op:
        body = {
            "TableName": self.table_name,
            "Item": _item(key, CLAIMED, expires, owner),
            "ConditionExpression": "attribute_not_exists(pk) OR #e <= :now",
            "ExpressionAttributeNames": {"#e": "expires"},
            "ExpressionAttributeValues": {":now": {"N": _number(now)}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        return _Op(key, "Put", body)

    def _completion_op(self, key: str, owner: str, expires: float) -> _Op:
        return _Op(
            key,
            "Put",
            {"TableName": self.table_name, "Item": _item(key, COMPLETED, expires, owner)},
        )

    def _ours(self, key: str, owner: str) -> dict[str, Any]:
        return {
            "TableName": self.table_name,
            "Key": {"pk": {"S": key}},
            "ConditionExpression": "#o = :owner AND #s = :claimed",
            "ExpressionAttributeNames": {"#o": "owner", "#s": "state"},
            "ExpressionAttributeValues": {":owner": {"S": owner}, ":claimed": {"S": CLAIMED}},
        }

    def _let_go(self, keys: set[str], owner: str) -> None:
        """Release, if the store lets us, what a claim that failed half-way won: else those
        keys stay held until their claims lapse (held, never run twice)."""
        with suppress(StoreUnavailable):
            self.release(sorted(keys), owner=owner)

    def _apply(self, ops: list[_Op], riders: list[_Op], done: set[str]) -> dict[str, Record | None]:
        """Conditional `ops` (with unconditional `riders` in the first transaction): the keys
        whose write succeeded go in `done` (as they do: a failure half-way leaves the ones
        written there); returns those whose condition failed, with the record that blocked."""
        failed: dict[str, Record | None] = {}
        pending = ops
        contended = False
        for round_ in range(_ROUNDS):
            if not pending or not self._transactions:
                break
            if contended:  # cancelled by a conflict or throttling, not a condition: back off
                self._sleep(0.05 * 2**round_)
            left: list[_Op] = []
            contended = False
            size = MAX_TRANSACTION_ITEMS - len(riders)
            for start in range(0, len(pending), size):
                outcome = self._transact(pending[start : start + size], riders)
                if outcome is None:  # no transactions here: every key on its own
                    left.extend(pending[start:])
                    break
                written, chunk_failed, chunk_left, chunk_contended = outcome
                contended |= chunk_contended
                if written:
                    riders = []
                    done.update(op.key for op in pending[start : start + size])
                failed.update(chunk_failed)
                left.extend(chunk_left)
                size = MAX_TRANSACTION_ITEMS - len(riders)
            pending = left
        if riders:
            self._batch_write(riders)
        for op in pending:
            if self._one(op, failed):
                done.add(op.key)
        return failed

    def _transact(
        self, chunk: list[_Op], riders: list[_Op]
    ) -> tuple[bool, dict[str, Record | None], list[_Op], bool] | None:
        """One transaction: (written, the keys whose condition failed, the keys to try again,
        whether it met contention: a conflict, throttling), or None where DynamoDB has no
        transactions. A cancelled transaction wrote nothing."""
        items = [{op.kind: op.body} for op in chunk + riders]
        try:
            with self._calls(passing=_NO_TRANSACTIONS | {"TransactionCanceledException"}):
                self._client.transact_write_items(TransactItems=items)
        except Exception as exc:
            code = _code(exc)
            if code in _NO_TRANSACTIONS:
                self._transactions = False
                return None
            if code != "TransactionCanceledException":  # unreachable, throttled past retries
                raise
            reasons = getattr(exc, "response", {}).get("CancellationReasons") or []
            reasons += [{}] * (len(chunk) - len(reasons))
            failed: dict[str, Record | None] = {}
            left: list[_Op] = []
            codes = {reason.get("Code") for reason in reasons}
            contended = bool(codes - {"None", "ConditionalCheckFailed"})
            for op, reason in zip(chunk, reasons, strict=False):
                if reason.get("Code") == "ConditionalCheckFailed":
                    failed[op.key] = _record(reason["Item"]) if reason.get("Item") else None
                else:  # not this key's fault (another key's condition, a conflict): again
                    left.append(op)
            return False, failed, left, contended
        return True, {}, [], False

    def _one(self, op: _Op, failed: dict[str, Record | None]) -> bool:
        """One key's conditional write; False (and its blocker in `failed`) when refused."""
        call = {"Put": "put_item", "Delete": "delete_item", "Update": "update_item"}[op.kind]
        try:
            with self._calls(passing={_CONDITION_FAILED}):
                getattr(self._client, call)(**op.body)
        except Exception as exc:
            if _code(exc) != _CONDITION_FAILED:
                raise
            item = getattr(exc, "response", {}).get("Item")
            failed[op.key] = _record(item) if item else None
            return False
        return True

    def _batch_write(self, ops: list[_Op]) -> None:
        for start in range(0, len(ops), _BATCH_WRITE_ITEMS):
            chunk = ops[start : start + _BATCH_WRITE_ITEMS]
            request: dict[str, Any] = {
                self.table_name: [{"PutRequest": {"Item": op.body["Item"]}} for op in chunk]
            }
            for _ in range(_ROUNDS + 2):
                with self._calls():
                    answer = self._client.batch_write_item(RequestItems=request)
                request = answer.get("UnprocessedItems") or {}
                if not request:
                    break
                self._sleep(0.05)
            else:
                raise StoreUnavailable(
                    f"idempotency store {self.table_name}: writes left unwritten"
                )

    @contextmanager
    def _calls(self, passing: frozenset[str] | set[str] = frozenset()) -> Iterator[None]:
        """Every failure but the codes in `passing` as one `StoreUnavailable` line."""
        try:
            yield
        except Exception as exc:
            code = _code(exc)
            if code is not None and code in passing:
                raise
            raise StoreUnavailable(_describe(self.table_name, exc, code)) from exc


def _item(key: str, state: str, expires: float, owner: str) -> dict[str, Any]:
    return {
        "pk": {"S": key},
        "state": {"S": state},
        "expires": {"N": _number(expires)},
        "owner": {"S": owner},
        "ttl": {"N": str(math.ceil(expires))},
    }


def _set_expiry(body: dict[str, Any], expires: float) -> dict[str, Any]:
    """A conditional `body` (`_ours`) made an update of the claim's expiry."""
    return {
        **body,
        "UpdateExpression": "SET #e = :e, #t = :t",
        "ExpressionAttributeNames": {
            **body["ExpressionAttributeNames"],
            "#e": "expires",
            "#t": "ttl",
        },
        "ExpressionAttributeValues": {
            **body["ExpressionAttributeValues"],
            ":e": {"N": _number(expires)},
            ":t": {"N": str(math.ceil(expires))},
        },
    }


def _claimed_by(record: Record | None, owner: str) -> bool:
    return record is not None and record.state == CLAIMED and record.owner == owner


def _record(item: dict[str, Any]) -> Record:
    return Record(
        key=item["pk"]["S"],
        state=item.get("state", {}).get("S", ""),
        expires=float(item.get("expires", {}).get("N", "0")),
        owner=item.get("owner", {}).get("S", ""),
    )


def _number(value: float) -> str:
    """Epoch seconds to the millisecond, as DynamoDB's N takes them."""
    return f"{value:.3f}"


def _code(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code else None
    return None


def _describe(table: str, exc: BaseException, code: str | None) -> str:
    if code == "ResourceNotFoundException":
        return f"idempotency store: DynamoDB table {table!r} does not exist"
    if code is not None:
        message = getattr(exc, "response", {}).get("Error", {}).get("Message", "")
        return f"idempotency store {table}: DynamoDB refused the call: {code}: {message}"
    if _is_botocore(exc):
        return f"idempotency store {table}: cannot reach DynamoDB: {exc}"
    return f"idempotency store {table}: the call failed: {type(exc).__name__}: {exc}"


def _is_botocore(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("botocore")


def _default_client() -> Any:
    import boto3  # noqa: PLC0415 - slow to import; only a store without a client needs it
    from botocore.config import Config  # noqa: PLC0415

    config = Config(
        connect_timeout=2, read_timeout=5, retries={"mode": "standard", "max_attempts": 3}
    )
    return boto3.session.Session().client("dynamodb", config=config)
