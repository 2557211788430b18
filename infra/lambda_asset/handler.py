"""A sample Lambda consumer for infra/app.py: deployed as this folder, as is.

Put sqsbatch and its dependencies beside this file before `cdk deploy` (see docs/infra.md):

    pip install --target infra/lambda_asset --platform manylinux2014_x86_64 \
        --python-version 3.14 --only-binary=:all: sqsbatch

The settings (batch size, retries, DLQ...) arrive as SQSBATCH_* variables set by the CDK app.
"""

from sqsbatch import MessageBatch, lambda_handler


@lambda_handler()
def handler(batch: MessageBatch) -> None:
    for message in batch.messages:
        print(f"order {message.id} (attempt {message.attempts}): {message.body!r}")
        message.ack()
