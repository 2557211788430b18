"""A flow's call elsewhere (`Outside`: an idempotency store, S3) goes through both doors alike:
its result is sent back, what it raised is thrown in as it was, and the async door runs it off
the event loop's thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from sqsbatch._async.door import AsyncSqs
from sqsbatch._core.flows import Flow, Outside
from sqsbatch._sync.door import SyncSqs


class StoreDown(Exception):
    pass


def asks(calls: list[Any]) -> Flow[list[Any]]:
    """Yield each call as an `Outside`; return what each gave or raised."""
    seen: list[Any] = []
    for call in calls:
        try:
            seen.append((yield Outside(call)))
        except StoreDown as exc:
            seen.append(exc)
    return seen


def run_sync(flow: Flow[Any]) -> Any:
    return SyncSqs(None).run(flow)


def run_async(flow: Flow[Any]) -> Any:
    return asyncio.run(AsyncSqs(None).run(flow))


def down() -> None:
    raise StoreDown("store down")


@pytest.mark.parametrize("run", [run_sync, run_async], ids=["sync", "async"])
def test_an_outside_call_answers_the_flow_or_has_its_error_thrown_in(run: Any) -> None:
    seen = run(asks([lambda: 1, down, lambda: "two"]))
    assert seen[0] == 1 and isinstance(seen[1], StoreDown) and seen[2] == "two"


@pytest.mark.parametrize("run", [run_sync, run_async], ids=["sync", "async"])
def test_an_error_the_flow_does_not_catch_reaches_the_caller(run: Any) -> None:
    def flow() -> Flow[None]:
        yield Outside(down)

    with pytest.raises(StoreDown):
        run(flow())


def test_the_async_door_runs_an_outside_call_off_the_loops_thread() -> None:
    threads: list[int] = []

    async def main() -> None:
        threads.append(threading.get_ident())
        await AsyncSqs(None).run(asks([lambda: threads.append(threading.get_ident())]))

    asyncio.run(main())
    assert threads[0] != threads[1]
