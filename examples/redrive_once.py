"""The redrive daemon from Python: drain a DLQ once, with per-message backoff.

It creates queues of its own, `redrive-once-payments` and `redrive-once-payments-dlq`, and finds
SQS as boto3 does: `AWS_ENDPOINT_URL_SQS`, then the usual credentials. On a local SQS: start
`sqsbatch dev` in another shell, paste the `export` lines it prints into this one, then
    python examples/redrive_once.py
"""

from __future__ import annotations

from redrive import BackoffPolicy, Redriver, RedriveStats
from sqsbatch import create_queue


def main() -> RedriveStats:
    create_queue(
        "redrive-once-payments", dead_letter_queue="redrive-once-payments-dlq", max_retries=3
    )
    redriver = Redriver(
        ["redrive-once-payments-dlq"],
        policy=BackoffPolicy(base_delay=60, factor=2, max_delay=3600, max_redrives=5),
        rate=20,  # messages per second sent back, at most (per process)
    )
    stats = redriver.run_once()  # or redriver.run() until stop() / SIGTERM
    print(stats.as_dict(), redriver.requests)
    return stats


if __name__ == "__main__":
    main()
