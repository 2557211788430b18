"""Run one handler on a queue, on any front end, with SQS's ceilings shrunk to seconds."""

from __future__ import annotations

import asyncio
from typing import Any

from sqsbatch import AsyncConsumer, Consumer, ConsumerConfig, lambda_handler
from sqsbatch.limits import SqsLimits
from tests.front_ends import EventSourceMapping, Script, aio_client, as_async

NAMES = ["sync", "async", "lambda"]


def consume(
    front_end: str,
    queue: str,
    script: Script,
    config: ConsumerConfig,
    client: Any,
    *,
    limits: SqsLimits,
    idle_seconds: float,
) -> None:
    if front_end == "sync":
        Consumer(queue, script, config, client=client, limits=limits).run_until_idle(idle_seconds)
    elif front_end == "async":

        async def main() -> None:
            async with aio_client(client) as aio:
                consumer = AsyncConsumer(queue, as_async(script), config, client=aio, limits=limits)
                await consumer.run_until_idle(idle_seconds)

        asyncio.run(main())
    else:
        function = lambda_handler(config=config, client=client, limits=limits)(script)
        mapping = EventSourceMapping(
            client, queue, batch_size=config.max_batch_size, window=config.max_batch_timeout
        )
        try:
            mapping.run_until_idle(function, idle_seconds=idle_seconds)
        finally:
            function.close()
