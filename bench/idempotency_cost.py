"""DynamoDB requests and write units per message of the idempotency store (issue 29).

    .venv/bin/python bench/idempotency_cost.py [--batches 100] [--batch-size 10] [--dynalite]

Drives `DynamoDBStore` as a consumer would, batch after batch: claim the batch's keys, then
complete them all (the happy path), on moto's DynamoDB (`LocalSqs`, which serves DynamoDB too)
and, with `--dynalite`, on dynalite (tests/dynalite, `make install`). Modes:

- carried: completions ride in the next batch's claim transaction (`complete(carry=True)`);
- batched: completions in their own `BatchWriteItem` (`complete()`);
- duplicates: carried, with one key of every batch completed already (a redelivery).

Every HTTP request botocore sends is counted (a `before-send` hook, retries included). Write
units are computed from the items each request carries, by DynamoDB's pricing rule (a record
is far below 1 KB: 1 write unit a standard write, 2 a transactional one): moto reports no
consumed capacity for transactions, so they cannot be read off the answers.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import boto3

from sqsbatch.dev.server import LOCAL_CREDENTIALS, LocalSqs
from sqsbatch.idempotency import DynamoDBStore, new_owner


class Meter:
    """Requests and computed write units, from the requests botocore sends."""

    def __init__(self, client: Any) -> None:
        self.requests: Counter[str] = Counter()
        self.write_units = 0
        client.meta.events.register("before-parameter-build.dynamodb", self._units)
        client.meta.events.register("before-send.dynamodb", self._sent)

    def _sent(self, request: Any, **_: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        target = target.decode() if isinstance(target, bytes) else target
        self.requests[target.rsplit(".", 1)[-1]] += 1

    def _units(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        if model.name == "TransactWriteItems":
            self.write_units += 2 * len(params["TransactItems"])
        elif model.name == "BatchWriteItem":
            self.write_units += sum(len(items) for items in params["RequestItems"].values())
        elif model.name in ("PutItem", "UpdateItem", "DeleteItem"):
            self.write_units += 1


def client_for(endpoint: str) -> Any:
    return boto3.session.Session().client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name=LOCAL_CREDENTIALS["AWS_DEFAULT_REGION"],
        aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )


def new_table(client: Any) -> str:
    table = f"bench-{uuid.uuid4().hex[:8]}"
    client.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 0.1})
    return table


def run(endpoint: str, mode: str, batches: int, size: int) -> dict[str, Any]:
    client = client_for(endpoint)
    store = DynamoDBStore(new_table(client), client=client)
    if mode == "duplicates":  # one key of each batch completed beforehand, not counted
        store.complete([f"b{n}-0" for n in range(batches)], owner="before", ttl_seconds=3600)
    meter = Meter(client)
    handled = 0
    for batch in range(batches):
        owner = new_owner()
        claims = store.claim([f"b{batch}-{n}" for n in range(size)], owner=owner, expires=2e9)
        handled += len(claims.won)
        store.complete(sorted(claims.won), owner=owner, ttl_seconds=3600, carry=mode != "batched")
    store.flush()
    messages = batches * size
    return {
        "mode": mode,
        "messages": messages,
        "handled": handled,
        "requests": dict(meter.requests),
        "requests_per_message": round(sum(meter.requests.values()) / messages, 3),
        "write_units_per_message": round(meter.write_units / messages, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=10, choices=range(1, 101))
    parser.add_argument("--dynalite", action="store_true", help="also on dynalite")
    args = parser.parse_args()
    if args.batches < 1:
        parser.error("--batches must be at least 1")
    results = []
    with LocalSqs() as server:
        for mode in ("carried", "batched", "duplicates"):
            result = run(server.endpoint_url, mode, args.batches, args.batch_size)
            results.append({"on": "moto", **result})
    if args.dynalite:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.support import dynalite  # noqa: PLC0415

        reason = dynalite.missing()
        if reason is not None:
            parser.error(reason)
        with dynalite.Dynalite() as node:
            result = run(node.endpoint_url, "carried", args.batches, args.batch_size)
            results.append({"on": "dynalite", **result})
    for result in results:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
