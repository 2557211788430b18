"""The semantic scenarios of SPEC 2, against moto's server, on every front end."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sqsbatch import MessageBatch, Producer, create_queue
from sqsbatch._core.envelope import Death, decode
from tests.support.front_ends import FRONT_ENDS, FrontEnd
from tests.support.scenarios import SCENARIOS, Recorder, Scenario
from tests.support.sqs_helpers import depth, drain


def deaths_of(raw: dict[str, Any]) -> tuple[Death, ...]:
    return decode(raw).envelope.deaths


@pytest.mark.parametrize("front_end", FRONT_ENDS, ids=lambda f: f.name)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name.replace(" ", "-"))
def test_scenario(scenario: Scenario, front_end: FrontEnd, sqs: Any, name: str) -> None:
    # Given a queue (with its DLQ) holding the scenario's bodies
    dlq = f"{name}-dlq" if scenario.dlq else None
    create_queue(name, dead_letter_queue=dlq, max_retries=scenario.max_retries, client=sqs)
    Producer(name, client=sqs).send_batch([{"body": b} for b in scenario.bodies])
    recorder = Recorder()

    def handler(batch: MessageBatch) -> None:
        recorder.saw(batch)
        scenario.script(batch)

    # When the front end consumes until idle
    front_end.consume(name, handler, scenario.config(dlq), sqs)

    # Then every body was delivered with exactly the expected attempts, ids stable
    assert recorder.attempts() == scenario.attempts
    ids = {body: {i for b, i, _ in recorder.deliveries if b == body} for body in scenario.bodies}
    assert all(len(seen) == 1 for seen in ids.values())
    # and ended where it should: in the DLQ, or nowhere; never left behind
    assert depth(sqs, name) == 0
    if dlq is not None:
        copies = drain(sqs, dlq)
        assert sorted(json.loads(c["Body"]) for c in copies) == sorted(scenario.dead_lettered)
        if scenario.reasons is not None:
            # and each copy's history says why, on the queue it died on
            found = {json.loads(c["Body"]): deaths_of(c) for c in copies}
            assert {b: [d.reason for d in deaths] for b, deaths in found.items()} == (
                scenario.reasons
            )
            assert all(d.queue == name for deaths in found.values() for d in deaths)
