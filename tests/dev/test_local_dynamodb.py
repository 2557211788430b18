"""The local server's DynamoDB runs one request at a time (`sqsbatch.dev.moto_dynamodb`): moto's
`TransactWriteItems` puts back a copy of the table when a condition fails, which undid the
writes other requests made meanwhile, and its copy failed when taken during another write."""

from __future__ import annotations

import sys
import threading
import uuid
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from sqsbatch.dev import moto_dynamodb
from sqsbatch.dev.server import LOCAL_CREDENTIALS, LocalSqs


def dynamodb(local: LocalSqs) -> Any:
    return boto3.session.Session().client(
        "dynamodb",
        endpoint_url=local.endpoint_url,
        region_name=LOCAL_CREDENTIALS["AWS_DEFAULT_REGION"],
        aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )


def failing_transactions_beside_writes(local: LocalSqs, writers: int = 4) -> tuple[set[str], int]:
    """`writers` threads write 10 items at a time while 3 others run transactions that fail
    their condition (so moto puts its copy of the table back), with the interpreter switching
    threads as often as it can: (the written keys missing afterwards, requests that failed)."""
    client = dynamodb(local)
    table = f"t-{uuid.uuid4().hex[:8]}"
    client.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client.put_item(TableName=table, Item={"pk": {"S": "taken"}})
    written: list[str] = []
    failed = [0]
    done = threading.Event()

    def write() -> None:
        own = dynamodb(local)
        for _ in range(15):
            keys = [uuid.uuid4().hex for _ in range(10)]
            items = [{"PutRequest": {"Item": {"pk": {"S": key}}}} for key in keys]
            own.batch_write_item(RequestItems={table: items})
            written.extend(keys)

    def refuse() -> None:
        own = dynamodb(local)
        put = {"TableName": table, "ConditionExpression": "attribute_not_exists(pk)"}
        while not done.is_set():
            try:
                own.transact_write_items(
                    TransactItems=[{"Put": put | {"Item": {"pk": {"S": "taken"}}}}]
                )
            except ClientError as exc:
                failed[0] += exc.response["Error"]["Code"] != "TransactionCanceledException"

    workers = [threading.Thread(target=write) for _ in range(writers)]
    refusers = [threading.Thread(target=refuse) for _ in range(3)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for refuser in refusers:
            refuser.start()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        done.set()
        for refuser in refusers:
            refuser.join()
        sys.setswitchinterval(interval)
    present = {item["pk"]["S"] for item in _scan(client, table)}
    return set(written) - present, failed[0]


def _scan(client: Any, table: str) -> list[dict[str, Any]]:
    pages = client.get_paginator("scan").paginate(TableName=table)
    return [item for page in pages for item in page["Items"]]


def test_a_failed_transaction_undoes_no_other_requests_write(local_sqs: LocalSqs) -> None:
    # Given the local server (its start applies the lock)
    assert moto_dynamodb.is_applied()
    # When transactions fail beside 600 items written 10 at a time
    missing, failed = failing_transactions_beside_writes(local_sqs)
    # Then every written item is there, and no request failed but the refused transactions
    assert (missing, failed) == (set(), 0)


@pytest.mark.parametrize("range_key", [False, True], ids=["hash", "hash+range"])
def test_a_failed_transaction_puts_back_what_it_wrote_before_its_failing_item(
    local_sqs: LocalSqs, range_key: bool
) -> None:
    """Its rollback keeps a copy of the items it names, not of the table (a copy of the whole
    table per item made each transaction cost in proportion to the table)."""
    client = dynamodb(local_sqs)
    table = f"t-{uuid.uuid4().hex[:8]}"
    schema = [{"AttributeName": "pk", "KeyType": "HASH"}]
    attributes = [{"AttributeName": "pk", "AttributeType": "S"}]
    if range_key:
        schema.append({"AttributeName": "sk", "KeyType": "RANGE"})
        attributes.append({"AttributeName": "sk", "AttributeType": "S"})
    client.create_table(
        TableName=table,
        KeySchema=schema,
        AttributeDefinitions=attributes,
        BillingMode="PAY_PER_REQUEST",
    )

    def key(name: str) -> dict[str, Any]:
        return {"pk": {"S": name}} | ({"sk": {"S": "1"}} if range_key else {})

    for name in ("kept", "gone", "taken"):
        client.put_item(TableName=table, Item=key(name) | {"n": {"N": "1"}})
    # A put of a new item, an update and a delete, then a put whose condition fails
    with pytest.raises(ClientError, match="TransactionCanceled"):
        client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": key("new") | {"n": {"N": "1"}}}},
                {
                    "Update": {
                        "TableName": table,
                        "Key": key("kept"),
                        "UpdateExpression": "SET n = :n",
                        "ExpressionAttributeValues": {":n": {"N": "2"}},
                    }
                },
                {"Delete": {"TableName": table, "Key": key("gone")}},
                {
                    "Put": {
                        "TableName": table,
                        "Item": key("taken"),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )
    items = client.scan(TableName=table, ConsistentRead=True)["Items"]
    assert sorted((item["pk"]["S"], item["n"]["N"]) for item in items) == [
        ("gone", "1"),
        ("kept", "1"),
        ("taken", "1"),
    ]
    # And one that succeeds writes all of its items
    client.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": table, "Item": key("new") | {"n": {"N": "1"}}}},
            {"Delete": {"TableName": table, "Key": key("gone")}},
        ]
    )
    items = client.scan(TableName=table, ConsistentRead=True)["Items"]
    assert sorted(item["pk"]["S"] for item in items) == ["kept", "new", "taken"]
