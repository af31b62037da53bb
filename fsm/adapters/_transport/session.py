"""The guarded session the application uses (:class:`GuardedSession`,
:class:`GuardedConnection`, :func:`open_guarded_session`), what differs between the
SDK lines (:class:`SdkBinding`), and which of the SDK session's methods a guarded
session races against the guard (:data:`RACED_METHODS`, :data:`NOT_RACED`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, cast

import anyio
import anyio.lowlevel

from fsm.adapters._transport.body import NotingWriter
from fsm.adapters._transport.handles import CURRENT_CALL, CallSlot
from fsm.adapters._transport.http import HttpLib
from fsm.adapters._transport.rejoin import (
    SdkRejoin,
    forget_session,
    record_session,
    reshow,
    restart,
    resume_call,
)
from fsm.adapters._transport.session_io import SessionIO
from fsm.adapters.sdkerrors import SdkErrorType
from fsm.adapters.sdkversion import SdkRange, check_sdk_version
from fsm.durable.store import SseCall, Store
from fsm.errors import (
    InteractionFailed,
    RequestKey,
    StoreError,
)
from fsm.properties import Observation, Violation
from fsm.sse.guard import Guard, GuardConfig
from fsm.sse.observe import ObservedGuard

if TYPE_CHECKING:  # for annotations only: the core imports nothing of the SDK at run time
    from mcp import types

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_P = ParamSpec("_P")


Connect = Callable[..., AbstractAsyncContextManager[tuple[Any, Any]]]
"""``connect(url, http_client, **options)``: the SDK's transport, yielding ``(read,
write)``; ``options`` are keywords of the SDK's transport function, given only when the
application set one (so a ``connect`` that takes none works while none is set)."""


@contextlib.asynccontextmanager
async def sdk_streams(url: str, http_client: Any, **options: Any) -> AsyncIterator[tuple[Any, Any]]:
    """The installed SDK's ``streamable_http_client`` on ``http_client``, as ``(read,
    write)``: the :data:`Connect` of both lines (1.x also yields a session-id getter,
    dropped here). ``options`` go to ``streamable_http_client`` (``terminate_on_close``,
    2.x's ``max_sse_event_size``). Imports the SDK when called."""
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url, http_client=http_client, **options) as streams:
        yield streams[0], streams[1]


RACED_METHODS: Mapping[str, str | None] = {
    "call_tool": "tools/call",
    "complete": "completion/complete",
    "get_prompt": "prompts/get",
    "list_prompts": "prompts/list",
    "list_resource_templates": "resources/templates/list",
    "list_resources": "resources/list",
    "list_tools": "tools/list",
    "read_resource": "resources/read",
    "send_ping": "ping",
    "send_request": None,
    "set_logging_level": "logging/setLevel",
    "subscribe_resource": "resources/subscribe",
    "unsubscribe_resource": "resources/unsubscribe",
}
"""The request methods of the SDK's ``ClientSession`` (both lines) a guarded session
offers, each raced against the guard (:meth:`GuardedSession.raced`), by the JSON-RPC
method of the request whose stream decides the call (``None``: the first request the
call sends; ``send_request`` sends exactly one). Requests the SDK sends on its own during
the call (``call_tool`` lists the tools to validate a result) are guarded on the wire but
do not decide the call."""

NOT_RACED: Mapping[str, str] = {
    "initialize": "the guarded session is initialized before it is yielded; a second "
    "handshake on the same session is not something to race (the raw session has it)",
    "discover": "probes and adopts protocol 2026-07-28, which has no session-ful streams "
    "to guard; its calls are guarded by fsm.adapters.mrtr",
    "send_discover": "the single server/discover probe of discover(), same reason",
    "dispatch_input_request": "hands a 2026-07-28 input request to the session's own "
    "callbacks, locally: no request is sent",
    "validate_tool_result": "a local check of a result against the cached output schema "
    "(call_tool runs it; it lists the tools only to refresh that cache)",
    "send_notification": "a notification: nothing answers it, so nothing can end it; "
    "the raw session sends it, guarded on the wire",
    "send_progress_notification": "a notification, same reason",
    "send_roots_list_changed": "a notification, same reason",
}
"""The public coroutine methods of the SDK's ``ClientSession`` (either line) a guarded
session does not offer, each with the reason; ``GuardedSession.session`` (the raw SDK
session) still has them. A method in neither this table nor :data:`RACED_METHODS` is one
a new SDK release added: the surface tests fail until it is classified."""

