"""Send a message past SQS's size limit through S3, in AWS's extended client format
(docs/payloads.md): AWS's own extended clients, Java or Python, read it; and consume it: every
sqsbatch consumer reads the payload (from sqsbatch's producer or AWS's clients) before the
handler, and deletes it from S3 once the message is acked.

Run against a local endpoint serving SQS and S3: `AWS_ENDPOINT_URL=http://127.0.0.1:4566 python
examples/large_payloads.py orders my-payload-bucket`.
"""

from __future__ import annotations

import sys

from sqsbatch import Consumer, MessageBatch, Producer, S3Payloads


def send_large(queue: str, bucket: str) -> str:
    producer = Producer(queue, large_payloads=S3Payloads(bucket, threshold=262_144))
    report = {"rows": [{"n": n, "text": "x" * 100} for n in range(20_000)]}  # about 2.5 MB
    return producer.send(report)  # the body goes to S3 first, then its pointer to SQS


def count_rows(batch: MessageBatch) -> None:
    for message in batch.messages:  # an offloaded message's body is its payload, from S3
        print(f"{message.id}: {len(message.body['rows'])} rows")


def consume_large(queue: str) -> None:
    Consumer(queue, count_rows).run_until_idle()  # no option: consumers always read payloads


if __name__ == "__main__":
    print(send_large(sys.argv[1], sys.argv[2]))
    consume_large(sys.argv[1])
