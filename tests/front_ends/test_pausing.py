"""`sqsbatch.pause_queue` / `resume_queue` / `queue_pause` against the local moto server: the
queue tags, the Lambda event source mappings, the calls made."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from sqsbatch import (
    ConfigError,
    QueueNotFound,
    SqsBatchError,
    SqsError,
    create_queue,
    pause_queue,
    resume_queue,
)
from sqsbatch._core.pause_state import REASON_TAG, UNTIL_TAG
from sqsbatch._sync.door import SyncSqs
from sqsbatch.cli import queue_admin as queues_cli
from sqsbatch.dev.server import LocalSqs
from sqsbatch.pausing import queue_pause
from tests.docs.test_examples import ROOT, load
from tests.support.faults import ClientProxy, Faulty, throttled
from tests.support.lambdas import lambda_client, mapping, state

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def tags(sqs: Any, queue: str) -> dict[str, str]:
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    return dict(sqs.list_queue_tags(QueueUrl=url).get("Tags", {}))


def test_pause_tags_the_queue_and_resume_untags_it(sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    sqs.tag_queue(QueueUrl=url, Tags={"team": "billing"})
    done = pause_queue(
        name, for_seconds=90, reason="db down", client=sqs, lambda_client=False, now=lambda: NOW
    )
    assert tags(sqs, name) == {
        "team": "billing",
        UNTIL_TAG: "2027-01-15T08:01:30Z",
        REASON_TAG: "db down",
    }
    assert done.queue == name and done.state.paused and done.state.until == NOW + 90
    assert done.mappings == [] and done.notes == ["Lambda event source mappings not checked"]
    assert queue_pause(name, client=sqs, now=lambda: NOW + 89).paused
    assert not queue_pause(name, client=sqs, now=lambda: NOW + 90).paused  # expired
    resumed = resume_queue(url, client=sqs, lambda_client=False)
    assert not resumed.state.paused
    assert tags(sqs, name) == {"team": "billing"}  # only the pause's tags removed


def test_an_indefinite_pause_says_what_retention_does_meanwhile(sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    done = pause_queue(name, client=sqs, lambda_client=False)
    assert done.state.paused and done.state.until is None
    assert tags(sqs, name)[UNTIL_TAG] == "indefinitely"
    assert "SQS deletes messages older than 4 days" in done.notes[0]


def test_a_pause_longer_than_retention_is_named(sqs: Any, name: str) -> None:
    url = sqs.create_queue(QueueName=name, Attributes={"MessageRetentionPeriod": "3600"})
    assert url
    done = pause_queue(name, for_seconds=7200, client=sqs, lambda_client=False)
    assert "outlasts the queue's retention (3600 s)" in done.notes[0]


def test_pause_disables_the_queues_mappings_and_resume_enables_them(
    local_sqs: LocalSqs, sqs: Any, name: str
) -> None:
    create_queue(name, client=sqs)
    create_queue(f"{name}-other", client=sqs)
    mine = mapping(local_sqs, sqs, name, f"{name}-fn")
    other = mapping(local_sqs, sqs, f"{name}-other", f"{name}-other-fn")
    lambdas = lambda_client(local_sqs)
    done = pause_queue(name, client=sqs, lambda_client=lambdas)
    assert done.mappings == [f"{mine} ({name}-fn)"]
    assert state(local_sqs, mine) == "Disabled" and state(local_sqs, other) == "Enabled"
    again = pause_queue(name, client=sqs, lambda_client=lambdas)
    assert again.mappings == []  # already disabled: nothing changed, nothing said
    resumed = resume_queue(name, client=sqs, lambda_client=lambdas)
    assert resumed.mappings == [f"{mine} ({name}-fn)"]
    assert state(local_sqs, mine) == "Enabled" and state(local_sqs, other) == "Enabled"


class CountingSqs:
    """The boto3 client, counting the calls made through it (what a pause costs)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: list[str] = []

    def __getattr__(self, op: str) -> Any:
        self.calls.append(op)
        return getattr(self.client, op)


