"""redrive: drain dead-letter queues back to their sources, per message, with backoff.

`Redriver` is the daemon (`run()` forever, `run_once()` for cron jobs and tests);
`move_now` and `start_native_move` are the operator's moves, which ignore the backoff.
The decisions live in `redrive.policy` and `redrive.decide` (pure); see docs/redrive.md.
"""

from redrive.daemon import Redriver
from redrive.manual import move_now, start_native_move
from redrive.plan import MoveRow
from redrive.policy import BackoffPolicy
from redrive.report import MoveReport, RedriveStats

__all__ = [
    "BackoffPolicy",
    "MoveReport",
    "MoveRow",
    "RedriveStats",
    "Redriver",
    "move_now",
    "start_native_move",
]
