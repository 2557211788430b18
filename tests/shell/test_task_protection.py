"""`TaskProtection` against a fake ECS agent on 127.0.0.1 (http.server in a thread, recording
every call): busy and idle, renewal, a 500, a failure answer, a hanging agent, and no agent."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from sqsbatch._shell.task_protection import TaskProtection
from tests.support.waiting import wait_for


class FakeAgent:
    """Answers `PUT /task-protection/v1/state` as the ECS agent does, or as told: `status` and
    `body` for the next answers; `hang` held until `release` is set."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.status = 200
        self.body: dict[str, Any] | None = None
        self.hang = False
        self.release = threading.Event()
        agent = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                sent = json.loads(self.rfile.read(length))
                agent.calls.append((self.command, self.path, sent))
                if agent.hang:
                    agent.release.wait(60)
                    return
                answer = agent.body or {
                    "protection": {
                        "ExpirationDate": "2026-11-27T04:00:00Z",
                        "ProtectionEnabled": sent["ProtectionEnabled"],
                        "TaskArn": "arn:aws:ecs:us-east-1:123456789012:task/c/1",
                    }
                }
                data = json.dumps(answer).encode()
                self.send_response(agent.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.uri = f"http://127.0.0.1:{self.server.server_address[1]}/api/task-id"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def bodies(self) -> list[dict[str, Any]]:
        return [body for _, _, body in self.calls]


@pytest.fixture
def agent() -> Iterator[FakeAgent]:
    found = FakeAgent()
    yield found
    found.release.set()
    found.server.shutdown()
    found.server.server_close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


TAKE = {"ProtectionEnabled": True, "ExpiresInMinutes": 16}
DROP = {"ProtectionEnabled": False}


def protection(agent: FakeAgent, clock: Clock, **extra: Any) -> TaskProtection:
    return TaskProtection(expires_minutes=16, agent_uri=agent.uri, clock=clock, **extra)


def test_a_busy_period_is_one_take_and_one_drop(agent: FakeAgent) -> None:
    clock = Clock()
    guard = protection(agent, clock)
    guard.update(False)
    guard.update(True)
    assert guard.wait(60)
    for _ in range(50):  # batch after batch: no call per batch
        guard.update(True)
    guard.update(False)
    assert guard.wait(60)
    assert agent.calls == [
        ("PUT", "/api/task-id/task-protection/v1/state", TAKE),
        ("PUT", "/api/task-id/task-protection/v1/state", DROP),
    ]
    assert guard.calls == 2 and guard.failures == 0
    guard.close()


def test_a_long_handler_has_its_protection_renewed(agent: FakeAgent) -> None:
    clock = Clock()
    guard = protection(agent, clock)
    guard.update(True)
    assert guard.wait(60)
    clock.now += 8 * 60  # half the expiry, still busy
    guard.update(True)
    assert guard.wait(60)
    guard.close()
    assert agent.bodies() == [TAKE, TAKE, DROP]


def test_a_500_is_logged_swallowed_and_tried_again(
    agent: FakeAgent, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    guard = protection(agent, clock, retry_seconds=30)
    agent.status, agent.body = 500, {"error": {"Code": "ServerException", "Message": "boom"}}
    with caplog.at_level(logging.WARNING, logger="sqsbatch"):
        guard.update(True)
        assert guard.wait(60)
    assert caplog.messages == ["scale-in protection: could not take it: HTTP 500 error: boom"]
    guard.update(True)
    assert guard.wait(60) and len(agent.calls) == 1  # not before retry_seconds
    agent.status, agent.body = 200, None
    clock.now += 30
    guard.update(True)
    assert guard.wait(60)
    assert agent.bodies() == [TAKE, TAKE] and guard.failures == 1
    guard.close()


def test_a_failure_answer_is_a_failure(agent: FakeAgent, caplog: pytest.LogCaptureFixture) -> None:
    agent.body = {"failure": {"Arn": "arn:task", "Reason": "TASK_NOT_VALID", "Detail": None}}
    guard = protection(agent, Clock())
    with caplog.at_level(logging.WARNING, logger="sqsbatch"):
        guard.update(True)
        assert guard.wait(60)
    assert caplog.messages == ["scale-in protection: could not take it: failure: TASK_NOT_VALID"]
    assert guard.failures == 1
    guard.close()


def test_a_hanging_agent_never_holds_the_caller(
    agent: FakeAgent, caplog: pytest.LogCaptureFixture
) -> None:
    agent.hang = True
    clock = Clock()
    guard = protection(agent, clock, timeout=3.0)
    with caplog.at_level(logging.WARNING, logger="sqsbatch"):
        guard.update(True)
        wait_for(lambda: agent.calls, "the take reached the agent")
        for busy in (False, True, False) * 100:  # the caller goes on while the agent hangs
            guard.update(busy)
        assert guard.failures == 0  # every update returned with the take still out
        assert len(agent.calls) == 1  # and nothing piled up behind it
        wait_for(lambda: guard.failures == 1, "the call timed out")
    assert caplog.messages[0].startswith("scale-in protection: could not take it: no answer (")
    agent.hang = False
    agent.release.set()
    clock.now += 30
    guard.update(False)  # the take may have landed: it is dropped
    assert guard.wait(60)
    assert agent.bodies()[-1] == DROP
    guard.close()


@pytest.mark.parametrize("how", ["no agent", "turned off"])
def test_without_an_agent_or_turned_off_nothing_is_called(
    agent: FakeAgent, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    monkeypatch.delenv("ECS_AGENT_URI", raising=False)
    if how == "no agent":
        guard = TaskProtection(expires_minutes=16)
    else:
        monkeypatch.setenv("ECS_AGENT_URI", agent.uri)
        guard = TaskProtection(expires_minutes=16, enabled=False)
    guard.update(True)
    guard.update(False)
    guard.close()
    assert not guard.active and guard.calls == 0 and agent.calls == []


def test_the_agent_uri_comes_from_the_environment(
    agent: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ECS_AGENT_URI", agent.uri)
    guard = TaskProtection(expires_minutes=16, clock=Clock())
    guard.update(True)
    guard.close()
    assert agent.bodies() == [TAKE, DROP]
