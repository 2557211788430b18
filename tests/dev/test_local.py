"""LocalSqs: the embedded moto server of the tests, the demo and `sqsbatch dev`."""

from __future__ import annotations

import socket

import pytest

from sqsbatch import SqsBatchError
from sqsbatch.dev.server import LocalSqs


def test_serves_sqs_on_a_port_it_picks() -> None:
    with LocalSqs() as server:
        assert server.endpoint_url.startswith("http://127.0.0.1:")
        client = server.client()
        url = client.create_queue(QueueName="hello")["QueueUrl"]
        client.send_message(QueueUrl=url, MessageBody="hi")
        assert client.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "hi"
        assert server.environment()["AWS_ENDPOINT_URL_SQS"] == server.endpoint_url


def test_refuses_a_taken_port_instead_of_hanging() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SqsBatchError, match=f"cannot serve a local SQS on 127.0.0.1:{port}"):
            LocalSqs(port=port).start()