NOT_TAKEN: Mapping[str, str] = {
    "url": "the first, positional parameter of guarded_session itself",
    "read_stream": "the guarded transport's, opened by guarded_session",
    "write_stream": "the guarded transport's, opened by guarded_session",
    "dispatcher": "would replace the guarded transport's streams (2.x)",
}
"""Parameters of the SDK's ``ClientSession`` and ``streamable_http_client`` an adapter's
``guarded_session`` does not take, each with the reason; it takes every other one, with
the SDK's default."""


_NO_DEFAULT = inspect.Parameter.empty


@functools.cache
def _defaults(fn: Callable[..., Any]) -> Mapping[str, Any]:
    return {
        name: p.default
        for name, p in inspect.signature(fn).parameters.items()
        if p.default is not _NO_DEFAULT
    }


def _is_default(value: Any, default: Any) -> bool:
    if value is default:
        return True
    kind = type(default)
    return kind in (bool, int, float, str) and type(value) is kind and value == default


def non_default(fn: Callable[..., Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``values`` that are not at the default of ``fn``'s parameter of the
    same name (the default itself, or an equal ``bool``, ``int``, ``float`` or ``str``).

    How a typed signature mirroring the SDK's passes on only what the caller set: a
    release of the line that lacks a parameter newer releases added works as long as the
    caller leaves it at its default, and one given a value fails as the SDK's own call
    would (``TypeError``). Sound when the mirrored defaults are the SDK's (the surface
    tests check that)."""
    defaults = _defaults(fn)
    return {
        name: value
        for name, value in values.items()
        if name not in defaults or not _is_default(value, defaults[name])
    }


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
    ``None``: plain library errors. ``rejoin``: how the line adopts a stored session and
    resumes a stored call (:mod:`fsm.adapters._transport.rejoin`); ``None``: a guarded
    session of this line takes no store.
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
    rejoin: SdkRejoin | None = None


class GuardedConnection:
    """The guard for one MCP session, for a client that opens the SDK session itself (a
    framework such as fastmcp's ``Client``): give it :meth:`http_client` as its HTTP
    client, run each request (a tool call, a prompt, a resource read) through
    :meth:`call`, and hold each prompt inside :meth:`prompt` (or give the SDK
    :meth:`wrap_callback` of its elicitation callback).
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

    async def call(
        self, run: Callable[[], Awaitable[_T]], *, method: str | None = "tools/call"
    ) -> _T:
        """Await ``run()`` (one request through the SDK or a framework on it), raced
        against the guard's ``Fail`` for the stream of the request of JSON-RPC ``method``
        that ``run()`` sends (the first such; ``None``: the first request it sends, of any
        method): ``call(lambda: client.get_prompt("greet"), method="prompts/get")``.

        Raises the guard's typed error (once) if the interaction died; raises
        :class:`~fsm.errors.SessionExpiredError` at once if the session is known gone;
        otherwise returns or raises what ``run()`` does. A typed error is also the SDK
        line's JSON-RPC error (``SdkBinding.errors``: code -32000, ``data.reason``).
        Other requests ``run()`` sends are guarded on the wire; when one of them dies, the
        call gets what the SDK raises for it (unless its error names the stream, below).

        ``run()`` runs in a task of the connection's own (with the caller's context
        variables). When the guard fails the call, the typed error is raised at once and
        ``run()`` is left to end by itself, as the guard's ending error reaches the SDK on
        the stream's body (its result is dropped): cancelling the SDK's request while that
        error is being delivered to it would close mcp 1.x's receive loop, and the session
        with it. When the caller leaves otherwise (cancelled), ``run()`` is cancelled;
        when the connection closes, whatever still runs is.
        """
        e = self._e
        if e.expired is not None:
            raise _again(e, e.expired)
        slot = CallSlot(method=method)
        outcome: list[_T] = []
        raised: list[BaseException] = []
        done = anyio.Event()
        scope = anyio.CancelScope()

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

        token = CURRENT_CALL.set(slot)
        try:
            e.start_detached(attempt, scope)  # the task copies the context: the slot
        finally:
            CURRENT_CALL.reset(token)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                await done.wait()
                tg.cancel_scope.cancel()
        finally:
            if slot.error is None:  # ended, or its caller left: nothing of it runs on
                scope.cancel()
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
        if not raised:  # cancelled by the connection's close, and no stream of it failed
            raise RuntimeError("the guarded connection closed while the call ran")
        raise raised[0]


class GuardedSession(GuardedConnection):
    """An initialized ``ClientSession`` with the guard in front of it: the base of each
    SDK line's guarded session (:class:`fsm.adapters.mcp2.GuardedSession`,
    :class:`fsm.adapters.mcp1.GuardedSession`), whose typed methods mirror the line's
    ``ClientSession`` and call :meth:`raced`.

    ``session`` is the raw SDK session: what the guarded session does not offer
    (:data:`NOT_RACED`, and attributes that send nothing) is there, its requests guarded
    on the wire but not raced.
    """

    def __init__(self, session: Any, engine: SessionIO) -> None:
        super().__init__(engine)
        self.session = session

    async def raced(self, name: str, /, **arguments: Any) -> Any:
        """``session.<name>(**arguments)``, raced against the guard as :meth:`call` races
        it, for ``name`` in :data:`RACED_METHODS` (``ValueError`` otherwise): its result,
        or exactly one typed error (also the SDK's error type) when the guard decided the
        interaction cannot complete, or what the SDK raises; ``SessionExpiredError`` at
        once when the session is known gone.

        Arguments at the default of this class's method ``name`` are not passed on
        (:func:`non_default`), so a release of the line without a newer parameter works
        while the caller leaves it alone.
        """
        method = raced_request(name)
        send = getattr(self.session, name)
        own = getattr(type(self), name, None)
        given = non_default(own, arguments) if callable(own) else dict(arguments)
        return await self.call(lambda: send(**given), method=method)

    @property
    def restored_calls(self) -> tuple[SseCall, ...]:
        """The calls in flight when the process before this one ended, from the store
        (empty unless this session was rejoined from a store): give each to
        :meth:`resume_call`. Its ``method`` and ``params`` say what it was."""
        return self._e.restored

    async def resume_call(self, call: SseCall) -> Any:
        """Resume ``call`` (one of :attr:`restored_calls`) to exactly one outcome: the
        result the SDK returns for its method (a ``CallToolResult`` for ``tools/call``),
        or one typed error (also the SDK's error type): the guard's, or reason
        ``ended-before-restart`` (its end was recorded before the crash, its result not
        stored) or ``not-resumable`` (no stream of it was stored). See
        ``docs/durability.md``."""
        rejoin = self._e.binding.rejoin
        if rejoin is None:
            raise ValueError(f"{self._e.binding.name} sessions cannot resume a stored call")
        return await resume_call(self, rejoin, call)


def raced_request(name: str) -> str | None:
    """The JSON-RPC method the ``ClientSession`` method ``name`` sends, for a method a
    guarded session races (:data:`RACED_METHODS`; ``None``: any request, as
    ``send_request``); ``ValueError`` for a method it does not race."""
    if name not in RACED_METHODS:
        raise ValueError(f"{name!r} is not a request method a guarded session races")
    return RACED_METHODS[name]


def raced_method(
    sdk_method: Callable[Concatenate[Any, _P], Awaitable[_T]],
) -> Callable[Concatenate[GuardedSession, _P], Coroutine[Any, Any, _T]]:
    """A guarded session's method that is ``sdk_method`` (a request method of the SDK's
    ``ClientSession`` named in :data:`RACED_METHODS`) raced against the guard
    (:meth:`GuardedSession.raced`), with the SDK method's signature: for a type checker
    through ``ParamSpec``, for ``inspect.signature`` through ``__wrapped__``.

    For a method whose signature is one declaration; an overloaded method (whose result
    type follows an argument) or a deprecated one keeps an explicit definition, as a type
    checker sees only the first overload, and no deprecation, of a derived signature.
    Arguments are passed on by name (``sdk_method`` takes no ``*args`` or ``**kwargs``);
    ``ValueError`` for a method :data:`RACED_METHODS` does not name."""
    name = sdk_method.__name__
    sent = raced_request(name)
    signature = inspect.signature(sdk_method)
    receiver = next(iter(signature.parameters))

    @functools.wraps(sdk_method)
    async def method(self: GuardedSession, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        arguments = signature.bind(self.session, *args, **kwargs).arguments
        del arguments[receiver]
        return cast("_T", await self.raced(name, **arguments))

    request = f"``{sent}``" if sent else "any request"
    method.__doc__ = f"``ClientSession.{name}`` ({request}), raced against the guard."
    return method


class SameOnBothLines(GuardedSession):
    """The typed request methods whose ``ClientSession`` signature is the same on both SDK
    lines, written once: the base of :class:`fsm.adapters.mcp2.GuardedSession` and
    :class:`fsm.adapters.mcp1.GuardedSession`. A method whose signature differs between
    the lines (``call_tool``, ``get_prompt``, ``list_*``, ``read_resource``, ``send_ping``,
    ``send_request``, ``set_logging_level``, ``(un)subscribe_resource``) stays on each
    line's class. Annotations name ``mcp.types`` (both lines define these types); nothing of
    the SDK is imported at run time."""

    async def complete(
        self,
        ref: types.ResourceTemplateReference | types.PromptReference,
        argument: dict[str, str],
        context_arguments: dict[str, str] | None = None,
    ) -> types.CompleteResult:
        """``ClientSession.complete`` (``completion/complete``), raced against the guard."""
        return cast(
            "types.CompleteResult",
            await self.raced(
                "complete", ref=ref, argument=argument, context_arguments=context_arguments
            ),
        )


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
"""Where an event log goes: a path (opened, written and closed by the session) or an open
text stream (written, not flushed or closed)."""


def _close(engine: SessionIO) -> None:
    """The guarded connection ends: coalesced event ids are recorded, every stream still
    open ends as closed with the session (:meth:`SessionIO.end_session`), and the
    background IO stops. With a store, the session left on purpose is not one to rejoin
    (:func:`~fsm.adapters._transport.rejoin.forget_session`)."""
    engine.flush()
    engine.end_session()
    engine.close()
    forget_session(engine)


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
    store: Store | None = None,
) -> AsyncIterator[GuardedConnection]:
    """The guard for one MCP session on ``url``, for a client that opens the SDK session
    itself (see :class:`GuardedConnection`); arguments as :func:`open_guarded_session`
    (``store``: the guard is durable, its writes go there).
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
        if store is not None:
            config = dataclasses.replace(config or GuardConfig(), durable=True)
        observed = ObservedGuard(Guard(clock=clock, config=config), sink=sink)
        tg = await stack.enter_async_context(anyio.create_task_group())
        engine = SessionIO(observed, http_client, tg, url, binding)
        engine.store = store
        engine.ends_on_delete = True
        stack.callback(_close, engine)
        yield GuardedConnection(engine)


def lone_store_error(group: BaseExceptionGroup[BaseException]) -> StoreError | None:
    """The one :class:`~fsm.errors.StoreError` ``group`` holds (at any depth) when it holds
    nothing else but cancellations, else ``None`` (see :func:`store_failure`)."""
    leaves: list[BaseException] = []
    todo: list[BaseException] = [group]
    while todo:
        exc = todo.pop()
        if isinstance(exc, BaseExceptionGroup):
            todo.extend(exc.exceptions)
        else:
            leaves.append(exc)
    errors = [x for x in leaves if isinstance(x, StoreError)]
    rest = [x for x in leaves if not isinstance(x, (StoreError, anyio.get_cancelled_exc_class()))]
    return errors[0] if len(errors) == 1 and not rest else None


@contextlib.contextmanager
def store_failure(applies: Callable[[], bool] = lambda: True) -> Iterator[None]:
    """Around task groups a guarded session's opening, or a one-call adapter's call, runs
    in: a :class:`~fsm.errors.StoreError` a group failed with alone (a write ahead
    refused: a full disk, a record longer than the store reads back; a stored session
    that does not read back) is raised as itself, chained to the group, so the opening or
    the call ends with exactly that one typed error (:func:`lone_store_error`), while
    ``applies()``; any other group is raised unchanged. Imports no SDK (both lines'
    adapters and both one-call adapters share it)."""
    try:
        yield
    except BaseExceptionGroup as group:
        failure = lone_store_error(group) if applies() else None
        if failure is None:
            raise
        raise failure from group


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
    session_type: type[GuardedSession] = GuardedSession,
    transport_options: Mapping[str, Any] | None = None,
    store: Store | None = None,
    **session_kwargs: Any,
) -> AsyncIterator[GuardedSession]:
    """Open an initialized, guarded MCP session on ``url`` (legacy streamable HTTP).

    ``http_client`` carries all HTTP (its hooks, auth and timeouts apply; it is not closed
    here); ``config`` is the guard's policy; ``clock`` its time source (monotonic
    seconds); ``log`` a path or text stream that receives the event log as JSON Lines
    while it happens (:mod:`fsm.trace`: the header first, every record with ``t`` and its
    UTC ``wall`` time; not flushed here). ``session_type`` is what is yielded (a line's
    typed :class:`GuardedSession`); ``transport_options`` go to the SDK's transport
    (``binding.connect``), extra keyword arguments to ``ClientSession``. Raises
    ``RuntimeError`` for an unsupported SDK version when ``strict_sdk``. ``binding`` says
    which SDK line. The adapters' ``guarded_session`` is this with a typed signature.

    ``store``: the guard is durable and writes ahead to it; if the store holds a session
    to rejoin (the process before this one ended with calls in flight), the session is
    rejoined instead of initialized (:mod:`fsm.adapters._transport.rejoin`): its
    questions on screen at the crash go to ``elicitation_callback`` once more, marked,
    and :attr:`GuardedSession.restored_calls` lists what to :meth:`~GuardedSession.resume_call`.
    ``ValueError`` for a line without ``binding.rejoin``; a stored session that does not
    read back (or is beyond the guard's limits) fails the opening with that
    :class:`~fsm.errors.StoreError` itself.
    """
    rejoin = binding.rejoin
    if store is not None and rejoin is None:
        raise ValueError(f"a {binding.name} guarded session takes no store")
    opened = False
    with store_failure(lambda: not opened):  # a failure of the opening, not of its use
        async with (
            open_guarded_connection(
                binding,
                url,
                http_client=http_client,
                config=config,
                clock=clock,
                log=log,
                strict_sdk=strict_sdk,
                store=store,
            ) as conn,
            conn.http_client(headers=conn._e.http.headers) as outer,
            binding.connect(url, outer, **(transport_options or {})) as (read, write),
            binding.session_class(
                read,
                write if binding.context_follows_sends else NotingWriter(write, conn._e),
                elicitation_callback=conn.wrap_callback(elicitation_callback),
                **session_kwargs,
            ) as session,
        ):
            e = conn._e
            shows = restart(e, store) if store is not None else ()
            if rejoin is not None and e.rejoin is not None and e.rejoined:
                rejoin.adopt(session, e.rejoin.initialize, e.next_id)
                for shown in shows:
                    e.spawn(lambda a: reshow(e, rejoin, session, elicitation_callback, a), shown)
            else:
                result = await session.initialize()
                if store is not None and rejoin is not None:
                    await record_session(e, store, rejoin.dump_initialize(result))
            opened = True
            yield session_type(session, e)
