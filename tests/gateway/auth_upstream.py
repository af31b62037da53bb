"""An upstream that binds each MCP session to the principal that created it, for the
gateway's threat-model tests (tests/gateway/test_threat_model.py).

:class:`SessionAuth` is an ASGI middleware in front of the harness server
(:func:`fsm.wire.server.build_app`). It does what the MCP specification advises a
server with authorization to do:

* every request needs ``Authorization: Bearer <token>`` with a known token: a missing,
  malformed or unknown one gets ``401`` (``WWW-Authenticate: Bearer ...``, the body the
  mcp SDK's bearer middleware sends) and reaches nothing;
* tokens map to principals (``{"tok-a": "alice", "tok-a2": "alice", "tok-b": "bob"}``): a
  session belongs to the principal whose token made its ``initialize``, so a refreshed
  token of the same principal keeps working;
* a request carrying a session id owned by another principal gets ``403`` (mode
  ``"403"``) or, as servers that hide other users' sessions answer, ``404`` with the SDK's
  own ``Session not found`` JSON-RPC body (mode ``"404"``), or, as a server that refuses
  in its protocol layer answers, ``200`` with a JSON-RPC error for the message's id
  (mode ``"rpc"``, the session's id on it as the mcp SDK's transport puts it on every
  response of a session), and reaches nothing.

With ``cors``, :func:`running_auth_server` puts Starlette's ``CORSMiddleware`` in front of
it, the layout the mcp SDK documents for browser clients: a CORS preflight (``OPTIONS``)
is answered ``200`` there, before any check of token or session.

Everything that reached the inner server is recorded (:attr:`SessionAuth.passed`: HTTP
method, session, principal, JSON body, ``Last-Event-ID``), and every refusal
(:attr:`SessionAuth.refused`), so a test can prove that a request never got through.
:func:`running_auth_server` serves it all with uvicorn on 127.0.0.1. asyncio only.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fsm.wire.server import ServerController, build_app
from fsm.wire.serving import serving, whole_body

__all__ = [
    "FORBIDDEN_BODY",
    "FOREIGN_CODE",
    "SESSION_NOT_FOUND_BODY",
    "TOKENS",
    "UNAUTHORIZED_BODY",
    "AuthServer",
    "Mode",
    "Passed",
    "Refusal",
    "SessionAuth",
    "refused_in_rpc",
    "running_auth_server",
]

Mode = Literal["403", "404", "rpc"]
"""How a session of another principal is refused: ``403``, ``404`` as if unknown, or
``200`` with a JSON-RPC error (``rpc``)."""

TOKENS: Mapping[str, str] = {"tok-a": "alice", "tok-a2": "alice", "tok-b": "bob"}
"""Bearer tokens and their principals (``tok-a2``: alice's refreshed token)."""

UNAUTHORIZED_BODY: dict[str, str] = {
    "error": "invalid_token",
    "error_description": "Authentication required",
}
"""The body of a ``401`` (what the mcp SDK's bearer middleware sends)."""

FORBIDDEN_BODY: dict[str, str] = {
    "error": "forbidden",
    "error_description": "The session belongs to another principal",
}
"""The body of a ``403`` (mode ``"403"``)."""

SESSION_NOT_FOUND_BODY: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {"code": -32600, "message": "Session not found"},
}
"""The body of a ``404`` (mode ``"404"``): the mcp SDK's own for an unknown session."""

FOREIGN_CODE = -32001
"""The JSON-RPC error code of a refusal in mode ``"rpc"``."""


def refused_in_rpc(message: Any) -> dict[str, Any]:
    """The body of a refusal in mode ``"rpc"`` (HTTP ``200``): a JSON-RPC error for the
    id of ``message`` if it is a request, else for none."""
    request = isinstance(message, dict) and "method" in message
    return {
        "jsonrpc": "2.0",
        "id": message.get("id") if request else None,
        "error": {"code": FOREIGN_CODE, "message": "The session belongs to another principal"},
    }


@dataclass(frozen=True)
class Passed:
    """A request that reached the inner server."""

    method: str
    """The HTTP method."""
    session: str | None
    """Its ``Mcp-Session-Id`` (``None`` for an ``initialize``)."""
    principal: str
    """Whose token it carried."""
    message: Any
    """Its JSON body (``None`` if it had none or not JSON)."""
    last_event_id: str | None = None

    @property
    def rpc_method(self) -> str | None:
        """The JSON-RPC method of a request or notification (``None`` for an answer)."""
        method = self.message.get("method") if isinstance(self.message, dict) else None
        return method if isinstance(method, str) else None

    @property
    def is_answer(self) -> bool:
        """Whether it answered a server request (a JSON-RPC response or error)."""
        body = self.message
        return (
            isinstance(body, dict)
            and "method" not in body
            and ("result" in body or "error" in body)
        )


