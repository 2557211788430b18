"""A command winding down after its first signal (the poller stopped, its counters still to
print) answers a second one at once, as it promised: exit 128 + the signal, not Python's own
KeyboardInterrupt (`sqsbatch.cli.foreground.Foreground`)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

from sqsbatch.cli.foreground import Foreground


class Exited(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


@pytest.fixture
def handlers() -> Iterator[None]:
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@pytest.mark.usefixtures("handlers")
def test_a_second_signal_during_the_wind_down_ends_it_with_130(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a poller that stops as soon as it is asked, stopped by a first SIGINT
    stopped = threading.Event()
    started = threading.Event()

    def work() -> None:
        started.set()
        stopped.wait(30)

    run = Foreground(work, stopped.set, dict, "q", poll_seconds=1, visibility_timeout=30)

    def interrupt() -> None:
        started.wait(30)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt).start()
    run.run()
    assert stopped.is_set()

    # When a second SIGINT comes while the command prints its counters
    def exit_(code: int) -> None:
        raise Exited(code)

    monkeypatch.setattr(os, "_exit", exit_)
    handler = signal.getsignal(signal.SIGINT)
    assert callable(handler) and handler is not signal.default_int_handler
    # Then it stops at once with 130
    with pytest.raises(Exited) as exited:
        handler(signal.SIGINT, None)
    assert exited.value.code == 130
