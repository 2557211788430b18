"""The pollers' botocore retries: botocore's standard mode (which errors, how many attempts,
its retry quota), with the wait before each retry from the core (`call_retry_seconds`): a
transient failure is retried within 50 ms at first, a throttle within 1 s."""

from __future__ import annotations

import asyncio
from typing import Any

import aioboto3
import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ConnectionClosedError

from sqsbatch._core.delays import call_retry_seconds
from sqsbatch._shell.botocore import client_config
from sqsbatch._shell.retries import retries_soon

CREDENTIALS = {"region_name": "us-east-1", "aws_access_key_id": "x", "aws_secret_access_key": "x"}


@pytest.mark.parametrize(
    ("attempt", "throttled", "step"),
    [(1, False, 0.05), (2, False, 0.1), (4, False, 0.4), (1, True, 1.0), (3, True, 4.0)],
)
def test_call_retry_seconds_is_full_jitter_over_its_step(
    attempt: int, throttled: bool, step: float
) -> None:
    assert call_retry_seconds(attempt, throttled=throttled, draw=0.0) == 0.0
    assert call_retry_seconds(attempt, throttled=throttled, draw=0.5) == pytest.approx(step / 2)
    assert call_retry_seconds(attempt, throttled=throttled, draw=0.999) < step


def test_call_retry_seconds_caps_its_step_at_20_s() -> None:
    assert call_retry_seconds(100, throttled=True, draw=0.5) == 10.0
    assert call_retry_seconds(10**9, throttled=False, draw=0.5) == 10.0


def sqs(**config: Any) -> Any:
    return boto3.session.Session().client(
        "sqs", endpoint_url="http://127.0.0.1:9", config=client_config(**config), **CREDENTIALS
    )


def delays(client: Any, attempts: int, *, throttled: bool, times: int = 50) -> list[Any]:
    """What the client's needs-retry handlers answer for a failed ReceiveMessage attempt."""
    operation = client.meta.service_model.operation_model("ReceiveMessage")
    found = []
    for _ in range(times):
        if throttled:
            http = AWSResponse("http://127.0.0.1:9", 400, {}, None)
            parsed = {"Error": {"Code": "RequestThrottled", "Message": "Rate exceeded"}}
            kwargs: dict[str, Any] = {"response": (http, parsed), "caught_exception": None}
        else:
            error = ConnectionClosedError(endpoint_url="http://127.0.0.1:9")
            kwargs = {"response": None, "caught_exception": error}
        answers = client.meta.events.emit(
            "needs-retry.sqs.ReceiveMessage",
            endpoint=None,
            operation=operation,
            attempts=attempts,
            request_dict={"context": {}},
            **kwargs,
        )
        found.append(next((a for _, a in answers if a is not None), None))
    return found


def test_a_transient_failure_is_retried_within_50_ms_at_first() -> None:
    before = delays(sqs(), 1, throttled=False)
    assert max(before) > 0.05  # botocore 1.40's own standard mode: up to 1 s
    after = delays(retries_soon(sqs()), 1, throttled=False)
    assert all(d is not None and 0 <= d < 0.05 for d in after)
    assert max(delays(retries_soon(sqs()), 3, throttled=False)) < 0.2


def test_a_throttle_still_waits_up_to_a_second() -> None:
    found = delays(retries_soon(sqs()), 1, throttled=True)
    assert all(d is not None and d < 1.0 for d in found) and max(found) > 0.3


def test_the_attempts_and_the_quota_are_botocores() -> None:
    client = retries_soon(sqs())
    last = client.meta.config.retries["total_max_attempts"]
    assert None not in delays(client, last - 1, throttled=False, times=5)
    assert delays(client, last, throttled=False, times=5) == [None] * 5  # no attempt more
    drained = retries_soon(sqs())
    found = delays(drained, 1, throttled=False, times=200)  # 500 tokens, 5 a retry
    assert found[-1] is None and None not in found[:50]


def test_another_retry_mode_is_left_alone() -> None:
    config = Config(retries={"mode": "legacy"})
    client = boto3.session.Session().client(
        "sqs", endpoint_url="http://127.0.0.1:9", config=config, **CREDENTIALS
    )
    assert retries_soon(client) is client
    assert max(d for d in delays(client, 1, throttled=False) if d is not None) > 0.05


def test_aiobotocore_clients_take_it_too() -> None:

    async def main() -> list[Any]:
        session = aioboto3.Session()
        config = client_config()
        async with session.client(
            "sqs", endpoint_url="http://127.0.0.1:9", config=config, **CREDENTIALS
        ) as client:
            retries_soon(client)
            operation = client.meta.service_model.operation_model("ReceiveMessage")
            found = []
            for _ in range(50):
                error = ConnectionClosedError(endpoint_url="http://127.0.0.1:9")
                answers = await client.meta.events.emit(
                    "needs-retry.sqs.ReceiveMessage",
                    response=None,
                    caught_exception=error,
                    endpoint=None,
                    operation=operation,
                    attempts=1,
                    request_dict={"context": {}},
                )
                found.append(next((a for _, a in answers if a is not None), None))
            return found

    found = asyncio.run(main())
    assert all(d is not None and 0 <= d < 0.05 for d in found)
