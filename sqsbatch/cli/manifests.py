"""KEDA manifests for a consumer, derived from its settings (`sqsbatch keda`, docs/scaling.md).

Pure: no call to AWS or Kubernetes. `keda_manifests` returns the documents as plain dicts;
`to_yaml` writes them as YAML with a small emitter (block mappings and sequences, every string
double-quoted as JSON writes it, which YAML reads the same), so no YAML library is needed.

The figures, from the consumer's `ConsumerConfig` and two inputs only the operator knows:

- `queueLength`, the messages per replica KEDA aims at: one replica runs `max_concurrency`
  batches of up to `max_batch_size` messages, each batch `batch_seconds` long, so it handles
  `rate = max_concurrency * max_batch_size / batch_seconds` messages a second. A message that
  may wait `latency_seconds` before its handler starts allows `floor(rate * latency_seconds)`
  waiting messages per replica. A Deployment counts the messages in flight too
  (`scaleOnInFlight: "true"`, so a busy replica is not taken for an idle one): its target adds
  what a replica holds, `max_concurrency * max_batch_size`. A ScaledJob counts only the waiting
  ones (`scaleOnInFlight: "false"`, with KEDA's `accurate` strategy for such queues).
- `terminationGracePeriodSeconds`: the longest handler (`handler_timeout`), plus the long poll
  (20 s) a stopping poller ends first, plus `read_timeout_margin` for its last settle calls.
- The liveness probe: `sqsbatch health FILE --max-age 60`, the file `--health-file` touches.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqsbatch.config import ConsumerConfig
from sqsbatch.limits import SqsLimits

__all__ = [
    "HEALTH_FILE",
    "HEALTH_MAX_AGE_SECONDS",
    "KedaInputs",
    "grace_seconds",
    "keda_manifests",
    "queue_length",
    "to_yaml",
]

HEALTH_FILE = "/tmp/sqsbatch.health"
HEALTH_MAX_AGE_SECONDS = 60  # three long polls, as the ECS health check (sqsbatch/cdk/fargate.py)
KEDA_API = "keda.sh/v1alpha1"
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
# Words YAML 1.1 readers (PyYAML, Kubernetes' go-yaml) take for booleans or null: quoted.
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


@dataclass(frozen=True)
class KedaInputs:
    """What the settings cannot say: where the work runs and how fast a batch goes."""

    queue: str  # a name or URL (KEDA's `queueURL` takes either)
    handler: str  # MODULE:FUNCTION
    image: str
    region: str
    name: str
    latency_seconds: float = 60.0
    batch_seconds: float = 1.0
    min_replicas: int = 0
    max_replicas: int = 10
    async_handler: bool = False
    authentication: str | None = None  # a TriggerAuthentication's name


def rate(config: ConsumerConfig, batch_seconds: float) -> float:
    """Messages a second one replica handles."""
    return config.max_concurrency * config.max_batch_size / batch_seconds


def queue_length(config: ConsumerConfig, inputs: KedaInputs, *, in_flight: bool) -> int:
    """KEDA's target messages per replica (module docstring); at least 1."""
    waiting = math.floor(rate(config, inputs.batch_seconds) * inputs.latency_seconds)
    held = config.max_concurrency * config.max_batch_size if in_flight else 0
    return max(1, waiting + held)


def grace_seconds(config: ConsumerConfig) -> int:
    """The longest handler, the long poll and the last settle calls, in whole seconds."""
    limits = SqsLimits()
    total = config.handler_timeout + limits.max_wait_seconds + config.read_timeout_margin
    return math.ceil(total)


def keda_manifests(
    config: ConsumerConfig, inputs: KedaInputs, *, job: bool
) -> list[dict[str, Any]]:
    """A Deployment and its ScaledObject; with `job`, one ScaledJob of `--once` runs."""
    if job:
        return [_scaled_job(config, inputs)]
    return [_deployment(config, inputs), _scaled_object(config, inputs)]


def _trigger(config: ConsumerConfig, inputs: KedaInputs, *, in_flight: bool) -> dict[str, Any]:
    metadata = {
        "queueURL": inputs.queue,
        "queueLength": str(queue_length(config, inputs, in_flight=in_flight)),
        "awsRegion": inputs.region,
        "scaleOnInFlight": "true" if in_flight else "false",
    }
    trigger: dict[str, Any] = {"type": "aws-sqs-queue", "metadata": metadata}
    if inputs.authentication is not None:
        trigger["authenticationRef"] = {"name": inputs.authentication}
    return trigger


