"""`AsyncConsumer`: the long-running aioboto3 poller (ECS, asyncio services).

Written once with its sync twin, in `sqsbatch/_async/poller.py` (see there).
"""

from sqsbatch._async.flavour import AsyncBatchHandler
from sqsbatch._async.poller import AsyncConsumer

__all__ = ["AsyncBatchHandler", "AsyncConsumer"]
