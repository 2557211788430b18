"""CDK constructs for sqsbatch, derived from the same settings as the consumers.

Needs the `cdk` extra (`pip install 'sqsbatch[cdk]'`) and a `node` binary; `import sqsbatch`
alone never imports aws_cdk. Bring your own app:

    from sqsbatch import ConsumerConfig
    from sqsbatch.cdk import LambdaConsumer, QueueAlarms, QueueWithDlq

    config = ConsumerConfig.load("orders", "sqsbatch.toml")
    queues = QueueWithDlq(stack, "Orders", queue_name="orders", config=config)
    LambdaConsumer(stack, "OrdersLambda", queues=queues, asset_path="lambda_asset")
    QueueAlarms(stack, "OrdersAlarms", queue=queues.queue, queue_name="orders",
                oldest_message_seconds=3600)

or let `build_app("sqsbatch.toml")` deploy everything a file describes (see docs/infra.md).
"""

from sqsbatch.cdk.alarms import MetricsAlarms, QueueAlarms
from sqsbatch.cdk.dashboard import QueueDashboard
from sqsbatch.cdk.fargate import FargateConsumer, RedriveService, TaskSize, container_image
from sqsbatch.cdk.lambda_consumer import LambdaConsumer
from sqsbatch.cdk.queue_pair import DeadLetterQueue, QueueWithDlq, queue_arn
from sqsbatch.cdk.settings import DeploymentPlan, InfraSettings, load_plan
from sqsbatch.cdk.stack import SqsBatchStack, build_app

__all__ = [
    "DeadLetterQueue",
    "DeploymentPlan",
    "FargateConsumer",
    "InfraSettings",
    "LambdaConsumer",
    "MetricsAlarms",
    "QueueAlarms",
    "QueueDashboard",
    "QueueWithDlq",
    "RedriveService",
    "SqsBatchStack",
    "TaskSize",
    "build_app",
    "container_image",
    "load_plan",
    "queue_arn",
]
