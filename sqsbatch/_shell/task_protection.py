"""ECS task scale-in protection from inside the task: `PUT $ECS_AGENT_URI/task-protection/v1/state`.

`update(busy)` never waits: it asks the core's `ProtectionPlan` whether a call is due and hands
it to one daemon thread, which makes it with urllib and a short timeout. A hanging agent holds
that thread only (the plan sends nothing else meanwhile), never the caller. Failures (no answer,
an HTTP error, an answer with a `failure` or `error`) are logged at WARNING and swallowed; the
plan tries again later. Without `ECS_AGENT_URI`, or with `scale_in_protection = false`, it
does nothing at all.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from sqsbatch._core.protection import ProtectionCall, ProtectionPlan

__all__ = ["AGENT_ENV", "STATE_PATH", "TaskProtection"]

log = logging.getLogger("sqsbatch")

AGENT_ENV = "ECS_AGENT_URI"
STATE_PATH = "/task-protection/v1/state"
TIMEOUT_SECONDS = 6.0
"""How long one call to the agent may take (connect, and each read): past the agent's own 4 s
timeout on its call to ECS, so that its answer, even a timeout, gets through."""


class TaskProtection:
    """Scale-in protection for this task while its poller is busy."""

    def __init__(
        self,
        *,
        expires_minutes: int,
        enabled: bool = True,
        agent_uri: str | None = None,
        timeout: float = TIMEOUT_SECONDS,
        retry_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        uri = agent_uri if agent_uri is not None else os.environ.get(AGENT_ENV, "")
        self.url = uri.rstrip("/") + STATE_PATH if uri and enabled else None
        self.calls = 0
        self.failures = 0
        self._plan = ProtectionPlan(expires_minutes=expires_minutes, retry_seconds=retry_seconds)
        self._timeout = timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._busy = False
        self._out = False  # a call handed to the thread, not yet answered
        self._work: queue.SimpleQueue[ProtectionCall | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    @property
    def active(self) -> bool:
        """Whether this process makes protection calls at all."""
        return self.url is not None

    def update(self, busy: bool) -> None:
        """Whether the poller holds a batch now; call on every change and now and then (a
        renewal falls due while busy). Never waits."""
        if self.url is None:
            return
        with self._lock:
            self._busy = busy
            self._step()

    def wait(self, timeout: float) -> bool:
        """Wait (at most `timeout` s) until no call is out; whether none is."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._out, timeout)

    def close(self, timeout: float = TIMEOUT_SECONDS) -> None:
        """Drop protection if held (waiting at most `timeout` s for the calls out), then end the
        thread."""
        self.update(False)
        self.wait(timeout)
        if self._thread is not None:
            self._work.put(None)
            self._thread = None

    def _step(self) -> None:
        if self._out:
            return
        call = self._plan.step(self._clock(), busy=self._busy)
        if call is None:
            return
        self._out = True
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="sqsbatch-protection")
            self._thread.daemon = True
            self._thread.start()
        self._work.put(call)

    def _run(self) -> None:
        while (call := self._work.get()) is not None:
            ok = self._put(call)
            with self._lock:
                self.calls += 1
                self.failures += 0 if ok else 1
                self._plan.done(self._clock(), ok=ok)
                self._out = False
                self._step()  # the state may have changed while the call was out
                self._idle.notify_all()

    def _put(self, call: ProtectionCall) -> bool:
        assert self.url is not None
        body = json.dumps(call.body()).encode()
        request = urllib.request.Request(
            self.url, data=body, method="PUT", headers={"Content-Type": "application/json"}
        )
        what = "take" if call.enabled else "drop"
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as answer:
                problem = _problem(answer.read(65_536))
        except urllib.error.HTTPError as exc:
            problem = f"HTTP {exc.code} {_problem(exc.read(65_536)) or exc.reason}"
        except (OSError, ValueError) as exc:  # unreachable, refused, timed out
            problem = f"no answer ({exc})"
        if problem:
            log.warning("scale-in protection: could not %s it: %s", what, problem)
            return False
        return True


def _problem(body: bytes) -> str:
    """What went wrong, from the agent's JSON answer ("" for a `protection` answer)."""
    try:
        answer = json.loads(body or b"{}")
    except ValueError:
        return f"not JSON: {body[:80]!r}"
    if not isinstance(answer, dict):
        return f"unexpected answer: {str(answer)[:80]}"
    for key in ("failure", "error"):
        found = answer.get(key)
        if isinstance(found, dict):
            reason = found.get("Reason") or found.get("Message") or found.get("Code") or found
            return f"{key}: {reason}"
    return ""
