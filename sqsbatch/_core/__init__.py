"""The pure core: every decision about messages, receipts and retries, and every exchange with
SQS as a flow that yields the calls it needs; no I/O.

Nothing here imports boto3, aioboto3, botocore, threading, asyncio, time or random
(`tests/test_core_imports.py` fails when a module does): clocks, random sources and SQS's answers
come in as arguments. The shells (`sqsbatch._sync`, `sqsbatch._async`, the Lambda adapter, the
redrive daemon) drive the flows with one of the two drivers and wait in their own way.
"""
