"""Question identity, shared by both eras: when a server asks again what it asked before.

A server may ask one question under several keys: an MRTR server under a new
round-local ``inputRequests`` key in a later round, a server-side shim (the TypeScript
legacy MRTR shim, the Go SDK's MRTR middleware, the Python v2 ``Resolve``) under a new
JSON-RPC id of an ``elicitation/create`` with identical params. Within one origin call
(an MRTR call; in the SSE era, the POST stream of a tool call and the requests on it),
two requests are **one question** when their method and canonical params are equal
(:func:`question_id`: sorted-key JSON with ``_meta`` left out, hashed by
:func:`fsm.messages.params_digest`). A question the user answered is never presented
again: its stored answer is resubmitted, at most ``max_reasks`` times per question,
then the call fails once with :class:`~fsm.errors.QuestionReaskedError`
(:func:`reask_refusal`); with ``on_reask="fail"`` on the first re-ask.

This module holds the rule, not the state: :class:`fsm.sse.guard.Guard` and
:class:`fsm.mrtr.call.MrtrCall` keep their questions and fire the declared transitions.
"""

from __future__ import annotations

import json
from collections.abc import Container, Mapping
from typing import Any, Literal

from fsm.errors import RequestKey
from fsm.messages import params_digest

INPUT_METHODS = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
"""The methods an ``inputRequests`` entry may ask (an MRTR round of protocol 2026-07-28, a
task of the tasks extension): the default of both eras' ``input_methods``."""

OnReask = Literal["resubmit", "fail"]
"""What a re-ask of an answered question does: resubmit the stored answer (bounded by
``max_reasks``) or fail the call at once."""

ON_REASK: tuple[OnReask, ...] = ("resubmit", "fail")


def question_id(method: str, params: Mapping[str, Any] | None) -> str:
    """The identity of a question: its method and the digest of its canonical params
    (``_meta`` left out), e.g. ``"elicitation/create#0fed88c222563bba"``. Two requests of
    one origin call with equal identities are one question, whatever their keys."""
    return f"{method}#{params_digest(params):016x}"


def input_requests_problem(
    asked: object, limit: int, methods: Container[str], max_key_chars: int | None = None
) -> str | None:
    """What is wrong with an ``inputRequests`` map as a server sent it (an MRTR round, a
    task's poll), or ``None`` when it is well formed: not a map, more than ``limit``
    entries, a key that is not a string of at most ``max_key_chars`` (``None``: any
    length), an entry that is not a ``{method, params}`` object, a method outside
    ``methods`` (quoted up to 80 characters), or params that are not an object. The first
    problem found is the one told."""
    if not isinstance(asked, Mapping):
        return f"inputRequests is {type(asked).__name__}, not a map"
    if len(asked) > limit:
        return f"{len(asked)} inputRequests (max_input_requests={limit})"
    for key, req in asked.items():
        if max_key_chars is not None and (not isinstance(key, str) or len(key) > max_key_chars):
            return f"an inputRequests key longer than max_key_chars={max_key_chars}"
        if not isinstance(req, Mapping) or not isinstance(req.get("method"), str):
            return f"inputRequests[{key!r}] is not a {{method, params}} object"
        if req["method"] not in methods:
            return f"inputRequests[{key!r}] asks {req['method'][:80]!r}"
        if req.get("params") is not None and not isinstance(req["params"], Mapping):
            return f"inputRequests[{key!r}].params is not an object"
    return None


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON (sorted keys; what JSON cannot say as its ``repr``):
    how a stored answer or a question's params are kept and compared."""
    return json.dumps(value, sort_keys=True, default=repr)


def reask_refusal(reasks: int, max_reasks: int, on_reask: OnReask) -> str | None:
    """Why a re-ask of a question already resubmitted ``reasks`` times must fail the call
    (the evidence :class:`~fsm.errors.QuestionReaskedError` carries), or ``None`` when
    its stored answer is resubmitted (once more)."""
    if on_reask == "fail" or reasks >= max_reasks:
        return f"resubmitted {reasks} time(s), max_reasks={max_reasks}, on_reask={on_reask}"
    return None


class QuestionBook:
    """Which key first asked each question of each origin call, as an observer needs it
    to tell a re-ask under a new id (:attr:`fsm.properties.Delivered.question`).

    Scopes are origin calls (in the SSE era a tool call's POST stream): :meth:`open` one
    when it begins; a request on a scope never opened is no one call's and is never a
    re-ask. Memory is bounded: at most ``max_scopes`` scopes (the oldest forgotten
    first) of at most ``max_questions`` questions each (more are not recorded: a re-ask
    of one of them is seen as a question of its own)."""

    __slots__ = ("_scopes", "max_questions", "max_scopes")

    def __init__(self, *, max_scopes: int = 256, max_questions: int = 256) -> None:
        self.max_scopes, self.max_questions = max_scopes, max_questions
        self._scopes: dict[str, dict[str, RequestKey]] = {}

    def open(self, scope: str) -> None:
        """Begin origin call ``scope`` (a scope of that name before is forgotten)."""
        self._scopes.pop(scope, None)
        self._scopes[scope] = {}
        while len(self._scopes) > self.max_scopes:
            del self._scopes[next(iter(self._scopes))]

    def forget(self, scope: str) -> None:
        """Drop what is known of ``scope``."""
        self._scopes.pop(scope, None)

    def first(
        self, scope: str, method: str, params: Mapping[str, Any] | None, key: RequestKey
    ) -> RequestKey | None:
        """The key that asked ``key``'s question first in ``scope``, when another one did;
        ``None`` when ``key`` is the first (it is recorded) or ``scope`` is no open call."""
        questions = self._scopes.get(scope)
        if questions is None:
            return None
        qid = question_id(method, params)
        first = questions.get(qid)
        if first is None:
            if len(questions) < self.max_questions:
                questions[qid] = key
            return None
        return first if first != key else None
