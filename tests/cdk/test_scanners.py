"""The scanners people run in CI pass on the example app's template: checkov and cfn-lint.

Every finding is fixed or acknowledged next to its resource, with its reason, as CloudFormation
`Metadata` (`checkov: {skip: [{id, comment}]}`, which checkov reports as skipped). Offline:
checkov runs with `--skip-download`, no API key and BC_SKIP_MAPPING (observed with strace: no
socket other than AF_UNIX is opened); cfn-lint reads the specs it ships with.

checkov pins a boto3 that sqsbatch's pins exclude, so it lives in its own venv, `.venv-scan`,
which `make test` installs from constraints-scan.txt. Without it these tests are skipped, unless
SCANNERS_REQUIRED=1 (as `make test` sets) turns the skip into a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import lint_file

from sqsbatch.cdk.acknowledgements import MIN_REASON_LENGTH
from tests.cdk.conftest import REPO, Synthesis, resources

CHECKOV = REPO / ".venv-scan" / "bin" / "checkov"
# Findings that are right not to fix (docs/infra.md gives the reasons): (check, resource type).
ACKNOWLEDGED = {
    ("CKV_AWS_116", "AWS::Lambda::Function"),  # a function DLQ, which SQS event sources never use
    ("CKV_AWS_117", "AWS::Lambda::Function"),  # a VPC for a function that talks only to AWS APIs
    ("CKV_AWS_173", "AWS::Lambda::Function"),  # a customer key for non-secret settings
}


def offline_environment() -> dict[str, str]:
    """The caller's environment without any checkov/Prisma Cloud setting, plus offline flags."""
    prefixes = ("BC_", "PRISMA_", "CKV_", "CHECKOV_")
    env = {key: value for key, value in os.environ.items() if not key.startswith(prefixes)}
    return env | {"BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"}


def template_path(synthesis: Synthesis) -> Path:
    return synthesis.outdir / f"{synthesis.stack_name}.template.json"


def run_checkov(synthesis: Synthesis) -> dict[str, Any]:
    """checkov's JSON report on the template, as CI would run it (but offline)."""
    if not CHECKOV.exists():
        message = f"{CHECKOV} is missing: `make test` (or `make scanners`) installs it"
        if os.environ.get("SCANNERS_REQUIRED") == "1":
            pytest.fail(message)
        pytest.skip(message)
    command = [
        str(CHECKOV),
        *("-f", str(template_path(synthesis))),
        *("--framework", "cloudformation"),
        "--skip-download",
        *("-o", "json"),
    ]
    result = subprocess.run(
        command, env=offline_environment(), capture_output=True, text=True, check=False
    )
    assert result.returncode in (0, 1), result.stderr  # 1: some check failed (asserted below)
    report: dict[str, Any] = json.loads(result.stdout)
    return report


@pytest.fixture(scope="module")
def checkov(synthesis: Synthesis) -> Iterator[dict[str, Any]]:
    yield run_checkov(synthesis)


def assert_only_acknowledged(report: dict[str, Any]) -> None:
    """No failed check, and every skipped one acknowledged with its reason."""
    results = report["results"]
    failed = sorted((f["check_id"], f["resource"]) for f in results["failed_checks"])
    assert failed == []
    assert report["summary"]["parsing_errors"] == 0
    skipped = {(s["check_id"], s["resource"].split(".")[0]) for s in results["skipped_checks"]}
    assert skipped == ACKNOWLEDGED
    for skip in results["skipped_checks"]:
        assert len(skip["check_result"]["suppress_comment"]) >= MIN_REASON_LENGTH, skip


def test_checkov_finds_nothing_that_is_not_acknowledged(checkov: dict[str, Any]) -> None:
    assert_only_acknowledged(checkov)


def test_checkov_checked_the_encryption_and_the_concurrency(
    synthesis: Synthesis, checkov: dict[str, Any]
) -> None:
    """The pass means something: the checks that failed before the KMS key and the reserved
    concurrency ran on every queue, log group and function, and passed."""
    passed = {(p["check_id"], p["resource"]) for p in checkov["results"]["passed_checks"]}
    template = synthesis.template
    for check, kind in [
        ("CKV_AWS_27", "AWS::SQS::Queue"),
        ("CKV_AWS_158", "AWS::Logs::LogGroup"),
        ("CKV_AWS_115", "AWS::Lambda::Function"),
    ]:
        found = resources(template, kind)
        assert found, kind
        for logical_id in found:
            assert (check, f"{kind}.{logical_id}") in passed


def test_cfn_lint_finds_nothing(synthesis: Synthesis) -> None:
    matches = lint_file(template_path(synthesis))
    assert [str(match) for match in matches] == []


def test_the_scanners_pass_with_metrics_on(metrics_synthesis: Synthesis) -> None:
    """The dashboards and the alarms on the consumers' metrics add no finding (cdk-nag ran in
    the fixture: `app.synth()` raises on a failing AwsSolutions check)."""
    assert [str(match) for match in lint_file(template_path(metrics_synthesis))] == []
    assert_only_acknowledged(run_checkov(metrics_synthesis))
