"""One slow call does not hold up the daemon: each DLQ is drained in a thread of its own, and
within a DLQ a pass's sends and deletes go on behind its next receive.

The endpoint is a loopback proxy in front of moto's server that holds back the requests the
test names (every `ReceiveMessage` of one DLQ, or the `SendMessageBatch` carrying one message)
until the test releases them (`tests/support/holding_proxy.py`): a call that does not answer, as
a slow or hung call would. Nothing is timed: the test waits for the other messages to arrive
while the held call is still out.
"""

from __future__ import annotations

import threading
from typing import Any

import boto3

from redrive import BackoffPolicy, Redriver
from sqsbatch._shell.botocore import client_config
from sqsbatch.dev.server import LocalSqs
from sqsbatch.errors import QueueNotFound
from tests.redrive.test_redrive_daemon import running
from tests.support.holding_proxy import holding_proxy
from tests.support.redrive import bodies, dead_letter, make_queues
from tests.support.waiting import wait_for

NOW = BackoffPolicy(base_delay=0, jitter=0)
CREDENTIALS = {"region_name": "us-east-1", "aws_access_key_id": "x", "aws_secret_access_key": "x"}


def test_a_dlq_whose_receive_hangs_does_not_hold_up_the_other_dlqs(
    local_sqs: LocalSqs, sqs: Any, name: str
) -> None:
    # Given two DLQs, the first one named to the daemon slow to answer its receives
    slow_source, slow_dlq = make_queues(sqs, f"{name}-slow")
    fast_source, fast_dlq = make_queues(sqs, f"{name}-fast")
    dead_letter(sqs, slow_dlq, slow_source, [9])
    dead_letter(sqs, fast_dlq, fast_source, [1, 2, 3])
    with holding_proxy(local_sqs.endpoint_url) as proxy:
        client = boto3.session.Session().client(
            "sqs", endpoint_url=proxy.endpoint_url, config=client_config(), **CREDENTIALS
        )
        proxy.hold("ReceiveMessage", slow_dlq)
        redriver = Redriver([slow_dlq, fast_dlq], policy=NOW, client=client, wait_seconds=1)
        with running(redriver):
            # When the daemon runs and the slow DLQ's receive is out, unanswered
            wait_for(lambda: proxy.held >= 1, "the slow DLQ's receive held")
            # Then the other DLQ's messages are moved meanwhile
            wait_for(lambda: redriver.stats.moved >= 3, "the other DLQ's messages moved")
            assert bodies(sqs, fast_source) == [1, 2, 3]
            assert bodies(sqs, slow_source) == []  # its receive is still held
            # And once the slow DLQ answers, its message follows
            proxy.release()
            wait_for(lambda: redriver.stats.moved >= 4, "the slow DLQ's message moved")
    assert bodies(sqs, slow_source) == [9]


def test_a_fatal_error_on_one_dlq_stops_them_all_and_run_raises_it(sqs: Any, name: str) -> None:
    # Given two DLQs, one of which is deleted once the daemon receives from both
    make_queues(sqs, f"{name}-a")
    _, gone = make_queues(sqs, f"{name}-b")
    _, kept = make_queues(sqs, f"{name}-c")
    redriver = Redriver([gone, kept], policy=NOW, client=sqs, wait_seconds=1)
    raised: list[BaseException] = []

    def run() -> None:
        try:
            redriver.run()
        except BaseException as exc:
            raised.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    wait_for(lambda: redriver.requests_by_operation.get("receive_message", 0) >= 2, "receiving")
    sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName=gone)["QueueUrl"])
    # Then run() ends, the other DLQ's thread stopped too, and raises the missing queue's error
    runner.join(timeout=60)
    assert not runner.is_alive()
    assert len(raised) == 1 and isinstance(raised[0], QueueNotFound)


def test_a_pass_whose_send_hangs_does_not_hold_up_the_next_passes_of_its_dlq(
    local_sqs: LocalSqs, sqs: Any, name: str
) -> None:
    # Given one DLQ of 31 messages, and SQS slow to answer the send that carries the first
    source, dlq = make_queues(sqs, name)
    others = [f"m{n:02}" for n in range(1, 31)]
    dead_letter(sqs, dlq, source, ["slow-one", *others])
    with holding_proxy(local_sqs.endpoint_url) as proxy:
        client = boto3.session.Session().client(
            "sqs", endpoint_url=proxy.endpoint_url, config=client_config(), **CREDENTIALS
        )
        proxy.hold("SendMessageBatch", "slow-one")
        redriver = Redriver(dlq, policy=NOW, client=client, wait_seconds=1)
        with running(redriver):
            # When the daemon runs and that send is out, unanswered
            wait_for(lambda: proxy.held >= 1, "the send held")
            # Then the next passes of the same DLQ move the other messages meanwhile (all but
            # the held pass's: it received up to 10, and counts them once its send is answered)
            wait_for(lambda: redriver.stats.moved >= 21, "the next passes moved")
            # And once SQS answers, the held pass's messages follow, each once
            proxy.release()
            wait_for(lambda: redriver.stats.moved >= 31, "the held pass settled")
    assert bodies(sqs, source) == [*others, "slow-one"]
    assert bodies(sqs, dlq) == []
