"""Send a message past SQS's size limit through S3, in AWS's extended client format
(docs/payloads.md): AWS's own extended clients, Java or Python, read it.

Run against a local endpoint serving SQS and S3: `AWS_ENDPOINT_URL=http://127.0.0.1:4566 python
examples/large_payloads.py orders my-payload-bucket`.
"""

from __future__ import annotations

import sys

from sqsbatch import Producer, S3Payloads


def send_large(queue: str, bucket: str) -> str:
    producer = Producer(queue, large_payloads=S3Payloads(bucket, threshold=262_144))
    report = {"rows": [{"n": n, "text": "x" * 100} for n in range(20_000)]}  # about 2.5 MB
    return producer.send(report)  # the body goes to S3 first, then its pointer to SQS


if __name__ == "__main__":
    print(send_large(sys.argv[1], sys.argv[2]))
