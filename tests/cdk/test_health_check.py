"""The Fargate consumer and the redrive daemon touch a health file that ECS checks."""

from __future__ import annotations

from sqsbatch.cdk.fargate import HEALTH_FILE, HEALTH_MAX_AGE_SECONDS
from tests.cdk.conftest import Synthesis, resources


def test_every_fargate_container_touches_a_health_file_that_its_health_check_reads(
    synthesis: Synthesis,
) -> None:
    tasks = resources(synthesis.template, "AWS::ECS::TaskDefinition").values()
    containers = [c for task in tasks for c in task["Properties"]["ContainerDefinitions"]]
    commands = {tuple(c["Command"][:2]) for c in containers}
    assert ("sqsbatch", "consume") in commands and ("redrive", "run") in commands, commands
    for container in containers:
        assert container["Command"][-2:] == ["--health-file", HEALTH_FILE]
        check = container["HealthCheck"]
        assert check["Command"] == [
            "CMD-SHELL",
            f"sqsbatch health {HEALTH_FILE} --max-age {HEALTH_MAX_AGE_SECONDS}",
        ]
        assert check["Retries"] >= 1 and check["StartPeriod"] >= HEALTH_MAX_AGE_SECONDS
