"""The idempotency guard's table (`[infra] idempotency = true`; docs/idempotency.md).

One table for the stack: on-demand, string partition key `pk`, DynamoDB's TTL on `ttl` (the
store writes it: completed keys are cleaned up once `idempotency_ttl` has passed), point-in-time
recovery, encrypted with the stack's key when it has one. Each consumer gets the table's name in
`SQSBATCH_IDEMPOTENCY_TABLE` and a grant of the calls `sqsbatch.idempotency.DynamoDBStore`
makes, and no other: it never scans, queries or reads one item alone.
"""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from sqsbatch.cdk.encryption import allow_key

__all__ = ["STORE_ACTIONS", "TABLE_ENVIRONMENT", "IdempotencyTable"]

STORE_ACTIONS = [
    "dynamodb:BatchGetItem",  # what blocks a claim
    "dynamodb:PutItem",  # claims and completions (alone, or inside TransactWriteItems)
    "dynamodb:UpdateItem",  # a heartbeat's extension of its own claims
    "dynamodb:DeleteItem",  # releasing its own claims
    "dynamodb:BatchWriteItem",  # completions, 25 at a time
]
"""What `DynamoDBStore` calls. TransactWriteItems is not an IAM action of its own: each item in a
transaction is allowed by its action (Put, Update, Delete) above."""
TABLE_KEY_ACTIONS = ["kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey"]
"""A customer-managed key's use by a DynamoDB reader and writer (DynamoDB calls KMS with the
caller's permissions)."""
TABLE_ENVIRONMENT = "SQSBATCH_IDEMPOTENCY_TABLE"


class IdempotencyTable(Construct):
    """The table, and `grant(role)` for each consumer that guards with it."""

    def __init__(
        self, scope: Construct, id: str, *, encryption_key: kms.IKey | None = None
    ) -> None:
        super().__init__(scope, id)
        self.encryption_key = encryption_key
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute="ttl",
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED
            if encryption_key is None
            else dynamodb.TableEncryption.CUSTOMER_MANAGED,
            encryption_key=encryption_key,
        )

    @property
    def environment(self) -> dict[str, str]:
        """What a consumer's environment needs to guard with this table."""
        return {TABLE_ENVIRONMENT: self.table.table_name}

    def grant(self, role: iam.IRole) -> None:
        """Let `role` make the store's calls on this table (and use its key), nothing more."""
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=STORE_ACTIONS, resources=[self.table.table_arn])
        )
        allow_key(role, self.encryption_key, TABLE_KEY_ACTIONS)
