"""The pause check the pollers will run every `pause_check_seconds` (`check_pause`, a flow),
driven by both doors against the local moto server: one `ListQueueTags`, the state, and a failed
check that keeps the last state."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from sqsbatch import SqsError, create_queue, pause_queue
from sqsbatch._async.door import AsyncSqs
from sqsbatch._core.pause_state import UNTIL_TAG, PauseCheck, PauseState, check_pause
from sqsbatch._sync.door import SyncSqs
from tests.support.faults import Faulty, throttled
from tests.support.front_ends import aio_client

NOW = 1_800_000_000.0


def test_the_sync_door_reads_the_pause_in_one_call(sqs: Any, name: str) -> None:
    url = create_queue(name, client=sqs)
    door = SyncSqs(sqs)
    assert door.run(check_pause(url, NOW)) == PauseCheck(PauseState(paused=False))
    pause_queue(url, for_seconds=60, reason="deploy", client=sqs, lambda_client=False)
    requests = sum(door.requests.values())
    check = door.run(check_pause(url, 0.0))
    assert check.state.paused and check.state.reason == "deploy" and check.line is None
    assert sum(door.requests.values()) == requests + 1  # one ListQueueTags, nothing else


def test_the_async_door_reads_it_too(sqs: Any, name: str) -> None:
    url = create_queue(name, client=sqs)
    pause_queue(url, client=sqs, lambda_client=False)

    async def main() -> PauseCheck:
        async with aio_client(sqs) as client:
            return await AsyncSqs(client).run(check_pause(url, NOW))

    assert asyncio.run(main()).state == PauseState(paused=True)


def test_a_failed_periodic_check_keeps_the_last_state_and_says_so(sqs: Any, name: str) -> None:
    url = create_queue(name, client=sqs)
    faulty = Faulty(sqs)
    faulty.fail("list_queue_tags", 1, throttled)
    last = PauseState(paused=True, until=NOW + 60)
    check = SyncSqs(faulty).run(check_pause(url, NOW, last=last))
    assert check.state is last
    assert check.line is not None and check.line[0] == logging.WARNING
    assert check.line[1].startswith("pause check failed, still paused: SQS error Throttling")


def test_an_unreadable_tag_is_paused_with_a_warning(sqs: Any, name: str) -> None:
    url = create_queue(name, client=sqs)
    sqs.tag_queue(QueueUrl=url, Tags={UNTIL_TAG: "tomorrow"})
    check = SyncSqs(sqs).run(check_pause(url, NOW))
    assert check.state.paused and check.line is not None
    assert "'tomorrow'" in check.line[1]


def test_a_one_off_check_raises_what_failed(sqs: Any, name: str) -> None:
    url = create_queue(name, client=sqs)
    faulty = Faulty(sqs)
    faulty.fail("list_queue_tags", 1, throttled)
    with pytest.raises(SqsError, match="Throttling"):
        SyncSqs(faulty).run(check_pause(url, NOW))
