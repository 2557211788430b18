"""`SettlingPasses`: the redrive daemon's passes still settling while it receives the next batch
of the same DLQ (`Redriver.run`), so that one late answer holds up only its own pass."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from sqsbatch._core.closing import SETTLES_OUT_PER_SLOT

__all__ = ["SettlingPasses"]


class SettlingPasses:
    """One DLQ's passes still settling (sends and hides, then deletes) while it receives again:
    up to `depth` at once, each in a pooled thread; past that, the next waits for the oldest.
    What a settle raised (a call SQS refused after botocore's retries) is raised by the next
    `check`, `start` or `wait`, in the DLQ's own thread, where a failed pass is decided.
    `wait` waits for all of them (then raises the first failure, if any) and ends the pool."""

    def __init__(self, name: str, depth: int = SETTLES_OUT_PER_SLOT) -> None:
        self._depth = depth
        self._pool = ThreadPoolExecutor(max_workers=depth, thread_name_prefix=f"redrive-{name}")
        self._out: deque[Future[object]] = deque()

    def start(self, settle: Callable[[], object]) -> None:
        self.check()
        while len(self._out) >= self._depth:
            self._out.popleft().result()
        self._out.append(self._pool.submit(settle))

    def check(self) -> None:
        """Forget the settles done; raise the first failure among them."""
        done = [future for future in self._out if future.done()]
        for future in done:
            self._out.remove(future)
        for future in done:
            future.result()

    def wait(self) -> None:
        out, self._out = self._out, deque()
        try:
            failures = [future.exception() for future in out]
        finally:
            self._pool.shutdown(wait=True)
        for failure in failures:
            if failure is not None:
                raise failure
