"""The stores' contract, on every store: MemoryStore, SqliteStore, and DynamoDBStore on moto's
DynamoDB and on dynalite (tests/idempotency/conftest.py). Clocks are fakes."""

from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from sqsbatch._core.idempotency import CLAIMED, COMPLETED
from sqsbatch.idempotency import Claims, new_owner
from tests.idempotency.conftest import FakeClock, MakeStore

KEYS = [f"key-{n}" for n in range(10)]


def test_a_claim_wins_absent_keys_and_names_what_blocks_the_others(
    make_store: MakeStore, clock: FakeClock
) -> None:
    a, b = make_store(), make_store()
    first, second = new_owner(), new_owner()
    assert a.claim(KEYS[:6], owner=first, expires=clock.now + 30).won == set(KEYS[:6])
    claims = b.claim(KEYS[4:], owner=second, expires=clock.now + 30)
    assert claims.won == set(KEYS[6:])
    assert set(claims.blocked) == {"key-4", "key-5"}
    for record in claims.blocked.values():
        assert record is not None
        assert (record.state, record.owner, record.expires) == (CLAIMED, first, clock.now + 30)


# On moto too: its own server let two transactions at once interleave (a 500 for "dictionary
# changed size during iteration", one key written by both); the local server now runs its
# DynamoDB requests one at a time (`sqsbatch.dev.moto_dynamodb`).
@pytest.mark.parametrize("kind", ["memory", "sqlite", "moto", "dynalite"])
def test_two_owners_racing_for_the_same_keys_never_both_win_one(
    make_store: MakeStore, kind: str
) -> None:
    stores = [make_store(), make_store()]
    owners = [new_owner(), new_owner()]
    for round_ in range(5):
        keys = [f"race-{round_}-{n}" for n in range(10)]
        barrier = threading.Barrier(2)

        def claim(
            index: int, keys: list[str] = keys, barrier: threading.Barrier = barrier
        ) -> Claims:
            barrier.wait()
            return stores[index].claim(keys, owner=owners[index], expires=2e9)

        with ThreadPoolExecutor(2) as pool:
            one, two = pool.map(claim, [0, 1])
        assert not one.won & two.won
        assert one.won | two.won == set(keys)
        records = stores[0].read(keys)
        assert {key for key in keys if records[key].owner == owners[0]} == one.won


def test_a_lapsed_claim_is_taken_over_and_its_owner_can_no_longer_touch_it(
    make_store: MakeStore, clock: FakeClock
) -> None:
    dead, alive = make_store(), make_store()
    old, new = new_owner(), new_owner()
    dead.claim(["k"], owner=old, expires=clock.now + 10)
    clock.advance(9.5)
    assert alive.claim(["k"], owner=new, expires=clock.now + 10).won == frozenset()
    clock.advance(0.5)  # the claim ends at exactly now: lapsed
    assert alive.claim(["k"], owner=new, expires=clock.now + 10).won == {"k"}
    assert dead.extend(["k"], owner=old, expires=clock.now + 99) == frozenset()
    dead.release(["k"], owner=old)
    assert alive.read(["k"])["k"].owner == new
    assert alive.extend(["k"], owner=new, expires=clock.now + 99) == {"k"}
    assert alive.read(["k"])["k"].expires == clock.now + 99


def test_a_completed_key_is_never_claimed_until_its_ttl_runs_out(
    make_store: MakeStore, clock: FakeClock
) -> None:
    a, b = make_store(), make_store()
    owner = new_owner()
    a.claim(["done"], owner=owner, expires=clock.now + 30)
    a.complete(["done"], owner=owner, ttl_seconds=1000)
    clock.advance(999)  # long past the claim, within the ttl
    claims = b.claim(["done"], owner=new_owner(), expires=clock.now + 30)
    record = claims.blocked["done"]
    assert claims.won == frozenset() and record is not None and record.state == COMPLETED
    b.release(["done"], owner=owner)  # a completed record is not a claim: it stays
    assert b.read(["done"])["done"].state == COMPLETED
    clock.advance(1)
    assert b.claim(["done"], owner=new_owner(), expires=clock.now + 30).won == {"done"}


def test_release_deletes_only_the_claims_of_its_owner(
    make_store: MakeStore, clock: FakeClock
) -> None:
    a, b = make_store(), make_store()
    mine, theirs = new_owner(), new_owner()
    a.claim(["k1", "k2"], owner=mine, expires=clock.now + 30)
    b.claim(["k3"], owner=theirs, expires=clock.now + 30)
    b.release(["k1", "k2", "k3"], owner=mine)  # k3 is theirs: stays
    assert set(a.read(["k1", "k2", "k3"])) == {"k3"}
    assert b.claim(["k1"], owner=theirs, expires=clock.now + 30).won == {"k1"}


def test_a_conflict_in_a_batch_blocks_only_its_key(make_store: MakeStore, clock: FakeClock) -> None:
    a = make_store()
    owner = new_owner()
    a.claim(["key-3"], owner=owner, expires=clock.now + 30)
    a.complete(["key-3"], owner=owner, ttl_seconds=600)
    claims = make_store().claim(KEYS, owner=new_owner(), expires=clock.now + 30)
    assert claims.won == set(KEYS) - {"key-3"}
    record = claims.blocked["key-3"]
    assert record is not None and record.state == COMPLETED


def test_a_carried_completion_counts_before_it_is_written(
    make_store: MakeStore, clock: FakeClock
) -> None:
    a = make_store()
    owner = new_owner()
    a.claim(["k"], owner=owner, expires=clock.now + 30)
    a.complete(["k"], owner=owner, ttl_seconds=600, carry=True)
    claims = a.claim(["k", "other"], owner=new_owner(), expires=clock.now + 30)
    record = claims.blocked["k"]
    assert claims.won == {"other"} and record is not None and record.state == COMPLETED
    a.flush()
    assert make_store().read(["k"])["k"].state == COMPLETED


def test_the_same_key_twice_in_one_claim_is_claimed_once(
    make_store: MakeStore, clock: FakeClock
) -> None:
    claims = make_store().claim(["k", "k", "j"], owner=new_owner(), expires=clock.now + 30)
    assert claims.won == {"k", "j"}


@pytest.mark.parametrize("size", [1, 10, 150])
def test_batches_of_any_size_are_claimed_and_completed(
    make_store: MakeStore, clock: FakeClock, size: int
) -> None:
    store, owner = make_store(), new_owner()
    keys = [f"n-{n}" for n in range(size)]
    assert store.claim(keys, owner=owner, expires=clock.now + 30).won == set(keys)
    store.complete(keys, owner=owner, ttl_seconds=60)
    assert {record.state for record in store.read(keys).values()} == {COMPLETED}
    assert math.isclose(store.read(keys)[keys[-1]].expires, clock.now + 60)
