"""The moto speed-up of the local SQS (sqsbatch/dev/moto_speedup.py): it fits the pinned moto, gives
moto's own answers, makes a receive cost the same at any depth, and keeps concurrent deletes and
sends from undoing each other.

No timing here (bench/local_depth.py measures): the scaling test counts reads of moto's clock,
which moto's own members make once or twice per message in the queue, for each message returned.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import itertools
import logging
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from sqsbatch.dev import moto_speedup
from sqsbatch.dev.server import LocalSqs
from tests.support.waiting import wait_for

models: Any = importlib.import_module("moto.sqs.models")  # moto's internals, untyped here

REPLACED = [
    ("SQSBackend", "is_message_valid_based_on_retention_period"),
    ("Queue", "messages"),
    ("Queue", "approximate_number_of_messages_delayed"),
    ("Queue", "approximate_number_of_messages_not_visible"),
    ("Queue", "delete_message"),
    ("SQSBackend", "receive_message"),
]
NOW = 1_800_000_000.0  # moto's clock, frozen by `frozen_clock`, in seconds
REAL_CLOCK = (models.unix_time, models.unix_time_millis)


@pytest.fixture
def moto_as_is(local_sqs: LocalSqs) -> Iterator[None]:
    """moto's own members for one test; the speed-up is back afterwards."""
    moto_speedup.revert()
    try:
        yield
    finally:
        assert moto_speedup.apply()


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "unix_time", lambda dt=None: NOW)
    monkeypatch.setattr(models, "unix_time_millis", lambda dt=None: NOW * 1000)


def shift_moto_clock(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Set moto's SQS clock (and only it) `seconds` ahead of the real one, as PITFALLS says."""
    real, real_millis = REAL_CLOCK
    monkeypatch.setattr(models, "unix_time", lambda dt=None: real(dt) + seconds)
    monkeypatch.setattr(models, "unix_time_millis", lambda dt=None: real_millis(dt) + seconds * 1e3)


def test_it_fits_the_pinned_moto_and_local_sqs_applies_it(local_sqs: LocalSqs) -> None:
    # If this fails, moto changed under the speed-up: re-read the replaced members and the ones
    # they rely on, re-check the replacements, then update the fingerprints (or the pin).
    assert moto_speedup.misfit(importlib.metadata.version("moto")) is None
    assert moto_speedup.is_applied()
    for owner, name in REPLACED:
        assert getattr(models, owner).__dict__[name] is not moto_speedup.original(owner, name)


def test_applying_twice_changes_nothing(local_sqs: LocalSqs) -> None:
    installed = {member: getattr(models, member[0]).__dict__[member[1]] for member in REPLACED}
    assert moto_speedup.apply()
    with LocalSqs():
        pass
    assert installed == {m: getattr(models, m[0]).__dict__[m[1]] for m in REPLACED}


@pytest.mark.usefixtures("moto_as_is")
def test_another_moto_runs_unpatched_after_one_warning_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="sqsbatch"):
        assert not moto_speedup.apply(moto_version="5.3.0")
        assert not moto_speedup.apply(moto_version="5.3.0")
    assert not moto_speedup.is_applied()
    for owner, name in REPLACED:
        assert getattr(models, owner).__dict__[name] is moto_speedup.original(owner, name)
    [line] = caplog.messages
    assert "moto 5.3.0 is not the moto>=5.2,<5.3" in line
    assert "unpatched" in line
    assert "\n" not in line


def test_a_changed_member_that_it_relies_on_is_a_misfit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models.Message, "delayed", property(lambda self: False))
    assert moto_speedup.misfit("5.2.5") == (
        "moto 5.2.5 changed Message.delayed: the speed-up does not fit it"
    )


