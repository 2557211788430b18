"""sqsbatch: Cloudflare Queues' consumer model on Amazon SQS.

Batches of up to 100 messages by size or timeout, per-message `ack()`/`retry()`, `ack_all()`/
`retry_all()` with first-call-wins precedence, `max_retries` with dead-letter queues, delays on
send and on retry; the same handler in a long-running poller and in AWS Lambda.
"""

from sqsbatch.async_consumer import AsyncBatchHandler, AsyncConsumer
from sqsbatch.async_producer import AsyncProducer
from sqsbatch.backoff import exponential_backoff
from sqsbatch.config import ConsumerConfig, ProducerConfig
from sqsbatch.consumer import BatchHandler, Consumer
from sqsbatch.errors import (
    ConfigError,
    CredentialsError,
    EventError,
    FifoError,
    MessageError,
    Overloaded,
    QueueNotFound,
    SendError,
    SqsBatchError,
    SqsError,
)
from sqsbatch.lambda_adapter import LambdaContext, lambda_handler
from sqsbatch.lifecycle import ConsumerStats
from sqsbatch.limits import SQS_LIMITS, SqsLimits
from sqsbatch.message import Message, MessageBatch
from sqsbatch.pausing import pause_queue, resume_queue
from sqsbatch.producer import MessageSendRequest, Producer
from sqsbatch.queues import create_queue

__all__ = [
    "SQS_LIMITS",
    "AsyncBatchHandler",
    "AsyncConsumer",
    "AsyncProducer",
    "BatchHandler",
    "ConfigError",
    "Consumer",
    "ConsumerConfig",
    "ConsumerStats",
    "CredentialsError",
    "EventError",
    "FifoError",
    "LambdaContext",
    "Message",
    "MessageBatch",
    "MessageError",
    "MessageSendRequest",
    "Overloaded",
    "Producer",
    "ProducerConfig",
    "QueueNotFound",
    "SendError",
    "SqsBatchError",
    "SqsError",
    "SqsLimits",
    "create_queue",
    "exponential_backoff",
    "lambda_handler",
    "pause_queue",
    "resume_queue",
]
__version__ = "0.1.0"
