"""The asyncio flavour: the door and the poller (the sources of `sqsbatch._sync`'s twins)."""
