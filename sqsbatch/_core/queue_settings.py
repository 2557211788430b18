"""A consumer's settings once the queue has been asked, without I/O.

The queue is the source of truth: at start every front end reads the queue's RedrivePolicy
(`policy_query`) and `resolve_settings` fills what the consumer's settings leave unset, says what
contradicts them, and decides what a message whose last delivery fails becomes (`LastFailure`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from sqsbatch._core.ledger import LastFailure
from sqsbatch._core.shapes import queue_name
from sqsbatch.config import ConsumerConfig
from sqsbatch.errors import ConfigError, CredentialsError, QueueNotFound, SqsError

__all__ = [
    "QueueSettings",
    "RedrivePolicy",
    "check_dead_letter_queue",
    "lookup_refusal",
    "policy_query",
    "resolve_settings",
    "retention_of",
]


@dataclass(frozen=True)
class RedrivePolicy:
    """A queue's `RedrivePolicy`: where SQS moves a message, and after how many receives."""

    dead_letter_queue: str
    max_receive_count: int

    @classmethod
    def of(cls, attributes: Mapping[str, str]) -> RedrivePolicy | None:
        """The policy in a queue's attributes; None when it has none. `ValueError` if garbled."""
        raw = attributes.get("RedrivePolicy")
        if not raw:
            return None
        policy = json.loads(raw)
        target = str(policy["deadLetterTargetArn"]).rsplit(":", 1)[-1]
        count = int(policy["maxReceiveCount"])
        if not target or count < 1:
            raise ValueError(raw)
        return cls(target, count)


@dataclass(frozen=True)
class QueueSettings:
    """A consumer's settings once the queue has been asked: what it will do with a message whose
    last delivery fails, and what to say at start."""

    config: ConsumerConfig
    last_failure: LastFailure
    notes: tuple[tuple[int, str], ...] = ()
    """(log level, line) to log once at start."""
    retention_seconds: int | None = None
    """The queue's MessageRetentionPeriod (None: not known), read in the same call."""


def resolve_settings(
    queue: str,
    config: ConsumerConfig,
    attributes: Mapping[str, str] | None,
    *,
    refused: str = "",
) -> QueueSettings:
    """The queue is the source of truth: `dead_letter_queue` and `max_retries` not given
    explicitly (keyword, `SQSBATCH_*`, `sqsbatch.toml`) come from its RedrivePolicy.

    `attributes` None: the lookup failed (`refused` says why). A message is deleted on its last
    failure only when the queue has no RedrivePolicy and no DLQ is configured; when sqsbatch
    cannot know where it belongs, it leaves it to the RedrivePolicy.
    """
    settings = _resolved(queue, config, attributes, refused)
    return replace(settings, retention_seconds=retention_of(attributes or {}))


def retention_of(attributes: Mapping[str, str]) -> int | None:
    """A queue's `MessageRetentionPeriod` in seconds, from its attributes (None: absent)."""
    try:
        return int(attributes["MessageRetentionPeriod"])
    except (KeyError, ValueError):
        return None


def _resolved(
    queue: str, config: ConsumerConfig, attributes: Mapping[str, str] | None, refused: str
) -> QueueSettings:
    name = queue_name(queue)
    explicit = config.model_fields_set
    try:
        policy = None if attributes is None else RedrivePolicy.of(attributes)
    except (ValueError, KeyError, TypeError):
        attributes, refused = None, "its RedrivePolicy is not valid JSON with a DLQ ARN and count"
    if attributes is None:
        return _unknown_policy(name, config, refused)
    if policy is None:
        return _no_policy(name, config)
    derived = {
        key: value
        for key, value in (
            ("dead_letter_queue", policy.dead_letter_queue),
            ("max_retries", policy.max_receive_count - 1),
        )
        if key not in explicit
    }
    effective = config.model_copy(update=derived)
    notes = _contradictions(name, effective, policy)
    if derived:
        given = ", ".join(f"{key}={value!r}" for key, value in derived.items())
        notes.insert(0, (logging.INFO, f"queue {name}: {given} from its RedrivePolicy"))
    return QueueSettings(effective, LastFailure.DEAD_LETTER, tuple(notes))