@dataclass(frozen=True)
class Refusal:
    """A request refused before the inner server: ``status`` 401, 403 or 404."""

    method: str
    session: str | None
    principal: str | None
    """``None``: no token, or one that is not known."""
    status: int
    message: Any


@dataclass
class SessionAuth:
    """The ASGI middleware (see the module docstring) around ``app``."""

    app: ASGIApp
    tokens: Mapping[str, str] = field(default_factory=lambda: dict(TOKENS))
    mode: Mode = "403"
    owners: dict[str, str] = field(default_factory=dict)
    """Session id -> the principal that created it."""
    passed: list[Passed] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)

    def principal_of(self, authorization: bytes | None) -> str | None:
        """The principal of an ``Authorization`` value (``None``: missing, not a bearer
        token, or an unknown one; bytes that are not ASCII never match a token)."""
        if authorization is None:
            return None
        scheme, _, token = authorization.decode("latin-1").partition(" ")
        if scheme.lower() != "bearer":
            return None
        return self.tokens.get(token.strip())

    def passed_for(self, session: str) -> list[Passed]:
        """What reached the inner server for ``session``, in order."""
        return [p for p in self.passed if p.session == session]

    def answers_for(self, session: str) -> list[Passed]:
        """The answers (to server requests) of ``session`` that reached the inner server."""
        return [p for p in self.passed_for(session) if p.is_answer]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            headers.setdefault(name.lower(), value)
        body = await whole_body(receive)
        message = _json(body)
        method = str(scope["method"])
        raw_sid = headers.get(b"mcp-session-id")
        session = raw_sid.decode("latin-1") if raw_sid is not None else None
        principal = self.principal_of(headers.get(b"authorization"))
        if principal is None:
            await self._refuse(send, 401, UNAUTHORIZED_BODY, (method, session, None, message))
            return
        owner = self.owners.get(session) if session is not None else None
        if owner is not None and owner != principal:
            status, refusal = {
                "403": (403, FORBIDDEN_BODY),
                "404": (404, SESSION_NOT_FOUND_BODY),
                "rpc": (200, refused_in_rpc(message)),
            }[self.mode]
            await self._refuse(send, status, refusal, (method, session, principal, message))
            return
        raw_cursor = headers.get(b"last-event-id")
        cursor = raw_cursor.decode("latin-1") if raw_cursor is not None else None
        self.passed.append(Passed(method, session, principal, message, cursor))

        unread: list[bytes] = [body]

        async def replay() -> Message:
            if unread:
                return {"type": "http.request", "body": unread.pop(), "more_body": False}
            return await receive()

        async def binding_send(msg: Message) -> None:
            if session is None and msg["type"] == "http.response.start":
                for name, value in msg.get("headers", []):
                    if name.lower() == b"mcp-session-id":
                        self.owners.setdefault(value.decode("latin-1"), principal)
            await send(msg)

        await self.app(scope, replay, binding_send)

    async def _refuse(
        self,
        send: Send,
        status: int,
        body: Mapping[str, Any],
        what: tuple[str, str | None, str | None, Any],
    ) -> None:
        method, session, principal, message = what
        self.refused.append(Refusal(method, session, principal, status, message))
        data = json.dumps(body).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(data)).encode()),
        ]
        if status == 401:
            challenge = 'Bearer error="invalid_token", error_description="Authentication required"'
            headers.append((b"www-authenticate", challenge.encode()))
        if self.mode == "rpc" and session is not None:  # as the session's transport answers
            headers.append((b"mcp-session-id", session.encode("latin-1")))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data, "more_body": False})


def _json(body: bytes) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


@dataclass(frozen=True)
class AuthServer:
    """A running upstream: ``url`` is its MCP endpoint, ``controller`` the harness
    server's (deadlines, gates, its log), ``auth`` the middleware (owners, records)."""

    url: str
    port: int
    controller: ServerController
    auth: SessionAuth


@contextlib.asynccontextmanager
async def running_auth_server(
    tokens: Mapping[str, str] = TOKENS,
    *,
    mode: Mode = "403",
    cors: bool = False,
    shutdown_timeout: float = 0.5,
) -> AsyncIterator[AuthServer]:
    """The harness server (scoped event store, ``retry: 50``) behind :class:`SessionAuth`
    (behind ``CORSMiddleware`` too with ``cors``), served on 127.0.0.1 (ephemeral port)
    until the block exits."""
    controller = ServerController()
    auth = SessionAuth(build_app(controller), dict(tokens), mode)
    app: ASGIApp = auth
    if cors:
        app = CORSMiddleware(
            auth,
            allow_origins=["*"],
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["*"],
            expose_headers=["Mcp-Session-Id"],
        )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    try:
        async with serving(app, sock, shutdown_timeout=shutdown_timeout):
            yield AuthServer(f"http://127.0.0.1:{port}/mcp", port, controller, auth)
    finally:
        sock.close()
