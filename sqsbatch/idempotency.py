"""Idempotency stores (issue 29): where the guard records which keys are claimed and completed.

Every operation takes a batch of keys. A record (`sqsbatch._core.idempotency.Record`) is a
key `pk`, a `state` (claimed or completed), `expires` (epoch seconds: when a claim lapses, or
when a completed record may be forgotten), the `owner` token of the claim that wrote it, and,
in DynamoDB, `ttl` (whole epoch seconds) for DynamoDB's TTL clean-up. A record blocks a claim
while it has not expired, whatever its state: a claim is never taken over before it lapses,
and a completed record never before its `idempotency_ttl` runs out.

- `DynamoDBStore(table_name, *, client=None)`: a fleet (docs/idempotency.md: cost per message).
- `SqliteStore(path)`: the processes of one host; it does not protect a fleet.
- `MemoryStore()`: one process; tests.

A store that cannot be reached raises `sqsbatch.errors.StoreUnavailable`.
"""

from __future__ import annotations

import math
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, runtime_checkable

from sqsbatch._core.idempotency import CLAIMED, COMPLETED, Claims, Record
from sqsbatch._shell.dynamodb_store import DynamoDBStore
from sqsbatch.config import ConsumerConfig
from sqsbatch.errors import StoreUnavailable

__all__ = [
    "Claims",
    "DynamoDBStore",
    "MemoryStore",
    "Record",
    "SqliteStore",
    "Store",
    "StoreUnavailable",
    "new_owner",
    "store_from_config",
]

Clock = Callable[[], float]


def new_owner() -> str:
    """A fresh claim token: one per claimed batch, so that a release or an extension touches
    only the claims that batch made."""
    return uuid.uuid4().hex


def store_from_config(config: ConsumerConfig, *, client: object = None) -> Store | None:
    """The store the settings name: `idempotency_table` (`SQSBATCH_IDEMPOTENCY_TABLE`) makes a
    `DynamoDBStore`; None when it is unset."""
    if config.idempotency_table is None:
        return None
    return DynamoDBStore(config.idempotency_table, client=client)


@runtime_checkable
class Store(Protocol):
    """What the guard asks of a store. Times are epoch seconds."""

    def claim(self, keys: Sequence[str], *, owner: str, expires: float) -> Claims:
        """Claim each key until `expires` where no unexpired record exists (a lapsed claim is
        taken over; a completed record never): the keys won, and what blocks each other one.
        A key `owner` claimed already is won as it is (a retried claim)."""
        ...

    def extend(self, keys: Sequence[str], *, owner: str, expires: float) -> frozenset[str]:
        """Push `owner`'s claims on to `expires` (a heartbeat): the keys still ours."""
        ...

    def complete(
        self, keys: Sequence[str], *, owner: str, ttl_seconds: float, carry: bool = False
    ) -> None:
        """Record the keys as completed for `ttl_seconds`. `carry=True` lets a store write
        them with its next claims (fewer requests; see `flush`) instead of at once."""
        ...

    def release(self, keys: Sequence[str], *, owner: str) -> None:
        """Delete the claims `owner` still holds on the keys; any other record stays."""
        ...

    def read(self, keys: Sequence[str]) -> dict[str, Record]:
        """The records of the keys that have one (expired ones included)."""
        ...

    def flush(self) -> None:
        """Write the carried completions now (idle, shutdown, end of a Lambda invocation)."""
        ...


def _claimable(record: Record | None, now: float) -> bool:
    return record is None or not record.blocks(now)


