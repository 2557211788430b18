"""Run every front end and both producers in a process of its own, with OpenTelemetry missing,
installed but never imported, or imported with no SDK: `python -m tests.support.untraced MODE`
(the local SQS endpoint in `AWS_ENDPOINT_URL_SQS`). Prints what it saw as one JSON line.

`missing`: a meta-path finder refuses every `opentelemetry` import, as if the extra were not
installed. `unused`: nothing is done about it. `idle`: the API is imported, no provider is set.
`environment`: the provider is named in `OTEL_PYTHON_TRACER_PROVIDER` only (batches are traced).
"""

from __future__ import annotations

import asyncio
import importlib.abc
import json
import os
import sys
import uuid
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

import boto3


class Missing(importlib.abc.MetaPathFinder):
    """Makes `import opentelemetry...` fail as it does where the extra is not installed."""

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name.partition(".")[0] == "opentelemetry":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def main(mode: str) -> dict[str, Any]:
    if mode == "missing":
        sys.meta_path.insert(0, Missing())
    elif mode in ("idle", "environment"):
        if mode == "environment":
            os.environ["OTEL_PYTHON_TRACER_PROVIDER"] = "sdk_tracer_provider"
        import opentelemetry.trace  # noqa: F401, PLC0415

    # Imported here, after the finder is in place: as a process without the extra would.
    import sqsbatch  # noqa: PLC0415
    from sqsbatch._shell import tracing  # noqa: PLC0415
    from tests.support.front_ends import FRONT_ENDS, aio_client  # noqa: PLC0415

    sqs = boto3.session.Session().client("sqs")  # the endpoint and keys: from the environment
    handled: dict[str, list[Any]] = {}
    for front_end in FRONT_ENDS:
        queue = f"untraced-{front_end.name}-{uuid.uuid4().hex[:8]}"
        sqsbatch.create_queue(queue, client=sqs)
        sqsbatch.Producer(queue, client=sqs).send({"n": 1})

        async def send_async(queue: str = queue) -> None:
            async with aio_client(sqs) as client:
                await sqsbatch.AsyncProducer(queue, client=client).send({"n": 2})

        asyncio.run(send_async())
        seen: list[Any] = []

        def handler(batch: sqsbatch.MessageBatch, seen: list[Any] = seen) -> None:
            seen.extend(message.body for message in batch.messages)

        front_end.consume(queue, handler, sqsbatch.ConsumerConfig(max_batch_timeout=0.2), sqs)
        handled[front_end.name] = sorted(body["n"] for body in seen)
    return {
        "handled": handled,
        "off": tracing.start(sqsbatch.MessageBatch("q", [])) is tracing.OFF,
        "imported": sorted(m for m in sys.modules if m.partition(".")[0] == "opentelemetry"),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