def queue_in_every_state(backend: Any) -> Any:
    """Messages visible, in flight, delayed, and exactly on each boundary of moto's clock."""
    backend.create_queue("states", MessageRetentionPeriod=60)
    queue = backend.get_queue("states")
    now_ms = NOW * 1000
    for n, (visible_at, delayed_until, age) in enumerate(
        [
            (0, 0, 0),  # visible
            (now_ms + 1, 0, 10),  # in flight
            (now_ms, 0, 59),  # in flight until just after now
            (now_ms - 1, 0, 60),  # visible again; exactly as old as the retention period
            (0, now_ms + 1, 61),  # delayed; older than the retention period
            (0, now_ms, 30),  # delay over exactly now
        ]
    ):
        message = models.Message(f"m-{n}", "body")
        message.sent_timestamp = int(now_ms - age * 1000)
        message.visible_at, message.delayed_until = visible_at, delayed_until
        queue._messages.append(message)
    return queue


@pytest.mark.usefixtures("local_sqs", "frozen_clock")
def test_each_replacement_gives_motos_own_answer() -> None:
    # Given a queue with messages in every state, on the boundaries of moto's frozen clock
    backend = models.SQSBackend("us-east-1", "123456789012")
    queue = queue_in_every_state(backend)
    assert moto_speedup.is_applied()
    own_check = moto_speedup.original("SQSBackend", "is_message_valid_based_on_retention_period")
    own_messages, own_delayed, own_not_visible = (
        moto_speedup.original("Queue", member).fget
        for member in (
            "messages",
            "approximate_number_of_messages_delayed",
            "approximate_number_of_messages_not_visible",
        )
    )
    # Then each replaced member answers as moto's own
    assert [m.id for m in queue.messages] == [m.id for m in own_messages(queue)]
    assert [m.id for m in queue.messages] == ["m-0", "m-3", "m-5"]
    assert queue.approximate_number_of_messages_delayed == own_delayed(queue) == 1
    assert queue.approximate_number_of_messages_not_visible == own_not_visible(queue) == 2
    answers = [
        backend.is_message_valid_based_on_retention_period("states", m) for m in queue._messages
    ]
    assert answers == [own_check(backend, "states", m) for m in queue._messages]
    assert answers == [True, True, True, False, False, True]


@pytest.mark.parametrize("members", ["sped up", "moto's own"])
def test_a_message_past_retention_is_neither_returned_nor_deleted(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    sqs: Any,
    name: str,
    members: str,
) -> None:
    if members == "moto's own":
        request.getfixturevalue("moto_as_is")
    # Given a queue that keeps messages for 60 s, and a message on it
    url = sqs.create_queue(QueueName=name, Attributes={"MessageRetentionPeriod": "60"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="old")
    # When moto's clock says it is 59 s old, it is received (and made visible again)
    shift_moto_clock(monkeypatch, 59)
    [fresh] = sqs.receive_message(QueueUrl=url)["Messages"]
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=fresh["ReceiptHandle"], VisibilityTimeout=0
    )
    # When it is 61 s old
    shift_moto_clock(monkeypatch, 61)
    # Then moto returns nothing, and keeps the message (in flight: that receive counted)
    assert "Messages" not in sqs.receive_message(QueueUrl=url, VisibilityTimeout=30)
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (
        counts["ApproximateNumberOfMessages"],
        counts["ApproximateNumberOfMessagesNotVisible"],
    ) == ("0", "1")


def clock_reads_of_one_receive(monkeypatch: pytest.MonkeyPatch, depth: int) -> int:
    """How often one receive of 10, straight on a moto backend, reads moto's clock."""
    backend = models.SQSBackend("us-east-1", "123456789012")
    backend.create_queue("deep")
    for n in range(depth):
        backend.send_message("deep", f"m-{n}")
    reads = 0
    me = threading.get_ident()

    def counted(clock: Any) -> Any:
        def read(dt: Any = None) -> Any:
            nonlocal reads
            if threading.get_ident() == me:
                reads += 1
            return clock(dt)

        return read

    with monkeypatch.context() as patch:
        patch.setattr(models, "unix_time", counted(models.unix_time))
        patch.setattr(models, "unix_time_millis", counted(models.unix_time_millis))
        assert len(backend.receive_message("deep", 10, 0, 30)) == 10
    return reads