def _pod(config: ConsumerConfig, inputs: KedaInputs, *, once: bool) -> dict[str, Any]:
    command = ["sqsbatch", "consume", inputs.handler, "--queue", inputs.queue]
    command += ["--async"] if inputs.async_handler else []
    command += ["--once"] if once else []
    command += ["--health-file", HEALTH_FILE]
    probe = ["sqsbatch", "health", HEALTH_FILE, "--max-age", str(HEALTH_MAX_AGE_SECONDS)]
    container = {
        "name": "consumer",
        "image": inputs.image,
        "command": command,
        "env": [{"name": key, "value": value} for key, value in environment(config).items()],
        "livenessProbe": {
            "exec": {"command": probe},
            "initialDelaySeconds": 60,
            "periodSeconds": 30,
            "timeoutSeconds": 10,
            "failureThreshold": 3,
        },
    }
    pod: dict[str, Any] = {"terminationGracePeriodSeconds": grace_seconds(config)}
    if once:
        pod["restartPolicy"] = "Never"
    pod["containers"] = [container]
    return pod


def environment(config: ConsumerConfig) -> dict[str, str]:
    """`SQSBATCH_*` variables for the settings that differ from the defaults, so the pod's
    `ConsumerConfig()` equals `config` (a file in the image is overridden by them)."""
    values = config.model_dump(exclude_defaults=True)
    return {
        f"SQSBATCH_{name.upper()}": (str(value).lower() if isinstance(value, bool) else str(value))
        for name, value in values.items()
        if value is not None
    }


def _deployment(config: ConsumerConfig, inputs: KedaInputs) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": inputs.name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": inputs.name, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": _pod(config, inputs, once=False),
            },
        },
    }


def _scaled_object(config: ConsumerConfig, inputs: KedaInputs) -> dict[str, Any]:
    return {
        "apiVersion": KEDA_API,
        "kind": "ScaledObject",
        "metadata": {"name": inputs.name},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": inputs.name},
            "minReplicaCount": inputs.min_replicas,
            "maxReplicaCount": inputs.max_replicas,
            "pollingInterval": 30,
            "cooldownPeriod": 300,
            "triggers": [_trigger(config, inputs, in_flight=True)],
        },
    }


def _scaled_job(config: ConsumerConfig, inputs: KedaInputs) -> dict[str, Any]:
    return {
        "apiVersion": KEDA_API,
        "kind": "ScaledJob",
        "metadata": {"name": inputs.name},
        "spec": {
            "jobTargetRef": {"template": {"spec": _pod(config, inputs, once=True)}},
            "minReplicaCount": inputs.min_replicas,
            "maxReplicaCount": inputs.max_replicas,
            "pollingInterval": 30,
            "scalingStrategy": {"strategy": "accurate"},
            "triggers": [_trigger(config, inputs, in_flight=False)],
        },
    }


def to_yaml(documents: Sequence[Mapping[str, Any]]) -> str:
    """The documents as YAML, separated by `---`."""
    return "".join("---\n" + "".join(_block(doc, 0)) for doc in documents)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Mapping) and not value:
        return "{}"
    if isinstance(value, Sequence) and not value:
        return "[]"
    raise TypeError(f"no YAML for {type(value).__name__}")


def _key(key: str) -> str:
    plain = _PLAIN_KEY.match(key) and key.lower() not in _RESERVED
    return key if plain else json.dumps(key)


def _nested(value: Any) -> bool:
    return isinstance(value, Mapping | list | tuple) and bool(value)


def _block(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if _nested(item):
                lines.append(f"{pad}{_key(key)}:\n")
                lines += _block(item, indent + 2)
            else:
                lines.append(f"{pad}{_key(key)}: {_scalar(item)}\n")
        return lines
    for item in value:
        if _nested(item):
            inner = _block(item, indent + 2)
            lines.append(f"{pad}- {inner[0].lstrip()}")
            lines += inner[1:]
        else:
            lines.append(f"{pad}- {_scalar(item)}\n")
    return lines
