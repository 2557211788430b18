"""`Behind`, both flavours: a slot's settles out behind its receives, at most
`SETTLES_OUT_PER_SLOT` at once; a settle in the slot, and the slot's end, wait for all of them.
Settles here are calls that block on a gate, so that which of them are out is the test's."""

from __future__ import annotations

import asyncio
import threading

from sqsbatch._async.flavour import Behind as AsyncBehind
from sqsbatch._core.closing import SETTLES_OUT_PER_SLOT
from sqsbatch._sync.flavour import Behind

OUT = SETTLES_OUT_PER_SLOT
BOUND = 30.0
"""The longest a test waits for what must happen."""
STILL_WAITING = 0.2
"""How long a test looks at what must not happen (a start that must wait)."""


def test_threads_have_up_to_settles_out_per_slot_out_then_wait_for_the_oldest() -> None:
    behind = Behind()
    gates = [threading.Event() for _ in range(OUT + 1)]
    ended: list[str] = []

    def settle(n: int) -> None:
        gates[n].wait(BOUND)
        ended.append(f"settle {n}")

    # Given as many settles out as a slot may have, none answered yet: each start returned
    for n in range(OUT):
        behind.start(True, settle, n)
    # When the slot starts one more
    more = threading.Thread(target=behind.start, args=(True, settle, OUT))
    more.start()
    # Then it waits, until the oldest is done
    more.join(STILL_WAITING)
    assert more.is_alive()
    gates[0].set()
    more.join(BOUND)
    assert not more.is_alive() and ended == ["settle 0"]

    # And a settle in the slot waits for every one out, then runs in the slot
    in_slot = threading.Thread(target=behind.start, args=(False, ended.append, "in the slot"))
    in_slot.start()
    in_slot.join(STILL_WAITING)
    assert in_slot.is_alive()
    for gate in gates:
        gate.set()
    in_slot.join(BOUND)
    assert not in_slot.is_alive() and ended[-1] == "in the slot"
    assert sorted(ended[:-1]) == [f"settle {n}" for n in range(OUT + 1)]


def test_threads_wait_for_every_settle_out_when_the_slot_ends() -> None:
    behind = Behind()
    gate = threading.Event()
    ended: list[int] = []

    def settle(n: int) -> None:
        gate.wait(BOUND)
        ended.append(n)

    for n in range(OUT - 1):
        behind.start(True, settle, n)
    ending = threading.Thread(target=behind.wait)
    ending.start()
    ending.join(STILL_WAITING)
    assert ending.is_alive() and not ended
    gate.set()
    ending.join(BOUND)
    assert not ending.is_alive() and sorted(ended) == list(range(OUT - 1))


def test_asyncio_has_up_to_settles_out_per_slot_out_then_waits_for_the_oldest() -> None:
    async def main() -> None:
        behind = AsyncBehind()
        gates = [asyncio.Event() for _ in range(OUT + 1)]
        ended: list[str] = []

        async def settle(n: int) -> None:
            await gates[n].wait()
            ended.append(f"settle {n}")

        async def in_slot() -> None:
            ended.append("in the slot")

        # Given as many settles out as a slot may have: each start returned
        for n in range(OUT):
            await asyncio.wait_for(behind.start(True, settle, n), BOUND)
        # When the slot starts one more, it waits until the oldest is done
        more = asyncio.create_task(behind.start(True, settle, OUT))
        done, _ = await asyncio.wait({more}, timeout=STILL_WAITING)
        assert not done
        gates[0].set()
        await asyncio.wait_for(more, BOUND)
        assert ended == ["settle 0"]
        # And a settle in the slot waits for every one out, then runs
        slot = asyncio.create_task(behind.start(False, in_slot))
        done, _ = await asyncio.wait({slot}, timeout=STILL_WAITING)
        assert not done
        for gate in gates:
            gate.set()
        await asyncio.wait_for(slot, BOUND)
        assert ended[-1] == "in the slot"
        assert sorted(ended[:-1]) == [f"settle {n}" for n in range(OUT + 1)]

    asyncio.run(main())


def test_asyncio_cancels_the_settles_out_when_the_slot_is_cancelled() -> None:
    async def main() -> None:
        behind = AsyncBehind()
        never = asyncio.Event()
        cancelled: list[int] = []

        async def settle(n: int) -> None:
            try:
                await never.wait()
            except asyncio.CancelledError:
                cancelled.append(n)
                raise

        for n in range(OUT - 1):
            await behind.start(True, settle, n)
        ending = asyncio.create_task(behind.wait())
        await asyncio.sleep(0)
        ending.cancel()
        done, _ = await asyncio.wait({ending}, timeout=BOUND)
        assert done and ending.cancelled()
        await asyncio.sleep(0)  # the settles' cancellations are delivered
        assert sorted(cancelled) == list(range(OUT - 1))

    asyncio.run(main())
