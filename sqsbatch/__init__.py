"""sqsbatch: Cloudflare Queues' consumer model on Amazon SQS.

Batches of up to 100 messages by size or timeout, per-message `ack()`/`retry()`, `ack_all()`/
`retry_all()` with first-call-wins precedence, `max_retries` with dead-letter queues, delays on
send and on retry; the same handler in a long-running poller and in AWS Lambda.
"""

from sqsbatch._async.consumer import AsyncConsumer
from sqsbatch._async.flavour import AsyncBatchHandler
from sqsbatch._async.producer import AsyncProducer
from sqsbatch._core.message import Message, MessageBatch
from sqsbatch._core.sending import MessageSendRequest
from sqsbatch._shell.lifecycle import ConsumerStats
from sqsbatch._sync.consumer import Consumer
from sqsbatch._sync.flavour import BatchHandler
from sqsbatch._sync.producer import Producer
from sqsbatch._version import __version__ as __version__
from sqsbatch.backoff import exponential_backoff
from sqsbatch.config import ConsumerConfig, ProducerConfig
from sqsbatch.errors import (
    ConfigError,
    CredentialsError,
    EventError,
    FifoError,
    MessageError,
    Overloaded,
    PayloadError,
    PayloadMissing,
    QueueNotFound,
    SendError,
    SqsBatchError,
    SqsError,
)
from sqsbatch.lambda_adapter import LambdaContext, lambda_handler
from sqsbatch.limits import SQS_LIMITS, SqsLimits
from sqsbatch.pausing import pause_queue, resume_queue
from sqsbatch.payloads import S3Payloads
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
    "PayloadError",
    "PayloadMissing",
    "Producer",
    "ProducerConfig",
    "QueueNotFound",
    "S3Payloads",
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
