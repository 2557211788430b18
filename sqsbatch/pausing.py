"""Pause and resume a queue, Cloudflare's verbs: the state is a queue tag, so every consumer of
the queue agrees with no new infrastructure (`sqsbatch._core.pause_state` says what the tags
mean; the pollers are to read it, once wired). A queue consumed by Lambda has its event
source mappings disabled on pause and enabled on resume, and the answer names the ones that
changed.

Requests: a pause is `GetQueueUrl` (a name, not a URL), one `GetQueueAttributes` (the ARN and the
retention), one `TagQueue`, then `ListEventSourceMappings` (one page per 100 mappings) and one
`UpdateEventSourceMapping` per mapping that changes. A resume is the same with `UntagQueue`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqsbatch._core.pause_state import (
    MAX_PAUSE_SECONDS,
    REASON_TAG,
    UNTIL_TAG,
    PauseState,
    check_pause,
    pause_tags,
    read_pause,
)
from sqsbatch._core.shapes import queue_name
from sqsbatch._sync.door import SyncSqs, default_client
from sqsbatch.errors import ConfigError, SqsBatchError

__all__ = ["Paused", "pause_queue", "queue_pause", "resume_queue"]

_ON = frozenset({"Enabled", "Enabling", "Creating", "Updating"})
_OFF = frozenset({"Disabled", "Disabling"})


@dataclass(frozen=True)
class Paused:
    """What a pause or resume did: the queue's state now, the event source mappings it changed
    (their UUIDs, with their function), and notes for the operator (a pause that outlives the
    queue's retention, mappings left alone)."""

    queue: str
    state: PauseState
    mappings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def pause_queue(
    queue: str,
    *,
    for_seconds: float | None = None,
    reason: str | None = None,
    client: Any = None,
    lambda_client: Any = None,
    now: Callable[[], float] = time.time,
) -> Paused:
    """Pause `queue` (name or URL) until resumed, or for `for_seconds`: its pause tags are set
    (the pollers do not read them yet: docs/pressure.md), and the Lambda event source mappings
    whose source is the queue are disabled.

    `lambda_client=False` leaves Lambda alone (no Lambda call at all); None makes a boto3 one.
    """
    seconds = _checked_seconds(for_seconds)
    until = None if seconds is None else math.ceil(now()) + seconds
    try:
        tags = pause_tags(until, reason)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    sqs = SyncSqs(client if client is not None else default_client())
    url, arn, retention = _queue_facts(sqs, queue)
    sqs.call("tag_queue", {"QueueUrl": url, "Tags": tags})
    notes = _retention_notes(seconds, retention)
    changed = _switch_mappings(lambda_client, arn, enable=False, notes=notes)
    return Paused(queue_name(url), read_pause(tags, now()), changed, notes)


def resume_queue(queue: str, *, client: Any = None, lambda_client: Any = None) -> Paused:
    """Resume `queue`: its pause tags are removed and its disabled Lambda event source mappings
    enabled (every disabled mapping of the queue: pause keeps no list of its own)."""
    sqs = SyncSqs(client if client is not None else default_client())
    url, arn, _ = _queue_facts(sqs, queue)
    sqs.call("untag_queue", {"QueueUrl": url, "TagKeys": [UNTIL_TAG, REASON_TAG]})
    notes: list[str] = []
    changed = _switch_mappings(lambda_client, arn, enable=True, notes=notes)
    return Paused(queue_name(url), PauseState(paused=False), changed, notes)


def queue_pause(
    queue: str, *, client: Any = None, now: Callable[[], float] = time.time
) -> PauseState:
    """Whether `queue` is paused now: one `ListQueueTags` (and `GetQueueUrl` for a name)."""
    sqs = SyncSqs(client if client is not None else default_client())
    return sqs.run(check_pause(sqs.queue_url(queue), now())).state


def _checked_seconds(for_seconds: float | None) -> int | None:
    if for_seconds is None:
        return None
    if isinstance(for_seconds, bool) or not isinstance(for_seconds, int | float):
        raise ConfigError(f"for_seconds={for_seconds!r} is invalid (accepted: seconds, or None)")
    if not 1 <= for_seconds <= MAX_PAUSE_SECONDS:
        raise ConfigError(
            f"for_seconds={for_seconds!r} is invalid (accepted: 1..{MAX_PAUSE_SECONDS}, "
            "14 days, SQS's longest retention; None pauses until resumed)"
        )
    return math.ceil(for_seconds)


def _queue_facts(sqs: SyncSqs, queue: str) -> tuple[str, str, int]:
    url = sqs.queue_url(queue)
    names = ["QueueArn", "MessageRetentionPeriod"]
    attributes = sqs.call(
        "get_queue_attributes", {"QueueUrl": url, "AttributeNames": names}, queue=queue_name(url)
    )["Attributes"]
    return url, attributes["QueueArn"], int(attributes.get("MessageRetentionPeriod", 345_600))


def _retention_notes(seconds: int | None, retention: int) -> list[str]:
    days = f"{retention / 86_400:g} days" if retention >= 86_400 else f"{retention} s"
    if seconds is None:
        return [f"paused until resumed: SQS deletes messages older than {days} meanwhile"]
    if seconds > retention:
        return [f"the pause outlasts the queue's retention ({days}): SQS deletes older messages"]
    return []


def _switch_mappings(client: Any, arn: str, *, enable: bool, notes: list[str]) -> list[str]:
    if client is False:
        notes.append("Lambda event source mappings not checked")
        return []
    client = client if client is not None else _lambda_client()
    changed: list[str] = []
    with _lambda_errors(enable):
        for mapping in _mappings(client, arn):
            if mapping.get("State") in (_OFF if enable else _ON):
                client.update_event_source_mapping(UUID=mapping["UUID"], Enabled=enable)
                function = str(mapping.get("FunctionArn", "?")).rsplit(":", 1)[-1]
                changed.append(f"{mapping['UUID']} ({function})")
    return changed


def _mappings(client: Any, arn: str) -> Iterator[dict[str, Any]]:
    params: dict[str, Any] = {"EventSourceArn": arn, "MaxItems": 100}
    while True:
        page = client.list_event_source_mappings(**params)
        yield from page.get("EventSourceMappings", [])
        if not page.get("NextMarker"):
            return
        params["Marker"] = page["NextMarker"]


@contextmanager
def _lambda_errors(enable: bool) -> Iterator[None]:
    from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        what = f"Lambda error {error.get('Code', 'Unknown')}: {error.get('Message', '')}"
        raise _partly_done(enable, what) from exc
    except BotoCoreError as exc:
        raise _partly_done(enable, f"Lambda error: {exc}") from exc


def _partly_done(enable: bool, what: str) -> SqsBatchError:
    done = "resumed (its tags removed)" if enable else "paused (its tag set)"
    verb = "enabled" if enable else "disabled"
    return SqsBatchError(
        f"the queue is {done}, but its Lambda event source mappings were not all {verb}: {what}"
    )


def _lambda_client() -> Any:
    import boto3  # noqa: PLC0415 - slow to import
    from botocore.config import Config  # noqa: PLC0415

    config = Config(connect_timeout=5, read_timeout=10, retries={"mode": "standard"})
    return boto3.session.Session().client("lambda", config=config)
