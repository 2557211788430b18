"""examples/sns_envelope.py runs against moto's server (SQS and SNS): the orders published to
the topic reach its handler as validated `Order`s, with the notification's fields."""

from __future__ import annotations

import pytest

from sqsbatch.dev.server import LocalSqs
from tests.support.front_ends import load_example
from tests.support.sqs_helpers import depth


def test_the_sns_example_handles_each_published_order(
    local_sqs: LocalSqs,
    name: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for key, value in local_sqs.environment().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", local_sqs.endpoint_url)  # SNS too
    load_example("sns_envelope").main(name, idle_seconds=1.0)
    printed = sorted(capsys.readouterr().out.splitlines())
    assert printed == [
        "order 1 of acme: order placed",
        "order 2 of globex: order placed",
    ]
    sqs = local_sqs.client()
    assert depth(sqs, name) == 0 and depth(sqs, f"{name}-dlq") == 0