def test_a_pause_costs_three_sqs_calls_and_a_check_one(sqs: Any, name: str) -> None:
    url = create_queue(name, client=sqs)
    counting = CountingSqs(sqs)
    pause_queue(url, for_seconds=60, client=counting, lambda_client=False)
    assert counting.calls == ["get_queue_attributes", "tag_queue"]  # a URL: no GetQueueUrl
    counting.calls.clear()
    queue_pause(url, client=counting)
    assert counting.calls == ["list_queue_tags"]


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"for_seconds": 0}, "for_seconds=0 is invalid"),
        ({"for_seconds": 15 * 86_400}, "14 days"),
        ({"for_seconds": True}, "for_seconds=True"),
        ({"reason": "a;b"}, "reason holds ';'"),
    ],
)
def test_bad_arguments_are_one_line_before_any_call(
    kwargs: dict[str, Any], words: str, name: str
) -> None:
    with pytest.raises(ConfigError, match=words):
        pause_queue(name, client=object(), lambda_client=False, **kwargs)


def test_a_missing_queue_is_named(sqs: Any, name: str) -> None:
    with pytest.raises(QueueNotFound, match=name):
        pause_queue(name, client=sqs, lambda_client=False)


def test_the_example_pauses_and_resumes(
    local_sqs: LocalSqs,
    sqs: Any,
    name: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """examples/pause_resume.py, with default clients: SQS and Lambda at the local endpoint."""
    create_queue(name, client=sqs)
    monkeypatch.setenv("AWS_ENDPOINT_URL", local_sqs.endpoint_url)
    example = load(ROOT / "examples" / "pause_resume.py")
    example.hold_back(name)
    first, second = capsys.readouterr().out.splitlines()
    assert first.startswith("True 20") and first.endswith("Z []")
    assert second == "billing API down"
    assert UNTIL_TAG not in tags(sqs, name)


def denied(op: str) -> Exception:
    error: Exception = ClientError(
        {"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}, op
    )
    return error


def test_lambda_refusing_says_the_queue_is_paused_but_its_mappings_are_not(
    local_sqs: LocalSqs, sqs: Any, name: str
) -> None:
    create_queue(name, client=sqs)
    lambdas = Faulty(lambda_client(local_sqs))
    lambdas.fail("list_event_source_mappings", 1, denied)
    with pytest.raises(SqsBatchError) as raised:
        pause_queue(name, client=sqs, lambda_client=lambdas)
    assert str(raised.value) == (
        "the queue is paused (its tag set), but its Lambda event source mappings were not all "
        "disabled: Lambda error AccessDeniedException: not authorized"
    )
    assert tags(sqs, name)[UNTIL_TAG] == "indefinitely"


def test_queues_shows_a_question_mark_where_tags_may_not_be_read(sqs: Any, name: str) -> None:
    url = create_queue(name, client=sqs)
    faulty = Faulty(sqs)
    faulty.fail("list_queue_tags", 1, denied)
    row = queues_cli._row(SyncSqs(faulty), url, None)
    assert row is not None and row["paused_until"] == "?"
    assert queues_cli._paused_cell("?") == "? (tags not readable)"
    faulty.fail("list_queue_tags", 1, throttled)  # anything else is an error, as before
    with pytest.raises(SqsError, match="ThrottlingException"):
        queues_cli._row(SyncSqs(faulty), url, None)


class Paged(ClientProxy):
    """moto answers every mapping in one page (it ignores `MaxItems`): pages of 2 here, over
    its real answer, as Lambda pages them (`NextMarker`, then `Marker`)."""

    def _call(self, op: str, target: Any, params: dict[str, Any]) -> Any:
        if op != "list_event_source_mappings":
            return target(**params)
        start = int(params.pop("Marker", 0))
        params.pop("MaxItems", None)
        found = target(**params)["EventSourceMappings"]
        page: dict[str, Any] = {"EventSourceMappings": found[start : start + 2]}
        if start + 2 < len(found):
            page["NextMarker"] = str(start + 2)
        return page


def test_every_page_of_mappings_is_switched(local_sqs: LocalSqs, sqs: Any, name: str) -> None:
    create_queue(name, client=sqs)
    made = [mapping(local_sqs, sqs, name, f"{name}-fn{i}") for i in range(5)]
    done = pause_queue(name, client=sqs, lambda_client=Paged(lambda_client(local_sqs)))
    assert len(done.mappings) == 5
    assert {state(local_sqs, uuid) for uuid in made} == {"Disabled"}
