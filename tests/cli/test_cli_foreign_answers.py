"""An endpoint that answers, but not as SQS: a proxy's or a captive portal's HTML page, an XML
error. The answer is summarised in one line (status, error code or page title, at most 200
characters), never dumped, and a page with a 200 status is not read as an empty answer. On the
command line, and on the clients the pollers make for themselves (sync and async)."""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from typer.testing import CliRunner

from sqsbatch._shell.botocore import SUMMARY_CHARS, not_sqs, translate
from sqsbatch._sync.flavour import default_client as sync_default_client
from sqsbatch.cli.app import app
from sqsbatch.errors import SqsError
from tests.support.cli_results import one_line_error

runner = CliRunner()

PAGE = b"<html><head><title>Captive portal</title></head><body>" + b"log in " * 500 + b"</body>"
GATEWAY = b"<html><head><title>502 Bad Gateway</title></head><body><h1>502</h1></body></html>"
XML = (
    b'<?xml version="1.0"?><Error><Code>AccessDenied</Code><Message>Blocked by the proxy'
    + b" policy" * 300
    + b"</Message></Error>"
)
ANSWERS = {
    "portal": (200, "text/html", PAGE, "HTTP 200, an HTML page titled 'Captive portal'"),
    "gateway": (502, "text/html", GATEWAY, "HTTP 502, an HTML page titled '502 Bad Gateway'"),
    "xml": (403, "application/xml", XML, "HTTP 403, an XML error AccessDenied: Blocked by"),
}


@pytest.fixture
def foreign(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """An HTTP server that answers every request with one of `ANSWERS`: (its URL, the summary)."""
    status, content_type, body, says = ANSWERS[request.param]

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", says
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("foreign", list(ANSWERS), indirect=True)
@pytest.mark.parametrize("command", [["queues"], ["send", "q", "hello"], ["stats", "q"]])
def test_a_foreign_answer_is_one_summarised_line(
    foreign: tuple[str, str], command: list[str]
) -> None:
    url, says = foreign
    result = runner.invoke(app, ["--endpoint-url", url, "--region", "us-east-1", *command])
    line = one_line_error(result, 1, says)
    assert len(line) <= len("error: ") + SUMMARY_CHARS + len(" (q)")
    assert "log in log in" not in line  # the page's text is not dumped


@pytest.mark.parametrize("foreign", ["portal", "xml"], indirect=True)
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_pollers_own_clients_refuse_a_foreign_answer_in_one_line(
    foreign: tuple[str, str], kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, says = foreign
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", url)
    with pytest.raises(SqsError, match=says) as caught:
        if kind == "sync":
            sync_default_client().list_queues()
        else:

            async def call() -> None:
                from sqsbatch._async.door import AsyncSqs  # noqa: PLC0415
                from sqsbatch._async.flavour import opened  # noqa: PLC0415

                sqs = AsyncSqs(None)
                async with opened(sqs, 10):
                    await sqs.call("list_queues", {})

            asyncio.run(call())
    assert len(str(caught.value)) <= SUMMARY_CHARS


def test_a_client_error_carrying_markup_is_summarised_for_any_client() -> None:
    response: Any = {
        "Error": {"Code": "403", "Message": XML.decode()},
        "ResponseMetadata": {"HTTPStatusCode": 403},
    }
    error = translate(ClientError(response, "ListQueues"), queue="q")
    assert isinstance(error, SqsError)
    assert str(error).startswith("the endpoint did not answer as SQS does: HTTP 403")
    assert len(str(error)) <= SUMMARY_CHARS + len(" (q)") and error.code == "AccessDenied"


def test_json_and_plain_text_are_not_markup() -> None:
    assert not_sqs(200, b'{"QueueUrls": []}') is None
    assert not_sqs(500, "Internal Server Error") is None
