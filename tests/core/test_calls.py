"""BatchRun: batch calls of at most 10 entries and 1 MiB, reconciled entry by entry."""

from __future__ import annotations

from sqsbatch._core.calls import BatchRun, Entry
from sqsbatch.limits import SqsLimits


def entries(
    n: int, op: str = "delete_message_batch", size: int = 0, queue: str = "q"
) -> list[Entry]:
    return [Entry(f"k{i}", op, queue, {"ReceiptHandle": f"r{i}"}, size) for i in range(n)]


def test_chunks_of_ten_per_queue_and_operation() -> None:
    hide = Entry("x", "change_message_visibility_batch", "q", {})
    other = [Entry(f"o{i}", "delete_message_batch", "other", {}) for i in range(2)]
    calls = BatchRun([*entries(23), hide, *other]).next_calls()
    assert [(c.op, c.queue_url, len(c.entries)) for c in calls] == [
        ("delete_message_batch", "q", 10),
        ("delete_message_batch", "q", 10),
        ("delete_message_batch", "q", 3),
        ("change_message_visibility_batch", "q", 1),
        ("delete_message_batch", "other", 2),
    ]
    params = calls[0].params()
    assert params["QueueUrl"] == "q"
    assert [e["Id"] for e in params["Entries"]] == [str(i) for i in range(10)]


def test_sends_are_cut_at_the_payload_limit() -> None:
    limits = SqsLimits(max_payload_bytes=100)
    run = BatchRun(entries(5, op="send_message_batch", size=40), limits=limits)
    assert [len(c.entries) for c in run.next_calls()] == [2, 2, 1]


def test_failed_entries_are_retried_only_when_not_the_senders_fault() -> None:
    run = BatchRun(entries(4, op="send_message_batch"))
    (call,) = run.next_calls()
    run.record(
        call,
        {
            "Successful": [{"Id": "0", "MessageId": "m0"}],
            "Failed": [
                {"Id": "1", "Code": "InternalError", "SenderFault": False},
                {"Id": "2", "Code": "InvalidMessageContents", "SenderFault": True},
            ],
            # entry 3 is missing from the answer: never assume it worked
        },
    )
    (again,) = run.next_calls()
    assert [e.key for e in again.entries] == ["k1", "k3"]
    run.record(
        again, {"Successful": [{"Id": "0", "MessageId": "m1"}, {"Id": "1", "MessageId": "m3"}]}
    )
    assert run.next_calls() == [] and run.done
    assert sorted(r.key for r in run.ok()) == ["k0", "k1", "k3"]
    assert [(r.key, r.code) for r in run.failed()] == [("k2", "InvalidMessageContents")]


def test_expired_receipts_are_gone_not_retried() -> None:
    run = BatchRun(entries(3))
    (call,) = run.next_calls()
    run.record(
        call,
        {
            "Successful": [{"Id": "0"}],
            "Failed": [
                {"Id": "1", "Code": "ReceiptHandleIsInvalid", "SenderFault": True},
                {"Id": "2", "Code": "InvalidParameterValue", "SenderFault": True},
            ],
        },
    )
    assert run.next_calls() == []
    assert all(r.gone for r in run.failed()) and len(run.failed()) == 2


def test_rounds_are_bounded_and_back_off() -> None:
    run = BatchRun(entries(1), max_rounds=3)
    waits = []
    while calls := run.next_calls():
        waits.append(run.backoff_seconds())
        run.record_error(calls[0], "ServiceUnavailable", "down", retryable=True)
    assert waits == [0.0, 0.1, 0.2]
    assert [r.code for r in run.failed()] == ["ServiceUnavailable"]


def test_an_answer_that_names_an_entry_twice_is_not_read_as_accepting_the_call() -> None:
    run = BatchRun(entries(3))
    (call,) = run.next_calls()
    # Three successes, as many as entries, but "1" twice and "2" never
    run.record(call, {"Successful": [{"Id": "0"}, {"Id": "1"}, {"Id": "1"}]})
    (again,) = run.next_calls()
    assert [e.key for e in again.entries] == ["k2"]
    assert not run.clean


def test_clean_only_when_every_entry_was_accepted_on_its_first_try() -> None:
    whole = BatchRun(entries(12))
    for call in whole.next_calls():
        whole.record(call, {"Successful": [{"Id": str(i)} for i in range(len(call.entries))]})
    assert whole.clean and whole.next_calls() == []
    assert sorted(r.key for r in whole.ok()) == sorted(f"k{i}" for i in range(12))

    retried = BatchRun(entries(2))
    (call,) = retried.next_calls()
    retried.record(call, {"Successful": [{"Id": "0"}], "Failed": [{"Id": "1", "Code": "X"}]})
    (again,) = retried.next_calls()
    retried.record(again, {"Successful": [{"Id": "0"}]})
    assert retried.done and not retried.clean
    assert sorted(r.key for r in retried.ok()) == ["k0", "k1"] and retried.failed() == []

    refused = BatchRun(entries(1))
    (call,) = refused.next_calls()
    refused.record_error(call, "AccessDenied", "no", retryable=False)
    assert refused.done and not refused.clean
