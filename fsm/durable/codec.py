"""Records as JSON text, and back: the SQLite schema's row format, for every era (the
SSE guard's request, question and stream records; an MRTR call's or a task's record).

A record reads back equal to the one written, or :class:`~fsm.errors.StoreCorruptError`
is raised: a row that is not JSON (or nests deeper than Python's parser recurses), is
longer than :data:`MAX_VALUE_BYTES`, has the wrong shape, holds something other than a
number where one belongs (every numeric field is read by one helper of its kind: no NaN,
no infinity but the ``+inf`` of a deadline or a wait that a configured ``inf`` makes, no
integer beyond the floats where a real belongs, no float where an integer belongs), or
names an error class this library does not define. A record is refused before it is
written (:class:`~fsm.errors.StoreError`, nothing written) when its JSON is longer than
:data:`MAX_VALUE_BYTES`: a store never holds a value its next load would refuse."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from fsm import errors
from fsm.durable.calls import CallRecord
from fsm.durable.store import MAX_SSE_CALLS, RESUMABLE, SessionRecord, SseCall
from fsm.errors import InteractionFailed, RequestId, RequestKey, StoreCorruptError, StoreError
from fsm.machines.product import Cause
from fsm.mrtr.call import CallSnapshot
from fsm.mrtr.call import QuestionRecord as MrtrQuestion
from fsm.sse.guard import Question, RequestRecord, SseDelta, StreamRecord
from fsm.tasks.task import KeyRecord, TaskSnapshot
from fsm.tasks.task import QuestionRecord as TaskQuestion

_T = TypeVar("_T")

SCHEMA_VERSION = 2
"""The schema this library writes (``PRAGMA user_version``)."""

DECODE_ERRORS: tuple[type[Exception], ...] = (TypeError, ValueError, IndexError, OverflowError)
"""What reading a damaged record's fields can raise: each loader (and a store reading
around one) turns them into :class:`~fsm.errors.StoreCorruptError`."""

_LARGEST = sys.float_info.max
"""The largest finite float: the bound of a stored real number."""

MAX_VALUE_BYTES = 8 << 20
"""The longest stored value (one record, a question's params; UTF-8 bytes) a load reads:
a longer one is :class:`~fsm.errors.StoreCorruptError`, so what a load holds stays
bounded. A call whose params are longer is written but cannot be rejoined."""


def dump_id(rid: RequestId) -> str:
    """A request id as a key column (``1`` and ``"1"`` stay distinct)."""
    return json.dumps(rid)


def load_id(text: str) -> RequestId:
    """A key column back as a request id."""
    try:
        return _id(_json(text))
    except ValueError as exc:
        raise StoreCorruptError(f"not a request id: {text[:80]!r}") from exc


def dump_stream(rec: StreamRecord) -> str:
    """A stream record (without history) as JSON."""
    return storable(json.dumps([*rec[:4], *rec[5:10], _cause(rec.cause), rec.requests, rec.held]))


def load_stream(text: str) -> StreamRecord:
    """A stream record back (its history ``()``)."""
    v = fields(text, 12)
    try:
        sid, origin, state, cursor, stalls, resumes, retry_ms, resumed, ended = v[:9]
        requests = tuple(_key(k) for k in v[10])
        if origin is not None:
            origin = _id(origin)
        return StreamRecord(
            _str(sid),
            origin,
            _str(state),
            _opt(cursor, str),
            (),
            _int(stalls),
            _int(resumes),
            _maybe(retry_ms, _int),
            bool(resumed),
            bool(ended),
            _load_cause(v[9]),
            requests,
            _maybe(v[11], _held),
        )
    except DECODE_ERRORS as exc:
        raise StoreCorruptError(f"stream record does not read back: {exc}") from exc


def dump_request(rec: RequestRecord) -> str:
    """A request record as JSON."""
    return storable(json.dumps([*rec[:11], _cause(rec.cause), rec.reasks]))


def load_request(text: str) -> RequestRecord:
    """A request record back."""
    v = fields(text, 13)
    try:
        key, stream, method, digest, deadline, state, answer, attempts, at, asserted, ended = v[:11]
        return RequestRecord(
            _key(key),
            _str(stream),
            _str(method),
            _int(digest),
            _real(deadline, forever=True),
            _str(state),
            _answer(answer),
            _int(attempts),
            _num(at),
            bool(asserted),
            bool(ended),
            _load_cause(v[11]),
            _int(v[12]),
        )
    except DECODE_ERRORS as exc:
        raise StoreCorruptError(f"request record does not read back: {exc}") from exc


def load_question(session: str, rid: str, method: str, params: str | None) -> Question:
    """A question row back."""
    if not isinstance(method, str) or not (params is None or isinstance(params, str)):
        raise StoreCorruptError("question row does not read back")
    if params is not None:
        bounded(params)
    return Question((session, load_id(rid)), method, params)


def dump_meta(d: SseDelta) -> tuple[tuple[str, str], ...]:
    """The meta entries ``d`` writes, as ``(name, value)``: ``session`` (the session id)
    and ``expired`` (``"1"`` or ``"0"``)."""
    return (("session", d.session), ("expired", "1" if d.expired else "0"))


def load_meta(meta: Mapping[str, object]) -> tuple[str, bool]:
    """The session id and whether it expired, from the meta entries :func:`dump_meta`
    wrote (``""`` and not expired when none were)."""
    session, expired = meta.get("session", ""), meta.get("expired", "0")
    if not isinstance(session, str) or expired not in ("0", "1"):
        raise StoreCorruptError("meta does not read back")
    return session, expired == "1"


def _cause(cause: Cause | None) -> list[Any] | None:
    if cause is None:
        return None
    return [cause.error.__name__, cause.message, cause.key, cause.evidence, cause.reason]


def _held(v: Any) -> tuple[float, float, int]:
    """A stream's patience with a held connection: ``(since, waited, refusals)``; the
    waits asked may add up to ``+inf`` (a ``Retry-After`` of ``inf`` taken whole)."""
    since, waited, refusals = v
    return (_real(since), _real(waited, forever=True), _int(refusals))


def _load_cause(v: Any) -> Cause | None:
    if v is None:
        return None
    name, message, key, evidence, reason = v
    error = getattr(errors, _str(name), None)
    if not (isinstance(error, type) and issubclass(error, InteractionFailed)):
        raise StoreCorruptError(f"unknown error class in a stored cause: {name!r}")
    return Cause(
        error,
        _str(message),
        None if key is None else _key(key),
        tuple(map(_str, evidence)),
        _opt(reason, str),
    )


def _key(v: Any) -> RequestKey:
    session, rid = v
    return (_str(session), _id(rid))


def _id(rid: Any) -> RequestId:
    if isinstance(rid, bool) or not isinstance(rid, (int, str)):
        raise ValueError(f"not a request id: {rid!r}")
    return rid


def _opt(v: Any, kind: type[_T]) -> _T | None:
    if v is None or (isinstance(v, kind) and not isinstance(v, bool)):
        return v
    raise ValueError(f"not a {kind.__name__} or null: {v!r}")


def _answer(v: Any) -> str | None:
    """A stored answer: the canonical JSON of an object (the guard decodes it to submit)."""
    if v is None:
        return None
    if not isinstance(v, str) or not isinstance(_json(v), dict):
        raise ValueError("a stored answer is not a JSON object")
    return v


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError(f"not a string: {v!r}")
    return v


def _too_long(text: str) -> bool:
    """Whether ``text`` is longer than :data:`MAX_VALUE_BYTES` in UTF-8 (counted only
    when it could be)."""
    return (
        len(text) * 4 > MAX_VALUE_BYTES and len(text.encode("utf-8", "replace")) > MAX_VALUE_BYTES
    )


def bounded(text: str) -> str:
    """``text``, a stored value, if it is at most :data:`MAX_VALUE_BYTES` long;
    otherwise :class:`~fsm.errors.StoreCorruptError`."""
    if not isinstance(text, str):
        raise StoreCorruptError("a stored value is not text")
    if _too_long(text):
        raise StoreCorruptError(f"a stored value is longer than {MAX_VALUE_BYTES} bytes")
    return text


def storable(text: str) -> str:
    """``text``, a value about to be written, if a load will read it back (at most
    :data:`MAX_VALUE_BYTES` long); otherwise :class:`~fsm.errors.StoreError` before
    anything is written, naming no store (the store writing it names itself:
    :func:`naming_store`)."""
    if _too_long(text):
        raise StoreError(
            f"a record of {len(text.encode('utf-8', 'replace'))} bytes is longer than "
            f"{MAX_VALUE_BYTES}: not written"
        )
    return text


def _json(text: str) -> Any:
    try:
        return json.loads(bounded(text))
    except (TypeError, ValueError, RecursionError) as exc:
        raise StoreCorruptError(f"stored value is not JSON: {type(exc).__name__}") from exc


@contextmanager
def naming_store(where: str) -> Iterator[None]:
    """Within it, a :class:`~fsm.errors.StoreError` that names no store (a record that
    does not read back, as the loaders raise it; one refused before it is written, as
    :func:`storable` raises it) is raised again, of its class, naming the store
    ``where``: its message starts with it and its ``path`` is it. One that names a store
    passes through unchanged. Each store reads and writes its records within it."""
    try:
        yield
    except StoreError as exc:
        if exc.path:
            raise
        raise type(exc)(f"{where}: {exc}", path=where) from exc


def fields(text: str, n: int) -> list[Any]:
    """A stored value that must be a JSON list of ``n`` fields, decoded
    (:class:`~fsm.errors.StoreCorruptError` otherwise: not JSON, too long or too deep)."""
    v = _json(text)
    if not isinstance(v, list) or len(v) != n:
        raise StoreCorruptError(f"stored record is not a list of {n} fields")
    return v


# ------------------------------------------------------------------ one-call records


def dump_call(rec: CallRecord) -> str:
    """An MRTR call's or a task's record as JSON."""
    s = rec.snapshot
    if isinstance(s, CallSnapshot):
        snap: list[Any] = [
            s.state,
            _cause(s.cause),
            [[*q[:7]] for q in s.questions],
            [list(k) for k in s.round_keys],
            *s[4:],
        ]
    else:
        snap = [
            s.task,
            s.state,
            _cause(s.cause),
            s.status,
            [_keyfields(k) for k in s.keys],
            [[q.question, q.answer, q.prompt, q.reuses] for q in s.questions],
            s.get_pending,
            None if s.update is None else list(s.update),
            s.polls,
            s.poll_errors,
            s.resends,
            s.interval_s,
            s.created,
            s.deadline,
            s.ended,
        ]
    return storable(
        json.dumps(
            [
                rec.era,
                rec.call,
                snap,
                [[list(q.key), q.method, q.params] for q in rec.questions],
                [list(k) for k in rec.reshown],
            ]
        )
    )


def _keyfields(k: KeyRecord) -> list[Any]:
    """A task key's record as a list of fields (its cause encoded)."""
    return [k.key, k.question, k.method, k.state, k.listed, k.resubmits, k.answer, _cause(k.cause)]


def load_call(text: str) -> CallRecord:
    """A call's record back."""
    v = fields(text, 5)
    try:
        era, call, snap, questions, reshown = v
        if era == "mrtr":
            snapshot: CallSnapshot | TaskSnapshot = _load_mrtr(snap)
        elif era == "tasks":
            snapshot = _load_task(snap)
        else:
            raise ValueError(f"unknown era {era!r}")
        if isinstance(snapshot, TaskSnapshot) and snapshot.task != call:
            raise ValueError(f"a record of {call!r} holds task {snapshot.task!r}")
        return CallRecord(
            _str(call),
            snapshot,
            tuple(Question(_key(k), _str(m), _params(p)) for k, m, p in questions),
            tuple(_key(k) for k in reshown),
        )
    except DECODE_ERRORS as exc:
        raise StoreCorruptError(f"call record does not read back: {exc}") from exc


def load_call_of(call: str, text: str) -> CallRecord:
    """The record ``text`` stored under call id ``call``: :func:`load_call`, and
    :class:`~fsm.errors.StoreCorruptError` when it is the record of another call."""
    rec = load_call(text)
    if rec.call != call:
        raise StoreCorruptError(f"call {call!r} holds another call")
    return rec


def _load_mrtr(v: Any) -> CallSnapshot:
    state, cause, questions, round_keys, rnd, request_state, polls, resends, ended = v
    return CallSnapshot(
        _str(state),
        _load_cause(cause),
        tuple(
            MrtrQuestion(_str(i), _str(m), _params(p), _str(st), _num(at), _answer(a), _int(n))
            for i, m, p, st, at, a, n in questions
        ),
        tuple((_str(k), _str(q)) for k, q in round_keys),
        _int(rnd),
        _opt(request_state, str),
        _int(polls),
        _int(resends),
        _bool(ended),
    )


def _load_task(v: Any) -> TaskSnapshot:
    (task, state, cause, status, keys, questions, pending, update, polls, errs, resends,
     interval, created, deadline, ended) = v  # fmt: skip
    return TaskSnapshot(
        _str(task),
        _str(state),
        _load_cause(cause),
        _str(status),
        tuple(
            KeyRecord(
                _str(k),
                _str(q),
                _str(m),
                _str(st),
                _bool(listed),
                _int(n),
                _answer(a),
                _load_cause(c),
            )
            for k, q, m, st, listed, n, a, c in keys
        ),
        tuple(TaskQuestion(_str(q), _answer(a), _opt(p, str), _int(n)) for q, a, p, n in questions),
        _bool(pending),
        None if update is None else tuple(map(_str, update)),
        _int(polls),
        _int(errs),
        _int(resends),
        _real(interval),
        _num(created),
        _num(deadline),
        _bool(ended),
    )


def _params(v: Any) -> str | None:
    """A question's params: the canonical JSON of an object, or null (shown again from it)."""
    return _answer(v)


def _int(v: Any) -> int:
    """A stored integer (a count, a digest): a JSON integer, not a boolean nor a float
    (``1e999`` and ``Infinity`` are floats); ``ValueError`` otherwise."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"not an integer: {_quote(v)}")
    return v


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"not a boolean: {v!r}")
    return v


def _real(v: Any, *, forever: bool = False) -> float:
    """A stored real number (a time, a wait, an interval) as a float: a JSON integer or
    float within the finite floats, compared exactly, so no integer raises converting;
    with ``forever`` also ``+inf`` (a deadline or a wait a configured ``inf`` made:
    never). ``ValueError`` for a boolean, text, NaN, another infinity or an integer beyond
    the floats: a rule fed one would wait forever or raise untyped."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"not a number: {_quote(v)}")
    if not (-_LARGEST <= v <= _LARGEST or (forever and v == math.inf)):
        raise ValueError(f"not a finite number: {_quote(v)}")
    return float(v)


def _num(v: Any) -> float | None:
    """A finite number or null (a time, a deadline)."""
    return _maybe(v, _real)


def _maybe(v: Any, read: Callable[[Any], _T]) -> _T | None:
    """``None`` for null, else ``read(v)``."""
    return None if v is None else read(v)


def _quote(v: Any) -> str:
    """``v`` as a message quotes it: its repr, at most 40 characters."""
    return repr(v)[:40]


# ------------------------------------------------------------------ the SSE session


def dump_session(rec: SessionRecord) -> str:
    """An SSE adapter's session record as JSON."""
    return storable(
        json.dumps([rec.session, rec.initialize, [list(c) for c in rec.calls], rec.url])
    )


def load_session(text: str) -> SessionRecord:
    """A session record back: a record written without the URL (three fields) reads back
    with ``url`` ``""``, which no session is rejoined from (a fresh start). A call whose
    method is not :data:`~fsm.durable.store.RESUMABLE` does not read back."""
    v = _json(text)
    if not isinstance(v, list) or len(v) not in (3, 4):
        raise StoreCorruptError("stored session record is not a list of 3 or 4 fields")
    try:
        session, initialize, calls, url = v if len(v) == 4 else [*v, ""]
        if not isinstance(calls, list) or len(calls) > MAX_SSE_CALLS:
            raise ValueError("calls is not a bounded list")
        return SessionRecord(
            _str(session),
            _str(initialize),
            tuple(SseCall(_str(s), _method(m), _params(p)) for s, m, p in calls),
            _str(url),
        )
    except DECODE_ERRORS as exc:
        raise StoreCorruptError(f"session record does not read back: {exc}") from exc


def _method(v: Any) -> str:
    if v not in RESUMABLE:
        raise ValueError(f"not a resumable method: {v!r}")
    return _str(v)
