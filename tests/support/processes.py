"""The one way a test runs a child process it must not leave behind: `spawned`."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

PIPED: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
"""`spawned`'s keywords for a child whose stdout and stderr the test reads, as text."""


@contextmanager
def spawned(args: Sequence[str], **popen: Any) -> Iterator[subprocess.Popen[Any]]:
    """Start `args` (`popen`: subprocess.Popen's keywords); on leaving, however the block ends,
    kill the child if it still runs, close its pipes and reap it: no test leaves a process."""
    process = subprocess.Popen(args, **popen)
    with process:  # Popen's own exit closes the pipes and waits for the child
        try:
            yield process
        finally:
            if process.poll() is None:
                process.kill()
