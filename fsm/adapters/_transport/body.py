"""The body the SDK reads for one tracked stream (:class:`GuardedBody`): events passed on,
blanked or held for a claim, resumes spliced in; and the writer that notes which call
sent each request (:class:`NotingWriter`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.lowlevel

from fsm import actions as act
from fsm import events as ev
from fsm.adapters._transport.handles import CURRENT_CALL
from fsm.adapters._transport.http import HttpRequest, HttpResponse, ending_error, http_result
from fsm.adapters._transport.sse import (
    BOM,
    LARGE_EVENT,
    EventTooLarge,
    SseParser,
    encode_event,
    hot_event,
)
from fsm.errors import (
    EventTooLargeError,
    InteractionFailed,
    RequestKey,
)

if TYPE_CHECKING:
    from fsm.adapters._transport.handles import Tee
    from fsm.adapters._transport.session_io import SessionIO

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

_CLAIM_SALT = os.urandom(8).hex().encode()
"""Makes the tokens that hold a presented request's place unguessable by a server."""
YIELD_EVERY = 64 * 1024
"""Bytes a :class:`GuardedBody` reads before it hands the event loop to other tasks. A
read of data already buffered returns without suspending, so a stream that arrives
faster than it is passed on would otherwise hold the loop, which every other stream
(and, in the gateway, every other session) shares, until its buffer runs dry."""


