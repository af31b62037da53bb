"""The guarded session the application uses (:class:`GuardedSession`,
:class:`GuardedConnection`, :func:`open_guarded_session`) and what differs between the
SDK lines (:class:`SdkBinding`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import IO, Any, TypeVar

import anyio
import anyio.lowlevel

from fsm.adapters._transport.body import NotingWriter
from fsm.adapters._transport.handles import CURRENT_CALL, CallSlot
from fsm.adapters._transport.http import HttpLib
from fsm.adapters._transport.session_io import SessionIO
from fsm.adapters.sdkerrors import SdkErrorType
from fsm.adapters.sdkversion import SdkRange, check_sdk_version
from fsm.errors import (
    InteractionFailed,
    RequestKey,
)
from fsm.properties import Observation, Violation
from fsm.sse.guard import Guard, GuardConfig
from fsm.sse.observe import ObservedGuard

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

Connect = Callable[[str, Any], AbstractAsyncContextManager[tuple[Any, Any]]]
"""``connect(url, http_client)``: the SDK's transport, yielding ``(read, write)``."""


@contextlib.asynccontextmanager
async def sdk_streams(url: str, http_client: Any) -> AsyncIterator[tuple[Any, Any]]:
    """The installed SDK's ``streamable_http_client`` on ``http_client``, as ``(read,
    write)``: the :data:`Connect` of both lines (1.x also yields a session-id getter,
    dropped here). Imports the SDK when called."""
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url, http_client=http_client) as streams:
        yield streams[0], streams[1]


@dataclass(frozen=True)
class SdkBinding:
    """What differs between the SDK lines the core serves; nothing the guard decides.

    ``hx`` is the SDK's HTTP library module (``httpx2`` for mcp 2.x, ``httpx`` for 1.x: one
    API, distinct types); ``connect`` opens the SDK's streamable-HTTP transport on an
    ``hx.AsyncClient``; ``session_class`` is its ``ClientSession``; ``cancel_result()`` the
    ``ElicitResult(action="cancel")`` a withdrawn prompt returns; ``supported``/``others``
    the release ranges for :func:`~fsm.adapters.sdkversion.check_sdk_version`.
    ``errors_as_responses``: answer a request POST's HTTP error status (other than 404)
    locally with a JSON-RPC error for its id, for SDKs whose writer dies on one (1.x).
    ``context_follows_sends``: the SDK's POST task sees the sending task's context
    variables (2.x); when not (1.x), the core notes which call sent each request id on the
    SDK's write stream instead. ``errors``: the SDK's JSON-RPC error type; every typed
    error the session raises is an instance of it too (:mod:`fsm.adapters.sdkerrors`).
    ``None``: plain library errors.
    """

    name: str
    hx: HttpLib
    supported: SdkRange
    others: tuple[SdkRange, ...]
    connect: Connect
    session_class: Callable[..., Any]
    cancel_result: Callable[[], Any]
    errors_as_responses: bool = False
    context_follows_sends: bool = True
    errors: SdkErrorType | None = None


