"""Every store under test: MemoryStore, SqliteStore, and DynamoDBStore on moto's DynamoDB (the
session's moto server, which serves DynamoDB on the SQS port) and on dynalite."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from sqsbatch.dev.server import LOCAL_CREDENTIALS, LocalSqs
from sqsbatch.idempotency import DynamoDBStore, MemoryStore, SqliteStore, Store
from tests.support import dynalite

START = 1_800_000_000.0


class FakeClock:
    """Epoch seconds that move only when a test moves them."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Requests:
    """DynamoDB's requests as botocore sends them (a `before-send` hook: every HTTP request,
    retries included), by operation."""

    def __init__(self, client: Any) -> None:
        self.counts: Counter[str] = Counter()
        client.meta.events.register("before-send.dynamodb", self._seen)

    def _seen(self, request: Any, **_: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        if isinstance(target, bytes):
            target = target.decode()
        self.counts[target.rsplit(".", 1)[-1]] += 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def dynamodb_client(endpoint_url: str) -> Any:
    return boto3.session.Session().client(
        "dynamodb",
        endpoint_url=endpoint_url,
        region_name=LOCAL_CREDENTIALS["AWS_DEFAULT_REGION"],
        aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )


def create_table(client: Any) -> str:
    table = f"idem-{uuid.uuid4().hex[:12]}"
    client.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 0.1})
    return table


@pytest.fixture(scope="session")
def dynalite_endpoint() -> Iterator[str]:
    reason = dynalite.missing()
    if reason is not None:
        dynalite.skip_or_fail(reason)
    with dynalite.Dynalite() as server:
        yield server.endpoint_url


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


MakeStore = Callable[[], Store]


@pytest.fixture(params=["memory", "sqlite", "moto", "dynalite"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def endpoint(kind: str, request: pytest.FixtureRequest) -> str | None:
    """The DynamoDB endpoint of a DynamoDB kind (None for the others)."""
    if kind == "moto":
        server: LocalSqs = request.getfixturevalue("local_sqs")
        return server.endpoint_url
    if kind == "dynalite":
        return str(request.getfixturevalue("dynalite_endpoint"))
    return None


@pytest.fixture
def make_store(kind: str, endpoint: str | None, clock: FakeClock, tmp_path: Path) -> MakeStore:
    """Stores of one kind on one table (or file, or dict): two of them are two consumers."""
    if kind == "memory":
        shared = MemoryStore(clock=clock)
        return lambda: shared
    if kind == "sqlite":
        path = tmp_path / "idempotency.sqlite"
        return lambda: SqliteStore(path, clock=clock)
    assert endpoint is not None
    table = create_table(dynamodb_client(endpoint))
    return lambda: DynamoDBStore(
        table, client=dynamodb_client(endpoint), clock=clock, sleep=lambda _: None
    )
