"""A second DynamoDB on 127.0.0.1: dynalite (npm, pinned in tests/dynalite/package.json), an
implementation independent of moto's, to catch moto's own condition semantics.

`make install` runs `npm ci` in tests/dynalite (4 s, 10 MB). Without node or that install the
tests that need it are skipped, or fail when DYNALITE_REQUIRED=1 (as `make test` sets).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from types import TracebackType
from typing import Self

import pytest

FOLDER = Path(__file__).resolve().parent.parent / "dynalite"


def missing() -> str | None:
    """Why dynalite cannot run here, or None."""
    if shutil.which("node") is None:
        return "dynalite needs node (not found)"
    if not (FOLDER / "node_modules" / "dynalite").is_dir():
        return "dynalite is not installed: make install (npm ci --prefix tests/dynalite)"
    return None


def skip_or_fail(reason: str) -> None:
    if os.environ.get("DYNALITE_REQUIRED") == "1":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


class Dynalite:
    """dynalite in a node process of its own, on a port it picked itself (no race)."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None
        self.endpoint_url = ""

    def __enter__(self) -> Self:
        self._process = subprocess.Popen(
            ["node", str(FOLDER / "serve.js")],
            cwd=FOLDER,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        port = self._process.stdout.readline().strip()
        if not port.isdigit():
            self.__exit__(None, None, None)
            raise RuntimeError(f"dynalite did not start (it printed {port!r})")
        self.endpoint_url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._process is not None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
