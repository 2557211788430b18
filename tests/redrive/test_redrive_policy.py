"""The redrive daemon's pure decisions: backoff, jitter, routing, dispositions, the token bucket.

No SQS here: messages are built by hand (`dlq_message`), time is a number, randomness seeded.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

import redrive
from redrive.daemon import jitter_random
from redrive.decide import DlqMessage, Kind, decide, read, route
from redrive.plan import moved_envelope, parked_envelope
from redrive.policy import BackoffPolicy
from sqsbatch._core.envelope import Death, DecodedMessage, Envelope, ErrorInfo
from sqsbatch._core.rate import TokenBucket
from sqsbatch.errors import ConfigError

T0 = 1_800_000_000.0
ARN = "arn:aws:sqs:us-east-1:123456789012:orders"


def dlq_message(
    *,
    source: str | None = "orders",
    redrives: int = 0,
    failed_at: float | None = T0,
    first_received_at: float | None = None,
    source_arn: str | None = None,
    message_id: str = "m-1",
) -> DlqMessage:
    """A DLQ message as `read` would make it, without SQS."""
    error = ErrorInfo("RuntimeError", "boom", failed_at) if failed_at is not None else None
    envelope = Envelope(
        id=message_id, timestamp=T0 - 100, redrives=redrives, source_queue=source, error=error
    )
    decoded = DecodedMessage(
        id=message_id,
        body={"n": 1},
        timestamp=datetime.fromtimestamp(T0 - 100, UTC),
        attempts=1,
        attributes={"tenant": "a"},
        envelope=envelope,
        raw_body='{"n":1}',
        raw_attributes={"tenant": {"DataType": "String", "StringValue": "a"}},
        group_id="g-1",
    )
    return DlqMessage(decoded, "receipt", f"sqs-{message_id}", first_received_at, source_arn)


def disposition_at(message: DlqMessage, now: float, policy: BackoffPolicy, **kw: Any) -> Any:
    target = route(message, only_source=kw.pop("only", None), fallback=kw.pop("to", None))
    rng = jitter_random(message.message.id, message.redrives)
    parking = kw.pop("parking", None)
    return decide(message, policy, target=target, parking_queue=parking, now=now, random=rng, **kw)


# -- the policy ----------------------------------------------------------------------------------


def test_delays_grow_by_factor_up_to_the_cap() -> None:
    policy = BackoffPolicy(base_delay=60, factor=2, max_delay=3600, jitter=0)
    rng = random.Random(1)
    assert [policy.delay(n, rng) for n in range(8)] == [60, 120, 240, 480, 960, 1920, 3600, 3600]


def test_defaults_follow_the_seeds() -> None:
    policy = BackoffPolicy()
    assert (policy.base_delay, policy.factor, policy.max_delay) == (60, 2, 3600)
    assert (policy.jitter_seconds, policy.max_redrives) == (60, 5)


@pytest.mark.parametrize("n", [0, 1, 3, 10])
def test_jitter_stays_within_zero_and_jitter(n: int) -> None:
    policy = BackoffPolicy(base_delay=10, factor=3, max_delay=500, jitter=7)
    rng = random.Random(42)
    delays = [policy.delay(n, rng) - policy.backoff(n) for _ in range(2000)]
    assert all(0 <= d <= 7 for d in delays)
    assert max(delays) - min(delays) > 6  # spread over the range, not a constant


def test_jitter_is_the_same_on_every_receive_and_every_replica() -> None:
    policy = BackoffPolicy(base_delay=60, jitter=60)
    one = policy.due_at(T0, 2, jitter_random("m-1", 2))
    again = policy.due_at(T0, 2, jitter_random("m-1", 2))
    other = policy.due_at(T0, 2, jitter_random("m-2", 2))
    assert one == again != other
    assert policy.due_at(T0, 3, jitter_random("m-1", 3)) != one


@pytest.mark.parametrize(
    ("setting", "value", "says"),
    [
        ("base_delay", -1, "base_delay=-1 is invalid (accepted: seconds 0..86400)"),
        ("factor", 0.5, "factor=0.5 is invalid (accepted: number 1..100)"),
        ("max_delay", -5, "max_delay=-5 is invalid"),
        ("max_delay", 10, "max_delay=10 is invalid: it must be >= base_delay=60"),
        ("jitter", -2, "jitter=-2 is invalid (accepted: seconds 0..86400)"),
        ("max_redrives", -1, "max_redrives=-1 is invalid (accepted: int 0..1000)"),
        ("max_redrives", True, "max_redrives=True is invalid"),
        ("base_delay", float("nan"), "base_delay=nan is invalid"),
    ],
)
def test_bad_policy_fails_with_one_line(setting: str, value: Any, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        BackoffPolicy(**{setting: value})
    assert says in str(caught.value)
    assert "\n" not in str(caught.value)


# -- the dispositions-----------------------------------------------------------------------------


def test_a_message_not_yet_due_is_hidden_until_it_is() -> None:
    policy = BackoffPolicy(base_delay=60, jitter=0)
    disposition = disposition_at(dlq_message(), T0 + 10, policy)
    assert disposition.kind is Kind.HIDE
    assert disposition.hide_seconds == 50
    assert disposition.due_at == T0 + 60


def test_a_due_message_moves_to_its_source() -> None:
    policy = BackoffPolicy(base_delay=60, jitter=0)
    disposition = disposition_at(dlq_message(redrives=1), T0 + 120, policy)
    assert (disposition.kind, disposition.target) == (Kind.MOVE, "orders")


def test_the_nth_redrive_waits_longer() -> None:
    policy = BackoffPolicy(base_delay=60, factor=2, jitter=0)
    waits = [disposition_at(dlq_message(redrives=n), T0, policy).hide_seconds for n in range(4)]
    assert waits == [60, 120, 240, 480]


def test_hiding_never_passes_the_12h_ceiling_counted_from_the_receive() -> None:
    policy = BackoffPolicy(base_delay=86_400, max_delay=86_400, jitter=0)
    disposition = disposition_at(dlq_message(), T0, policy, held_for=100.5)
    assert disposition.kind is Kind.HIDE
    assert disposition.hide_seconds == 43_200 - 101


def test_without_metadata_the_first_receive_in_the_dlq_is_dead_lettered_at() -> None:
    policy = BackoffPolicy(base_delay=60, jitter=0)
    native = dlq_message(source=None, failed_at=None, first_received_at=T0 + 1000)
    disposition = disposition_at(native, T0 + 1030, policy, only="http://sqs/123/orders")
    assert (disposition.kind, disposition.hide_seconds) == (Kind.HIDE, 30)


def test_exhausted_messages_stay_or_park() -> None:
    policy = BackoffPolicy(max_redrives=2, hold_seconds=300)
    spent = dlq_message(redrives=2)
    stays = disposition_at(spent, T0 + 10**6, policy)
    assert (stays.kind, stays.hide_seconds) == (Kind.EXHAUSTED, 300)
    parks = disposition_at(spent, T0, policy, parking="parked")
    assert (parks.kind, parks.target) == (Kind.PARK, "parked")
    assert disposition_at(dlq_message(redrives=1), T0 + 10**6, policy).kind is Kind.MOVE


def test_no_source_and_no_fallback_is_unroutable() -> None:
    disposition = disposition_at(dlq_message(source=None), T0 + 10**6, BackoffPolicy())
    assert (disposition.kind, disposition.hide_seconds) == (Kind.UNROUTABLE, 300)


# -- routing -------------------------------------------------------------------------------------


def test_routing_order_metadata_then_source_arn_then_only_source_then_fallback() -> None:
    # moto never sets DeadLetterQueueSourceArn, so that branch is tested here, by hand.
    both = dlq_message(source="from-metadata", source_arn=ARN)
    assert route(both, only_source="only", fallback="to") == "from-metadata"
    arn_only = dlq_message(source=None, source_arn=ARN)
    assert route(arn_only, only_source="only", fallback="to") == "orders"
    bare = dlq_message(source=None)
    assert route(bare, only_source="only", fallback="to") == "only"
    assert route(bare, only_source=None, fallback="to") == "to"
    assert route(bare, only_source=None, fallback=None) is None


def test_read_takes_the_system_attributes_routing_needs() -> None:
    raw = {
        "MessageId": "sqs-1",
        "ReceiptHandle": "rh",
        "Body": "plain",
        "Attributes": {
            "SentTimestamp": "1800000000000",
            "ApproximateReceiveCount": "3",
            "ApproximateFirstReceiveTimestamp": "1800000005000",
            "DeadLetterQueueSourceArn": ARN,
        },
    }
    message = read(raw)
    assert (message.known_source, message.first_received_at) == ("orders", T0 + 5)
    assert message.dead_lettered_at == T0 + 5
    assert (message.redrives, message.message.body) == (0, "plain")


def test_a_message_with_broken_metadata_reads_as_foreign() -> None:
    broken = '{"v":1,"ct":"json","a":"lots","err":{"unexpected":1}}'
    raw = {
        "MessageId": "sqs-2",
        "ReceiptHandle": "rh",
        "Body": "{}",
        "Attributes": {"SentTimestamp": "1800000000000"},
        "MessageAttributes": {"sqsbatch": {"DataType": "String", "StringValue": broken}},
    }
    message = read(raw)
    assert (message.message.id, message.message.body, message.redrives) == ("sqs-2", "{}", 0)


# -- the copies ----------------------------------------------------------------------------------


def test_a_moved_copy_has_one_more_redrive_and_a_fresh_budget() -> None:
    message = dlq_message(redrives=2)
    envelope = moved_envelope(message, "http://sqs/123/orders")
    assert (envelope.id, envelope.timestamp) == ("m-1", T0 - 100)
    assert (envelope.redrives, envelope.base_attempts) == (3, 0)
    assert (envelope.source_queue, envelope.error) == ("orders", None)


def test_a_moved_copy_records_its_dead_count_and_carries_it() -> None:
    # Given a DLQ message sqsbatch dead-lettered twice (its history may keep fewer entries)
    message = dlq_message(redrives=1)
    dead = message.message.envelope.died(Death("a", "q", 1, 1.0)).died(Death("b", "q", 1, 2.0))
    message = replace(message, message=replace(message.message, envelope=dead))
    # When it is moved back to its source
    envelope = moved_envelope(message, "http://sqs/123/orders")
    # Then its copy knows it has not died since, through the attribute too
    assert envelope.dead_count_at_redrive == dead.dead_count
    carried = Envelope.from_attribute(envelope.to_attribute()["StringValue"])
    assert carried is not None and carried.dead_count_at_redrive == dead.dead_count
    assert not carried.died_since_redrive
    assert carried.died(Death("c", "q", 1, 3.0)).died_since_redrive


def test_a_parked_copy_keeps_the_error_and_the_source() -> None:
    envelope = parked_envelope(dlq_message(redrives=5))
    assert envelope.redrives == 5
    assert envelope.source_queue == "orders"
    assert envelope.error is not None and envelope.error.type == "RuntimeError"


# -- the token bucket ----------------------------------------------------------------------------


def test_the_bucket_never_grants_more_than_rate_times_time_plus_burst() -> None:
    # Given a bucket of 5 messages/s and a fake clock ticking 0.1 s between asks for 3 tokens
    bucket = TokenBucket(5, now=0.0)
    granted, now = 0, 0.0
    # When asked again and again over 20 seconds
    while now < 20.0:
        granted += bucket.take(now, 3).count
        now += 0.1
    # Then what went out fits the rate (plus the initial burst of one second's worth)
    assert 5 * 20 <= granted <= 5 * 20 + 5


def test_the_bucket_says_how_long_until_tokens() -> None:
    bucket = TokenBucket(2, now=0.0)
    assert bucket.take(0.0, 10).count == 2
    assert bucket.wait_seconds(1, 0.0) == pytest.approx(0.5)
    assert bucket.wait_seconds(3, 0.0) == pytest.approx(1.5)
    assert bucket.take(0.5, 1).count == 1


@pytest.mark.parametrize("rate", [0, -1, float("inf"), True])
def test_a_bad_rate_fails_clearly(rate: Any) -> None:
    with pytest.raises(ConfigError, match=r"rate=.* is invalid \(accepted: messages/s > 0\)"):
        TokenBucket(rate, now=0.0)


def test_exported_names() -> None:
    assert redrive.__all__ == sorted(redrive.__all__)
    expected = {"BackoffPolicy", "MoveReport", "RedriveStats", "Redriver", "move_now"}
    assert expected | {"start_native_move"} <= set(redrive.__all__)
    for exported in redrive.__all__:
        assert getattr(redrive, exported) is not None