class GuardedBody:
    """The body the SDK reads for one tracked stream: filtered events, spliced resumes.

    Ends when the origin's response was passed on (the SDK closes it), when the guard
    failed the stream (a synthetic JSON-RPC error for the origin is appended first), or
    when the guard stopped resuming a stream without origin.

    Each upstream connection is read by a parser of its own, and its bytes are passed on
    as that parser reads them at both ends. A byte order mark that leads the connection
    is dropped (:meth:`SseParser.begin`): WHATWG readers drop one only at the very start
    of what they read, and a resume's connection is spliced into the middle of the
    stream the SDK (or a gateway's client) reads, where a kept mark would hide the id (or
    the data) of the line after it; the mcp SDK's own reader (httpx2) drops none. A body
    whose first piece passed on would begin with a mark the guard read as data (a second
    one, or one after an event nothing of which was passed on) begins with an empty
    comment line (``:``) instead, so a reader takes the mark for data too. At a
    clean end, the events the end completes (:meth:`SseParser.finish`: an event ended by
    a bare CR the last read ended with) are passed on, as any other event, before the
    stream is reported lost.
    """

    def __init__(
        self,
        engine: SessionIO,
        stream: str,
        origin: Any,
        request: HttpRequest,
        resp: HttpResponse | None,
        tee: Tee,
    ) -> None:
        self.e, self.stream, self.origin = engine, stream, origin
        self.request, self.resp, self.tee = request, resp, tee
        self._acted = False
        self._claims: list[tuple[bytes, RequestKey, str | None, bytes]] = []
        self._claim_key: RequestKey | None = None
        self.replaced: HttpResponse | None = None
        """The upstream response of the stream's previous client connection, closed
        before this one resumes (a server may refuse a resume while it holds it)."""

    async def aclose(self) -> None:
        if self.resp is not None:
            await self.resp.aclose()
        if self.e.tees.get(self.stream) is self.tee:
            del self.e.tees[self.stream]

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.resp is None:  # a client reconnected (:meth:`GuardedTransport.reconnect`)
            first = await self._reconnect()
            if first is None:
                tail = self._ending()
                if tail:
                    yield tail
                return
            self.resp = first
        began = False  # a piece was passed on
        while True:
            parser = SseParser(self.e.max_event)
            self.tee.resp = self.resp
            # no content coding: read the transport stream itself (one generator hop less)
            source = (
                self.resp.stream
                if "content-encoding" not in self.resp.headers
                and isinstance(self.resp.stream, self.e.hx.AsyncByteStream)
                else self.resp.aiter_bytes()
            )
            chunks = source.__aiter__()
            clean = True
            unyielded = 0
            start = True  # the connection's leading BOM, if any, not yet read past
            while not self.tee.killed:  # killed before a read: the read is not waited for
                chunk: bytes | None
                ended = False
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    logger.debug("%s connection ended", self.stream)
                    # what the end completes (an event ended by a CR) is passed on first
                    chunk, ended = (b"", True) if parser.pending else (None, False)
                except Exception as exc:  # whatever ends a connection abruptly
                    logger.debug("%s read failed: %r", self.stream, exc)
                    chunk, clean = None, False
                if self.tee.killed:
                    chunk, clean = None, False
                if chunk is None:
                    break
                if start:  # each connection's own BOM: dropped as the parser drops it
                    chunk = parser.begin(chunk)
                    start = parser.starting
                    if not (chunk or ended):
                        continue
                self._acted = False
                try:
                    out = await self._pass_on(parser, chunk, ended)
                except EventTooLarge as exc:
                    too_large = EventTooLargeError.reason
                    self.e.feed(ev.StreamAbandoned(self.stream, too_large, str(exc)))
                    break
                if self._claims:
                    out = await self._settle_claims(out)
                unyielded += len(chunk)
                for piece in out:
                    if piece:
                        if not began:
                            began = True
                            if piece[0] == BOM[0]:  # not first: a reader would drop a mark
                                yield b":\n"  # there that the guard read as data
                        yield piece
                        unyielded += len(piece)
                    if unyielded >= YIELD_EVERY:  # buffered reads never suspend: hand over
                        unyielded = 0
                        await anyio.lowlevel.checkpoint()
                if ended or (self._acted and self._dead()):
                    break
                if unyielded >= YIELD_EVERY:
                    unyielded = 0
                    await anyio.lowlevel.checkpoint()
            await self.resp.aclose()
            if self._dead():
                tail = self._ending()
                if tail:
                    yield tail
                return
            nxt = await self._resume(clean)
            if nxt is None:
                tail = self._ending()
                if tail:
                    yield tail
                return
            self.resp = nxt

    def _dead(self) -> bool:
        return self.e.guard.stream_state(self.stream) in ("done", "dead") or self.tee.killed

    async def _pass_on(self, parser: SseParser, chunk: bytes, ended: bool = False) -> list[bytes]:
        """Feed every event ``chunk`` completes; the pieces of bytes the SDK gets for them.
        ``ended``: the connection ended cleanly (``chunk`` is empty): the events the end
        completes (:meth:`SseParser.finish`: one ended by a CR the last read ended with).

        That is ``chunk`` itself when it holds only whole events, all passed unchanged
        (the common case), else the events up to the last complete one, each as received
        (the pieces it was read in: :attr:`SseFrame.parts`) or as rewritten by
        :meth:`_verdict` (an incomplete tail stays in ``parser``). Stops after the first
        event that leaves the stream dead (``_acted`` and :meth:`_dead`); the events after
        it are dropped. Plain notifications at the start of an event (``parser.idle``) in
        an ASCII chunk are read by :func:`hot_event` and fed through
        :meth:`SessionIO.on_hot` without decoding; the rest of the chunk goes to
        ``parser``.

        An event over :data:`LARGE_EVENT` bytes is decoded with a checkpoint before and
        after (the one step that reads it whole) and passed on in the pieces it came in,
        never copied into one: no step holds the event loop, which other sessions share,
        for longer than decoding its message takes.
        """
        e, stream = self.e, self.stream
        pos = mark = 0  # chunk[:mark] is in parts (rewritten), chunk[mark:pos] unchanged
        parts: list[bytes] = []
        if parser.idle and chunk.isascii():
            size = len(chunk)
            while pos < size:
                hot = hot_event(chunk, pos)
                if hot is None:
                    break
                end, event_id = hot
                actions = e.on_hot(stream, event_id)
                if actions is None:
                    break
                if actions:
                    new = self._verdict(event_id, actions, None)
                    if new is not None:
                        parts += (chunk[mark:pos], new)
                        mark = end
                    if self._dead():
                        parts.append(chunk[mark:end])
                        return parts
                pos = end
            if pos == size:
                if not parts:
                    return [chunk]
                parts.append(chunk[mark:])
                return parts
        whole = not parser.pending and not parts  # all bytes before chunk went out
        events = parser.finish() if ended else parser.feed(chunk[pos:] if pos else chunk)
        large = any(sse.size > LARGE_EVENT for sse in events)
        if large:
            await anyio.lowlevel.checkpoint()
        pieces: list[bytes | None] = []
        for sse in events:
            actions, msg = e.on_sse(stream, sse)
            if large and sse.size > LARGE_EVENT:
                await anyio.lowlevel.checkpoint()
            piece = self._verdict(sse.event_id, actions, msg)
            if not sse.utf8 and piece is None:  # malformed: reaches nobody as a message
                piece = encode_event(sse.event_id, "") if sse.event_id is not None else b""
            if self._claim_key is not None:
                token = b"\x00fsm-claim-%d-%s\x00" % (len(self._claims), _CLAIM_SALT)
                self._claims.append((token, self._claim_key, sse.event_id, sse.raw))
                self._claim_key, piece = None, token
            pieces.append(piece)
            if self._acted and self._dead():
                whole = False
                break
        if whole and not parser.pending and all(p is None for p in pieces):
            return [chunk]
        if pos > mark:
            parts.append(chunk[mark:pos])
        for sse, p in zip(events, pieces, strict=False):
            if p is None:
                parts += sse.parts
            else:
                parts.append(p)
        return parts

    def _verdict(
        self, event_id: str | None, actions: tuple[act.Action, ...], msg: Any
    ) -> bytes | None:
        """The bytes the SDK gets instead of an event the guard answered with ``actions``
        (``msg``: its decoded message, or ``None`` when read as a plain notification);
        ``None``: the event goes unchanged. Sets ``_acted`` when there are actions."""
        if not actions:
            return None
        self._acted = True
        is_request = isinstance(msg, dict) and "method" in msg and "id" in msg
        presented = any(isinstance(a, act.Present) for a in actions)
        if is_request and not presented:
            return encode_event(event_id, "") if event_id is not None else b""
        if is_request and self.e.claim is not None:
            self._claim_key = next(a.key for a in actions if isinstance(a, act.Present))
            return None
        if any(
            isinstance(a, act.Ignore)
            and a.reason in ("duplicate-event", "foreign-response", "stream-terminal")
            for a in actions
        ):
            return encode_event(event_id, "") if event_id is not None else b""
        return None

    def _ending(self) -> bytes:
        """The synthetic JSON-RPC error that releases the SDK's waiter (origin streams)."""
        if self.origin is None or self.e.guard.stream_state(self.stream) == "done":
            return b""
        err = self.e.failures.get(self.stream) or self.e.closed.get(self.stream)
        return encode_event(None, json.dumps(ending_error(self.origin, err)))

    async def _settle_claims(self, out: list[bytes]) -> list[bytes]:
        """Ask :attr:`SessionIO.claim` for each request presented in ``out`` (held there as
        a token, a piece of its own): pass it on if won, blank it (keeping its id) if
        lost; a claim that raises blanks it and fails the stream with that error (fail
        closed)."""
        e = self.e
        claims, self._claims = self._claims, []
        assert e.claim is not None
        settled: dict[bytes, bytes] = {}
        for token, key, event_id, raw in claims:
            try:
                won = await e.claim(key, self.stream, event_id)
            except InteractionFailed as err:
                logger.warning("a claim failed: %s", err)
                won = False
                if self.stream not in e.failures:
                    e.failures[self.stream] = err
                self.tee.killed = True
            blank = encode_event(event_id, "") if event_id is not None else b""
            settled[token] = raw if won else blank
        return [settled.get(piece, piece) if piece[:1] == b"\x00" else piece for piece in out]

    async def _resume(self, clean: bool) -> Any:
        """Resume as the guard says; the new connection's response, or ``None`` to stop."""
        actions = self.e.feed(ev.StreamLost(self.stream, clean))
        logger.debug("%s lost (clean=%s): %s", self.stream, clean, actions)
        return await self._resume_as(actions, immediate=False)

    async def _reconnect(self) -> Any:
        """The client reconnected to this stream: resume it upstream now (the client
        already waited), from the guard's cursor, within the stream's budgets."""
        e, stream = self.e, self.stream
        if self.replaced is not None:
            replaced, self.replaced = self.replaced, None
            with contextlib.suppress(Exception):
                await replaced.aclose()
        state = e.guard.stream_state(stream)
        actions: tuple[act.Action, ...]
        if state == "open":
            actions = e.feed(ev.StreamLost(stream, False))
        elif state == "resuming":  # the GET in flight went with the old connection
            actions = e.feed(ev.ResumeRefused(stream, None, "ClientReconnected"))
        else:
            actions = (act.Wait(stream, 0.0),) if state == "waiting" else ()
        return await self._resume_as(actions, immediate=True)

    async def _resume_as(self, actions: tuple[act.Action, ...], immediate: bool) -> Any:
        """Follow the guard's ``Wait``/``Resume`` from ``actions`` until a resume opens an
        event stream (its response) or the guard stops (``None``). ``immediate``: this is
        a client's reconnection, sent at once with its request's headers.

        A resume ``GET`` that cannot be built or sent, whatever it raises (a header value
        the HTTP client refuses, say), is fed to the guard as a refusal with no response
        (``transport-error``, as a connection refused is): retried within the stream's
        budgets, then one ending error; never an exception out of the stream's body. The
        guard's cursor is a usable one (see
        :func:`~fsm.adapters._transport.sse.usable_event_id`), so this is a last line."""
        e, stream = self.e, self.stream
        while True:
            wait = next((a for a in actions if isinstance(a, act.Wait)), None)
            if wait is None or self._dead():
                return None
            if not immediate:
                await anyio.sleep(wait.delay_s)
            if self._dead():
                return None
            actions = e.feed(ev.TimerFired(stream))
            logger.debug("%s timer: %s", stream, actions)
            resume = next((a for a in actions if isinstance(a, act.Resume)), None)
            if resume is None:
                return None
            carried, url = e.acting_for(stream=stream)
            if immediate:  # the client's own resume GET, its cursor rewritten
                headers = dict(self.request.headers)
                headers["last-event-id"] = resume.cursor
            else:
                headers = e.headers(carried, **{"last-event-id": resume.cursor})
                headers.pop("content-type", None)
            immediate = False
            try:
                req = e.http.build_request("GET", url, headers=headers)
                resp = await e.http.send(req, stream=True)
            except (e.hx.HTTPError, OSError) as exc:
                actions = e.feed(ev.ResumeRefused(stream, None, type(exc).__name__))
                continue
            except Exception as exc:  # a GET that cannot be built or sent: one failure too
                logger.warning("%s resume GET not sent: %r", stream, exc)
                actions = e.feed(ev.ResumeRefused(stream, None, type(exc).__name__))
                continue
            ctype = resp.headers.get("content-type", "").partition(";")[0].strip().lower()
            logger.debug("%s resume -> %s %s", stream, resp.status_code, ctype)
            if resp.status_code == 200 and ctype == "text/event-stream":
                e.feed(ev.StreamResumed(stream))
                return resp
            got = await http_result(resp)
            actions = e.feed(
                ev.ResumeRefused(
                    stream,
                    got.status,
                    body=got.body,
                    retry_after=got.retry_after,
                    text=got.text,
                )
            )


class NotingWriter:
    """The SDK's write stream, noting which guarded call sends each request id the call
    waits for (:meth:`CallSlot.binds`; for SDKs whose POST task does not inherit the
    caller's context variables). Everything else is the wrapped stream's."""

    def __init__(self, inner: Any, engine: SessionIO) -> None:
        self._inner, self._e = inner, engine

    async def send(self, item: Any) -> None:
        slot = CURRENT_CALL.get()
        if slot is not None and slot.origin is None:
            root: Any = getattr(getattr(item, "message", None), "root", None)
            rid = getattr(root, "id", None)
            if rid is not None and slot.binds(getattr(root, "method", None)):
                self._e.sent_calls[rid] = slot
        await self._inner.send(item)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def __aenter__(self) -> NotingWriter:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        return await self._inner.__aexit__(*exc)
