"""Every store against one model of the contract, on random sequences of claims, extensions,
completions, releases and clock moves (hypothesis): the four stores answer alike, moto's and
dynalite's condition semantics included."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sqsbatch._core.idempotency import CLAIMED, COMPLETED
from tests.idempotency.conftest import FakeClock, MakeStore

OWNERS = ["first", "second"]
KEYS = st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3)
STEPS: st.SearchStrategy[tuple[str, list[str], str, int]] = st.one_of(
    st.tuples(st.just("claim"), KEYS, st.sampled_from(OWNERS), st.sampled_from([5, 30])),
    st.tuples(st.just("extend"), KEYS, st.sampled_from(OWNERS), st.sampled_from([5, 30])),
    st.tuples(st.just("complete"), KEYS, st.sampled_from(OWNERS), st.sampled_from([20, 100])),
    st.tuples(st.just("release"), KEYS, st.sampled_from(OWNERS), st.just(0)),
    st.tuples(st.just("wait"), st.just([]), st.just(""), st.sampled_from([1, 5, 10, 30])),
)


@dataclass
class Model:
    """The contract, written out: key -> (state, expires, owner)."""

    now: float
    records: dict[str, tuple[str, float, str]] = field(default_factory=dict)

    def claim(self, keys: list[str], owner: str, expires: float) -> set[str]:
        won = set()
        for key in dict.fromkeys(keys):
            record = self.records.get(key)
            if record is None or record[1] <= self.now:
                self.records[key] = (CLAIMED, expires, owner)
                won.add(key)
            elif self.ours(key, owner):  # a retried claim: ours as it is
                won.add(key)
        return won

    def ours(self, key: str, owner: str) -> bool:
        record = self.records.get(key)
        return record is not None and record[0] == CLAIMED and record[2] == owner

    def extend(self, keys: list[str], owner: str, expires: float) -> set[str]:
        ours = {key for key in keys if self.ours(key, owner)}
        for key in ours:
            self.records[key] = (CLAIMED, expires, owner)
        return ours

    def complete(self, keys: list[str], owner: str, ttl: float) -> None:
        for key in keys:
            self.records[key] = (COMPLETED, self.now + ttl, owner)

    def release(self, keys: list[str], owner: str) -> None:
        for key in keys:
            if self.ours(key, owner):
                del self.records[key]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(STEPS, min_size=1, max_size=12))
@example(  # SqliteStore deletes a lapsed claim as another key completes: it cannot be extended
    [
        ("claim", ["c"], "first", 5),
        ("wait", [], "", 10),
        ("complete", ["a"], "first", 20),
        ("extend", ["c"], "first", 5),
    ]
)
def test_every_store_follows_the_model(
    make_store: MakeStore, clock: FakeClock, steps: list[tuple[str, list[str], str, int]]
) -> None:
    store = make_store()
    prefix = uuid.uuid4().hex[:8]  # one table (or file) for every example: keys of its own
    tokens = {owner: f"{prefix}-{owner}" for owner in OWNERS}
    model = Model(clock.now)
    for action, keys, owner, seconds in steps:
        named = [f"{prefix}-{key}" for key in keys]
        token = tokens.get(owner, "")
        if action == "claim":
            won = store.claim(named, owner=token, expires=clock.now + seconds).won
            assert won == model.claim(named, token, clock.now + seconds)
        elif action == "extend":
            ours = store.extend(named, owner=token, expires=clock.now + seconds)
            assert ours == model.extend(named, token, clock.now + seconds)
        elif action == "complete":
            store.complete(named, owner=token, ttl_seconds=seconds)
            model.complete(named, token, seconds)
        elif action == "release":
            store.release(named, owner=token)
            model.release(named, token)
        else:
            clock.advance(seconds)
            model.now = clock.now
        records = store.read([f"{prefix}-{key}" for key in "abc"])
        live = {k: (r.state, r.expires, r.owner) for k, r in records.items()}
        expected = {k: v for k, v in model.records.items()}
        # an expired record may linger (DynamoDB's TTL deletes it some time after): compare
        # what blocks, and every record that exists in both
        assert {k for k, v in live.items() if v[1] > clock.now} == {
            k for k, v in expected.items() if v[1] > clock.now
        }
        for key in live.keys() & expected.keys():
            assert live[key] == expected[key]
        for key in expected.keys() - live.keys():  # an expired record the store has deleted is
            del model.records[key]  # gone for good: a lapsed claim can no longer be extended
