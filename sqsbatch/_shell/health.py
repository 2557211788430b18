"""The health file of a long-running process (`health_file`, `--health-file`), and its reader.

The decisions (when to touch, when a loop has stalled) are the core's
(`sqsbatch._core.liveness`); this module does the file system part: check at construction that
the file can be written, touch it (one `utime` call, its modification time is the heartbeat),
and tell how old it is (`sqsbatch health PATH --max-age SECONDS`, an ECS container health check).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from sqsbatch.errors import ConfigError

__all__ = ["NOT_YET", "HealthFile", "age_seconds"]

log = logging.getLogger("sqsbatch")

NOT_YET = 0
"""The modification time of a health file not touched yet by the process that made it."""


class HealthFile:
    """A file whose modification time says the process is alive.

    Bad input fails here, before anything starts: a directory that does not exist or cannot be
    written, a path that is a directory, a file that cannot be written.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        shown = str(path)
        if shown == "" or self.path.is_dir():
            raise ConfigError(f"health_file={shown!r} is invalid: it is a directory")
        if not self.path.parent.is_dir():
            raise ConfigError(f"health_file={shown!r} is invalid: no directory {self.path.parent}")
        try:  # created (or reset) as stale: fresh only once the process proves it is alive
            self.path.touch()
            os.utime(self.path, (NOT_YET, NOT_YET))
        except OSError as exc:
            raise ConfigError(
                f"health_file={shown!r} is invalid: cannot write it ({exc.strerror})"
            ) from None
        self._failed = False

    def touch(self) -> None:
        """Set the modification time to now (creating the file the first time). A failure is
        logged once and not raised: the health check, not the consumer, reports it."""
        try:
            try:
                os.utime(self.path)
            except FileNotFoundError:
                self.path.touch()
        except OSError as exc:
            if not self._failed:
                log.error("cannot touch the health file %s: %s", self.path, exc.strerror)
            self._failed = True
        else:
            self._failed = False


def age_seconds(path: str | os.PathLike[str], now: float) -> float | None:
    """Seconds since the file was last touched (`now` is wall time); None when it is missing
    or not touched yet since its process started."""
    try:
        touched = os.stat(path).st_mtime
    except FileNotFoundError:
        return None
    return None if touched == NOT_YET else now - touched
