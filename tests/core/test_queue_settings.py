"""The queue is the source of truth: settings not given come from its RedrivePolicy (SPEC 2.6).

`resolve_settings` is pure; these are its table tests. The front ends' behaviour on a real queue
is in tests/front_ends/test_never_lose.py.
"""

from __future__ import annotations

import json
import logging

import pytest

from sqsbatch import ConsumerConfig
from sqsbatch._core.ledger import LastFailure
from sqsbatch._core.queue_settings import QueueSettings, RedrivePolicy, resolve_settings


def policy(dlq: str = "q-dlq", count: int = 4) -> dict[str, str]:
    target = f"arn:aws:sqs:us-east-1:123456789012:{dlq}"
    return {"RedrivePolicy": json.dumps({"deadLetterTargetArn": target, "maxReceiveCount": count})}


def notes(settings: QueueSettings, level: int = logging.WARNING) -> list[str]:
    return [text for lvl, text in settings.notes if lvl == level]


def test_settings_not_given_come_from_the_redrive_policy() -> None:
    # Given a consumer with no DLQ and no max_retries of its own
    settings = resolve_settings("q", ConsumerConfig(max_batch_size=7), policy(count=6))
    # Then the queue's policy fills them in, and nothing contradicts it
    assert settings.config.dead_letter_queue == "q-dlq"
    assert settings.config.max_retries == 5
    assert settings.config.max_batch_size == 7
    assert settings.last_failure is LastFailure.DEAD_LETTER
    assert notes(settings) == []
    (said,) = notes(settings, logging.INFO)  # where the values came from, for an operator
    assert said == "queue q: dead_letter_queue='q-dlq', max_retries=5 from its RedrivePolicy"


def test_a_max_receive_count_beyond_the_config_range_is_kept() -> None:
    settings = resolve_settings("q", ConsumerConfig(), policy(count=1000))
    assert settings.config.max_retries == 999  # SQS allows 1..1000; we never dead-letter early


def test_settings_from_the_environment_count_as_explicit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQSBATCH_MAX_RETRIES", "1")
    settings = resolve_settings("q", ConsumerConfig.load("q"), policy(count=4))
    assert settings.config.max_retries == 1  # given: kept (headroom is no contradiction)
    assert settings.config.dead_letter_queue == "q-dlq"  # not given: from the queue
    assert notes(settings) == []


def test_an_explicit_other_dlq_is_used_and_reported_in_one_line() -> None:
    settings = resolve_settings("q", ConsumerConfig(dead_letter_queue="other"), policy())
    assert settings.config.dead_letter_queue == "other"
    (line,) = notes(settings)
    assert "dead-letters to q-dlq" in line and "go to other" in line and "\n" not in line


def test_a_max_receive_count_below_max_retries_plus_one_is_a_contradiction() -> None:
    settings = resolve_settings("q", ConsumerConfig(max_retries=5), policy(count=4))
    (line,) = notes(settings)
    assert "maxReceiveCount=4 but max_retries=5 needs 6" in line
    assert "before its last retry" in line
    assert settings.config.max_retries == 5


@pytest.mark.parametrize("count", [4, 5, 50])
def test_headroom_above_max_retries_plus_one_is_no_contradiction(count: int) -> None:
    settings = resolve_settings("q", ConsumerConfig(max_retries=3), policy(count=count))
    assert notes(settings) == []


def test_an_explicit_dlq_given_as_a_url_matches_the_policy_by_name() -> None:
    url = "http://127.0.0.1:1/123456789012/q-dlq"
    config = ConsumerConfig(dead_letter_queue=url, max_retries=3)
    assert resolve_settings("q", config, policy()).notes == ()


def test_no_policy_and_no_dlq_deletes_on_the_last_failure_as_cloudflare_does() -> None:
    settings = resolve_settings("q", ConsumerConfig(), {})
    assert settings.last_failure is LastFailure.DROP
    (line,) = notes(settings, logging.WARNING)  # failures are deleted: worth a warning
    assert "no RedrivePolicy and no dead_letter_queue" in line


def test_no_policy_but_a_dlq_dead_letters_and_warns_about_crashes() -> None:
    settings = resolve_settings("q", ConsumerConfig(dead_letter_queue="q-dlq"), {})
    assert settings.last_failure is LastFailure.DEAD_LETTER
    (line,) = notes(settings)
    assert "has no RedrivePolicy" in line


def test_a_refused_lookup_without_a_dlq_leaves_messages_to_sqs() -> None:
    settings = resolve_settings("q", ConsumerConfig(), None, refused="AccessDenied")
    assert settings.last_failure is LastFailure.LEAVE
    (line,) = notes(settings)
    assert "AccessDenied" in line and "never deleted" in line


def test_a_refused_lookup_with_a_dlq_still_dead_letters_there() -> None:
    config = ConsumerConfig(dead_letter_queue="q-dlq")
    settings = resolve_settings("q", config, None, refused="AccessDenied")
    assert settings.last_failure is LastFailure.DEAD_LETTER
    assert settings.config is config


@pytest.mark.parametrize(
    "raw", ["not json", "{}", '{"deadLetterTargetArn": "arn:aws:sqs:r:1:x", "maxReceiveCount": 0}']
)
def test_a_garbled_policy_is_treated_as_unknown_never_as_absent(raw: str) -> None:
    settings = resolve_settings("q", ConsumerConfig(), {"RedrivePolicy": raw})
    assert settings.last_failure is LastFailure.LEAVE


def test_redrive_policy_reads_the_dlq_name_and_count() -> None:
    assert RedrivePolicy.of(policy("d", 3)) == RedrivePolicy("d", 3)
    assert RedrivePolicy.of({}) is None