class MemoryStore:
    """A dict behind a lock: one process, for tests and `sqsbatch.testing`."""

    def __init__(self, *, clock: Clock = time.time) -> None:
        self._clock = clock
        self._records: dict[str, Record] = {}
        self._lock = threading.Lock()

    def claim(self, keys: Sequence[str], *, owner: str, expires: float) -> Claims:
        with self._lock:
            now = self._clock()
            won: set[str] = set()
            blocked: dict[str, Record | None] = {}
            for key in dict.fromkeys(keys):
                record = self._records.get(key)
                if _claimable(record, now):
                    self._records[key] = Record(key, CLAIMED, expires, owner)
                    won.add(key)
                elif _ours(record, owner):
                    won.add(key)
                else:
                    blocked[key] = record
            return Claims(frozenset(won), blocked)

    def extend(self, keys: Sequence[str], *, owner: str, expires: float) -> frozenset[str]:
        with self._lock:
            ours = {key for key in keys if _ours(self._records.get(key), owner)}
            for key in ours:
                self._records[key] = Record(key, CLAIMED, expires, owner)
            return frozenset(ours)

    def complete(
        self, keys: Sequence[str], *, owner: str, ttl_seconds: float, carry: bool = False
    ) -> None:
        with self._lock:
            expires = self._clock() + ttl_seconds
            for key in keys:
                self._records[key] = Record(key, COMPLETED, expires, owner)

    def release(self, keys: Sequence[str], *, owner: str) -> None:
        with self._lock:
            for key in keys:
                if _ours(self._records.get(key), owner):
                    del self._records[key]

    def read(self, keys: Sequence[str]) -> dict[str, Record]:
        with self._lock:
            return {key: self._records[key] for key in keys if key in self._records}

    def flush(self) -> None:
        """Nothing is carried: every write is immediate."""


def _ours(record: Record | None, owner: str) -> bool:
    return record is not None and record.state == CLAIMED and record.owner == owner


_SCHEMA = """
CREATE TABLE IF NOT EXISTS idempotency (
    pk TEXT PRIMARY KEY, state TEXT NOT NULL, expires REAL NOT NULL, owner TEXT NOT NULL,
    ttl INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS idempotency_ttl ON idempotency (ttl);
"""


class SqliteStore:
    """A SQLite file: the processes of ONE host share it (SQLite's file locks). It does not
    protect a fleet: two hosts have two files. Expired records are deleted as keys complete."""

    def __init__(self, path: str | Path, *, clock: Clock = time.time) -> None:
        self._path = str(path)
        self._clock = clock
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(
                self._path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"idempotency store {self._path}: {exc}") from None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"idempotency store {self._path}: {exc}") from None

    def _get(self, db: sqlite3.Connection, key: str) -> Record | None:
        row = db.execute(
            "SELECT pk, state, expires, owner FROM idempotency WHERE pk = ?", (key,)
        ).fetchone()
        return None if row is None else Record(row[0], row[1], row[2], row[3])

    def _put(self, db: sqlite3.Connection, record: Record) -> None:
        db.execute(
            "INSERT OR REPLACE INTO idempotency VALUES (?, ?, ?, ?, ?)",
            (record.key, record.state, record.expires, record.owner, math.ceil(record.expires)),
        )

    def claim(self, keys: Sequence[str], *, owner: str, expires: float) -> Claims:
        won: set[str] = set()
        blocked: dict[str, Record | None] = {}
        with self._transaction() as db:
            now = self._clock()
            for key in dict.fromkeys(keys):
                record = self._get(db, key)
                if _claimable(record, now):
                    self._put(db, Record(key, CLAIMED, expires, owner))
                    won.add(key)
                elif _ours(record, owner):
                    won.add(key)
                else:
                    blocked[key] = record
        return Claims(frozenset(won), blocked)

    def extend(self, keys: Sequence[str], *, owner: str, expires: float) -> frozenset[str]:
        ours: set[str] = set()
        with self._transaction() as db:
            for key in keys:
                if _ours(self._get(db, key), owner):
                    self._put(db, Record(key, CLAIMED, expires, owner))
                    ours.add(key)
        return frozenset(ours)

    def complete(
        self, keys: Sequence[str], *, owner: str, ttl_seconds: float, carry: bool = False
    ) -> None:
        with self._transaction() as db:
            now = self._clock()
            for key in keys:
                self._put(db, Record(key, COMPLETED, now + ttl_seconds, owner))
            db.execute("DELETE FROM idempotency WHERE ttl < ?", (math.floor(now),))

    def release(self, keys: Sequence[str], *, owner: str) -> None:
        with self._transaction() as db:
            db.executemany(
                "DELETE FROM idempotency WHERE pk = ? AND owner = ? AND state = ?",
                [(key, owner, CLAIMED) for key in keys],
            )

    def read(self, keys: Sequence[str]) -> dict[str, Record]:
        with self._transaction() as db:
            found = {key: self._get(db, key) for key in keys}
        return {key: record for key, record in found.items() if record is not None}

    def flush(self) -> None:
        """Nothing is carried: every write is immediate."""

    def close(self) -> None:
        with self._lock:
            self._db.close()
