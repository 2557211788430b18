"""What only DynamoDB's store has: the record as written (TTL attribute), its requests per
message, its fallbacks, and a table that cannot be reached. On moto and on dynalite."""

from __future__ import annotations

import math
import socket
import sqlite3
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from sqsbatch._shell.dynamodb_store import DynamoDBStore
from sqsbatch.errors import StoreUnavailable
from sqsbatch.idempotency import SqliteStore, new_owner
from tests.idempotency.conftest import FakeClock, Requests, create_table, dynamodb_client

BATCH = 10
BATCHES = 30
TARGET = 0.15
"""Issue 29: DynamoDB requests per message for claims and completions, batches of 10."""


@pytest.fixture(params=["moto", "dynalite"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def client(endpoint: str) -> Any:
    return dynamodb_client(endpoint)


@pytest.fixture
def table(client: Any) -> str:
    return create_table(client)


def store_on(table: str, client: Any, clock: FakeClock) -> DynamoDBStore:
    return DynamoDBStore(table, client=client, clock=clock, sleep=lambda _: None)


def test_records_carry_their_state_owner_expiry_and_a_whole_ttl(
    client: Any, table: str, clock: FakeClock
) -> None:
    clock.now = 1_800_000_000.25
    store, owner = store_on(table, client, clock), new_owner()
    store.claim(["claimed", "done"], owner=owner, expires=clock.now + 30)
    store.complete(["done"], owner=owner, ttl_seconds=86_400)
    claimed = client.get_item(TableName=table, Key={"pk": {"S": "claimed"}})["Item"]
    done = client.get_item(TableName=table, Key={"pk": {"S": "done"}})["Item"]
    assert claimed == {
        "pk": {"S": "claimed"},
        "state": {"S": "claimed"},
        "owner": {"S": owner},
        "expires": claimed["expires"],
        "ttl": {"N": "1800000031"},  # DynamoDB's TTL takes whole epoch seconds
    }
    assert float(claimed["expires"]["N"]) == 1_800_000_030.25
    assert done["state"] == {"S": "completed"}
    assert done["ttl"] == {"N": str(math.ceil(clock.now + 86_400))}


def test_sqlite_keeps_the_same_ttl_and_forgets_expired_records(
    tmp_path: Path, clock: FakeClock
) -> None:
    store, owner = SqliteStore(tmp_path / "s.db", clock=clock), new_owner()
    store.complete(["old"], owner=owner, ttl_seconds=10)
    clock.advance(20)
    store.complete(["new"], owner=owner, ttl_seconds=10.5)
    rows = sqlite3.connect(tmp_path / "s.db").execute("SELECT pk, ttl FROM idempotency").fetchall()
    assert rows == [("new", math.ceil(clock.now + 10.5))]


def test_happy_path_requests_per_message_meet_the_target_with_carried_completions(
    client: Any, table: str, clock: FakeClock, kind: str
) -> None:
    store = store_on(table, client, clock)
    requests = Requests(client)
    for batch in range(BATCHES):
        owner = new_owner()
        keys = [f"m-{batch}-{n}" for n in range(BATCH)]
        assert store.claim(keys, owner=owner, expires=clock.now + 30).won == set(keys)
        store.complete(keys, owner=owner, ttl_seconds=3600, carry=True)
    store.flush()
    per_message = requests.total / (BATCH * BATCHES)
    if kind == "moto":  # one transaction per batch (its claims + the last batch's completions)
        assert requests.counts == {"TransactWriteItems": BATCHES, "BatchWriteItem": 1}
        assert per_message <= TARGET
    else:  # dynalite has no transactions: one conditional put per claim (docs/idempotency.md)
        assert requests.counts["TransactWriteItems"] == 1  # refused once, then never asked
        assert requests.counts["PutItem"] == BATCH * BATCHES
    done = store.read([f"m-{b}-{n}" for b in range(BATCHES) for n in range(BATCH)])
    assert {record.state for record in done.values()} == {"completed"}
    assert len(done) == BATCH * BATCHES


def test_completions_not_carried_cost_one_batch_write_per_25(
    client: Any, table: str, clock: FakeClock
) -> None:
    store, owner = store_on(table, client, clock), new_owner()
    keys = [f"k{n}" for n in range(30)]
    requests = Requests(client)
    store.complete(keys, owner=owner, ttl_seconds=60)
    assert requests.counts == {"BatchWriteItem": 2}


@pytest.mark.parametrize("kind", ["moto"])  # dynalite has no transactions (the next test)
def test_a_duplicate_in_a_batch_costs_one_failed_transaction_and_its_blocker_comes_back(
    client: Any, table: str, clock: FakeClock, kind: str
) -> None:
    sleeps: list[float] = []
    store = DynamoDBStore(table, client=client, clock=clock, sleep=sleeps.append)
    owner = new_owner()
    store.claim(["k3"], owner=owner, expires=clock.now + 30)
    store.complete(["k3"], owner=owner, ttl_seconds=60)
    requests = Requests(client)
    claims = store.claim([f"k{n}" for n in range(10)], owner=new_owner(), expires=clock.now + 30)
    assert len(claims.won) == 9
    record = claims.blocked["k3"]
    assert record is not None and record.state == "completed" and record.owner == owner
    # the cancelled transaction said which key failed, with its record (ALL_OLD): no read
    assert requests.counts == {"TransactWriteItems": 2}
    assert sleeps == []  # a condition is no contention: the rest go again at once


@pytest.fixture
def down(clock: FakeClock) -> DynamoDBStore:
    """A store whose DynamoDB is a closed port, with one attempt per call."""
    client = boto3.session.Session().client(
        "dynamodb",
        endpoint_url=f"http://127.0.0.1:{_closed_port()}",
        region_name="us-east-1",
        config=Config(retries={"mode": "standard", "max_attempts": 1}),
    )
    return store_on("t", client, clock)


def test_the_default_client_gives_up_on_an_unreachable_table_with_one_clear_line(
    monkeypatch: pytest.MonkeyPatch, clock: FakeClock
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", f"http://127.0.0.1:{_closed_port()}")
    store = DynamoDBStore("t", clock=clock)  # short timeouts, 3 attempts: seconds, not minutes
    with pytest.raises(StoreUnavailable, match=r"^idempotency store t: cannot reach DynamoDB: "):
        store.read(["k"])


def test_carried_completions_survive_a_claim_that_fails(
    clock: FakeClock, down: DynamoDBStore
) -> None:
    store, owner = down, new_owner()
    store.complete(["k"], owner=owner, ttl_seconds=60, carry=True)
    with pytest.raises(StoreUnavailable):
        store.claim(["other"], owner=owner, expires=clock.now + 30)
    assert list(store._carried) == ["k"]  # kept for the next claim or flush


def test_an_unreachable_store_fails_a_claim_after_one_request(
    clock: FakeClock, down: DynamoDBStore
) -> None:
    """Not a round of transactions and then a write per key, each failing the same way: the
    poller learns in one call's attempts that the store is down (it was 16 of them, 13 s)."""
    sent: list[str] = []  # calls, not botocore's attempts of one call

    def first_attempts(request: Any, **_: Any) -> None:
        if request.headers["amz-sdk-request"].startswith(b"attempt=1"):
            sent.append(request.headers["X-Amz-Target"].decode())

    down._client.meta.events.register("before-send", first_attempts)
    with pytest.raises(StoreUnavailable):
        down.claim(["a", "b"], owner="o", expires=clock.now + 30)
    assert sent == ["DynamoDB_20120810.TransactWriteItems"]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_store_that_cannot_be_reached_raises_one_clear_error(
    clock: FakeClock, down: DynamoDBStore
) -> None:
    store = down
    for call in (
        lambda: store.claim(["k"], owner="o", expires=clock.now + 30),
        lambda: store.complete(["k"], owner="o", ttl_seconds=60),
        lambda: store.release(["k"], owner="o"),
        lambda: store.read(["k"]),
    ):
        with pytest.raises(StoreUnavailable) as raised:
            call()
        assert str(raised.value).startswith("idempotency store t: cannot reach DynamoDB: ")
        assert "\n" not in str(raised.value)


def test_a_missing_table_is_named(client: Any, clock: FakeClock) -> None:
    with pytest.raises(StoreUnavailable, match="DynamoDB table 'nope' does not exist"):
        store_on("nope", client, clock).claim(["k"], owner="o", expires=clock.now + 30)


def test_an_unusable_sqlite_path_raises_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match=r"idempotency store .*: unable to open"):
        SqliteStore(tmp_path / "no" / "such" / "dir.db")


def test_a_claim_that_fails_half_way_lets_go_of_what_it_won(
    client: Any, table: str, clock: FakeClock
) -> None:
    store, owner = store_on(table, client, clock), new_owner()
    keys = [f"k{n}" for n in range(100)]
    # 100 claims fit one transaction (or go one by one); the 101st, an empty key, is refused
    with pytest.raises(StoreUnavailable, match="ValidationException"):
        store.claim([*keys, ""], owner=owner, expires=clock.now + 30)
    assert store.read(keys) == {}  # released: the retried batch finds them free
