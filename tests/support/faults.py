"""Fault injection around a REAL client: calls pass through to moto unless a fault is armed.

Used only for error paths that a healthy local SQS cannot produce (throttling, network errors,
a crash between two calls). Everything else reaches the server untouched.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError, EndpointConnectionError


def throttled(op: str) -> Exception:
    error: Exception = ClientError(
        {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, op
    )
    return error


def unreachable(op: str) -> Exception:
    error: Exception = EndpointConnectionError(endpoint_url="http://127.0.0.1:1")
    return error


class ClientProxy:
    """Proxies a boto3 client: each call of an operation goes through `_call` (a subclass's
    hook around it); its other attributes read through."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, op: str) -> Any:
        target = getattr(self._client, op)
        if not callable(target):
            return target

        def call(**params: Any) -> Any:
            return self._call(op, target, params)

        return call

    def _call(self, op: str, target: Callable[..., Any], params: dict[str, Any]) -> Any:
        return target(**params)


class Faulty(ClientProxy):
    """Proxies `client`; `fail(op, times, error)` makes the next `times` calls of `op` raise."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self._faults: dict[str, list[Callable[[str], Exception]]] = {}
        self._lock = threading.Lock()
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def fail(self, op: str, times: int, error: Callable[[str], Exception] = throttled) -> None:
        with self._lock:
            self._faults.setdefault(op, []).extend([error] * times)

    def _call(self, op: str, target: Callable[..., Any], params: dict[str, Any]) -> Any:
        with self._lock:
            self.calls.append((op, params))
            pending = self._faults.get(op)
            error = pending.pop(0) if pending else None
        if error is not None:
            raise error(op)
        return target(**params)