@pytest.mark.usefixtures("local_sqs")
def test_a_receive_reads_the_clock_as_often_at_any_depth(monkeypatch: pytest.MonkeyPatch) -> None:
    shallow, deep = (clock_reads_of_one_receive(monkeypatch, depth) for depth in (20, 400))
    assert deep == shallow


@pytest.mark.usefixtures("moto_as_is")
def test_motos_own_receive_reads_the_clock_per_message_in_the_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What the speed-up removes: a receive of 10 rescans the queue for each message it returns,
    # so each of the 380 more messages in the queue costs more than one read per message returned.
    shallow, deep = (clock_reads_of_one_receive(monkeypatch, depth) for depth in (20, 400))
    assert deep - shallow > 10 * (400 - 20)


def at_once(workers: list[threading.Thread]) -> None:
    """Start `workers` and wait for them, the interpreter switching threads as often as it can."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        sys.setswitchinterval(interval)


def deletes_and_sends_at_once(backend: Any, threads: int = 8, each: int = 50) -> list[str]:
    """`threads` threads delete `each` received messages apiece, one by one, while another sends
    as many new ones, with the interpreter switching threads as often as it can; what is left."""
    backend.create_queue("busy")
    for n in range(threads * each):
        backend.send_message("busy", f"old-{n}")
    handles = [m.receipt_handle for m in backend.receive_message("busy", threads * each, 0, 300)]
    assert len(handles) == threads * each
    start = threading.Barrier(threads + 1)

    def delete(mine: list[str]) -> None:
        start.wait()
        for handle in mine:
            backend.delete_message("busy", handle)

    def send() -> None:
        start.wait()
        for n in range(threads * each):
            backend.send_message("busy", f"new-{n}")

    workers = [threading.Thread(target=delete, args=(handles[i::threads],)) for i in range(threads)]
    workers.append(threading.Thread(target=send))
    at_once(workers)
    return sorted(m.body for m in backend.get_queue("busy")._messages)


@pytest.mark.usefixtures("local_sqs")
def test_concurrent_deletes_and_sends_neither_bring_back_nor_lose_a_message(
    local_sqs: LocalSqs,
) -> None:
    # Given 400 received messages, deleted by 8 threads at once while a 9th sends 400 more
    backend = models.SQSBackend("us-east-1", "123456789012")
    left = deletes_and_sends_at_once(backend)
    # Then every deleted message is gone and every sent one is there
    assert left == sorted(f"new-{n}" for n in range(400))


def scans_of_a_fifo_long_poll(monkeypatch: pytest.MonkeyPatch) -> int:
    """How often a 1 s long poll on a FIFO queue scans the queue while its one visible message
    cannot be received (an earlier message of its group is in flight)."""
    backend = models.SQSBackend("us-east-1", "123456789012")
    backend.create_queue("locked.fifo", FifoQueue="true", ContentBasedDeduplication="true")
    for body in ("g1", "g2"):
        backend.send_message("locked.fifo", body, group_id="g")
    assert len(backend.receive_message("locked.fifo", 1, 0, 30)) == 1  # g1 in flight
    scans = 0
    messages = models.Queue.__dict__["messages"]

    def counted(queue: Any) -> Any:
        nonlocal scans
        scans += 1
        return messages.fget(queue)

    with monkeypatch.context() as patch:
        patch.setattr(models.Queue, "messages", property(counted))
        assert backend.receive_message("locked.fifo", 10, 1, 30) == []
    return scans


@pytest.mark.usefixtures("local_sqs")
def test_a_fifo_long_poll_over_a_locked_group_waits_without_spinning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A pass over the queue, then a wait that a send or the end of the poll ends: a few scans
    assert scans_of_a_fifo_long_poll(monkeypatch) <= 5


@pytest.mark.usefixtures("moto_as_is")
def test_motos_own_fifo_long_poll_spins_over_a_locked_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What the speed-up removes: moto waits for "any visible message", and g2 is visible, so its
    # wait returns at once, pass after pass, for the whole poll (16 such polls held a moto
    # server at 17 of 20 CPU seconds in bench/fifo_groups.py)
    assert scans_of_a_fifo_long_poll(monkeypatch) > 100


def groups_received_twice(backend: Any, threads: int = 8) -> set[str]:
    """`threads` receives of 10 at once on a FIFO queue of 40 groups of 3 messages, with the
    interpreter switching threads as often as it can: the groups that two receives both got."""
    backend.create_queue("racy.fifo", FifoQueue="true", ContentBasedDeduplication="true")
    for seq in range(3):
        for group in range(40):
            backend.send_message("racy.fifo", f"g{group}-{seq}", group_id=f"g{group}")
    start = threading.Barrier(threads)
    got: list[set[str]] = []

    def receive() -> None:
        start.wait()
        answer = backend.receive_message("racy.fifo", 10, 0, 30)
        got.append({m.group_id for m in answer})

    workers = [threading.Thread(target=receive) for _ in range(threads)]
    at_once(workers)
    return {group for a, b in itertools.combinations(got, 2) for group in a & b}


@pytest.mark.usefixtures("local_sqs")
def test_receives_at_once_never_share_a_fifo_group() -> None:
    for _ in range(5):
        assert groups_received_twice(models.SQSBackend("us-east-1", "123456789012")) == set()


@pytest.mark.usefixtures("moto_as_is")
def test_motos_own_receives_at_once_share_fifo_groups() -> None:
    # What the lock removes: each receive reads the groups in flight at its start, so two at
    # once each take messages of the same groups (about 32 of 40 groups, in every run here)
    assert groups_received_twice(models.SQSBackend("us-east-1", "123456789012"))


@pytest.mark.usefixtures("local_sqs")
def test_a_fifo_long_poll_gets_a_group_s_next_message_once_the_earlier_is_deleted() -> None:
    # Given g2 behind g1 in flight, and a long poll waiting
    backend = models.SQSBackend("us-east-1", "123456789012")
    backend.create_queue("freed.fifo", FifoQueue="true", ContentBasedDeduplication="true")
    for body in ("g1", "g2"):
        backend.send_message("freed.fifo", body, group_id="g")
    (first,) = backend.receive_message("freed.fifo", 1, 0, 30)
    got: list[Any] = []
    polling = threading.Thread(
        target=lambda: got.extend(backend.receive_message("freed.fifo", 10, 20, 30))
    )
    polling.start()
    lock = backend.get_queue("freed.fifo")._messages_lock
    wait_for(lambda: lock._waiters, "the long poll waiting")  # a Condition's waiters (CPython)
    # When g1 is deleted, the poll gets g2 (moto's own returned nothing: it read the groups in
    # flight once, at its start, and kept that reading for the whole 20 s)
    backend.delete_message("freed.fifo", first.receipt_handle)
    polling.join()
    assert [m.body for m in got] == ["g2"]


def receives_at_once(backend: Any, threads: int = 8, messages: int = 500) -> Counter[str]:
    """`threads` threads receive `messages` messages ten at a time until the queue is empty, with
    the interpreter switching threads as often as it can; how often each message was received."""
    backend.create_queue("crowded")
    for n in range(messages):
        backend.send_message("crowded", f"m-{n}")
    seen: Counter[str] = Counter()
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def receive() -> None:
        start.wait()
        while found := backend.receive_message("crowded", 10, 0, 300):
            with lock:
                seen.update(message.id for message in found)

    workers = [threading.Thread(target=receive) for _ in range(threads)]
    at_once(workers)
    return seen


def test_concurrent_receives_never_hand_out_one_message_twice(local_sqs: LocalSqs) -> None:
    # Given 500 messages received by 8 threads at once (moto's own receive: ~5 given out twice
    # per run like this one, the demo's "ok" message handled twice)
    backend = models.SQSBackend("us-east-1", "123456789012")
    seen = receives_at_once(backend)
    # Then each was received once, while its visibility timeout lasts
    assert len(seen) == 500
    assert [message for message, count in seen.items() if count > 1] == []
