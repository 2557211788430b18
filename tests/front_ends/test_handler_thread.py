"""A sync handler's thread: `Done`, the one-shot event it sets, `run_in_thread` against a
budget, and a thread started on its caller's CPU. No sleep decides an outcome: a handler that
must not finish waits on a gate."""

from __future__ import annotations

import os
import threading

import pytest

from sqsbatch._cpu import near_caller, widen
from sqsbatch.handler_tasks import Done, HandlerThread, run_in_thread


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


# -- started near its caller (`sqsbatch._cpu`) --------------------------------------------------


def own_cpus() -> frozenset[int]:
    return frozenset(os.sched_getaffinity(0))


def test_a_thread_started_near_its_caller_is_narrowed_to_one_cpu_and_widens_itself_back() -> None:
    cpus = own_cpus()
    ready, go, widened = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, frozenset[int]] = {}
    had: list[frozenset[int] | None] = []

    def waiting() -> None:
        ready.set()
        go.wait(10)
        seen["narrowed"] = own_cpus()
        if had[0] is not None:
            widen(had[0])
        seen["widened"] = own_cpus()
        widened.set()

    thread = threading.Thread(target=waiting)
    thread.start()
    assert ready.wait(10)
    had.append(near_caller(thread.native_id))
    go.set()
    assert widened.wait(10)
    thread.join()

    if len(cpus) < 2:  # nothing to choose between: left alone
        assert had == [None]
        assert seen == {"narrowed": cpus, "widened": cpus}
    else:
        assert had == [cpus]
        assert len(seen["narrowed"]) == 1
        assert seen["narrowed"] <= cpus
        assert seen["widened"] == cpus


def test_no_thread_or_one_that_does_not_exist_is_left_alone_and_so_is_the_caller() -> None:
    cpus = own_cpus()
    with open("/proc/sys/kernel/pid_max") as limit:
        no_such_thread = int(limit.read()) + 1

    assert near_caller(None) is None
    assert near_caller(0) is None  # 0 would be the calling thread itself
    assert near_caller(no_such_thread) is None
    assert own_cpus() == cpus


@pytest.mark.parametrize("near", [True, False])
def test_a_handler_started_near_its_caller_and_what_it_starts_keep_every_cpu(near: bool) -> None:
    cpus = own_cpus()
    seen: list[frozenset[int]] = []

    def handler(batch: object) -> None:
        seen.append(own_cpus())
        started = threading.Thread(target=lambda: seen.append(own_cpus()))
        started.start()
        started.join()

    assert run_in_thread(handler, None, budget=10, near=near) == (False, None)
    assert seen == [cpus, cpus]
