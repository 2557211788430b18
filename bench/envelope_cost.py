"""CPU per message of unwrapping SNS and EventBridge envelopes (docs/envelopes.md).

    .venv/bin/python bench/envelope_cost.py [--number 20000] [--repeat 5]

Times, per message, the screening of a received batch of 10 (`screen` over `ReceivedDelivery`s,
as a poller's intake does; the handler then reads each body): with `max_message_age` alone (the
deliveries' bodies read by the handler as text), and with `envelope` set, for an SNS
notification of a small JSON order (moto's shape, as SNS delivers it) and for the EventBridge
event of AWS's documentation. The best of `--repeat` runs of `--number` batches. No SQS call is
made: unwrapping costs none.
"""

from __future__ import annotations

import argparse
import json
import timeit
from typing import Any

from sqsbatch._core.receiving import ReceivedDelivery
from sqsbatch._core.screening import Screen, screen
from sqsbatch._core.unwrap import EnvelopeKind, wrap

ORDER = {"order": 1, "tenant": "acme", "items": list(range(10))}
EVENT = {
    "version": "0",
    "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
    "detail-type": "EC2 Instance State-change Notification",
    "source": "aws.ec2",
    "account": "111122223333",
    "time": "2017-12-22T18:43:48Z",
    "region": "us-west-1",
    "resources": ["arn:aws:ec2:us-west-1:123456789012:instance/i-1234567890abcdef0"],
    "detail": {"instance-id": " i-1234567890abcdef0", "state": "terminated"},
}


def received(body: str, index: int) -> dict[str, Any]:
    return {
        "MessageId": f"m{index}",
        "ReceiptHandle": f"r{index}",
        "Body": body,
        "Attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000"},
    }


def per_message(body: str, how: Screen, number: int, repeat: int) -> float:
    raws = [received(body, i) for i in range(10)]

    def batch() -> None:
        found = screen(
            [ReceivedDelivery(raw, 0.0, 30.0) for raw in raws], how, wall_now=1.7e9, queue="q"
        )
        for delivery in found.live:
            _ = delivery.body

    return min(timeit.repeat(batch, number=number, repeat=repeat)) / number / 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sns = wrap("sns", ORDER, message_id="22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", sent_at=1.7e9)
    cases: list[tuple[str, str, EnvelopeKind | None]] = [
        ("plain JSON text, no envelope", json.dumps(ORDER), None),
        (f"SNS notification ({len(sns)} bytes)", sns, "sns"),
        (f"EventBridge event ({len(json.dumps(EVENT))} bytes)", json.dumps(EVENT), "eventbridge"),
    ]
    for name, body, kind in cases:
        how = Screen(max_message_age=3600, envelope=kind)
        seconds = per_message(body, how, args.number, args.repeat)
        print(f"{name:40} {seconds * 1e6:6.2f} us per message")


if __name__ == "__main__":
    main()
