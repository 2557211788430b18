"""`keda QUEUE --handler MODULE:FUNCTION --image IMAGE`: KEDA manifests for a consumer.

Prints a Deployment running `sqsbatch consume` and the KEDA `ScaledObject` that scales it on
the queue (with `--job`, one `ScaledJob` of `consume --once` runs instead), derived from the
queue's consumer settings (`ConsumerConfig.load`: keywords of the file, `SQSBATCH_*`): the
formulas are in `sqsbatch.cli.manifests` and docs/scaling.md. YAML, or with `--json` a
Kubernetes `List` (kubectl applies either). No call to AWS or Kubernetes.
"""

from __future__ import annotations

import os
import re
from typing import Annotated
from urllib.parse import urlsplit

import typer

from sqsbatch.cli.common import connection, print_json, wants_json
from sqsbatch.cli.manifests import KedaInputs, keda_manifests, to_yaml
from sqsbatch.config import ConsumerConfig, queue_of

__all__ = ["app"]

app = typer.Typer()

_HANDLER = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_REGION_IN_URL = re.compile(r"^sqs\.([a-z0-9-]+)\.amazonaws\.com")


Handler = Annotated[
    str, typer.Option(metavar="MODULE:FUNCTION", help="The batch handler the pods run.")
]
Image = Annotated[str, typer.Option(help="The container image, with sqsbatch and the handler.")]
Latency = Annotated[
    float, typer.Option(metavar="SECONDS", help="How long a message may wait to start.")
]
BatchSeconds = Annotated[
    float, typer.Option(metavar="SECONDS", help="How long the handler takes on one batch.")
]
MinReplicas = Annotated[int, typer.Option("--min", help="Fewest replicas (0: none idle).")]
MaxReplicas = Annotated[int, typer.Option("--max", help="Most replicas (or jobs).")]
Job = Annotated[bool, typer.Option("--job", help="A ScaledJob of `consume --once` runs.")]
Async = Annotated[
    bool, typer.Option("--async", help="The handler is an `async def` (AsyncConsumer).")
]
Name = Annotated[str | None, typer.Option(help="The objects' name (default: sqsbatch-QUEUE).")]
Auth = Annotated[
    str | None, typer.Option(metavar="NAME", help="A TriggerAuthentication for the scaler.")
]
ConfigFile = Annotated[
    str | None, typer.Option(metavar="FILE", help="The sqsbatch.toml (default as `consume`).")
]


@app.command()
def keda(  # noqa: PLR0917 - typer options are parameters
    ctx: typer.Context,
    queue: Annotated[str, typer.Argument(help="Queue name or URL (KEDA's queueURL).")],
    handler: Handler,
    image: Image,
    latency: Latency = 60.0,
    batch_seconds: BatchSeconds = 1.0,
    min_replicas: MinReplicas = 0,
    max_replicas: MaxReplicas = 10,
    job: Job = False,
    async_handler: Async = False,
    name: Name = None,
    auth: Auth = None,
    config: ConfigFile = None,
) -> None:
    """Print KEDA manifests (a Deployment and its ScaledObject, or --job a ScaledJob) for QUEUE's
    consumer: queueLength from --latency and --batch-seconds, scaleOnInFlight, a termination
    grace period covering the longest handler and the long poll, `sqsbatch health` as liveness
    probe."""
    _check(handler, latency, batch_seconds, min_replicas, max_replicas)
    inputs = KedaInputs(
        queue=queue,
        handler=handler,
        image=image,
        region=_region(ctx, queue),
        name=_name(queue, name),
        latency_seconds=latency,
        batch_seconds=batch_seconds,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        async_handler=async_handler,
        authentication=auth,
    )
    documents = keda_manifests(ConsumerConfig.load(queue, config), inputs, job=job)
    if wants_json(ctx):
        print_json({"apiVersion": "v1", "kind": "List", "items": documents})
        return
    typer.echo(to_yaml(documents), nl=False)


def _check(handler: str, latency: float, batch: float, low: int, high: int) -> None:
    """The options no type checks: one line naming the first that is wrong."""
    for value, option in ((latency, "--latency"), (batch, "--batch-seconds")):
        if not value > 0:
            raise typer.BadParameter(f"{value:g} is invalid: must be > 0", param_hint=option)
    if not _HANDLER.match(handler):
        raise typer.BadParameter(f"{handler!r} is not MODULE:FUNCTION", param_hint="--handler")
    if not 0 <= low <= high or high < 1:
        raise typer.BadParameter(
            f"--min {low} --max {high} is invalid (accepted: 0 <= --min <= --max, --max >= 1)",
            param_hint="--min/--max",
        )


def _region(ctx: typer.Context, queue: str) -> str:
    """`--region`, else the queue URL's, else `AWS_REGION` / `AWS_DEFAULT_REGION`."""
    found = _REGION_IN_URL.match(urlsplit(queue).hostname or "")
    region = (
        connection(ctx).region
        or (found.group(1) if found else None)
        or os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
    )
    if not region:
        raise typer.BadParameter(
            "KEDA's scaler needs the queue's region: give --region, a queue URL, or AWS_REGION",
            param_hint="--region",
        )
    return region


def _name(queue: str, given: str | None) -> str:
    name = given or "sqsbatch-" + re.sub(r"[^a-z0-9-]+", "-", queue_of(queue).lower()).strip("-")
    if not _NAME.match(name):
        raise typer.BadParameter(
            f"{name!r} is not a Kubernetes name (a-z, 0-9 and -, at most 63, starting and "
            "ending with a letter or digit)",
            param_hint="--name",
        )
    return name
