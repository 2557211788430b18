"""Scanner findings that are right not to fix, acknowledged next to the resource, with a reason.

cdk-nag's are acknowledged with `Validations.of(x).acknowledge(...)` and land in the cloud
assembly's metadata; checkov's are written into the template, as the resource's CloudFormation
`Metadata` (`checkov: {skip: [{id, comment}]}`), which checkov reads and reports as skipped with the
comment. Either way a reviewer finds the reason beside the resource, and docs/infra.md lists them.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnResource
from constructs import Construct

__all__ = ["skip_checkov"]

MIN_REASON_LENGTH = 40  # a reason says why, not just "not needed"


def skip_checkov(resource: Construct, check_id: str, reason: str) -> None:
    """Acknowledge checkov's `check_id` on `resource` (an L1, or an L2 whose default child is)."""
    cfn = resource if isinstance(resource, CfnResource) else resource.node.default_child
    if not isinstance(cfn, CfnResource):
        raise TypeError(f"{resource.node.path} is not a CloudFormation resource")
    if len(reason) < MIN_REASON_LENGTH:
        raise ValueError(f"the reason for skipping {check_id} is too short to say why")
    current: dict[str, Any] = cfn.get_metadata("checkov") or {}
    skips = [entry for entry in current.get("skip", []) if entry["id"] != check_id]
    cfn.add_metadata("checkov", {"skip": [*skips, {"id": check_id, "comment": reason}]})
