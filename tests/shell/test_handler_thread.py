"""A sync handler's thread: `Done`, the one-shot event it sets, and `run_in_thread` against a
budget. No sleep decides an outcome: a handler that must not finish waits on a gate."""

from __future__ import annotations

import threading

import pytest

from sqsbatch._shell.handler_tasks import Done, HandlerThread, run_in_thread


def test_done_is_unset_until_set_and_then_stays_set_for_every_wait() -> None:
    done = Done()
    assert not done.is_set()
    assert done.wait(0) is False
    assert done.wait(-1) is False  # a deadline already past: no wait, no error

    done.set()

    assert done.is_set()
    assert [done.wait(0), done.wait(5), done.wait(-1)] == [True, True, True]


def test_done_wakes_a_waiter_when_another_thread_sets_it() -> None:
    done = Done()
    setter = threading.Thread(target=done.set)
    setter.start()
    assert done.wait(threading.TIMEOUT_MAX * 2) is True  # longer than a lock can wait: clamped
    setter.join()


def test_a_handler_past_its_budget_is_timed_out_and_runs_on_unwaited() -> None:
    gate, finished = threading.Event(), threading.Event()

    def handler(batch: object) -> None:
        gate.wait()
        finished.set()

    assert run_in_thread(handler, None, budget=0.01) == (True, None)
    assert not finished.is_set()
    gate.set()
    assert finished.wait(10)


@pytest.mark.parametrize("raised", [ValueError("bad"), SystemExit(3), KeyboardInterrupt()])
def test_what_a_handler_raised_is_its_failure_once_done(raised: BaseException) -> None:
    def handler(batch: object) -> None:
        raise raised

    thread = HandlerThread(handler, None)
    assert thread.done.wait(10)
    assert thread.failure is raised


def test_a_handler_that_returned_has_no_failure() -> None:
    thread = HandlerThread(lambda batch: "ignored", None)
    assert thread.done.wait(10)
    assert thread.failure is None
