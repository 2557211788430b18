"""Hold a queue back while what its handler calls is down, then let it go (docs/pressure.md).

Run against a local SQS: `AWS_ENDPOINT_URL=http://127.0.0.1:4566 python examples/pause_resume.py
orders` (with `AWS_ENDPOINT_URL`, Lambda is asked at the same endpoint).
"""

from __future__ import annotations

import sys

import sqsbatch


def hold_back(queue: str) -> None:
    done = sqsbatch.pause_queue(queue, for_seconds=7200, reason="billing API down")
    print(done.state.paused, done.state.until_text(), done.mappings)  # True 2026-... []
    print(sqsbatch.pausing.queue_pause(queue).reason)  # billing API down
    sqsbatch.resume_queue(queue)


if __name__ == "__main__":
    hold_back(sys.argv[1])