class GuardedConnection:
    """The guard for one MCP session, for a client that opens the SDK session itself (a
    framework such as fastmcp's ``Client``): give it :meth:`http_client` as its HTTP
    client, run each tool call through :meth:`call`, and hold each prompt inside
    :meth:`prompt` (or give the SDK :meth:`wrap_callback` of its elicitation callback).
    :func:`open_guarded_connection` makes one; :class:`GuardedSession` is one with the
    SDK's ``ClientSession`` opened for you.
    """

    def __init__(self, engine: SessionIO) -> None:
        self._e = engine

    @property
    def guard(self) -> ObservedGuard:
        """The observed guard (decisions, monitor, kept observations)."""
        return self._e.og

    @property
    def session_id(self) -> str | None:
        """The MCP session id the server assigned."""
        return self._e.session

    @property
    def violations(self) -> list[tuple[int, Observation, Violation]]:
        """Property violations the online monitor saw (empty for a conforming run)."""
        self._e.flush()
        return self._e.og.violations

    @property
    def failures(self) -> dict[str, InteractionFailed]:
        """Every interaction the guard failed, by interaction name (the newest 1024): the
        error its call raised, an instance of the SDK's error type too. A stream that
        ended because the session closed is not here (it did not fail)."""
        return dict(self._e.failures)

    def observations(self) -> list[tuple[Observation, float]]:
        """The kept ``(observation, t)`` pairs, oldest first."""
        self._e.flush()
        return list(self._e.og.log)

    def event_log(self) -> str:
        """The kept observations as :mod:`fsm.trace` JSON Lines: a header, then one record
        per observation, each with ``t`` and ``wall``, in the order observed
        (:meth:`fsm.sse.observe.ObservedGuard.event_log`)."""
        self._e.flush()
        return self._e.og.event_log()

    def http_client(self, **kwargs: Any) -> Any:
        """A new ``AsyncClient`` of the SDK's HTTP library whose transport is the guard
        (all traffic goes on through the application's client). ``kwargs`` go to the
        ``AsyncClient`` (a framework's client factory passes ``headers``, ``auth``,
        ``timeout``, ``follow_redirects``); the caller closes it. One MCP session only."""
        e = self._e
        kwargs.setdefault("timeout", e.http.timeout)
        return e.hx.AsyncClient(transport=e.bound.transport(e), **kwargs)

    def wrap_callback(self, callback: ElicitationFn | None) -> ElicitationFn | None:
        """The SDK elicitation callback to install instead of ``callback``: run under
        :meth:`prompt`, returning the SDK's "cancel" result when withdrawn."""
        return _wrap_callback(self._e, callback)

    def prompt(self, request_id: Any) -> contextlib.AbstractContextManager[anyio.CancelScope]:
        """Hold the presentation of server request ``request_id`` inside this: it is
        cancelled when the guard withdraws the request (cancelled on the wire, session
        gone, rejected), even if the SDK's own loop is blocked (``scope.cancelled_caught``
        tells). Answer with what the SDK expects; the adapter submits it."""
        return _prompt_scope(self._e, request_id)

    async def call(self, run: Callable[[], Awaitable[_T]]) -> _T:
        """Await ``run()`` (one tool call through the SDK or a framework on it), raced
        against the guard's ``Fail`` for the call's stream.

        Raises the guard's typed error (once) if the interaction died; raises
        :class:`~fsm.errors.SessionExpiredError` at once if the session is known gone;
        otherwise returns or raises what ``run()`` does. A typed error is also the SDK
        line's JSON-RPC error (``SdkBinding.errors``: code -32000, ``data.reason``).
        """
        e = self._e
        if e.expired is not None:
            raise _again(e, e.expired)
        slot = CallSlot()
        token = CURRENT_CALL.set(slot)
        outcome: list[_T] = []
        raised: list[BaseException] = []
        done = anyio.Event()

        async def attempt() -> None:
            try:
                outcome.append(await run())
            except Exception as exc:
                raised.append(exc)
            finally:
                done.set()

        async def watch() -> None:
            await slot.failed.wait()
            done.set()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(attempt)
                tg.start_soon(watch)
                await done.wait()
                tg.cancel_scope.cancel()
        finally:
            CURRENT_CALL.reset(token)
            if slot.origin is not None:
                e.calls.pop(slot.origin, None)
        if slot.error is not None:
            raise slot.error
        if outcome:
            return outcome[0]
        typed = _typed_failure(e, raised[0]) if raised else None
        if typed is not None:
            raise typed from raised[0]
        if e.expired is not None:
            raise _again(e, e.expired)
        raise raised[0]


class GuardedSession(GuardedConnection):
    """An initialized ``ClientSession`` with the guard in front of it.

    ``call_tool`` returns the tool's result, or raises exactly one
    :class:`~fsm.errors.InteractionFailed` subclass when the guard decided the interaction
    cannot complete. ``session`` is the raw SDK session (for everything else: its requests
    are still guarded on the wire).
    """

    def __init__(self, session: Any, engine: SessionIO) -> None:
        super().__init__(engine)
        self.session = session

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """``ClientSession.call_tool`` through :meth:`~GuardedConnection.call`: the
        result, or one typed error."""
        return await self.call(lambda: self.session.call_tool(name, arguments, **kwargs))

    async def list_tools(self) -> Any:
        """``ClientSession.list_tools`` (raises SessionExpiredError once the session is gone)."""
        if self._e.expired is not None:
            raise _again(self._e, self._e.expired)
        return await self.session.list_tools()


