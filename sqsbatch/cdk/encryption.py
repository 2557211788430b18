"""The customer-managed KMS key of `[infra] kms`: the key, and who may use it for what.

With a key, every queue (SSE-KMS) and every log group of the stack is encrypted with it. SQS
encrypts with the caller's permissions: whoever sends to a queue needs `kms:GenerateDataKey` and
`kms:Decrypt` on its key, whoever receives needs `kms:Decrypt`. CloudWatch Logs encrypts as the
regional service principal, which the key policy allows for this account's log groups only.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

__all__ = ["QUEUE_RECEIVE", "QUEUE_SEND", "allow_key", "queue_key"]

QUEUE_SEND = ["kms:GenerateDataKey", "kms:Decrypt"]  # SendMessage to an SSE-KMS queue
QUEUE_RECEIVE = ["kms:Decrypt"]  # ReceiveMessage from it
# AWS's documented key policy statement for CloudWatch Logs (its wildcards, as published).
LOGS_ACTIONS = [
    "kms:Encrypt*",
    "kms:Decrypt*",
    "kms:ReEncrypt*",
    "kms:GenerateDataKey*",
    "kms:Describe*",
]


def queue_key(
    scope: Construct, id: str, setting: str | None, producer_services: Sequence[str] = ()
) -> kms.IKey | None:
    """`[infra] kms`: None (SQS-managed SSE), "create" (a new key) or an existing key's ARN.

    An existing key's policy is its owner's: it must let this account's IAM policies use the key
    (the default key policy does) and allow CloudWatch Logs (see docs/infra.md).
    """
    if setting is None:
        return None
    if setting == "create":
        return create_key(scope, id, producer_services=producer_services)
    return kms.Key.from_key_arn(scope, id, setting)


def create_key(scope: Construct, id: str, *, producer_services: Sequence[str] = ()) -> kms.Key:
    """A symmetric key with yearly rotation, kept when the stack is deleted (messages and logs
    written with it stay readable), usable by CloudWatch Logs for this account's log groups and
    by `producer_services` (SNS, EventBridge, ...) to send to this account's queues."""
    stack = Stack.of(scope)
    key = kms.Key(
        scope,
        id,
        description=f"sqsbatch: queues and log groups of the stack {stack.stack_name}",
        enable_key_rotation=True,
    )
    log_groups = stack.format_arn(
        service="logs",
        resource="log-group",
        resource_name="*",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
            actions=LOGS_ACTIONS,
            resources=["*"],  # in a key policy, "*" is this key
            conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn": log_groups}},
        )
    )
    if producer_services:
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal(service) for service in producer_services],
                actions=QUEUE_SEND,
                resources=["*"],
                # Only on behalf of this account's topics, rules, buckets: no confused deputy.
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
            )
        )
    return key


def allow_key(role: iam.IRole, key: kms.IKey | None, actions: Sequence[str]) -> None:
    """Let `role` use `key` for `actions` (nothing without a key)."""
    if key is not None:
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(actions), resources=[key.key_arn])
        )
