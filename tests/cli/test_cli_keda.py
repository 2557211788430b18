"""`sqsbatch keda QUEUE` (issue 30 item 5): KEDA manifests from the consumer's settings.

The manifests are checked against KEDA's published schema: the field names of the ScaledObject
and ScaledJob CRDs and the aws-sqs-queue scaler's metadata keys, vendored from kedacore/keda
v2.20.2 in tests/cli/data/keda_v2.20.2_fields.json (source, tag and commit named there).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # PyYAML, pinned in constraints.txt (moto's)
from typer.testing import CliRunner

from sqsbatch.cli.app import app
from sqsbatch.cli.manifests import KedaInputs, grace_seconds, queue_length, to_yaml
from sqsbatch.config import ConsumerConfig
from tests.cli.test_cli_process import SCRIPT
from tests.support.cli_results import ok, one_line_error

ROOT = Path(__file__).resolve().parents[2]
FIELDS = json.loads((Path(__file__).parent / "data" / "keda_v2.20.2_fields.json").read_text())
EXAMPLE = ROOT / "examples" / "k8s" / "ecs-worker-orders.yaml"
EXAMPLE_ARGS = [
    *("keda", "ecs-worker-orders", "--config", str(ROOT / "examples" / "sqsbatch.toml")),
    *("--handler", "examples.ecs_worker:handle", "--async"),
    *("--image", "ghcr.io/example/sqsbatch-worker:1", "--region", "us-east-1"),
    *("--latency", "30", "--batch-seconds", "2"),
]
BASE = ["keda", "orders", "--handler", "app.jobs:run", "--image", "app:1", "--region", "eu-west-1"]
runner = CliRunner()


@pytest.fixture(autouse=True)
def no_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("SQSBATCH_") or key in ("AWS_REGION", "AWS_DEFAULT_REGION"):
            monkeypatch.delenv(key)


def config(**values: Any) -> ConsumerConfig:
    return ConsumerConfig(**values)


def inputs(**values: Any) -> KedaInputs:
    given: dict[str, Any] = {"queue": "q", "handler": "m:f", "image": "i", "region": "r"}
    return KedaInputs(**(given | {"name": "n"} | values))


def test_queue_length_is_what_a_replica_handles_within_the_latency() -> None:
    settings = config(max_concurrency=2, max_batch_size=30)
    # rate = 2 * 30 / 2 s = 30 msg/s; 30 s of it waiting, plus the 60 a busy replica holds.
    assert (
        queue_length(settings, inputs(latency_seconds=30, batch_seconds=2), in_flight=True) == 960
    )
    assert (
        queue_length(settings, inputs(latency_seconds=30, batch_seconds=2), in_flight=False) == 900
    )
    slow = inputs(latency_seconds=1, batch_seconds=600)
    assert queue_length(config(), slow, in_flight=False) == 1  # never 0


def test_the_grace_period_covers_the_handler_the_long_poll_and_the_settle() -> None:
    assert grace_seconds(config(handler_timeout=300)) == 300 + 20 + 10
    assert grace_seconds(config(handler_timeout=0.5, read_timeout_margin=2.2)) == 23


def documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


def fields(*names: str) -> set[str]:
    return {field for name in names for field in FIELDS[name]["properties"]}


def check_against_keda(objects: list[dict[str, Any]]) -> None:
    """Every field of the manifests is one KEDA v2.20.2 (and the PodSpec it embeds) defines."""
    for thing in objects:
        spec = thing["spec"]
        if thing["kind"] == "Deployment":
            pod = spec["template"]["spec"]
        elif thing["kind"] == "ScaledObject":
            assert thing["apiVersion"] == "keda.sh/v1alpha1"
            assert set(spec) <= fields("ScaledObject.spec")
            assert set(FIELDS["ScaledObject.spec"]["required"]) <= set(spec)
            assert set(spec["scaleTargetRef"]) <= fields("ScaledObject.spec.scaleTargetRef")
            check_triggers(spec["triggers"], "ScaledObject.spec.triggers[]")
            continue
        else:
            assert thing["kind"] == "ScaledJob"
            assert set(spec) <= fields("ScaledJob.spec")
            assert set(FIELDS["ScaledJob.spec"]["required"]) <= set(spec)
            assert set(spec["jobTargetRef"]) <= fields("ScaledJob.spec.jobTargetRef")
            strategy = spec["scalingStrategy"]["strategy"]
            assert strategy in FIELDS["ScaledJob.spec.scalingStrategy.strategy"]["enum"]
            check_triggers(spec["triggers"], "ScaledJob.spec.triggers[]")
            pod = spec["jobTargetRef"]["template"]["spec"]
        check_pod(pod)


def check_triggers(triggers: list[dict[str, Any]], schema: str) -> None:
    (trigger,) = triggers
    assert set(trigger) <= fields(schema) and trigger["type"] == "aws-sqs-queue"
    metadata = trigger["metadata"]
    assert set(metadata) <= fields("aws-sqs-queue.metadata")
    assert set(FIELDS["aws-sqs-queue.metadata"]["required"]) <= set(metadata)
    assert all(isinstance(value, str) for value in metadata.values())  # map[string]string


def check_pod(pod: dict[str, Any]) -> None:
    assert set(pod) <= fields("PodSpec")
    (container,) = pod["containers"]
    assert set(container) <= fields("Container")
    assert set(container["livenessProbe"]) <= fields("Probe")
    assert set(container["livenessProbe"]["exec"]) <= fields("ExecAction")
    assert all(set(variable) <= fields("EnvVar") for variable in container["env"])


def test_the_example_is_what_the_command_prints_and_keda_accepts_it() -> None:
    printed = ok(runner.invoke(app, EXAMPLE_ARGS)).stdout
    written = EXAMPLE.read_text()
    assert written.endswith(printed) and written.removesuffix(printed).startswith("# Generated")
    objects = documents(printed)
    assert [o["kind"] for o in objects] == ["Deployment", "ScaledObject"]
    check_against_keda(objects)
    settings = ConsumerConfig.load("ecs-worker-orders", ROOT / "examples" / "sqsbatch.toml")
    trigger = objects[1]["spec"]["triggers"][0]["metadata"]
    assert trigger["scaleOnInFlight"] == "true"
    assert trigger["queueLength"] == str(
        settings.max_concurrency * settings.max_batch_size * 30 // 2
        + settings.max_concurrency * settings.max_batch_size
    )
    pod = objects[0]["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == grace_seconds(settings)
    env = {v["name"]: v["value"] for v in pod["containers"][0]["env"]}
    assert env["SQSBATCH_MAX_BATCH_SIZE"] == str(settings.max_batch_size)


def test_a_job_counts_only_waiting_messages_and_runs_until_idle() -> None:
    objects = documents(ok(runner.invoke(app, [*BASE, "--job", "--max", "5"])).stdout)
    check_against_keda(objects)
    ((job),) = objects
    metadata = job["spec"]["triggers"][0]["metadata"]
    assert metadata == {
        "queueURL": "orders",
        "queueLength": "600",  # 1 * 10 messages a second, for 60 s
        "awsRegion": "eu-west-1",
        "scaleOnInFlight": "false",
    }
    pod = job["spec"]["jobTargetRef"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    command = pod["containers"][0]["command"]
    assert command[:3] == ["sqsbatch", "consume", "app.jobs:run"] and "--once" in command
    probe = pod["containers"][0]["livenessProbe"]["exec"]["command"]
    assert probe[:2] == ["sqsbatch", "health"] and probe[2] == command[-1]


def test_json_prints_one_kubernetes_list_of_the_same_objects() -> None:
    as_yaml = documents(ok(runner.invoke(app, BASE)).stdout)
    listed = json.loads(ok(runner.invoke(app, [*BASE, "--json"])).stdout)
    assert listed == {"apiVersion": "v1", "kind": "List", "items": as_yaml}


def test_the_region_comes_from_the_url_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = "https://sqs.ap-south-1.amazonaws.com/123456789012/orders"
    base = ["keda", url, "--handler", "a:b", "--image", "i"]
    (_, scaled) = documents(ok(runner.invoke(app, base)).stdout)
    assert scaled["spec"]["triggers"][0]["metadata"]["awsRegion"] == "ap-south-1"
    assert scaled["metadata"]["name"] == "sqsbatch-orders"
    monkeypatch.setenv("AWS_REGION", "sa-east-1")
    (_, scaled) = documents(ok(runner.invoke(app, ["keda", "q", *base[2:]])).stdout)
    assert scaled["spec"]["triggers"][0]["metadata"]["awsRegion"] == "sa-east-1"


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--latency", "0"], ["--latency", "must be > 0"]),
        (["--batch-seconds", "-1"], ["--batch-seconds", "must be > 0"]),
        (["--handler", "app.run"], ["'app.run' is not MODULE:FUNCTION"]),
        (["--min", "3", "--max", "2"], ["--min 3 --max 2 is invalid"]),
        (["--name", "Orders_Q"], ["'Orders_Q' is not a Kubernetes name"]),
    ],
)
def test_bad_input_is_one_line(extra: list[str], words: list[str]) -> None:
    one_line_error(runner.invoke(app, [*BASE, *extra]), 2, *words)


def test_no_region_and_a_bad_file_are_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["keda", "q", "--handler", "a:b", "--image", "i"])
    one_line_error(result, 2, "needs the queue's region")
    bad = tmp_path / "sqsbatch.toml"
    bad.write_text('[[queues.consumers]]\nqueue = "orders"\nmax_batch_size = 0\n')
    one_line_error(runner.invoke(app, [*BASE, "--config", str(bad)]), 1, "max_batch_size")


@pytest.fixture
def script_env() -> Iterator[dict[str, str]]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("SQSBATCH_")}
    yield keep | {"COLUMNS": "200"}


def test_the_console_script_prints_the_example(script_env: dict[str, str]) -> None:
    done = subprocess.run(
        [str(SCRIPT), *EXAMPLE_ARGS],
        env=script_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert EXAMPLE.read_text().endswith(done.stdout) and done.stderr == ""


@pytest.mark.parametrize(
    "value",
    [
        {"a": "yes", "b": "true", "c": "null", "d": "1.0", "e": "x: y", "f": "#x", "g": "- x"},
        {"quote": 'say "hi"\n\tbye', "unicode": "café ✓", "empty": "", "back": "a\\b"},
        {"n": 3, "f": 2.5, "t": True, "no": False, "On": {}, "l": [], "true": 1, "a b": 2, "Y": 0},
        {"nested": [[1, [2, 3]], {"k": [{"x": 1}, {}]}, "s"]},
    ],
)
def test_the_yaml_emitter_writes_what_a_yaml_parser_reads_back(value: dict[str, Any]) -> None:
    (read,) = documents(to_yaml([value]))
    assert read == value