def _typed_failure(engine: SessionIO, exc: BaseException) -> InteractionFailed | None:
    """The guard's typed error behind ``exc``: an SDK or framework error (or one it wraps)
    carrying the guard's ending error (:func:`ending_error`: ``data.stream`` names a stream
    the guard failed with ``data.reason``). How a call learns its typed error when the
    guard could not tell which call sent the request (a framework's own write stream)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        data = getattr(getattr(current, "error", None), "data", None)
        if isinstance(data, Mapping) and isinstance(data.get("stream"), str):
            err = engine.failures.get(data["stream"])
            if err is not None and err.reason == data.get("reason"):
                return _again(engine, err)
        current = current.__cause__ or current.__context__
    return None


def _again(engine: SessionIO, err: InteractionFailed) -> InteractionFailed:
    """A fresh copy of a terminal error already raised to its own caller (an expired
    session's error goes to every later call), as the SDK line's error type too when
    the binding names one (:meth:`SessionIO.typed`)."""
    copy = type(err)(
        str(err), key=err.key, stream=err.stream, reason=err.reason, evidence=err.evidence
    )
    return engine.typed(copy)


ElicitationFn = Callable[[Any, Any], Awaitable[Any]]
"""The SDK's elicitation callback: ``async (context, params) -> ElicitResult | ErrorData``."""


@contextlib.contextmanager
def _prompt_scope(engine: SessionIO, request_id: Any) -> Iterator[anyio.CancelScope]:
    key: RequestKey = (engine.session or "", request_id)
    with anyio.CancelScope() as scope:
        engine.prompts[key] = scope
        if key in engine.withdrawn:
            scope.cancel()
        try:
            yield scope
        finally:
            engine.prompts.pop(key, None)


def _wrap_callback(engine: SessionIO, callback: ElicitationFn | None) -> ElicitationFn | None:
    """The callback the SDK gets: ``callback`` under a cancel scope the guard's ``Withdraw``
    cancels (then it returns ``cancel_result()``, which the transport drops: the key is
    dead). Both SDK lines put the server request's id on ``context.request_id``."""
    if callback is None:
        return None
    cancel_result = engine.binding.cancel_result

    async def on_elicit(context: Any, params: Any) -> Any:
        result: Any = cancel_result()
        with _prompt_scope(engine, context.request_id):
            result = await callback(context, params)
        return result

    return on_elicit


LogTarget = str | os.PathLike[str] | IO[str]


def _close(engine: SessionIO) -> None:
    """The guarded connection ends: coalesced event ids are recorded, every stream still
    open ends as closed with the session (:meth:`SessionIO.end_session`), and the
    background IO stops."""
    engine.flush()
    engine.end_session()
    engine.close()


@contextlib.asynccontextmanager
async def open_guarded_connection(
    binding: SdkBinding,
    url: str,
    *,
    http_client: Any = None,
    config: GuardConfig | None = None,
    clock: Callable[[], float] = time.monotonic,
    log: LogTarget | None = None,
    strict_sdk: bool = True,
) -> AsyncIterator[GuardedConnection]:
    """The guard for one MCP session on ``url``, for a client that opens the SDK session
    itself (see :class:`GuardedConnection`); arguments as :func:`open_guarded_session`.
    When this exits (and before the client's DELETE ends the session, if it sends one),
    every stream still open ends, recorded with outcome ``closed`` (not a failure:
    :meth:`SessionIO.end_session`); then its background IO (submissions, resumes) ends."""
    check_sdk_version(binding.supported, others=binding.others, strict=strict_sdk)
    hx = binding.hx
    async with contextlib.AsyncExitStack() as stack:
        if http_client is None:
            http_client = await stack.enter_async_context(
                hx.AsyncClient(timeout=hx.Timeout(30.0, read=300.0))
            )
        sink: IO[str] | None = None
        if isinstance(log, str | os.PathLike):
            sink = stack.enter_context(open(log, "w", encoding="utf-8"))  # noqa: SIM115
        elif log is not None:
            sink = log
        observed = ObservedGuard(Guard(clock=clock, config=config), sink=sink)
        tg = await stack.enter_async_context(anyio.create_task_group())
        engine = SessionIO(observed, http_client, tg, url, binding)
        engine.ends_on_delete = True
        stack.callback(_close, engine)
        yield GuardedConnection(engine)


@contextlib.asynccontextmanager
async def open_guarded_session(
    binding: SdkBinding,
    url: str,
    *,
    elicitation_callback: ElicitationFn | None = None,
    http_client: Any = None,
    config: GuardConfig | None = None,
    clock: Callable[[], float] = time.monotonic,
    log: LogTarget | None = None,
    strict_sdk: bool = True,
    **session_kwargs: Any,
) -> AsyncIterator[GuardedSession]:
    """Open an initialized, guarded MCP session on ``url`` (legacy streamable HTTP).

    ``http_client`` carries all HTTP (its hooks, auth and timeouts apply; it is not closed
    here); ``config`` is the guard's policy; ``clock`` its time source (monotonic
    seconds); ``log`` a path or text stream that receives the event log as JSON Lines
    while it happens (:mod:`fsm.trace`: the header first, every record with ``t`` and its
    UTC ``wall`` time; not flushed here). Extra keyword arguments go to
    ``ClientSession``. Raises ``RuntimeError`` for an unsupported SDK version when
    ``strict_sdk``. ``binding`` says which SDK line.
    """
    async with (
        open_guarded_connection(
            binding,
            url,
            http_client=http_client,
            config=config,
            clock=clock,
            log=log,
            strict_sdk=strict_sdk,
        ) as conn,
        conn.http_client(headers=conn._e.http.headers) as outer,
        binding.connect(url, outer) as (read, write),
        binding.session_class(
            read,
            write if binding.context_follows_sends else NotingWriter(write, conn._e),
            elicitation_callback=conn.wrap_callback(elicitation_callback),
            **session_kwargs,
        ) as session,
    ):
        await session.initialize()
        yield GuardedSession(session, conn._e)
