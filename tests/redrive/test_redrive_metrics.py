"""The redrive daemon's metrics (`metrics="emf"`): per DLQ, Moved, Hidden, Parked, Skipped and
Failed as EMF lines CloudWatch would accept (tests/support/emf.py), on the local SQS."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from redrive import BackoffPolicy, Redriver
from redrive.settings import RedriveSettings
from sqsbatch.errors import ConfigError
from tests.support.emf import check_lines, metric
from tests.support.redrive import dead_letter, make_queues


def test_a_pass_writes_what_it_moved_and_hid_per_dlq(
    sqs: Any, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [0, 1, 2], at=time.time() - 10)  # due: moved
    dead_letter(sqs, dlq, source, [3], at=time.time(), redrives=2)  # not due: hidden
    policy = BackoffPolicy(base_delay=5, factor=2, jitter=0)
    redriver = Redriver(dlq, policy=policy, client=sqs, metrics="emf", metrics_namespace="T/r")
    capsys.readouterr()
    redriver.run_once(wait_seconds=0)
    documents = check_lines(capsys.readouterr().out)
    assert metric(documents, "Moved", QueueName=dlq) == [3]
    assert metric(documents, "Hidden", QueueName=dlq) == [1]
    assert metric(documents, "Parked", QueueName=dlq) == [0]
    assert metric(documents, "Skipped", QueueName=dlq) == [0]
    assert {d["_aws"]["CloudWatchMetrics"][0]["Namespace"] for d in documents} == {"T/r"}


def test_without_metrics_nothing_is_written(
    sqs: Any, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source, dlq = make_queues(sqs, name)
    dead_letter(sqs, dlq, source, [0], at=time.time() - 10)
    capsys.readouterr()
    Redriver(dlq, policy=BackoffPolicy(base_delay=0, jitter=0), client=sqs).run_once(wait_seconds=0)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"metrics": "statsd"}, "metrics='statsd' is invalid: must be 'off' or 'emf'"),
        ({"metrics_namespace": "a b"}, "metrics_namespace='a b' is invalid: must be 1 to 255"),
        ({"metrics_interval": 0}, "metrics_interval=0 is invalid: must be seconds > 0"),
    ],
)
def test_bad_metrics_settings_fail_in_one_line_before_any_call(
    values: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigError, match="^" + re.escape(says)) as raised:
        Redriver("orders-dlq", client=object(), **values)
    assert "\n" not in str(raised.value)


def test_the_settings_read_the_metrics_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REDRIVE_METRICS", "emf")
    monkeypatch.setenv("REDRIVE_METRICS_INTERVAL", "30")
    settings = RedriveSettings(dlqs=["orders-dlq"])
    assert (settings.metrics, settings.metrics_namespace, settings.metrics_interval) == (
        "emf",
        "sqsbatch",
        30.0,
    )
    monkeypatch.setenv("REDRIVE_METRICS", "prometheus")
    with pytest.raises(ConfigError, match=r"^metrics='prometheus' is invalid"):
        RedriveSettings(dlqs=["orders-dlq"])