def policy_query(queue_url: str) -> dict[str, Any]:
    """`GetQueueAttributes` parameters for reading a queue's RedrivePolicy (and its retention,
    which the idempotency guard's default `idempotency_ttl` counts, in the same call)."""
    return {"QueueUrl": queue_url, "AttributeNames": ["RedrivePolicy", "MessageRetentionPeriod"]}


def lookup_refusal(exc: SqsError) -> str:
    """Why reading the RedrivePolicy failed, for a consumer that goes on without it; a missing
    queue and refused credentials are raised again (nothing could work)."""
    if isinstance(exc, QueueNotFound | CredentialsError):
        raise exc
    return exc.code or str(exc)


def _unknown_policy(name: str, config: ConsumerConfig, refused: str) -> QueueSettings:
    if config.dead_letter_queue is not None:
        note = (
            f"cannot read the RedrivePolicy of {name} ({refused}): failed messages go to "
            f"dead_letter_queue={config.dead_letter_queue!r} after max_retries="
            f"{config.max_retries}, unchecked against the queue"
        )
        return QueueSettings(config, LastFailure.DEAD_LETTER, ((logging.WARNING, note),))
    note = (
        f"cannot read the RedrivePolicy of {name} ({refused}) and no dead_letter_queue is set: "
        "a message whose last delivery fails is left on the queue for its RedrivePolicy, "
        "never deleted"
    )
    return QueueSettings(config, LastFailure.LEAVE, ((logging.WARNING, note),))


def _no_policy(name: str, config: ConsumerConfig) -> QueueSettings:
    dlq = config.dead_letter_queue
    if dlq is None:
        note = (
            f"queue {name} has no RedrivePolicy and no dead_letter_queue is set: a message whose "
            f"delivery {config.max_receive_count} fails is deleted (logged with its id)"
        )
        return QueueSettings(config, LastFailure.DROP, ((logging.WARNING, note),))
    note = (
        f"queue {name} has no RedrivePolicy: a consumer that crashes on a message before it can "
        f"settle would see it forever; create_queue({name!r}, dead_letter_queue={dlq!r}, "
        f"max_retries={config.max_retries}) sets one"
    )
    return QueueSettings(config, LastFailure.DEAD_LETTER, ((logging.WARNING, note),))


def _contradictions(
    name: str, config: ConsumerConfig, policy: RedrivePolicy
) -> list[tuple[int, str]]:
    """Explicit settings that disagree with the queue, each with what will happen.

    A `maxReceiveCount` above `max_retries + 1` is headroom, no contradiction: sqsbatch
    dead-letters first, with its metadata.
    """
    notes = []
    if queue_name(config.dead_letter_queue or "") != policy.dead_letter_queue:
        notes.append(
            f"queue {name} dead-letters to {policy.dead_letter_queue} in its RedrivePolicy but "
            f"dead_letter_queue={config.dead_letter_queue!r}: messages whose last delivery fails "
            f"go to {config.dead_letter_queue}; only those of a crashed consumer go to "
            f"{policy.dead_letter_queue}"
        )
    if policy.max_receive_count < config.max_receive_count:
        notes.append(
            f"queue {name} has RedrivePolicy.maxReceiveCount={policy.max_receive_count} but "
            f"max_retries={config.max_retries} needs {config.max_receive_count}: SQS moves a "
            f"failing message to {policy.dead_letter_queue} after {policy.max_receive_count} "
            "deliveries, before its last retry and without sqsbatch's metadata"
        )
    return [(logging.WARNING, note) for note in notes]


def check_dead_letter_queue(queue: str, dead_letter_queue: str | None) -> None:
    """A queue (name or URL) cannot be its own dead-letter queue."""
    if dead_letter_queue is not None and queue_name(dead_letter_queue) == queue_name(queue):
        raise ConfigError(f"dead_letter_queue={dead_letter_queue!r} is the queue itself")
