"""kill -9 of a poller after its handler's side effect and the completion, before the ack
(issue 29): the redelivery is acked without a second call. Both stores; the side effects are
lines of a ledger file the child's handler writes."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from sqsbatch import ConsumerConfig, Producer, create_queue
from sqsbatch.dev.server import LocalSqs
from sqsbatch.idempotency import DynamoDBStore
from tests.idempotency.conftest import create_table, dynamodb_client
from tests.support.pollers import POLLERS, Background
from tests.support.processes import spawned
from tests.support.sqs_helpers import depth
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["moto", "dynalite"])
def endpoint(request: pytest.FixtureRequest) -> str:
    """The DynamoDB endpoint of moto's server or of dynalite."""
    if request.param == "moto":
        return str(request.getfixturevalue("local_sqs").endpoint_url)
    return str(request.getfixturevalue("dynalite_endpoint"))


@pytest.mark.parametrize("kind", POLLERS)
def test_a_poller_killed_before_its_ack_leaves_a_copy_that_is_acked_without_a_second_call(
    kind: str, endpoint: str, local_sqs: LocalSqs, name: str, tmp_path: Path
) -> None:
    sqs = local_sqs.client()
    table = create_table(dynamodb_client(endpoint))
    create_queue(name, client=sqs)
    Producer(name, client=sqs).send("charge", idempotency_key="order-3")
    ledger, marker = tmp_path / "ledger", tmp_path / "completed"
    args = [sys.executable, "-m", "tests.idempotency.killed_poller", name, table, endpoint]
    env = {**os.environ, **local_sqs.environment(), "PYTHONPATH": str(ROOT)}
    # Given a poller that ran the side effect, recorded the completion, and hangs before its ack
    with spawned([*args, str(ledger), str(marker)], env=env, cwd=ROOT) as child:
        wait_for(marker.exists, "the child recorded the completion")
        os.kill(child.pid, signal.SIGKILL)
        child.wait(60)
    assert ledger.read_text() == "order-3\n"
    # When another poller gets the redelivery (once its visibility ends)
    store = DynamoDBStore(table, client=dynamodb_client(endpoint))
    calls: list[str] = []
    config = ConsumerConfig(max_batch_timeout=0.1)
    poller = Background(
        kind, name, lambda b: calls.extend(m.id for m in b.messages), config, sqs, idempotency=store
    ).start()
    try:
        wait_for(lambda: poller.poller.stats.duplicates_skipped == 1, "the copy was skipped")
        wait_for(lambda: depth(sqs, name) == 0, "the copy was deleted")
    finally:
        poller.stop()
    # Then it is acked without a second call
    assert calls == [] and ledger.read_text() == "order-3\n"
