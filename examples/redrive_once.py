"""The redrive daemon from Python: drain a DLQ once, with per-message backoff.

Run against the local SQS of `sqsbatch dev` (or real SQS with your credentials):
    AWS_ENDPOINT_URL_SQS=http://127.0.0.1:4566 python examples/redrive_once.py
"""

from __future__ import annotations

from redrive import BackoffPolicy, Redriver, RedriveStats
from sqsbatch import create_queue


def main() -> RedriveStats:
    create_queue("payments", dead_letter_queue="payments-dlq", max_retries=3)
    redriver = Redriver(
        ["payments-dlq"],
        policy=BackoffPolicy(base_delay=60, factor=2, max_delay=3600, max_redrives=5),
        rate=20,  # messages per second sent back, at most (per process)
    )
    stats = redriver.run_once()  # or redriver.run() until stop() / SIGTERM
    print(stats.as_dict(), redriver.requests)
    return stats


if __name__ == "__main__":
    main()
