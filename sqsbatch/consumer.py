"""`Consumer`: the long-running boto3 poller (ECS, EC2, a laptop).

Generated with its asyncio twin from one source, `sqsbatch/_async/poller.py` (see there).
"""

from sqsbatch._sync.flavour import BatchHandler
from sqsbatch._sync.poller import Consumer

__all__ = ["BatchHandler", "Consumer"]
