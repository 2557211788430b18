"""A poller (sync or async) run in a thread of its own against the local SQS, until stopped or
idle: for tests that watch it while it runs (pause, circuit, rate, scale-in protection)."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Callable
from typing import Any

from sqsbatch import AsyncConsumer, Consumer, ConsumerConfig, MessageBatch
from sqsbatch.limits import SqsLimits
from tests.support.front_ends import aio_client, as_async

POLLERS = ["sync", "async"]
"""The front ends that poll (the Lambda adapter is handed its batches)."""

SHORT_POLLS = SqsLimits(max_wait_seconds=1)
"""`Background`'s default `limits`: a stop waits for the long poll under way (SQS's 20 s)."""

Script = Callable[[MessageBatch], Any]
"""A handler: for the async poller, a plain function is wrapped in a coroutine (it blocks the
event loop while it runs), an `async def` is taken as it is."""


class Receives:
    """Every `ReceiveMessage` a client made: (monotonic start, MaxNumberOfMessages, got)."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, int, int]] = []

    def sync(self, client: Any) -> Any:
        record = self.calls

        class Recording:
            def __getattr__(self, op: str) -> Any:
                target = getattr(client, op)
                if op != "receive_message":
                    return target

                def call(**params: Any) -> Any:
                    started = time.monotonic()
                    answer = target(**params)
                    got = len(answer.get("Messages", []))
                    record.append((started, params["MaxNumberOfMessages"], got))
                    return answer

                return call

        return Recording()

    def aio(self, client: Any) -> Any:
        record = self.calls

        class Recording:
            def __getattr__(self, op: str) -> Any:
                target = getattr(client, op)
                if op != "receive_message":
                    return target

                async def call(**params: Any) -> Any:
                    started = time.monotonic()
                    answer = await target(**params)
                    got = len(answer.get("Messages", []))
                    record.append((started, params["MaxNumberOfMessages"], got))
                    return answer

                return call

        return Recording()


class Background:
    """`kind`'s poller on `queue`, running `script` in a thread; `idle_seconds` None: until
    `stop()`. `consumer` is set once made; `error` is what `run` raised. Its long polls last
    1 s unless `limits` says otherwise (`SHORT_POLLS`)."""

    def __init__(
        self,
        kind: str,
        queue: str,
        script: Script,
        config: ConsumerConfig,
        client: Any,
        *,
        idle_seconds: float | None = None,
        receives: Receives | None = None,
        **options: Any,
    ) -> None:
        options.setdefault("limits", SHORT_POLLS)
        self.kind = kind
        self.receives = receives
        self.consumer: Consumer | AsyncConsumer | None = None
        self.error: BaseException | None = None
        self._made = threading.Event()
        self._args = (queue, script, config, client, idle_seconds, options)
        self._thread = threading.Thread(target=self._main, daemon=True)

    def start(self) -> Background:
        self._thread.start()
        assert self._made.wait(60), "the poller was never made"
        return self

    @property
    def poller(self) -> Consumer | AsyncConsumer:
        assert self.consumer is not None
        return self.consumer

    def stop(self) -> None:
        self.poller.stop()
        self.join()

    def join(self) -> None:
        self._thread.join(60)
        assert not self._thread.is_alive(), "the poller did not stop within 60 s"

    def _main(self) -> None:
        queue, script, config, client, idle, options = self._args
        try:
            if self.kind == "sync":
                if self.receives is not None:
                    client = self.receives.sync(client)
                consumer = Consumer(queue, script, config, client=client, **options)
                self.consumer = consumer
                self._made.set()
                consumer.run() if idle is None else consumer.run_until_idle(idle)
            else:
                asyncio.run(self._amain())
        except BaseException as exc:  # the test reads it
            self.error = exc
        finally:
            self._made.set()

    async def _amain(self) -> None:
        queue, script, config, client, idle, options = self._args
        async with aio_client(client) as opened:
            aio = opened if self.receives is None else self.receives.aio(opened)
            handler = script if inspect.iscoroutinefunction(script) else as_async(script)
            consumer = AsyncConsumer(queue, handler, config, client=aio, **options)
            self.consumer = consumer
            self._made.set()
            await (consumer.run() if idle is None else consumer.run_until_idle(idle))
